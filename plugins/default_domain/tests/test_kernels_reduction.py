"""The reduction family (onnxkit_default_domain/kernels/reduction.py) on both backends.

Every test runs on ``cpu`` (numpy, with its ReduceSum/ReduceMean override) and ``gpu``
(torch; torch's CPU device without CUDA).  Expected values are float64 numpy formulas or
written out by hand; :func:`kernel_harness.portable` also runs the portable bodies the cpu
backend overrides, and ArgMax/ArgMin (whose cpu kernel is still the legacy one) on numpy.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernel_harness import BACKENDS, portable, run, session
from onnxkit.errors import OnnxkitError

torch = pytest.importorskip("torch")

I64 = np.int64


def _logsumexp(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True)
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


#: operator -> float64 reference(x, axis tuple, keepdims)
REFS = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": _logsumexp,
}
INPUT_FROM = {op: 13 if op == "ReduceSum" else 18 for op in REFS}
_TOL = {np.float32: 2e-6, np.float64: 1e-12, np.float16: 2e-3, ml_dtypes.bfloat16: 1.6e-2}


def _x(dtype, op):
    lo, hi = (0.5, 1.5) if op in ("ReduceProd", "ReduceLogSum") else (-2, 2)
    return np.random.default_rng(3).uniform(lo, hi, (3, 4, 5)).astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("op", sorted(REFS))
def test_axes_as_input_and_as_attribute(backend, dtype, op):
    x = _x(dtype, op)
    x64, tol = x.astype(np.float64), _TOL[dtype]
    for axes, kd in ((None, 1), ([1], 0), ([0, -1], 1), ([2, 0, 1], 0)):
        ax = None if axes is None else tuple(a % 3 for a in axes)
        want = REFS[op](x64, ax, bool(kd))
        rank = 3 if kd else (0 if axes is None else 3 - len(axes))
        attrs = {"keepdims": kd} if axes is None else {"keepdims": kd, "axes": axes}
        inputs = [x] if axes is None else [x, np.array(axes, I64)]
        gots = [run(backend, op, inputs, {"keepdims": kd}, opset=INPUT_FROM[op], out_ranks=[rank]),
                portable(backend, op, INPUT_FROM[op], {"keepdims": kd})(*inputs)]
        if op != "ReduceSum" or dtype != ml_dtypes.bfloat16:       # bfloat16 from 13: axes are an input there
            gots.append(run(backend, op, [x], attrs, opset=11 if op == "ReduceSum" else 13, out_ranks=[rank]))
        for got in gots:
            assert got.dtype == x.dtype and got.shape == np.shape(want), (op, axes, kd)
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol, err_msg=f"{op} {axes}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", sorted(REFS))
def test_noop_with_empty_axes(backend, op):
    x = _x(np.float32, op)
    elementwise = {"ReduceL1": np.abs, "ReduceSumSquare": np.square, "ReduceLogSum": np.log,
                   "ReduceL2": np.abs}.get(op, lambda v: v)
    v = INPUT_FROM[op]
    for inputs in ([x], [x, np.zeros((0,), I64)]):
        got = run(backend, op, inputs, {"noop_with_empty_axes": 1}, opset=v)
        np.testing.assert_allclose(got, elementwise(x.astype(np.float64)), rtol=2e-6, err_msg=op)
        every = run(backend, op, inputs, {"noop_with_empty_axes": 0, "keepdims": 0}, opset=v, out_ranks=[0])
        assert every.shape == ()
    s = run(backend, op, [np.array(2.5, np.float32)], opset=v)                 # a 0-d input
    assert s.shape == () and np.isclose(s, REFS[op](np.float64(2.5), None, False))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", sorted(REFS))
def test_reductions_of_empty_sets(backend, op):
    x = np.zeros((2, 0, 3), np.float32)
    want = {"ReduceSum": 0.0, "ReduceL1": 0.0, "ReduceL2": 0.0, "ReduceSumSquare": 0.0, "ReduceProd": 1.0,
            "ReduceMean": np.nan, "ReduceLogSum": -np.inf, "ReduceLogSumExp": -np.inf, "ReduceMax": -np.inf,
            "ReduceMin": np.inf}[op]
    got = run(backend, op, [x, np.array([1], I64)], {"keepdims": 0}, opset=INPUT_FROM[op], out_ranks=[2])
    assert got.shape == (2, 3) and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.full((2, 3), want, np.float32))
    kept = run(backend, op, [x, np.array([0, 1], I64)], opset=INPUT_FROM[op])
    assert kept.shape == (1, 1, 3)
    assert run(backend, op, [x, np.array([2], I64)], opset=INPUT_FROM[op]).shape == (2, 0, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_semantics(backend):
    big = 2 ** 30
    x = np.array([[7, -3, 2], [big, big, big]], np.int32)
    assert run(backend, "ReduceSum", [x, np.array([1], I64)], opset=13).tolist() == [[6], [-big]]   # 3 * 2**30 wraps
    p = np.array([[7, -3, 2], [46341, 46341, 1]], np.int32)
    assert run(backend, "ReduceProd", [p], {"axes": [1]}, opset=13).tolist() == [[-42], [46341 ** 2 - 2 ** 32]]
    mean = run(backend, "ReduceMean", [np.array([[7, -3, 2], [-7, 0, 0]], np.int32)], {"axes": [1]}, opset=13)
    assert mean.dtype == np.int32 and mean.tolist() == [[2], [-2]]                                 # 2 and -2.33: truncated
    l2 = run(backend, "ReduceL2", [np.array([[3, 4]], np.int64)], {"axes": [1]}, opset=13)
    assert l2.tolist() == [[5]]
    sq = np.array([[50000, 50000]], np.int32)
    assert run(backend, "ReduceSumSquare", [sq], {"axes": [1]}, opset=13).tolist() == [[5 * 10 ** 9 - 2 ** 32]]
    assert run(backend, "ReduceMax", [np.zeros((0, 2), np.int32), np.array([0], I64)], opset=18).tolist() == \
        [[-2 ** 31, -2 ** 31]]
    assert run(backend, "ReduceMin", [np.zeros((0,), np.int8)], {"keepdims": 0}, opset=18, out_ranks=[0]) == 127


@pytest.mark.parametrize("backend", BACKENDS)
def test_bool_max_min_and_nan(backend):
    b = np.array([[True, False], [False, False]])
    assert run(backend, "ReduceMax", [b, np.array([1], I64)], opset=20).tolist() == [[True], [False]]
    assert run(backend, "ReduceMin", [b], {"keepdims": 0}, opset=20, out_ranks=[0]) == np.False_
    assert run(backend, "ReduceMin", [np.zeros((0, 2), bool), np.array([0], I64)], opset=20).tolist() == [[True, True]]
    x = np.array([[1.0, np.nan], [2.0, 3.0]], np.float32)
    got = run(backend, "ReduceMax", [x], {"axes": [1]}, opset=13)
    assert np.isnan(got[0, 0]) and got[1, 0] == 3.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_log_sum_exp_is_stable(backend):
    x = np.array([[1000.0, 1000.0], [-1000.0, -1001.0], [np.inf, 1.0], [-np.inf, -np.inf]], np.float32)
    got = run(backend, "ReduceLogSumExp", [x], {"axes": [1]}, opset=13)
    want = [1000.0 + np.log(2.0), -1000.0 + np.log1p(np.exp(-1.0)), np.inf, -np.inf]
    np.testing.assert_allclose(got[:, 0], np.array(want, np.float32), rtol=1e-6)
    i = run(backend, "ReduceLogSumExp", [np.array([[0, 0]], np.int32)], {"axes": [1]}, opset=13)
    assert i.dtype == np.int32 and i.tolist() == [[0]]                  # log 2, truncated


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_axes_name_the_node(backend):
    x = np.ones((2, 3), np.float32)
    for inputs, match in (([x, np.array([0, 0], I64)], "repeats"), ([x, np.array([2], I64)], "out of range")):
        sess, feed = session(backend, "ReduceSum", inputs, opset=13)
        with pytest.raises(OnnxkitError, match=match) as info:
            sess.run(None, feed)
        assert "the_node" in str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8])
def test_argmax_argmin(backend, dtype):
    x = np.random.default_rng(4).integers(-2, 3, (4, 5, 3)).astype(dtype)     # ties: first vs last
    for op, f in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
        for attrs in ({}, {"axis": 1}, {"axis": -1, "keepdims": 0}, {"axis": 1, "select_last_index": 1}):
            a = attrs.get("axis", 0) % 3
            kd = bool(attrs.get("keepdims", 1))
            key = x.astype(np.float64)
            want = (x.shape[a] - 1 - f(np.flip(key, a), axis=a, keepdims=kd)) if attrs.get("select_last_index") \
                else f(key, axis=a, keepdims=kd)
            fn = portable(backend, op, 13, attrs)
            got = fn(x)
            assert got.dtype == np.int64 and got.tolist() == want.tolist(), (op, attrs)
            if dtype != ml_dtypes.bfloat16 or backend == "gpu":
                sess_got = run(backend, op, [x], attrs, opset=13, out_types=[7], out_ranks=[3 if kd else 2])
                assert sess_got.tolist() == want.tolist(), (op, attrs)
    with pytest.raises(OnnxkitError, match="empty"):
        portable(backend, "ArgMax", 13, {"axis": 1})(np.zeros((2, 0), np.float32))


def test_the_gpu_backend_runs_the_family_itself():
    x = np.ones((2, 3), np.float32)
    for op, inputs in (("ReduceMean", [x, np.array([0], I64)]), ("ReduceLogSumExp", [x, np.array([0], I64)]),
                       ("ArgMax", [x])):
        sess, feed = session("gpu", op, inputs, opset=18, out_types=[7] if op == "ArgMax" else None)
        assert all(fb.node != "the_node" for fb in sess.fallbacks), op
        assert sess.run(None, feed)[0].shape == (1, 3)
