"""The evaluation budget (onnxkit.runtime.budget): decided at planning, checked before kernels."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.errors import LimitExceeded  # noqa: E402
from onnxkit.limits import MiB, Limits, physical_memory  # noqa: E402
from onnxkit.runtime.budget import enter_run, leave_run  # noqa: E402


def _model(nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", 21)]).SerializeToString()


def _cos_model(inits=()):
    return _model([h.make_node("ConstantOfShape", ["s"], ["c"], name="make"), h.make_node("Relu", ["c"], ["y"], name="relu")],
                  [] if inits else [h.make_tensor_value_info("s", T.INT64, [2])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])], inits)


def test_guards_are_decided_at_planning():
    sess = onnxkit.InferenceSession(_cos_model())
    guards = {s.node.op_type: s.guard for s in sess.plan.steps}
    assert guards["ConstantOfShape"] is not None and guards["Relu"] is None
    # the value a guarded node charged is released when the loop frees it
    assert [s.release for s in sess.plan.steps] == [(), ("c",)]


def test_computed_value_limit_follows_max_tensor_bytes():
    assert Limits(max_tensor_bytes=MiB).max_value_bytes == MiB
    assert Limits().max_value_bytes == min(physical_memory() // 2, Limits().max_tensor_bytes)
    sess = onnxkit.InferenceSession(_cos_model(), limits=Limits(max_tensor_bytes=MiB))
    assert sess.run(None, {"s": np.array([16, 16])})[0].shape == (16, 16)
    with pytest.raises(LimitExceeded) as info:  # 100 MB computed under a 1 MiB limit
        sess.run(None, {"s": np.array([5000, 5000])})
    e = info.value
    assert e.limit == "max_value_bytes" and e.value == 100_000_000 and e.maximum == MiB
    assert "'make' (ConstantOfShape)" in str(e)


def test_a_remembered_prediction_still_refuses_and_charges_each_run():
    # guards remember inference's answer per input key: the key must tell runs apart
    sess = onnxkit.InferenceSession(_cos_model(), limits=Limits(max_tensor_bytes=MiB))
    for _ in range(3):
        assert sess.run(None, {"s": np.array([16, 16])})[0].shape == (16, 16)
        with pytest.raises(LimitExceeded):
            sess.run(None, {"s": np.array([5000, 5000])})
    guard = next(s.guard for s in sess.plan.steps if s.node.op_type == "ConstantOfShape")
    assert len(guard.known) == 2
    sess = onnxkit.InferenceSession(_cos_model(), limits=Limits(max_run_bytes=3 * MiB))
    budget, token = enter_run(sess.limits)
    try:  # 1 MiB charged by every run while the value lives, remembered or not
        for k in range(3):
            sess.plan.run([np.array([512, 512])])
            assert budget.live == 0
    finally:
        leave_run(token)


def test_run_bytes_are_released_after_a_run():
    sess = onnxkit.InferenceSession(_cos_model(), limits=Limits(max_run_bytes=8 * MiB))
    budget, token = enter_run(sess.limits)
    try:
        for _ in range(20):  # 4 MiB each time, 80 MiB in all: never more than 4 MiB live
            sess.plan.run([np.array([1024, 1024])])
        assert budget.live == 0
    finally:
        leave_run(token)


def test_a_constant_too_big_to_fold_is_refused_when_run():
    s = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "s")
    sess = onnxkit.InferenceSession(_cos_model([s]))   # planning folds constants: this one is left to run
    with pytest.raises(LimitExceeded, match="max_value_bytes"):
        sess.run(None, {})


def test_broadcasting_is_checked_and_equal_shapes_pass():
    m = _model([h.make_node("Add", ["a", "b"], ["y"], name="add")],
               [h.make_tensor_value_info("a", T.FLOAT, ["n", 1]), h.make_tensor_value_info("b", T.FLOAT, [1, "m"])],
               [h.make_tensor_value_info("y", T.FLOAT, ["n", "m"])])
    sess = onnxkit.InferenceSession(m, limits=Limits(max_value_bytes=MiB))
    assert sess.run(None, {"a": np.ones((256, 1), np.float32), "b": np.ones((1, 256), np.float32)})[0].shape == (256, 256)
    with pytest.raises(LimitExceeded, match="'add' \\(Add\\) requests outputs of 4,194,304 bytes"):
        sess.run(None, {"a": np.ones((1024, 1), np.float32), "b": np.ones((1, 1024), np.float32)})


def test_sequence_length_limit():
    m = _model([h.make_node("SplitToSequence", ["x"], ["y"], name="split", keepdims=0)],
               [h.make_tensor_value_info("x", T.FLOAT, ["n"])], [h.make_tensor_sequence_value_info("y", T.FLOAT, None)])
    sess = onnxkit.InferenceSession(m, limits=Limits(max_sequence_length=100))
    assert len(sess.run(None, {"x": np.ones(100, np.float32)})[0]) == 100
    with pytest.raises(LimitExceeded, match="max_sequence_length") as info:
        sess.run(None, {"x": np.ones(101, np.float32)})
    assert info.value.value == 101


def test_memory_the_system_refuses_is_an_onnxkit_error_without_a_memory_error():
    sess = onnxkit.InferenceSession(_cos_model())
    step = sess.plan.steps[1]
    real = step.fn

    def refuse(*args):
        raise MemoryError("Unable to allocate 4.00 TiB")

    step.fn = refuse
    try:
        with pytest.raises(onnxkit.errors.EvaluationError, match="'relu' \\(Relu\\): out of memory") as info:
            sess.run(None, {"s": np.array([2, 2])})
    finally:
        step.fn = real
    e, seen = info.value, []
    while e is not None:
        seen.append(type(e))
        e = e.__cause__ or e.__context__
    assert MemoryError not in seen


def _bytes_model():
    """ConstantOfShape of uint8: a fed shape [n] computes exactly n bytes."""
    one = h.make_tensor("v", T.UINT8, [1], [7])
    return _model([h.make_node("ConstantOfShape", ["s"], ["y"], name="make", value=one)],
                  [h.make_tensor_value_info("s", T.INT64, [1])], [h.make_tensor_value_info("y", T.UINT8, ["n"])])


@pytest.mark.parametrize("limit", ["max_value_bytes", "max_run_bytes"])
def test_exactly_the_limit_is_accepted_and_one_byte_more_refused(limit):
    # issue 29: a limit compared with >= refused a value of exactly the limit
    n = 100_000
    sess = onnxkit.InferenceSession(_bytes_model(), limits=Limits(**{"max_value_bytes": 2 * n, limit: n}))
    assert sess.run(None, {"s": np.array([n])})[0].nbytes == n
    with pytest.raises(LimitExceeded) as info:
        sess.run(None, {"s": np.array([n + 1])})
    assert info.value.limit == limit and info.value.value == n + 1 and info.value.maximum == n
