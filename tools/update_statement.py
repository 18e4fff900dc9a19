"""Regenerate the conformance statement the README embeds: ``python tools/update_statement.py``.

Writes the output of ``onnxkit conformance statement`` (every installed backend) between the
README's markers; ``tests/test_statement.py`` fails while the two differ.
"""

from __future__ import annotations

from pathlib import Path

from onnxkit.registry import build_registry
from onnxkit.statement import README_BEGIN, README_END, build_statement, readme_block, render_markdown

README = Path(__file__).resolve().parent.parent / "README.md"


def main() -> int:
    text = README.read_text()
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise SystemExit(f"{README}: the markers {README_BEGIN!r} ... {README_END!r} are missing")
    block = readme_block(render_markdown(build_statement(build_registry())))
    README.write_text(text[:start] + block + text[end + len(README_END):])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
