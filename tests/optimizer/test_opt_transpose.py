"""The ``transpose`` pass: inverse Transpose pairs cancelled, consecutive ones merged."""

from __future__ import annotations

import numpy as np

from optimizer_cases import TP, check_pass, helper, model, optimized_ops

X = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3, 4])
FEED = {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}


def test_inverse_pair_cancelled():
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3, 4])
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[1, 2, 0]),
             helper.make_node("Transpose", ["a"], ["b"], perm=[2, 0, 1]),
             helper.make_node("Neg", ["b"], ["y"])]
    check_pass(model(nodes, [X], [y]), FEED, "transpose", 1, ["Neg"])


def test_consecutive_merged_into_one():
    y = helper.make_tensor_value_info("y", TP.FLOAT, [4, 3, 2])
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[1, 0, 2]),
             helper.make_node("Transpose", ["a"], ["y"], perm=[2, 0, 1])]
    check_pass(model(nodes, [X], [y]), FEED, "transpose", 1, ["Transpose"])


def test_shared_first_transpose_kept():
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3, 4])
    z = helper.make_tensor_value_info("z", TP.FLOAT, [3, 4, 2])
    nodes = [helper.make_node("Transpose", ["x"], ["z"], perm=[1, 2, 0]),
             helper.make_node("Transpose", ["z"], ["y"], perm=[2, 0, 1])]
    # "z" is a graph output (and so read twice): nothing changes
    check_pass(model(nodes, [X], [y, z]), FEED, "transpose", 0, ["Transpose", "Transpose"])


def test_identity_pair_at_a_graph_output_left_alone():
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3, 4])
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 1]),
             helper.make_node("Transpose", ["a"], ["y"], perm=[0, 2, 1])]
    assert optimized_ops(model(nodes, [X], [y]), "transpose") == (0, ["Transpose", "Transpose"])
