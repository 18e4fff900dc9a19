"""Unit tests of the cpu fast paths transformer models run most: Gelu ('none' and 'tanh'),
Softmax / LogSoftmax over the last axis and Conv whose windows tile X (a ViT patch
embedding) (overrides/activation.py, overrides/conv.py).

What the fast paths must keep: Gelu 'none' in float32 within 2e-6 relative of a float64
evaluation over the bulk of the inputs and within the harness tolerance (rtol 1e-3, atol 1e-7)
everywhere, including the negative tail; the definition's values at +-inf and NaN; Softmax's
values bit for bit (plain numpy formulas written here, the old kernel's operations), with NaN
and infinities in rows; Conv's values within float rounding of a float64 loop over the
windows, cropped trailing rows, 1-D to 3-D, float16, weights given as runtime inputs that
change, several shapes on one node and two threads.  Expected values are computed
independently of the kernels: Python's ``math`` in float64 or plain numpy formulas.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides.activation import SOFTMAX_COMPILED_ROW  # noqa: E402

RNG = np.random.default_rng(2025)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def session(op, inputs, attrs=None, opset=20, constants=()):
    """A one-node model over ``inputs`` (``{name: example array}``, None: omitted), inputs of
    unknown shapes; names in ``constants`` are initializers holding the example."""
    given = {n: v for n, v in inputs.items() if v is not None}

    def info(name, v):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), None)

    node = helper.make_node(op, [n if v is not None else "" for n, v in inputs.items()], ["y"], **(attrs or {}))
    graph = helper.make_graph([node], "g", [info(n, v) for n, v in given.items() if n not in constants],
                              [info("y", next(iter(given.values())))],
                              initializer=[numpy_helper.from_array(v, n) for n, v in given.items() if n in constants])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return InferenceSession(model.SerializeToString(), validate=False)


def run1(s, **feed):
    """``s``'s output with numpy's floating-point warnings turned into errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return s.run(None, feed)[0]


# ============================================================================ Gelu
def gelu64(x):
    """x Phi(x) in float64 by math.erfc (no cancellation in the negative tail)."""
    return np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64).ravel()]).reshape(x.shape)


def gelu_tanh64(x):
    """0.5 x (1 + tanh u) in float64, as 0.5 x * 2 / (1 + exp(-2u)) (1 + tanh u cancels in the tail)."""
    v = x.astype(np.float64)
    u = math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)
    with np.errstate(over="ignore"):
        return 0.5 * v * (2 / (1 + np.exp(-2 * u)))


def test_gelu_float32_accuracy_over_the_range_and_the_tail():
    s = session("Gelu", {"x": np.zeros(1, np.float32)})
    bulk = np.linspace(-6, 6, 24001, dtype=np.float32)
    got, want = run1(s, x=bulk).astype(np.float64), gelu64(bulk)
    nz = want != 0
    assert np.max(np.abs(got - want)[nz] / np.abs(want[nz])) < 2e-6
    assert np.all(got[~nz] == 0)
    wide = np.concatenate([np.linspace(-16, 16, 32001, dtype=np.float32), -np.geomspace(6, 20, 2001, dtype=np.float32)])
    got, want = run1(s, x=wide).astype(np.float64), gelu64(wide)
    assert np.allclose(got, want, rtol=1e-3, atol=1e-7)
    tail = (wide < -6) & (np.abs(want) > 1e-30)                 # the tail keeps erfc's relative accuracy
    assert np.max(np.abs(got - want)[tail] / np.abs(want[tail])) < 1e-5


def test_gelu_float32_special_values():
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, -1e4, 1e4, 3.4e38, -3.4e38, 1e-30, -1e-30], np.float32)
    got = session("Gelu", {"x": x}).run(None, {"x": x})[0]
    assert np.isnan(got[0]) and got[1] == np.inf and np.isnan(got[2])      # -inf: the definition's -inf * 0
    assert got[3] == 0 and got[4] == 0 and got[5] == 0 and got[6] == 1e4
    assert got[7] == np.float32(3.4e38) and got[8] == 0                     # no overflow on the way
    np.testing.assert_allclose(got[9:].astype(np.float64), [0.5e-30, -0.5e-30], rtol=1e-6)


@pytest.mark.parametrize("shapes", [[(3, 9, 128), (3, 17, 128), (3, 9, 128)], [(70001,), (5,), (2, 70001)]])
def test_gelu_shapes_on_one_node_and_erf_between(shapes):
    # the powers scratch is per thread and shared with Erf: sizes change, results must not
    g = session("Gelu", {"x": np.zeros(shapes[0], np.float32)})
    e = session("Erf", {"x": np.zeros(shapes[0], np.float32)}, opset=13)
    for shape in shapes:
        x = randn(*shape) * 3
        got = run1(g, x=x)
        assert got.shape == shape and got.dtype == np.float32
        np.testing.assert_allclose(got.astype(np.float64), gelu64(x), rtol=2e-6, atol=1e-30)
        erf = run1(e, x=x[..., :7])
        want = np.vectorize(math.erf)(x[..., :7].astype(np.float64))
        np.testing.assert_allclose(erf.astype(np.float64), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 6e-6), (np.float64, 1e-13)])
def test_gelu_tanh_values(dtype, tol):
    s = session("Gelu", {"x": np.zeros(1, dtype)}, {"approximate": "tanh"})
    x = np.linspace(-6, 6, 12001).astype(dtype)
    got = run1(s, x=x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), gelu_tanh64(x), rtol=tol, atol=1e-30)
    wide = np.linspace(-20, 20, 4001).astype(dtype)
    assert np.allclose(run1(s, x=wide).astype(np.float64), gelu_tanh64(wide), rtol=1e-3, atol=1e-7)
    sp = np.array([-np.inf, np.inf, np.nan, -1e4, 1e4, 0.0], dtype)
    got = s.run(None, {"x": sp})[0]
    assert np.isnan(got[0]) and got[1] == np.inf and np.isnan(got[2])
    assert got[3] == 0 and got[4] == 1e4 and got[5] == 0


# ============================================================================ Softmax
def softmax_np(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax_np(x, axis=-1):
    e = x - np.max(x, axis=axis, keepdims=True)
    return e - np.log(np.sum(np.exp(e), axis=axis, keepdims=True))


def with_specials(x):
    x = x.copy()
    flat = x.reshape(-1)
    flat[::37], flat[5::41], flat[7::43] = np.nan, np.inf, -np.inf
    return x


def softmax64(x, log=False):
    """The definition on the last axis in float64 (x's values exactly), NaN where numpy's is."""
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = x64 - np.max(x64, axis=-1, keepdims=True)
        s = np.sum(np.exp(e), axis=-1, keepdims=True)
        return e - np.log(s) if log else np.exp(e) / s


@pytest.mark.usefixtures("warm_bodies")
@pytest.mark.parametrize("op,formula", [("Softmax", softmax_np), ("LogSoftmax", log_softmax_np)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("loops", ["numpy", "compiled"])
def test_softmax_last_axis(op, formula, dtype, loops):
    """The numpy body is the formula bit for bit; on float32 the compiled float32 rows loop (any
    row length: onnxkit_cpu.compiled.activation's 'softmax32') is within 3 + |x - max| + n / 64 ulp of the exact
    values (Softmax: relative; LogSoftmax: of max(|y|, 1); results that would be subnormal are 0),
    on float64 the float64 loop (rows of up to SOFTMAX_COMPILED_ROW; evaluated in float64, rounded
    once: onnxkit_cpu.compiled.activation) within 6 ulp of the float64 reference (whose own exp
    and division round), with the formula's NaN."""
    shapes = [(3, 2, 9, 9), (3, 2, 17, 17), (4000, 5), (7, 1), (2, 3, 1000), (3, 2, 9, 9), (6,)]
    with compiled.disabled() if loops == "numpy" else contextlib.nullcontext():
        s = session(op, {"x": np.zeros(shapes[0], dtype)}, opset=13)
    info = np.finfo(dtype)
    ulps = 1.5 if dtype == np.float32 else 6.0
    for shape in shapes:                      # several shapes on one node, one coming back
        for x in (randn(*shape, dtype=dtype) * 5, with_specials(randn(*shape, dtype=dtype) * 5)):
            with np.errstate(all="ignore"):
                want = formula(x)
            got = s.run(None, {"x": x})[0]
            assert got.dtype == np.dtype(dtype) and got.shape == shape
            if loops == "numpy" or (dtype == np.float64 and shape[-1] > SOFTMAX_COMPILED_ROW):   # numpy body
                np.testing.assert_array_equal(got, want)
                continue
            exact = softmax64(x, op == "LogSoftmax")
            assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isnan(got), np.isnan(exact))
            assert np.array_equal(got[np.isinf(exact)], exact[np.isinf(exact)])
            ok = np.isfinite(exact)
            scale = np.maximum(np.abs(exact[ok]), 1.0 if op == "LogSoftmax" else 0.0)
            floor = 2 * float(info.smallest_subnormal)
            if dtype == np.float32:
                x64 = x.astype(np.float64)
                with np.errstate(invalid="ignore"):
                    gap = np.abs(x64 - np.nanmax(np.where(np.isnan(x64), -np.inf, x64), axis=-1, keepdims=True))
                gap = np.where(np.isfinite(gap) & (op == "Softmax"), gap, 0.0)
                ulps, floor = (3.0 + gap + shape[-1] / 64)[ok], floor + 1.2e-38
            assert np.all(np.abs(got[ok] - exact[ok]) <= ulps * float(info.eps) * scale + floor)


def test_softmax_other_axes_and_masked_rows():
    x = randn(2, 5, 4) * 4
    for axis in (0, 1, -2):
        got = session("Softmax", {"x": x}, {"axis": axis}, opset=13).run(None, {"x": x})[0]
        np.testing.assert_array_equal(got, softmax_np(x, axis))
    m = np.where(np.arange(6) < 3, 0.0, -np.inf).astype(np.float32) + randn(4, 6)
    m[1] = -np.inf                            # a fully masked row: NaN, no warning
    got = run1(session("Softmax", {"x": m}, opset=13), x=m)
    assert np.all(np.isnan(got[1])) and np.all(got[[0, 2, 3], 3:] == 0)
    np.testing.assert_allclose(got[[0, 2, 3]].sum(axis=-1), 1, rtol=1e-6)


# ============================================================================ Conv patches
def ref_patch_conv(x, w, b, strides):
    """Conv with no pads and no dilation by a float64 loop over the output positions."""
    n, c, *sp = x.shape
    m, _, *k = w.shape
    out = [(d - kk) // s + 1 for d, kk, s in zip(sp, k, strides)]
    y = np.zeros((n, m, *out))
    x64, w64 = x.astype(np.float64), w.astype(np.float64).reshape(m, -1)
    for pos in itertools.product(*(range(o) for o in out)):
        win = x64[(slice(None), slice(None)) + tuple(slice(p * s, p * s + kk) for p, s, kk in zip(pos, strides, k))]
        y[(slice(None), slice(None)) + pos] = win.reshape(n, -1) @ w64.T
    if b is not None:
        y += b.astype(np.float64).reshape((1, m) + (1,) * len(out))
    return y


def close(got, want, tol=2e-5):
    assert got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


PATCHES = [
    ((3, 3, 32, 32), (64, 3, 8, 8), [8, 8]),             # the corpus ViT
    ((1, 3, 64, 64), (32, 3, 16, 16), [16, 16]),
    ((2, 4, 30, 33), (8, 4, 4, 4), [4, 4]),              # trailing rows and columns no window reads
    ((2, 3, 9, 12), (5, 3, 3, 4), [3, 4]),
    ((2, 4, 30), (8, 4, 5), [5]),                        # 1-D
    ((1, 2, 6, 6, 7), (3, 2, 2, 2, 3), [2, 2, 3]),       # 3-D
    ((1, 1, 8, 8), (1, 1, 2, 2), [2, 2]),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape,w_shape,strides", PATCHES)
def test_patch_conv_matches_the_reference(x_shape, w_shape, strides, bias):
    w, b = randn(*w_shape), (randn(w_shape[0]) if bias else None)
    s = session("Conv", {"x": randn(*x_shape), "w": w, "b": b}, {"strides": strides}, opset=17, constants=("w", "b"))
    for _ in range(3):                         # the thread's patches buffer is reused
        x = randn(*x_shape)
        got = run1(s, x=x)
        assert got.dtype == np.float32
        close(got, ref_patch_conv(x, w, b, strides))


def test_patch_conv_float16_and_runtime_weights():
    x, w, b = randn(2, 3, 16, 16, dtype=np.float16), randn(6, 3, 4, 4, dtype=np.float16), randn(6, dtype=np.float16)
    got = session("Conv", {"x": x, "w": w, "b": b}, {"strides": [4, 4]}, opset=17).run(None, {"x": x, "w": w, "b": b})[0]
    assert got.dtype == np.float16
    close(got, ref_patch_conv(x, w, b, [4, 4]), tol=2e-3)
    x, w = randn(2, 3, 16, 16), randn(6, 3, 4, 4)
    s = session("Conv", {"x": x, "w": w}, {"strides": [4, 4]}, opset=17)
    for k in range(4):                         # W a runtime input: a new array, or the same one changed
        close(s.run(None, {"x": x, "w": w})[0], ref_patch_conv(x, w, None, [4, 4]))
        if k % 2:
            w = randn(6, 3, 4, 4)
        else:
            w[...] = randn(6, 3, 4, 4)


def test_patch_conv_shapes_on_one_node_and_two_threads():
    w, b = randn(8, 3, 4, 4), randn(8)
    s = session("Conv", {"x": randn(1, 3, 16, 16), "w": w, "b": b}, {"strides": [4, 4]}, opset=17, constants=("w", "b"))
    for shape in [(1, 3, 16, 16), (2, 3, 8, 12), (1, 3, 17, 19), (1, 3, 16, 16)]:
        x = randn(*shape)
        close(s.run(None, {"x": x})[0], ref_patch_conv(x, w, b, [4, 4]))
    feeds = [randn(2, 3, 16, 16) for _ in range(2)]
    want = [ref_patch_conv(x, w, b, [4, 4]) for x in feeds]
    start = threading.Barrier(2)

    def work(k):
        start.wait()
        for _ in range(200):
            close(s.run(None, {"x": feeds[k]})[0], want[k])

    with ThreadPoolExecutor(2) as pool:         # both threads at once; the first failure re-raised
        list(pool.map(work, range(2)))
