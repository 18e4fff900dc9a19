"""The optimizer in a session: level and switches, the user's model untouched, the written
optimized model, the CLI's ``--optimized-model``."""

from __future__ import annotations

import numpy as np
import pytest

import onnxkit
from onnxkit import InferenceSession, SessionOptions
from onnxkit.api import to_bytes
from onnxkit.errors import OnnxkitError
from onnxkit.runtime.options import GraphOptimizationLevel
from optimizer_cases import TP, helper, init, model, off, within

RNG = np.random.default_rng(1)


def _proto():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [3, 2])
    nodes = [helper.make_node("Identity", ["x"], ["i"]),
             helper.make_node("Cast", ["i"], ["c"], to=TP.FLOAT),
             helper.make_node("MatMul", ["c", "W"], ["m"]),
             helper.make_node("Add", ["m", "B"], ["y"])]
    return model(nodes, [x], [y], [init("W", RNG.standard_normal((4, 2)).astype(np.float32)),
                                   init("B", RNG.standard_normal(2).astype(np.float32))])


FEED = {"x": RNG.standard_normal((3, 4)).astype(np.float32)}


def test_default_level_optimizes_disable_all_does_not():
    data = _proto().SerializeToString()
    on, plain = InferenceSession(data), InferenceSession(data, off())
    assert SessionOptions().graph_optimization_level == GraphOptimizationLevel.ORT_ENABLE_ALL
    assert on.optimized.rewrites == {"identity": 1, "cast": 1, "qdq": 0, "transpose": 0, "reshape": 0, "pad_conv": 0, "qpad_conv": 0,
                                     "conv_bn": 0, "channel_affine": 0, "matmul_add": 1, "gelu": 0,
                                     "hardswish": 0, "attention": 0, "qlut": 0}   # elementwise: opt-in
    assert [s.op for s in on.plan.steps] == ["Gemm"]
    assert plain.optimized.rewrites == {} and len(plain.plan.steps) == 4
    assert within(on.run(None, FEED)[0], plain.run(None, FEED)[0])
    for level in (GraphOptimizationLevel.ORT_ENABLE_BASIC, GraphOptimizationLevel.ORT_ENABLE_EXTENDED):
        so = SessionOptions()
        so.graph_optimization_level = level
        assert InferenceSession(data, so).optimized.changed


def test_an_opt_in_pass_runs_where_session_enable_passes_names_it():
    """elementwise is opt-in (onnxkit.runtime.optimizer.OPT_IN): off by default, on where
    ``session.enable_passes`` names it, off where ``session.disable_passes`` names it too; an
    unknown name refused in either entry."""
    from onnx import TensorProto, helper

    from onnxkit.runtime.optimizer import OPT_IN

    assert OPT_IN == {"elementwise"}
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["m"]), helper.make_node("Add", ["m", "x"], ["y"])],
                              "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    feed = {"x": FEED["x"]}
    default = InferenceSession(data)
    assert "elementwise" not in default.optimized.rewrites and [s.op for s in default.plan.steps] == ["Mul", "Add"]
    so = SessionOptions()
    so.add_session_config_entry("session.enable_passes", "elementwise")
    fused = InferenceSession(data, so)
    assert fused.optimized.rewrites["elementwise"] == 1 and [s.op for s in fused.plan.steps] == ["ai.onnxkit::Elementwise"]
    np.testing.assert_array_equal(fused.run(None, feed)[0], default.run(None, feed)[0])
    so.add_session_config_entry("session.disable_passes", "elementwise")
    assert "elementwise" not in InferenceSession(data, so).optimized.rewrites
    so = SessionOptions()
    so.add_session_config_entry("session.enable_passes", "no_such_pass")
    with pytest.raises(OnnxkitError, match="no_such_pass"):
        InferenceSession(data, so)


def test_single_pass_switched_off_and_unknown_name_refused():
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "matmul_add, cast, epilogue")   # (epilogue: the cpu
    sess = InferenceSession(_proto().SerializeToString(), so)               # MatMul would take the Add)
    assert sess.optimized.rewrites == {"identity": 1, "qdq": 0, "transpose": 0, "reshape": 0, "pad_conv": 0, "qpad_conv": 0, "conv_bn": 0,
                                       "channel_affine": 0, "gelu": 0, "hardswish": 0, "attention": 0,
                                       "qlut": 0}
    assert [s.op for s in sess.plan.steps] == ["Cast", "MatMul", "Add"]
    so.add_session_config_entry("session.disable_passes", "no_such_pass")
    with pytest.raises(OnnxkitError, match="no_such_pass"):
        InferenceSession(_proto().SerializeToString(), so)


def test_users_model_is_not_changed():
    m = onnxkit.load(_proto().SerializeToString())
    before = to_bytes(m)
    sess = InferenceSession(m)
    assert sess.optimized.changed and sess.model is m
    assert to_bytes(m) == before and [n.op_type for n in m.graph.node] == ["Identity", "Cast", "MatMul", "Add"]


def test_optimized_model_filepath_writes_the_optimized_model(tmp_path):
    out = tmp_path / "opt.onnx"
    so = SessionOptions()
    so.optimized_model_filepath = str(out)
    sess = InferenceSession(_proto().SerializeToString(), so)
    written = onnxkit.load(str(out))
    assert [n.op_type for n in written.graph.node] == ["Gemm"]
    report = onnxkit.check_model(written)
    assert report.ok and not report.warnings
    assert within(InferenceSession(str(out), off()).run(None, FEED)[0], sess.run(None, FEED)[0])


def test_cli_optimized_model(tmp_path, capsys):
    from onnxkit.cli import main

    src, out, x = tmp_path / "m.onnx", tmp_path / "opt.onnx", tmp_path / "x.npy"
    src.write_bytes(_proto().SerializeToString())
    np.save(x, FEED["x"])
    assert main(["run", str(src), "-i", f"x={x}", "--optimized-model", str(out), "--threads", "1"]) == 0
    assert "written to" in capsys.readouterr().out
    written = onnxkit.load(str(out))
    assert [n.op_type for n in written.graph.node] == ["Gemm"] and onnxkit.check_model(written).ok
    assert main(["run", str(src), "-i", f"x={x}", "--no-optimize", "--optimized-model", str(out)]) == 0
    assert [n.op_type for n in onnxkit.load(str(out)).graph.node] == ["Identity", "Cast", "MatMul", "Add"]


def test_graph_read_by_a_gradient_node_is_left_alone():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [3])
    dx = helper.make_tensor_value_info("dx", TP.FLOAT, [3])
    nodes = [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Neg", ["i"], ["y"]),
             helper.make_node("Gradient", ["x"], ["dx"], domain="ai.onnx.preview.training", xs=["x"], y="y")]
    proto = model(nodes, [x], [y, dx])
    proto.opset_import.append(helper.make_opsetid("ai.onnx.preview.training", 1))
    sess = InferenceSession(proto.SerializeToString())
    assert not sess.optimized.changed
    assert np.array_equal(sess.run(None, {"x": np.ones(3, np.float32)})[1], -np.ones(3, np.float32))


def test_the_session_infers_once_where_declarations_add_nothing(monkeypatch):
    """The checker's inference (Clause 9.4) feeds the optimizer's view when no declaration added
    to it (``declarations_used``): one inference per session; a model whose value_info says more
    than inference derives (a Reshape to a shape fed at run time, declared [2, 6]) is inferred
    again without its declarations, so the passes never take a declaration for a fact."""
    import onnxkit.inference as inference

    calls = []
    real = inference.infer_model
    monkeypatch.setattr(inference, "infer_model", lambda m, registry=None, **kw: calls.append(m) or real(m, registry, **kw))
    sess = InferenceSession(_proto().SerializeToString())
    assert len(calls) == 1 and sess.optimized.rewrites["cast"] == 1  # the Cast pass read the types
    x = helper.make_tensor_value_info("x", TP.FLOAT, [3, 4])
    s = helper.make_tensor_value_info("s", TP.INT64, [2])
    y = helper.make_tensor_value_info("y", TP.FLOAT, None)
    r = helper.make_tensor_value_info("r", TP.FLOAT, [2, 6])
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Cast", ["r"], ["y"], to=TP.FLOAT)]
    proto = model(nodes, [x, s], [y])
    proto.graph.value_info.append(r)
    calls.clear()
    sess = InferenceSession(proto.SerializeToString())
    assert len(calls) == 2
    out = sess.run(None, {"x": FEED["x"], "s": np.array([6, 2], np.int64)})[0]
    assert out.shape == (6, 2) and within(out, FEED["x"].reshape(6, 2))


def test_a_declared_output_no_node_reads_costs_no_second_inference(monkeypatch):
    """A declared graph output that says more than inference derives (exporters write symbols
    there) is read by no node, so the checker's types, with that output's own undeclared type,
    are the optimizer's: one inference (``InferenceResult.undeclared_types``)."""
    import onnxkit.inference as inference

    calls = []
    real = inference.infer_model
    monkeypatch.setattr(inference, "infer_model", lambda m, registry=None, **kw: calls.append(m) or real(m, registry, **kw))
    x = helper.make_tensor_value_info("x", TP.FLOAT, [3, 4])
    s = helper.make_tensor_value_info("s", TP.INT64, [2])
    y = helper.make_tensor_value_info("y", TP.FLOAT, ["rows", "cols"])
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=TP.FLOAT), helper.make_node("Reshape", ["c", "s"], ["y"])]
    sess = InferenceSession(model(nodes, [x, s], [y]).SerializeToString())
    assert len(calls) == 1 and sess.optimized.rewrites["cast"] == 1
    out = sess.run(None, {"x": FEED["x"], "s": np.array([2, 6], np.int64)})[0]
    assert out.shape == (2, 6) and within(out, FEED["x"].reshape(2, 6))
