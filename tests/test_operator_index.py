"""The operator index (docs/operators.md) is generated from the installed plugins' tables and current."""

from pathlib import Path

from onnxkit.registry import build_registry
from onnxkit.statement.operators import operator_index, render_index_markdown

INDEX = Path(__file__).resolve().parent.parent / "docs" / "operators.md"


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
