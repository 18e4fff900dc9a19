"""The operator index (docs/operators.md) is generated from the installed plugins' tables and current."""

from pathlib import Path

from onnxkit.registry import build_registry
from onnxkit.statement.operators import operator_index, render_index_markdown

INDEX = Path(__file__).resolve().parents[2] / "docs" / "operators.md"


def test_docs_operators_md_is_current():
    want = render_index_markdown(operator_index(build_registry())) + "\n"
    assert INDEX.read_text() == want, "docs/operators.md is stale: run python tools/operator_index.py"


def test_every_operator_of_ai_onnx_and_ai_onnx_ml_is_evaluated_on_both_backends():
    rows = [r for r in operator_index(build_registry()) if r["domain"] in ("ai.onnx", "ai.onnx.ml")]
    assert len(rows) > 200
    for backend in ("cpu", "gpu"):
        missing = [r["operator"] for r in rows if r["backends"][backend] == "unsupported"]
        assert missing == [], (backend, missing)
    assert all(r["backends"]["cpu"] != "fallback" for r in rows)


def test_a_row_names_where_the_operator_is_written():
    rows = {(r["domain"], r["operator"]): r for r in operator_index(build_registry())}
    rng = rows[("ai.onnx", "Range")]
    assert rng["since_versions"] == [11, 27]
    assert rng["inference"] == "onnxkit_default_domain.inference.generators"
    assert rng["kernel"] == "onnxkit_default_domain.kernels.generators"
    assert rng["backends"] == {"cpu": "kernel", "gpu": "kernel"}


def test_grep_finds_each_operator_in_its_inference_and_kernel_modules():
    """``grep -rn '"OpName"' plugins/`` finds an operator's inference function and its kernel: both
    modules name it literally (no operator registered only through a computed or space-split name)."""
    import importlib
    import inspect

    sources: dict = {}

    def text(module: str) -> str:
        if module not in sources:
            sources[module] = inspect.getsource(importlib.import_module(module))
        return sources[module]

    missing = []
    for r in operator_index(build_registry()):
        if r["domain"] not in ("ai.onnx", "ai.onnx.preview", "ai.onnx.preview.training"):
            continue
        for what in ("inference", "kernel"):
            if r[what] and f'"{r["operator"]}"' not in text(r[what]):
                missing.append((r["operator"], what, r[what]))
    assert missing == []
