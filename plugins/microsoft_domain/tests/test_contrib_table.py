"""docs/contrib_operators.md is what tools/contrib_table.py writes from the installed onnxruntime
and onnxkit's registry (regenerate: ``python tools/contrib_table.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytest.importorskip("onnxruntime")


def _tool():
    spec = importlib.util.spec_from_file_location("contrib_table", ROOT / "tools" / "contrib_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_table_is_the_tools_output():
    tool = _tool()
    assert (ROOT / "docs" / "contrib_operators.md").read_text() == tool.render(), \
        "docs/contrib_operators.md is stale: run python tools/contrib_table.py"


def test_every_operator_of_the_microsoft_plugin_is_listed_with_a_kernel():
    """The LLM operators among them (each must show a cpu kernel, not 'not supported')."""
    text = (ROOT / "docs" / "contrib_operators.md").read_text()
    for op in ("MatMulNBits", "GatherBlockQuantized", "MatMulBnb4", "MoE", "QMoE", "SparseAttention",
               "SparseToDenseMatMul", "GroupQueryAttention"):
        row = next(line for line in text.splitlines() if f"| `{op}` |" in line)
        assert row.endswith("| kernel: cpu, gpu |"), row


def test_an_operator_without_a_reason_is_an_error():
    tool = _tool()

    class Reg:
        operator_sets = {("com.microsoft", 1): None}

        @staticmethod
        def bind(domain, op, version):
            return None

    with pytest.raises(SystemExit, match="no reason"):
        tool.onnxkit_status(Reg, "com.microsoft", "NoSuchOperator", 1)
