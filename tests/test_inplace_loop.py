"""In-place donation by the run loop (onnxkit.runtime.loop: ``fn.inplace``): a kernel's in-place
form is called only for a dying input nothing else holds, never for a feed, a constant, a value
read later, a value another live value views, or one read twice by the node."""

from __future__ import annotations

import numpy as np

from optimizer_cases import TP, helper, init, model, off

from onnxkit import InferenceSession

X = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])
FEED = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5}


def _spy(sess, node_name: str, position: int = 0):
    """Give the step of ``node_name`` an in-place form at ``position`` that records the arrays
    it was handed (and computes out of place, as the kernel does)."""
    step = next(s for s in sess.plan.steps if s.node.name == node_name)
    real, donated = step.fn, []

    def fn(*args):
        return real(*args)

    def alt(*args):
        donated.append(args[position])
        return real(*args)

    fn.inplace = {position: alt}
    step.fn = fn
    return donated


def _session(nodes, inputs=(X,), inits=()):
    return InferenceSession(model(nodes, list(inputs), [Y], inits).SerializeToString(), off())


def test_a_dying_intermediate_is_donated():
    sess = _session([helper.make_node("Relu", ["x"], ["a"], name="r"),
                     helper.make_node("Neg", ["a"], ["y"], name="n")])
    donated = _spy(sess, "n")
    y = sess.run(None, FEED)[0]
    assert len(donated) == 1 and donated[0].shape == (2, 3)
    assert np.array_equal(y, -np.maximum(FEED["x"], 0))


def test_a_feed_is_never_donated():
    sess = _session([helper.make_node("Neg", ["x"], ["y"], name="n")])
    donated = _spy(sess, "n")
    sess.run(None, FEED)
    assert donated == []


def test_a_constant_is_never_donated():
    c = init("c", np.ones((2, 3), np.float32))
    sess = _session([helper.make_node("Add", ["c", "x"], ["y"], name="n")], inits=[c])
    donated = _spy(sess, "n")
    sess.run(None, FEED)
    sess.run(None, FEED)
    assert donated == []


def test_a_value_read_later_is_not_donated():
    sess = _session([helper.make_node("Relu", ["x"], ["a"], name="r"),
                     helper.make_node("Neg", ["a"], ["b"], name="n"),
                     helper.make_node("Add", ["a", "b"], ["y"], name="add")])
    donated = _spy(sess, "n")
    sess.run(None, FEED)
    assert donated == []


def test_a_value_a_live_view_shares_is_not_donated():
    shape = init("s", np.array([3, 2], np.int64))
    sess = _session([helper.make_node("Relu", ["x"], ["a"], name="r"),
                     helper.make_node("Reshape", ["a", "s"], ["v"], name="view"),   # a view of a
                     helper.make_node("Neg", ["a"], ["b"], name="n"),               # a dies here, v lives
                     helper.make_node("Reshape", ["v", "s0"], ["w"], name="back"),
                     helper.make_node("Add", ["w", "b"], ["y"], name="add")],
                    inits=[shape, init("s0", np.array([2, 3], np.int64))])
    donated = _spy(sess, "n")
    sess.run(None, FEED)
    assert donated == []


def test_a_value_read_twice_by_the_node_is_not_donated():
    sess = _session([helper.make_node("Relu", ["x"], ["a"], name="r"),
                     helper.make_node("Mul", ["a", "a"], ["y"], name="n")])
    donated = _spy(sess, "n")
    sess.run(None, FEED)
    assert donated == []


def test_the_second_input_can_be_the_donor():
    b = init("b", np.full((3,), 2.0, np.float32))
    sess = _session([helper.make_node("Relu", ["x"], ["a"], name="r"),
                     helper.make_node("Add", ["b", "a"], ["y"], name="n")], inits=[b])
    donated = _spy(sess, "n", position=1)
    y = sess.run(None, FEED)[0]
    assert len(donated) == 1 and np.array_equal(y, np.maximum(FEED["x"], 0) + 2)
