"""cpu ReduceSum / ReduceMax / ReduceMin of integer tensors, and Gather of one element.

A decoder's attention mask is summed (int64, one more column per token) and a Shape's extent is
gathered as a 0-d index: both run every token.  The integer reductions are the ufuncs' own
reductions (no portable body per call); Gather of one element of a vector is a 0-d tensor (a
numpy scalar would send the next node to its portable body).  Expected values: numpy over int64
(wrapped to the input's type as two's complement), and onnxruntime where it takes the type.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from onnxkit.api import load  # noqa: E402
from onnxkit.errors import EvaluationError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

TYPES = {np.int64: TensorProto.INT64, np.int32: TensorProto.INT32, np.int8: TensorProto.INT8,
         np.uint8: TensorProto.UINT8, np.uint32: TensorProto.UINT32}


def _model(op, elem, rank, keepdims=1, axes=(1,)):
    node = helper.make_node(op, ["x", "axes"], ["y"], name="the_reduce", keepdims=keepdims)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, [None] * rank)],
                              [helper.make_tensor_value_info("y", elem, None)],
                              initializer=[helper.make_tensor("axes", TensorProto.INT64, [len(axes)], list(axes))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _want(op, x, axes, keepdims):
    wide = x.astype(np.int64)
    r = {"ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min}[op](wide, axis=axes, keepdims=bool(keepdims))
    return np.asarray(r).astype(x.dtype)   # two's complement low bits


@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin"])
def test_integer_reductions_equal_numpy_over_a_growing_mask(op, dtype, monkeypatch):
    from onnxkit_cpu.overrides import reduction

    calls = []
    monkeypatch.setattr(reduction.portable, "reduce", lambda *a: calls.append(a) or pytest.fail("portable body"))
    sess = InferenceSession(load(_model(op, TYPES[dtype], 2).SerializeToString()), validate=False)
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    for t in range(1, 40):              # a decoder's mask: one more column per run
        x = rng.integers(info.min, info.max, size=(2, t), endpoint=True).astype(dtype)
        got = sess.run(None, {"x": x})[0]
        want = _want(op, x, (1,), 1)
        assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert not calls


@pytest.mark.parametrize("keepdims, axes", [(0, (0, 1)), (1, (0,)), (0, (-1,)), (1, (0, 2))])
def test_integer_sums_over_other_axes_as_onnxruntime_and_wrapping_as_the_portable_body(keepdims, axes):
    """Within the type's range onnxruntime's sums; beyond it (onnxruntime saturates, ONNX does not
    say) the portable body's two's complement low bits, as before the fast path."""
    ort = pytest.importorskip("onnxruntime")
    from onnxkit_default_domain.api import reduction as portable_reduction

    from onnxkit.registry import build_registry

    for dtype in (np.int32, np.int64):
        m = load(_model("ReduceSum", TYPES[dtype], 3, keepdims, axes).SerializeToString())
        info = np.iinfo(dtype)
        rng = np.random.default_rng(5)
        small = rng.integers(-1000, 1000, size=(3, 4, 5)).astype(dtype)
        got = InferenceSession(m, validate=False).run(None, {"x": small})[0]
        peer = ort.InferenceSession(_model("ReduceSum", TYPES[dtype], 3, keepdims, axes).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        want = peer.run(None, {"x": small})[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        large = rng.integers(info.max // 4, info.max, size=(3, 4, 5), endpoint=True).astype(dtype)
        got = InferenceSession(m, validate=False).run(None, {"x": large})[0]
        registry = build_registry()
        registry.kernels["cpu"][("", "ReduceSum", 13)] = portable_reduction.reduction_factory("ReduceSum", 13)
        portable = InferenceSession(m, registry=registry, validate=False).run(None, {"x": large})[0]
        np.testing.assert_array_equal(got, portable)
        np.testing.assert_array_equal(got, _want("ReduceSum", large, axes, keepdims))


def test_empty_and_bool_inputs_keep_the_portable_rules():
    empty = InferenceSession(load(_model("ReduceMax", TensorProto.INT32, 2).SerializeToString()), validate=False)
    got = empty.run(None, {"x": np.zeros((2, 0), np.int32)})[0]
    np.testing.assert_array_equal(got, np.full((2, 1), np.iinfo(np.int32).min, np.int32))   # the type's lowest
    summed = InferenceSession(load(_model("ReduceSum", TensorProto.INT64, 2).SerializeToString()), validate=False)
    np.testing.assert_array_equal(summed.run(None, {"x": np.zeros((2, 0), np.int64)})[0], np.zeros((2, 1), np.int64))
    bad = InferenceSession(load(_model("ReduceSum", TensorProto.INT64, 2, axes=(2,)).SerializeToString()),
                           validate=False)
    for _ in range(2):                                     # axis 2 of a matrix: refused by name, every run
        with pytest.raises(EvaluationError, match="the_reduce"):
            bad.run(None, {"x": np.ones((2, 3), np.int64)})


def _gather(rank_x):
    node = helper.make_node("Gather", ["x", "i"], ["y"], name="the_gather", axis=0)
    graph = helper.make_graph([node, helper.make_node("Cast", ["y"], ["z"], to=TensorProto.INT32)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, [None] * rank_x),
                               helper.make_tensor_value_info("i", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("z", TensorProto.INT32, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_gather_of_one_element_of_a_vector_is_a_0d_tensor():
    from onnxkit_cpu.overrides.indexing import gather

    class Ctx:
        def attr(self, name):
            return 0

        def fail(self, message):
            raise AssertionError(message)

    fn = gather(Ctx())
    x = np.array([4, 7, 9], np.int64)
    for i in (0, 2, -1):
        got = fn(x, np.array(i, np.int64))
        assert type(got) is np.ndarray and got.shape == () and got.dtype == np.int64 and got == x[i]
    assert fn(x, np.array([1], np.int64)).shape == (1,)
    assert fn(np.arange(6).reshape(2, 3), np.array(1, np.int64)).shape == (3,)
    sess = InferenceSession(load(_gather(1).SerializeToString()), validate=False)
    for n in range(2, 6):
        z = sess.run(None, {"x": np.arange(n, dtype=np.int64) * 3, "i": np.array(n - 1, np.int64)})[0]
        assert type(z) is np.ndarray and z.shape == () and z.dtype == np.int32 and int(z) == 3 * (n - 1)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMean"])
def test_an_integer_input_is_planned_once_per_rank_not_per_extent(op, monkeypatch):
    """A growing integer mask is planned once for its rank (its plan does not depend on the
    extents); a float input of a new shape, an empty integer input and another rank each get a
    plan of their own, and every run's result is numpy's (ReduceMean of int64: the portable body)."""
    from onnxkit_cpu.overrides import reduction

    made = []
    real = reduction._plan
    monkeypatch.setattr(reduction, "_plan", lambda *a: made.append(a[3].shape) or real(*a))
    sess = InferenceSession(load(_model(op, TensorProto.INT64, 2).SerializeToString()), validate=False)
    rng = np.random.default_rng(5)
    for t in range(1, 30):
        if t == 10:  # the session's first signatures each have a plan (and a kernel) of their own
            settled = len(made)
        x = rng.integers(-9, 9, size=(1, t)).astype(np.int64)
        got = sess.run(None, {"x": x})[0]
        want = {"ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMean": np.mean}[op](x, axis=1, keepdims=True)
        np.testing.assert_array_equal(got, want.astype(np.int64) if op != "ReduceMean" else np.trunc(want).astype(np.int64))
    assert len(made) == settled  # runs 10-29: new extents, no new plan
    assert all(len(s) == 2 for s in made)
    sess.run(None, {"x": np.zeros((1, 0), np.int64)})
    assert made[-1] == (1, 0) and len(made) == settled + 1
    fsess = InferenceSession(load(_model(op, TensorProto.FLOAT, 2).SerializeToString()), validate=False)
    made.clear()
    for t in range(1, 30):
        fsess.run(None, {"x": np.ones((1, t), np.float32)})
    assert len(made) > 20  # a float input of a new shape: a plan of its own (its BLAS sum's extents)
