"""The com.microsoft definitions: generated from onnxruntime's registry, each with a kernel and an
inference function, checked by the checker."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from onnxkit.schema import decode_schema_document
from onnx import helper

from onnxkit.plugin import traits_of
from onnxkit.registry import build_registry

HERE = Path(__file__).resolve().parent
TOOL = HERE.parent / "tools" / "generate_schemas.py"


def _tool():
    spec = importlib.util.spec_from_file_location("ms_generate_schemas", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_packaged_data_is_what_the_tool_writes_from_this_onnxruntime():
    tool = _tool()
    want = tool.build_document(tool._common())
    packaged = decode_schema_document((HERE.parent / "onnxkit_microsoft" / "schemas_data.json.gz").read_bytes())
    assert packaged == want


#: Definitions shipped before their kernels land (the conformance statement lists them "not
#: supported"); each kernel that lands removes its name.  Asserted exactly: the list only shrinks.
PENDING: set = set()


def test_every_definition_has_a_kernel_on_both_backends_and_an_inference_function():
    reg = build_registry()
    defs = [k for k in reg.operator_sets[("com.microsoft", 1)].schemas]
    names = {n for names in _tool().OPERATORS.values() for n in names}
    assert set(defs) == names and len(names) >= 20
    assert len(PENDING) == 0 and PENDING <= names
    assert {op for op in PENDING if reg.kernel("cpu", "com.microsoft", op, 1) is None} == PENDING
    names -= PENDING
    for op in names:
        key = ("com.microsoft", op, 1)
        assert reg.inference.get(key) is not None, op
        assert reg.owner[("onnxkit_portable_kernels", key)] == "microsoft_domain", op
        assert reg.kernel("cpu", "com.microsoft", op, 1) is not None, op
        host_only = traits_of(reg.portable[key]).host_only
        assert (reg.kernel("gpu", "com.microsoft", op, 1) is None) == host_only, op
    assert {op for op in names if traits_of(reg.portable[("com.microsoft", op, 1)]).host_only} == {
        "Tokenizer", "MurmurHash3"}


def _model(node):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [2, 4])],
                          [helper.make_tensor_value_info("y", 1, [2, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.mark.parametrize("node,problem", [
    (helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", alpha=1.5), None),
    (helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", alpha="no"), "alpha"),
    # an attribute the definition does not have: a warning (refused under strict), not an error
    (helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", beta=1.0), "warning:beta"),
    (helper.make_node("QuickGelu", ["x", "x"], ["y"], domain="com.microsoft"), "input"),
    (helper.make_node("MatMulNBits", ["x", "x", "x"], ["y"], domain="com.microsoft"), "K"),
])
def test_the_checker_checks_com_microsoft_nodes_against_their_schemas(node, problem):
    import onnxkit

    report = onnxkit.check_model(_model(node))
    errors = [str(e) for e in report.errors] if hasattr(report, "errors") else [str(report)]
    if problem is None:
        assert not errors, errors
    elif problem.startswith("warning:"):
        assert not errors and any(problem[8:] in str(w) for w in report.warnings), (errors, report.warnings)
    else:
        assert any(problem in e for e in errors), errors
