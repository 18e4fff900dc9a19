"""The ``reshape`` pass: a Reshape of a Reshape reads the first one's input."""

from __future__ import annotations

import numpy as np

from optimizer_cases import TP, check_pass, helper, init, model, optimized_ops

X = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3, 4])
FEED = {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}


def _chain(second_shape, result_shape, **attrs):
    y = helper.make_tensor_value_info("y", TP.FLOAT, result_shape)
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["a"]),
             helper.make_node("Reshape", ["a", "s2"], ["b"], **attrs),
             helper.make_node("Neg", ["b"], ["y"])]
    return model(nodes, [X], [y], [init("s1", np.array([6, 4], np.int64)), init("s2", np.array(second_shape, np.int64))])


def test_chain_collapsed():
    check_pass(_chain([4, -1, 2], [4, 3, 2]), FEED, "reshape", 1, ["Reshape", "Neg"])


def test_zero_entry_copies_an_extent_so_kept():
    # 0 copies the first Reshape's extent (6), not x's (2): collapsing would change the result
    check_pass(_chain([0, 2, 2], [6, 2, 2]), FEED, "reshape", 0, ["Reshape", "Reshape", "Neg"])


def test_shared_intermediate_kept():
    y = helper.make_tensor_value_info("y", TP.FLOAT, [24])
    z = helper.make_tensor_value_info("z", TP.FLOAT, [6, 4])
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["a"]),
             helper.make_node("Reshape", ["a", "s2"], ["y"]),
             helper.make_node("Abs", ["a"], ["z"])]
    m = model(nodes, [X], [y, z], [init("s1", np.array([6, 4], np.int64)), init("s2", np.array([24], np.int64))])
    assert optimized_ops(m, "reshape") == (0, ["Reshape", "Reshape", "Abs"])
