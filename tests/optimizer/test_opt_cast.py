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
