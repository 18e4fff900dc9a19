"""If inlining in shape specialization (onnxkit.runtime.optimizer.inline): an If whose condition
folds to a constant for a signature is replaced by the branch it takes; results identical to
the plan without specialization, for every signature."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer_cases import TP, helper, init, model

from onnxkit import InferenceSession, SessionOptions
from onnxkit.runtime.optimizer import specialize

X = helper.make_tensor_value_info("x", TP.FLOAT, None)
Y = helper.make_tensor_value_info("y", TP.FLOAT, None)
I64 = TP.INT64


def _plain() -> SessionOptions:
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "specialize")
    return so


def _c(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, TP.INT64 if dtype == np.int64 else TP.FLOAT,
                                                                             np.shape(value), np.ravel(value).tolist()))


def _squeeze_if(x, out, tag):
    """``out = Squeeze(x, -1) if x.shape[-1] == 1 else x`` (an exporter's conditional squeeze)."""
    then = helper.make_graph([_c(f"{tag}_ax", [-1]), helper.make_node("Squeeze", [x, f"{tag}_ax"], [f"{tag}_sq"])],
                             f"{tag}_then", [], [helper.make_tensor_value_info(f"{tag}_sq", TP.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Identity", [x], [f"{tag}_id"])], f"{tag}_else", [],
                              [helper.make_tensor_value_info(f"{tag}_id", TP.FLOAT, None)])
    return [helper.make_node("Shape", [x], [f"{tag}_s"]), _c(f"{tag}_m1", -1),
            helper.make_node("Gather", [f"{tag}_s", f"{tag}_m1"], [f"{tag}_last"], axis=0), _c(f"{tag}_one", 1),
            helper.make_node("Equal", [f"{tag}_last", f"{tag}_one"], [f"{tag}_c"]),
            helper.make_node("If", [f"{tag}_c"], [out], name=f"{tag}_if", then_branch=then, else_branch=other)]


def _nested():
    """Two conditional squeezes, the second inside the first's then branch, on a value of that
    branch: its condition is known only once the first is inlined (a second record phase)."""
    inner = _squeeze_if("t_sq", "t_out", "in")
    then = helper.make_graph([_c("t_ax", [-1]), helper.make_node("Squeeze", ["x", "t_ax"], ["t_sq"]), *inner],
                             "then", [], [helper.make_tensor_value_info("t_out", TP.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e_neg"])], "else", [],
                              [helper.make_tensor_value_info("e_neg", TP.FLOAT, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), _c("m1", -1), helper.make_node("Gather", ["s", "m1"], ["last"], axis=0),
             _c("one", 1), helper.make_node("Equal", ["last", "one"], ["c"]),
             helper.make_node("If", ["c"], ["r"], name="outer", then_branch=then, else_branch=other),
             helper.make_node("Mul", ["r", "two"], ["y"])]
    return model(nodes, [X], [Y], [init("two", np.array(2, np.float32))]).SerializeToString()


def _ops(sess, x):
    plan, recording = sess._specializer.plan_for(specialize.signature([x]))
    return [s.node.op_type for s in plan.steps], recording


def _x(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 3


@pytest.mark.parametrize("shape", [(2, 1, 1), (2, 3, 1), (2, 1), (4, 3)])
def test_nested_branches_inlined_and_results_identical(shape):
    m = _nested()
    sess, plain = InferenceSession(m), InferenceSession(m, _plain())
    x = _x(*shape)
    expected = plain.run(None, {"x": x})[0]
    for _ in range(4):  # record, record the inlined branch, specialized
        got = sess.run(None, {"x": x})[0]
        assert got.dtype == expected.dtype and got.shape == expected.shape and got.tobytes() == expected.tobytes()
    ops, recording = _ops(sess, x)
    assert not recording and "If" not in ops and "Shape" not in ops and "Identity" not in ops  # aliases collapsed
    if shape[-1] == 1:  # both squeezes where both conditions hold; the inner one is an Identity otherwise
        assert ops.count("Squeeze") == 1 + (shape[-2] == 1) and "Neg" not in ops
    else:
        assert ops == ["Neg", "Mul"]


def test_signatures_take_their_own_branches():
    m = _nested()
    sess, plain = InferenceSession(m), InferenceSession(m, _plain())
    for _ in range(3):
        for shape in [(2, 1), (2, 3), (3, 2, 1)]:
            x = _x(*shape)
            assert np.array_equal(sess.run(None, {"x": x})[0], plain.run(None, {"x": x})[0])
    assert len(sess._specializer._plans) == 3


def test_branch_outputs_an_outer_value_and_a_constant():
    """A branch returning a value of the enclosing graph (an alias step) and a constant of its own
    (a folded value: the caller still gets an array of its own)."""
    then = helper.make_graph([_c("k", [7.0, 8.0], np.float32)], "then", [],
                             [helper.make_tensor_value_info("x", TP.FLOAT, None),
                              helper.make_tensor_value_info("k", TP.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Abs", ["x"], ["a"])], "else", [],
                              [helper.make_tensor_value_info("n", TP.FLOAT, None),
                               helper.make_tensor_value_info("a", TP.FLOAT, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["s"], ["rank"]), _c("two", 2),
             helper.make_node("Equal", ["rank", "two"], ["c"]),
             helper.make_node("If", ["c"], ["p", "q"], then_branch=then, else_branch=other),
             helper.make_node("Add", ["p", "p"], ["y"])]
    z = helper.make_tensor_value_info("q", TP.FLOAT, None)
    m = model(nodes, [X], [Y, z]).SerializeToString()
    sess, plain = InferenceSession(m), InferenceSession(m, _plain())
    for x in (_x(2, 2), _x(3)):
        for _ in range(3):
            got, want = sess.run(None, {"x": x}), plain.run(None, {"x": x})
            assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert _ops(sess, _x(2, 2))[0] == ["Add"]  # p is x (its alias collapsed), q a folded constant
    assert _ops(sess, _x(3))[0] == ["Neg", "Abs", "Add"]
    x = _x(2, 2)
    q = sess.run(None, {"x": x})[1]
    q[:] = 0  # the folded constant is not handed out
    assert np.array_equal(sess.run(None, {"x": x})[1], [7.0, 8.0])


def test_branch_reusing_a_name_of_the_enclosing_graph_is_not_inlined():
    """A branch defining a name the enclosing graph also defines (shadowing, planned unvalidated)
    keeps its If: inlining would make the two one slot."""
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["d"])], "then", [],
                             [helper.make_tensor_value_info("d", TP.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["d2"])], "else", [],
                              [helper.make_tensor_value_info("d2", TP.FLOAT, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["s"], ["rank"]), _c("two", 2),
             helper.make_node("Equal", ["rank", "two"], ["c"]), helper.make_node("Relu", ["x"], ["d"]),
             helper.make_node("If", ["c"], ["p"], then_branch=then, else_branch=other),
             helper.make_node("Add", ["p", "d"], ["y"])]
    m = model(nodes, [X], [Y]).SerializeToString()
    sess, plain = InferenceSession(m, validate=False), InferenceSession(m, _plain(), validate=False)
    x = _x(2, 2)
    for _ in range(3):
        assert np.array_equal(sess.run(None, {"x": x})[0], plain.run(None, {"x": x})[0])
    assert "If" in _ops(sess, x)[0]


def test_inlined_branch_with_a_loop_reading_its_values():
    """A Loop inside the inlined branch reads a value of that branch by name: it still finds it."""
    body = helper.make_graph([helper.make_node("Add", ["acc", "b_val"], ["acc2"]),
                              helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
                             [helper.make_tensor_value_info("i", TP.INT64, []),
                              helper.make_tensor_value_info("cond_in", TP.BOOL, []),
                              helper.make_tensor_value_info("acc", TP.FLOAT, None)],
                             [helper.make_tensor_value_info("cond_out", TP.BOOL, []),
                              helper.make_tensor_value_info("acc2", TP.FLOAT, None)])
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["b_val"]), _c("trips", 3),
                              helper.make_node("Loop", ["trips", "", "x"], ["t_out"], body=body)], "then", [],
                             [helper.make_tensor_value_info("t_out", TP.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e_out"])], "else", [],
                              [helper.make_tensor_value_info("e_out", TP.FLOAT, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["s"], ["rank"]), _c("two", 2),
             helper.make_node("Equal", ["rank", "two"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    m = model(nodes, [X], [Y]).SerializeToString()
    sess = InferenceSession(m)
    x = _x(2, 2)
    for _ in range(3):
        assert np.array_equal(sess.run(None, {"x": x})[0], x - 3 * x)
    assert _ops(sess, x)[0] == ["Neg", "Loop"]


def test_a_failing_inlined_node_is_reported_by_name():
    then = helper.make_graph([_c("bad", [5, 5]), helper.make_node("Reshape", ["x", "bad"], ["t"], name="reshape_in_branch")],
                             "then", [], [helper.make_tensor_value_info("t", TP.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TP.FLOAT, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["s"], ["rank"]), _c("two", 2),
             helper.make_node("Equal", ["rank", "two"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    sess = InferenceSession(model(nodes, [X], [Y]).SerializeToString())
    from onnxkit.errors import EvaluationError

    x = _x(2, 2)
    for _ in range(3):  # the recording runs fail too: the signature's plan is never kept
        with pytest.raises(EvaluationError, match="reshape_in_branch"):
            sess.run(None, {"x": x})
    assert np.array_equal(sess.run(None, {"x": _x(3)})[0], np.abs(_x(3)))


def test_conditional_squeezes_in_sequence():
    """``r`` is a Squeeze of x or x itself, and a second conditional squeeze reads it: both fold,
    each signature taking its own branches."""
    nodes = [*_squeeze_if("x", "r", "a"), *_squeeze_if("r", "r2", "b"), helper.make_node("Mul", ["r2", "two"], ["y"])]
    m = model(nodes, [X], [Y], [init("two", np.array(2, np.float32))]).SerializeToString()
    sess, plain = InferenceSession(m), InferenceSession(m, _plain())
    for shape in [(2, 1, 1), (2, 3, 1), (2, 3)]:
        x = _x(*shape)
        expected = plain.run(None, {"x": x})[0]
        for _ in range(4):
            assert sess.run(None, {"x": x})[0].tobytes() == expected.tobytes()
        ops, recording = _ops(sess, x)
        assert not recording and ops == ["Squeeze"] * (shape.count(1)) + ["Mul"]


def test_values_after_an_inlined_branch_are_typed_again():
    """Inference of the model gives ``r1`` (after the first conditional squeeze) no static shape:
    the second squeeze folds only once the plan with the first inlined is typed again
    (:meth:`Specializer._reinfer`), where the constant ``w``, too big to be given by value, is
    typed as an input; the run is what the plain plan computes."""
    w = np.arange(200, dtype=np.float32).reshape(200, 1)
    nodes = [*_squeeze_if("x", "r", "a"), helper.make_node("Add", ["r", "w"], ["r1"]), *_squeeze_if("r1", "y", "b")]
    m = model(nodes, [X], [Y], [init("w", w)]).SerializeToString()
    sess, plain = InferenceSession(m), InferenceSession(m, _plain())
    x = _x(1, 1)
    for _ in range(4):
        assert np.array_equal(sess.run(None, {"x": x})[0], plain.run(None, {"x": x})[0])
    assert _ops(sess, x)[0] == ["Squeeze", "Add", "Squeeze"]
