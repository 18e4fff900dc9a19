"""Regenerate the operator index: ``python tools/operator_index.py`` writes ``docs/operators.md``.

``tests/plugins/test_operator_index.py`` fails while the file differs from what the installed plugins say.
"""

from __future__ import annotations

from pathlib import Path

from onnxkit.registry import build_registry
from onnxkit.statement.operators import operator_index, render_index_markdown

OUT = Path(__file__).resolve().parent.parent / "docs" / "operators.md"


def main() -> int:
    OUT.write_text(render_index_markdown(operator_index(build_registry())) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
