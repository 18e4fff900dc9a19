"""The ``identity`` pass: Identity and inference-mode Dropout removed, graph outputs kept."""

from __future__ import annotations

import numpy as np

from optimizer_cases import TP, check_pass, helper, init, model, optimized_ops

X = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])
FEED = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5}


def test_identity_and_dropout_removed():
    nodes = [helper.make_node("Identity", ["x"], ["a"]),
             helper.make_node("Dropout", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    check_pass(model(nodes, [X], [Y]), FEED, "identity", 2, ["Relu"])


def test_dropout_with_constant_false_training_mode_removed_true_kept():
    for training, expect in ((False, (1, ["Relu"])), (True, (0, ["Dropout", "Relu"]))):
        nodes = [helper.make_node("Dropout", ["x", "r", "t"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
        proto = model(nodes, [X], [Y], [init("r", np.float32(0.5)), init("t", np.bool_(training))])
        assert optimized_ops(proto, "identity") == expect
    nodes = [helper.make_node("Dropout", ["x", "r", "t"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    check_pass(model(nodes, [X], [Y], [init("r", np.float32(0.5)), init("t", np.bool_(False))]),
               FEED, "identity", 1, ["Relu"])


def test_graph_output_keeps_its_identity():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["y"])]
    check_pass(model(nodes, [X], [Y]), FEED, "identity", 0, ["Relu", "Identity"])


def test_used_mask_keeps_dropout():
    m = helper.make_tensor_value_info("m", TP.BOOL, [2, 3])
    nodes = [helper.make_node("Dropout", ["x"], ["y", "m"])]
    assert optimized_ops(model(nodes, [X], [Y, m]), "identity") == (0, ["Dropout"])


def test_name_read_in_a_subgraph_is_kept():
    then = helper.make_graph([helper.make_node("Neg", ["a"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TP.FLOAT, [2, 3])])
    other = helper.make_graph([helper.make_node("Abs", ["a"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TP.FLOAT, [2, 3])])
    c = helper.make_tensor_value_info("c", TP.BOOL, [])
    nodes = [helper.make_node("Identity", ["x"], ["a"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    check_pass(model(nodes, [X, c], [Y]), {**FEED, "c": np.array(True)}, "identity", 0, ["Identity", "If"])
