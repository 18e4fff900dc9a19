"""What onnxruntime accepts although it breaks a SHALL (onnxkit.checker.readings): each is a
checker warning naming what and where, ``strict=True`` refuses it, and the default session's
results equal onnxruntime 1.32's (the oracle)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.checker import check_model  # noqa: E402
from onnxkit.checker.readings import IMPLICIT_IMPORTS, read_as_onnxruntime  # noqa: E402
from onnxkit.errors import ConformanceWarning, ValidationError  # noqa: E402
from onnxkit.registry import get_registry  # noqa: E402

F = TensorProto.FLOAT


def _vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, opset=17, extra=(), **kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, **kw)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra]).SerializeToString()


def _oracle(data: bytes, feeds: dict) -> list:
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def _onnxkit(data: bytes, feeds: dict, **kw):
    """onnxkit's outputs and the ConformanceWarning lines creating the session gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = onnxkit.InferenceSession(data, **kw).run(None, feeds)
    return outs, [str(w.message) for w in caught if issubclass(w.category, ConformanceWarning)]


def _accepted(data: bytes, feeds: dict, code: str, *named: str, atol=1e-6):
    """The checker warns ``code`` naming each of ``named``; the session runs, equal to onnxruntime;
    ``strict=True`` refuses, naming the code."""
    report = check_model(data)
    assert report.ok, "\n".join(map(str, report.errors))
    found = [d for d in report.warnings if d.code == code]
    assert found, "\n".join(map(str, report.diagnostics))
    text = f"{found[0].location}: {found[0].message}"
    for what in named:
        assert what in text, (what, text)
    got, said = _onnxkit(data, feeds)
    assert len(said) == 1 and code in said[0]
    want = _oracle(data, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)
    with pytest.raises(ValidationError, match=code) as refused:
        onnxkit.InferenceSession(data, strict=True)
    assert "strict=True" in str(refused.value)
    return found


# -- 1. a domain onnxruntime imports implicitly ------------------------------------------------------

def test_the_implicit_imports_are_onnxruntimes():
    """onnxruntime writes the domains it imported implicitly into the model it saves: the table."""
    import tempfile
    from pathlib import Path

    data = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = str(Path(d) / "saved.onnx")
        ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        saved = onnx.load(so.optimized_model_filepath)
    assert {o.domain: o.version for o in saved.opset_import if o.domain not in ("", "ai.onnx")} == IMPLICIT_IMPORTS
    # com.microsoft at version 1 is the version onnxkit assumes; its plugin provides it
    assert get_registry().operator_set("com.microsoft", IMPLICIT_IMPORTS["com.microsoft"]) is not None


def test_com_microsoft_node_without_the_import_runs_as_onnxruntime_runs_it():
    data = _model([helper.make_node("FastGelu", ["x"], ["t"], domain="com.microsoft", name="gelu"),
                   helper.make_node("BiasGelu", ["t", "b"], ["y"], domain="com.microsoft")],
                  [_vi("x", [2, 3]), _vi("b", [3])], [_vi("y", [2, 3])])
    feeds = {"x": np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3), "b": np.array([0.5, -1, 2], np.float32)}
    found = _accepted(data, feeds, "domain-implicitly-imported", "node 0 'gelu' (com.microsoft::FastGelu)",
                      "'com.microsoft'", "com.microsoft version 1")
    assert len(found) == 2  # one per node


def test_the_reading_adds_the_import_to_a_copy():
    model = onnxkit.load(_model([helper.make_node("FastGelu", ["x"], ["y"], domain="com.microsoft")],
                                [_vi("x", [2])], [_vi("y", [2])]))
    read = read_as_onnxruntime(model, get_registry())
    assert read is not model and len(model.opset_import) == 1
    assert [(o.domain, o.version) for o in read.opset_import] == [("", 17), ("com.microsoft", 1)]
    plain = onnxkit.load(_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])]))
    assert read_as_onnxruntime(plain, get_registry()) is plain  # nothing to read differently: no copy


def test_an_unknown_domain_stays_not_imported():
    data = _model([helper.make_node("Foo", ["x"], ["y"], domain="com.acme")], [_vi("x", [2])], [_vi("y", [2])])
    assert [d.code for d in check_model(data).errors] == ["domain-not-imported"]


def test_a_domain_onnxruntime_imports_but_no_plugin_provides_stays_not_imported():
    node = helper.make_node("ATen", ["x"], ["y"], domain="org.pytorch.aten", operator="relu")
    data = _model([node], [_vi("x", [2])], [_vi("y", [2])])
    assert "org.pytorch.aten" in IMPLICIT_IMPORTS and get_registry().operator_set("org.pytorch.aten", 1) is None
    assert [d.code for d in check_model(data).errors] == ["domain-not-imported"]


# -- 2. Constant's value holding a sparse tensor -------------------------------------------------------

def _sparse_constant(opset):
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.5, -2.5, 4], np.float32), "vals"),
                                   numpy_helper.from_array(np.array([1, 4, 5], np.int64), "idx"), [2, 3])
    const = helper.make_node("Constant", [], ["c"], name="k")
    const.attribute.append(helper.make_attribute("value", sp))
    return _model([const, helper.make_node("Add", ["c", "x"], ["y"])], [_vi("x", [2, 3])], [_vi("y", [2, 3])],
                  opset=opset)


@pytest.mark.parametrize("opset", [11, 17])
def test_constant_value_holding_a_sparse_tensor_is_densified(opset):
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    _accepted(_sparse_constant(opset), feeds, "attribute-form-accepted", "node 0 'k' (Constant)",
              "attribute 'value'", "sparse tensor")


def test_a_sparse_value_too_large_to_densify_is_refused_by_the_limit():
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.5], np.float32), "vals"),
                                   numpy_helper.from_array(np.array([1], np.int64), "idx"), [1 << 20, 1 << 20])
    const = helper.make_node("Constant", [], ["y"], name="big")
    const.attribute.append(helper.make_attribute("value", sp))
    data = _model([const], [], [_vi("y", None)])
    for validate in (True, False):
        with pytest.raises(onnxkit.errors.LimitExceeded, match=r"node 0 'big' \(Constant\).*max_tensor_bytes"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConformanceWarning)
                onnxkit.InferenceSession(data, validate=validate)


def test_a_dense_value_of_the_wrong_type_stays_an_error():
    const = helper.make_node("Constant", [], ["y"], value=1.5)  # a FLOAT where a TENSOR is defined
    data = _model([const], [], [_vi("y", [])])
    assert [d.code for d in check_model(data).errors] == ["attribute-wrong-type"]


# -- 3. ScatterElements / ScatterND reduction max and min at 16 --------------------------------------

def _scatter(op, reduction, opset):
    if op == "ScatterElements":
        node = helper.make_node(op, ["d", "i", "u"], ["y"], axis=0, reduction=reduction, name="s")
        feeds = {"i": np.array([[1, 0, 1], [1, 1, 0]], np.int64),
                 "u": np.array([[10, -1, 0.5], [7, 30, -8]], np.float32)}
    else:
        node = helper.make_node(op, ["d", "i", "u"], ["y"], reduction=reduction, name="s")
        feeds = {"i": np.array([[1], [0], [1]], np.int64), "u": np.array([[10, -1, 0.5], [3, 3, 3], [2, 9, -4]],
                                                                          np.float32)}
    feeds["d"] = np.arange(6, dtype=np.float32).reshape(2, 3)
    ins = [_vi("d", [2, 3]), _vi("i", list(feeds["i"].shape), TensorProto.INT64), _vi("u", list(feeds["u"].shape))]
    return _model([node], ins, [_vi("y", [2, 3])], opset=opset), feeds


@pytest.mark.parametrize("op", ["ScatterElements", "ScatterND"])
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_scatter_reduction_defined_from_18_runs_at_16(op, reduction):
    data, feeds = _scatter(op, reduction, 16)
    _accepted(data, feeds, "attribute-value-beyond-definition", f"node 0 's' ({op})", "attribute 'reduction'",
              f"reduction={reduction!r}", f"{op}-18", f"{op}-16")


def test_scatter_reduction_at_18_is_no_finding_and_add_at_16_neither():
    for op, reduction, opset in (("ScatterElements", "max", 18), ("ScatterND", "add", 16)):
        report = check_model(_scatter(op, reduction, opset)[0])
        assert report.ok and not report.warnings, "\n".join(map(str, report.diagnostics))


def test_the_scatter_kernels_declare_it():
    from onnxkit.kernel_traits import operator_traits

    for op in ("ScatterElements", "ScatterND"):
        assert operator_traits(get_registry(), ("", op, 16)).accepts_beyond == (("reduction", ("max", "min"), 18),)


# -- 4. nodes out of topological order ----------------------------------------------------------------

def test_nodes_out_of_order_are_evaluated_in_a_topological_order():
    nodes = [helper.make_node("Mul", ["t", "u"], ["y"], name="last"), helper.make_node("Neg", ["x"], ["t"]),
             helper.make_node("Exp", ["t"], ["u"])]
    feeds = {"x": np.array([0.5, -1, 2], np.float32)}
    _accepted(_model(nodes, [_vi("x", [3])], [_vi("y", [3])]), feeds, "not-topologically-sorted",
              "node 0 'last' (Mul)", "'t'", "node 1 (Neg)")


def test_a_subgraph_reading_a_later_outer_value_orders_its_node_after_it():
    then_g = helper.make_graph([helper.make_node("Identity", ["t"], ["r"])], "then", [], [_vi("r", [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["t"], ["r"])], "else", [], [_vi("r", [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="if"),
             helper.make_node("Exp", ["x"], ["t"])]
    data = _model(nodes, [_vi("x", [2]), _vi("c", [], TensorProto.BOOL)], [_vi("y", [2])])
    for cond in (True, False):
        feeds = {"x": np.array([0.5, -1], np.float32), "c": np.array(cond)}
        _accepted(data, feeds, "not-topologically-sorted", "node 0 'if' (If)")


def test_a_cycle_stays_an_error():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    assert "graph-cycle" in {d.code for d in check_model(_model(nodes, [_vi("x", [2])], [_vi("y", [2])])).errors}
