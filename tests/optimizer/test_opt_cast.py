"""The ``cast`` pass: a Cast to the type its input already has is removed (inferred types)."""

from __future__ import annotations

import numpy as np

import onnxkit
from onnxkit.runtime.optimizer import optimize
from optimizer_cases import TP, check_pass, helper, model

X = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])
FEED = {"x": np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)}


def test_cast_to_own_type_removed_real_cast_kept():
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])
    z = helper.make_tensor_value_info("z", TP.INT32, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Cast", ["a"], ["b"], to=TP.FLOAT),      # float -> float: removed
             helper.make_node("Neg", ["b"], ["y"]),
             helper.make_node("Cast", ["a"], ["c"], to=TP.INT32),      # float -> int32: kept
             helper.make_node("Abs", ["c"], ["z"])]
    check_pass(model(nodes, [X], [y, z]), FEED, "cast", 1, ["Relu", "Neg", "Cast", "Abs"])


def test_cast_that_is_a_graph_output_kept():
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Cast", ["a"], ["y"], to=TP.FLOAT)]
    check_pass(model(nodes, [X], [y]), FEED, "cast", 0, ["Relu", "Cast"])


def test_cast_of_untyped_value_kept():
    u = helper.make_tensor_value_info("x", TP.FLOAT, None)
    y = helper.make_tensor_value_info("y", TP.FLOAT, None)
    # a custom-domain producer has no inference function: the type of "a" is unknown
    nodes = [helper.make_node("Foo", ["x"], ["a"], domain="custom.none"),
             helper.make_node("Cast", ["a"], ["b"], to=TP.FLOAT), helper.make_node("Neg", ["b"], ["y"])]
    m = model(nodes, [u], [y])
    m.opset_import.append(helper.make_opsetid("custom.none", 1))
    r = optimize(onnxkit.load(m.SerializeToString()), 99)
    assert r.rewrites["cast"] == 0


def _cast_like_model(like_type, opset=17, saturate=None):
    like = helper.make_tensor_value_info("like", like_type, [1])
    y = helper.make_tensor_value_info("y", like_type, [2, 3])
    attrs = {} if saturate is None else {"saturate": saturate}
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("CastLike", ["a", "like"], ["y"], **attrs)]
    return model(nodes, [X, like], [y], opset=opset)


def test_cast_like_with_a_known_target_type_becomes_cast():
    """CastLike(x, like) is Cast(x, to = like's type) (Part 2, CastLike): written so, as onnxruntime's
    saved optimized model writes it; the output keeps its name (here a graph output)."""
    proto = _cast_like_model(TP.FLOAT16)
    feed = dict(FEED, like=np.zeros(1, np.float16))
    check_pass(proto, feed, "cast", 1, ["Relu", "Cast"])
    r = optimize(onnxkit.load(proto.SerializeToString()), 99, disabled={"identity"})
    (cast,) = [n for n in r.model.graph.node if n.op_type == "Cast"]
    assert cast.attr("to") == TP.FLOAT16 and list(cast.input) == ["a"] and list(cast.output) == ["y"]


def test_cast_like_keeps_saturate():
    proto = _cast_like_model(TP.FLOAT8E4M3FN, opset=19, saturate=0)
    r = optimize(onnxkit.load(proto.SerializeToString()), 99)
    (cast,) = [n for n in r.model.graph.node if n.op_type == "Cast"]
    assert cast.attr("to") == TP.FLOAT8E4M3FN and cast.attr("saturate") == 0


def test_cast_like_to_its_own_type_stays_a_cast_as_in_onnxruntimes_file():
    """onnxruntime's saved file keeps the Cast a CastLike to X's own type becomes (its ScatterND /
    ScatterElements API tests expect ['Cast', 'ScatterElements', 'Sub'] for float32 too)."""
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("CastLike", ["a", "x"], ["b"]),
             helper.make_node("Neg", ["b"], ["y"])]
    check_pass(model(nodes, [X], [y]), FEED, "cast", 1, ["Relu", "Cast", "Neg"])


def test_cast_like_of_an_untyped_target_kept():
    u = helper.make_tensor_value_info("u", TP.FLOAT, None)
    y = helper.make_tensor_value_info("y", TP.FLOAT, None)
    nodes = [helper.make_node("Foo", ["u"], ["t"], domain="custom.none"),
             helper.make_node("CastLike", ["x", "t"], ["y"])]
    m = model(nodes, [X, u], [y])
    m.opset_import.append(helper.make_opsetid("custom.none", 1))
    r = optimize(onnxkit.load(m.SerializeToString()), 99)
    assert r.rewrites["cast"] == 0 and [n.op_type for n in r.model.graph.node] == ["Foo", "CastLike"]
