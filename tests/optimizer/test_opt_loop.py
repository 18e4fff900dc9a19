"""The slot run loop (onnxkit.runtime.loop): same results and errors as a checked run, fast path proven safe."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from optimizer_cases import TP, helper, model

import onnxkit
from onnxkit import InferenceSession, RunOptions
from onnxkit.errors import EvaluationError
from onnxkit.runtime.loop import ABSENT, SlotScope
from onnxkit.runtime.state import RUN_STATE

X = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])
FEED = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5}


def _chain():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["a", "x"], ["b"]),
             helper.make_node("Split", ["b"], ["c", "d"], axis=0), helper.make_node("Concat", ["d", "c"], ["e"], axis=0),
             helper.make_node("Mul", ["e", "x"], ["y"])]
    return model(nodes, [X], [Y])


def test_fast_and_watched_loops_agree():
    sess = InferenceSession(_chain().SerializeToString())
    fast = sess.run(None, FEED)[0]
    watched = sess.run(None, FEED, RunOptions())[0]  # run options: the checked (watched) loop
    a = np.maximum(FEED["x"], 0) + FEED["x"]
    assert np.array_equal(fast, np.concatenate([a[1:], a[:1]]) * FEED["x"])
    assert np.array_equal(fast, watched)


def test_assigned_kernel_is_seen_after_a_first_run():
    sess = InferenceSession(_chain().SerializeToString())
    sess.run(None, FEED)
    step = sess.plan.steps[-1]
    real, calls = step.fn, []

    def spy(*args):
        calls.append(len(args))
        return real(*args)

    step.fn = spy
    sess.run(None, FEED)
    assert calls == [2]


def test_kernel_leaving_a_read_output_absent_is_reported_by_name():
    sess = InferenceSession(_chain().SerializeToString())
    split = next(s for s in sess.plan.steps if s.node.op_type == "Split")
    real = split.fn
    split.fn = lambda b: real(b)[:1]  # only "c": "d" is never computed
    with pytest.raises(EvaluationError, match="reads 'd', which has no value"):
        sess.run(None, FEED)
    split.fn = lambda b: real(b)[0]  # not a tuple: the first output only
    with pytest.raises(EvaluationError, match="reads 'd', which has no value"):
        sess.run(None, FEED)


def test_unread_absent_output_is_fine():
    nodes = [helper.make_node("Split", ["x"], ["c", "d"], axis=0), helper.make_node("Concat", ["c", "c"], ["y"], axis=0)]
    sess = InferenceSession(model(nodes, [X], [Y]).SerializeToString())
    split = sess.plan.steps[0]
    real = split.fn
    split.fn = lambda b: real(b)[:1]
    out = sess.run(None, FEED)[0]
    assert np.array_equal(out, np.concatenate([FEED["x"][:1]] * 2))


def test_graph_not_in_topological_order_runs_in_a_topological_order():
    # as onnxruntime: the session evaluates the nodes in a topological order, validated or not
    # (onnxkit.checker.readings; the checker's not-topologically-sorted is a warning strict refuses)
    nodes = [helper.make_node("Neg", ["a"], ["y"]), helper.make_node("Relu", ["x"], ["a"])]
    for validate in (True, False):
        with pytest.warns(onnxkit.ConformanceWarning) if validate else contextlib.nullcontext():
            sess = InferenceSession(model(nodes, [X], [Y]).SerializeToString(), validate=validate)
        assert np.array_equal(sess.run(None, FEED)[0], -np.maximum(FEED["x"], 0))


def test_kernel_error_names_node_and_op():
    unfused = onnxkit.SessionOptions()       # Relu -> Add kept two steps (not one Elementwise region)
    unfused.add_session_config_entry("session.disable_passes", "elementwise")
    sess = InferenceSession(_chain().SerializeToString(), unfused)
    step = sess.plan.steps[1]

    def boom(*args):
        raise ValueError("bad")

    step.fn = boom
    with pytest.raises(EvaluationError, match=r"node '' \(Add\) failed: ValueError: bad") as info:
        sess.run(None, FEED)
    assert isinstance(info.value.__cause__, ValueError)


def test_subgraph_reads_outer_values_through_the_slot_scope():
    then = helper.make_graph([helper.make_node("Neg", ["a"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TP.FLOAT, [2, 3])])
    other = helper.make_graph([helper.make_node("Abs", ["a"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TP.FLOAT, [2, 3])])
    c = helper.make_tensor_value_info("c", TP.BOOL, [])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    sess = InferenceSession(model(nodes, [X, c], [Y]).SerializeToString())
    a = np.maximum(FEED["x"], 0)
    assert np.array_equal(sess.run(None, {**FEED, "c": np.array(True)})[0], -a)
    assert np.array_equal(sess.run(None, {**FEED, "c": np.array(False)})[0], a)
    assert np.array_equal(sess.run(None, {**FEED, "c": np.array(True)}, RunOptions())[0], -a)


def test_slot_scope_is_a_mapping_of_present_values():
    env = [None, np.float32(1), ABSENT]
    scope = SlotScope(env, {"": 0, "a": 1, "b": 2})
    assert "a" in scope and "b" not in scope and "zz" not in scope
    assert scope.get(RUN_STATE) is None and list(scope) == ["a"] and len(scope) == 1
    state = object()
    assert SlotScope(env, {"": 0, "a": 1}, state)[RUN_STATE] is state


def test_folded_defaults_plan_and_override():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2])
    w = helper.make_tensor_value_info("w", TP.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [2])
    nodes = [helper.make_node("Neg", ["w"], ["n"]), helper.make_node("Add", ["x", "n"], ["y"])]
    m = model(nodes, [x, w], [y], [onnxkit_init("w", np.array([1, 2], np.float32))])
    sess = InferenceSession(m.SerializeToString())
    one = np.ones(2, np.float32)
    assert np.array_equal(sess.run(None, {"x": one})[0], one - [1, 2])
    assert np.array_equal(sess.run(None, {"x": one, "w": one})[0], one - 1)


def onnxkit_init(name, array):
    from optimizer_cases import init

    return init(name, array)


def test_a_session_used_twice_gives_fresh_outputs():
    sess = InferenceSession(_chain().SerializeToString())
    first = sess.run(None, FEED)[0]
    first[:] = 0
    assert not np.array_equal(sess.run(None, FEED)[0], first)
    assert onnxkit.runtime.loop.ABSENT is ABSENT
