"""The compiled loops of LayerNormalization, the activations and the softmax family
(onnxkit_cpu/compiled/norm.py, compiled/activation.py) against the numpy bodies (the same
kernels planned under ``compiled.disabled()``) and independent references: float64 / ``math``
/ mpmath evaluations of the definitions.  Every test that expects the compiled path counts the
calls of the loop (a spy around the loop the factory asks for), so it fails if a kernel
silently stops taking it.

What each loop must keep (the modules' docstrings): LayerNormalization, HardSigmoid and
HardSwish bit-identical to the numpy bodies; float32 Sigmoid and Tanh onnxruntime's, bit-identical
to the numpy bodies; float64 Sigmoid, Gelu and the softmax family evaluated in float64 and rounded once (float32 within ~1 ulp of the exact function; Gelu 'none' on float32
within the erfc rational's 1.2e-6, the negative tail included); NaN and inf as the numpy bodies.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import activation as act_loops  # noqa: E402
from onnxkit_cpu.compiled import norm as norm_loops  # noqa: E402
from onnxkit_cpu.overrides import activation as act_override  # noqa: E402
from onnxkit_cpu.overrides import norm as norm_override  # noqa: E402

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba is not installed")

RNG = np.random.default_rng(2024)
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 3.0, -3.0, 88.0, -88.0, 200.0, -200.0])


def session(op, inputs, attrs=None, opset=17, outputs=("y",), numpy_body=False):
    """A planned one-node model over ``inputs`` (arrays, None: omitted) — under
    ``compiled.disabled()`` when ``numpy_body``."""
    names = ["" if v is None else f"x{k}" for k, v in enumerate(inputs)]
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), None)
           for n, v in zip(names, inputs) if v is not None]
    outs = [helper.make_tensor_value_info(o, TP.UNDEFINED, None) for o in outputs if o]
    node = helper.make_node(op, names, list(outputs), **(attrs or {}))
    ops = [helper.make_opsetid("", opset)]
    m = helper.make_model(helper.make_graph([node], "g", ins, outs), opset_imports=ops)
    m.ir_version = helper.find_min_ir_version_for(ops)
    data = m.SerializeToString()
    if numpy_body:
        with compiled.disabled():
            return InferenceSession(data, validate=False)
    return InferenceSession(data, validate=False)


def run(op, inputs, attrs=None, opset=17, outputs=("y",), numpy_body=False):
    s = session(op, inputs, attrs, opset, outputs, numpy_body)
    got = s.run(None, {f"x{k}": v for k, v in enumerate(inputs) if v is not None})
    return got if len([o for o in outputs if o]) > 1 else got[0]


class Spy:
    """Counts the calls of a compiled loop."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


@pytest.fixture
def norm_spy(monkeypatch):
    """Counts the calls of LayerNormalization's rows loops (float64: ``layer_norm_loop``'s,
    float32: ``layer_norm_rows32``'s)."""
    spy = Spy(None)
    loops = {64: norm_override.layer_norm_loop(), 32: norm_loops.layer_norm_rows32()}

    def counted(key):
        def call(*args):
            spy.calls += 1
            return loops[key](*args)
        return lambda: call if compiled.enabled() else None
    monkeypatch.setattr(norm_override, "layer_norm_loop", counted(64))
    monkeypatch.setattr(norm_loops, "layer_norm_rows32", counted(32))
    return spy


@pytest.fixture
def act_spy(monkeypatch):
    """``spies[name]``: the spy around compiled activation loop ``name`` (made on demand)."""
    real = act_loops.loop
    spies = {}

    def loop(name):
        if not compiled.enabled():
            return None
        if name not in spies:
            spies[name] = Spy(real(name))
        return spies[name]
    monkeypatch.setattr(act_loops, "loop", loop)
    return spies


def randn(*shape, dtype=np.float32, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def bits_equal(a, b):
    """Equal bit for bit (NaN and the sign of zero included)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


# ============================================================================ LayerNormalization
def layer_norm64(x, scale, b, axis):
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x64 - mean) ** 2).mean(axis=axes, keepdims=True) + 1e-5)
    y = (x64 - mean) * inv * scale.astype(np.float64)
    return y if b is None else y + b.astype(np.float64)


LN_CASES = [((3, 9, 64), -1, (64,)), ((3, 17, 64), -1, (64,)), ((1, 197, 768), -1, (768,)),
            ((2, 5, 300), -1, (1, 300)), ((4, 1031), 1, (1031,)), ((2, 3, 4, 5), 1, (3, 4, 5)),
            ((3, 9, 64), 1, (1, 9, 64)), ((7,), 0, (7,)), ((6, 3), -1, (3,)), ((2, 5000), -1, (5000,))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis,sshape", LN_CASES)
@pytest.mark.parametrize("with_b", [True, False])
def test_layer_norm_float64_bit_identical_float32_within_its_bound(norm_spy, shape, axis, sshape, dtype, with_b):
    """float64: the numpy body bit for bit; float32 (the vectorized loop, compiled/norm.py): mean
    and 1 / std within 1 ulp of float64's, Y within 4 ulp of ``|d inv scale| + |b|`` plus the
    mean's rounding ``|mean| 2^-24 inv |scale|``, and within Clause 11's tolerance of the numpy body."""
    x = randn(*shape, dtype=dtype, scale=3) + 1
    scale, b = randn(*sshape, dtype=dtype), randn(*sshape, dtype=dtype) if with_b else None
    outputs = ("y", "mean", "inv")
    got = run("LayerNormalization", [x, scale, b], {"axis": axis}, outputs=outputs)
    want = run("LayerNormalization", [x, scale, b], {"axis": axis}, outputs=outputs, numpy_body=True)
    assert norm_spy.calls == 1
    if dtype == np.float64:
        for g, w in zip(got, want):
            assert bits_equal(g, w)
        np.testing.assert_allclose(got[0], layer_norm64(x, scale, b, axis), rtol=1e-12, atol=1e-12)
        return
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x64 - mean) ** 2).mean(axis=axes, keepdims=True) + float(np.float32(1e-5)))
    eps = float(np.finfo(np.float32).eps)
    assert np.all(np.abs(got[1] - mean) <= eps * np.abs(mean)) and np.all(np.abs(got[2] - inv) <= eps * inv)
    term = np.abs((x64 - mean) * inv * scale) + (0 if b is None else np.abs(b))
    bound = 4 * eps * term + eps / 2 * np.abs(mean) * inv * np.abs(scale)
    assert np.all(np.abs(got[0] - layer_norm64(x, scale, b, axis)) <= bound)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-7)


def test_layer_norm_specials_signed_zeros_and_layouts(norm_spy):
    x = randn(6, 40)
    x[0, 3], x[1, 7], x[2, 0], x[3, :] = np.nan, np.inf, -np.inf, -0.0    # x[3]: -0 row
    x[4, :] = 1e30                                                        # a constant row
    scale, b = randn(40), np.zeros(40, np.float32)
    for args in ([x, scale, b], [x, scale, None], [np.asfortranarray(x), scale, b],     # non-contiguous X
                 [x[:, ::-1], scale[::-1], b[::-1]]):                               # and scale, B
        got = run("LayerNormalization", args, outputs=("y", "mean", "inv"))
        # numpy's sums follow the layout (a Fortran X sums column by column): the loop's results
        # are the numpy body's on the C-contiguous X
        plain = [None if a is None else np.ascontiguousarray(a) for a in args]
        with np.errstate(all="ignore"):                      # the numpy body warns on NaN / inf
            want = run("LayerNormalization", plain, outputs=("y", "mean", "inv"), numpy_body=True)
        for g, w in zip(got, want):                          # float32: the vectorized loop, within its bound
            assert np.array_equal(np.isnan(g), np.isnan(w))
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        assert np.array_equal(got[0][3], want[0][3]) and np.all(got[0][4] == (args[2] if args[2] is not None
                                                                               else 0 * args[1])[4 - 4:][:40])
    assert norm_spy.calls == 4
    assert np.all(np.isnan(got[0][:3])) and np.all(np.isfinite(got[0][3:]))


def test_layer_norm_other_broadcasts_keep_the_numpy_body(norm_spy):
    x = randn(3, 9, 64)
    scale = randn(64)                 # axis 1: the block is (9, 64), scale broadcasts over it
    got = run("LayerNormalization", [x, scale, None], {"axis": 1})
    want = run("LayerNormalization", [x, scale, None], {"axis": 1}, numpy_body=True)
    assert norm_spy.calls == 0 and bits_equal(got, want)
    np.testing.assert_allclose(got, layer_norm64(x, scale, None, 1), rtol=1e-5, atol=1e-5)


def test_layer_norm_float64_statistics_in_the_stash_type(norm_spy):
    x, s, b = randn(5, 8, dtype=np.float64), randn(8, dtype=np.float64), randn(8, dtype=np.float64)
    y, mean, inv = run("LayerNormalization", [x, s, b], {"stash_type": 1}, outputs=("y", "mean", "inv"))
    assert norm_spy.calls == 1 and y.dtype == np.float64 and mean.dtype == inv.dtype == np.float32
    assert mean.shape == inv.shape == (5, 1)
    np.testing.assert_allclose(y, layer_norm64(x, s, b, -1), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(mean, x.mean(axis=1, keepdims=True).astype(np.float32))


def test_layer_norm_from_several_threads(norm_spy):
    x, s, b = randn(8, 3, 9, 64), randn(64), randn(64)
    sess = session("LayerNormalization", [x[0], s, b])
    want = [sess.run(None, {"x0": x[k], "x1": s, "x2": b})[0] for k in range(8)]     # one thread at a time
    got = [None] * 8

    def work(k):
        for _ in range(20):
            got[k] = sess.run(None, {"x0": x[k], "x1": s, "x2": b})[0]
    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(bits_equal(g, w) for g, w in zip(got, want))


# ============================================================================ HardSigmoid / HardSwish
def hard_inputs(dtype):
    x = np.concatenate([randn(4001, dtype=dtype, scale=4), SPECIALS.astype(dtype),
                        np.array([-3, 3, -2.9999, 2.9999, 6, -6], dtype)])          # 4020 elements
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op,attrs,opset", [("HardSwish", {}, 14), ("HardSigmoid", {}, 6),
                                            ("HardSigmoid", {"alpha": 0.3, "beta": -0.1}, 6)])
def test_hard_sigmoid_swish_bit_identical(act_spy, op, attrs, opset, dtype):
    x = hard_inputs(dtype)
    for arg in (x, x.reshape(2, -1).T, x.reshape(1, 2, -1)[:, :, ::3]):     # contiguous or not
        got = run(op, [arg], attrs, opset)
        want = run(op, [arg], attrs, opset, numpy_body=True)
        assert bits_equal(got, want)
    assert act_spy["hard_sigmoid"].calls == 3
    x64 = x.astype(np.float64)
    alpha, beta = (attrs.get("alpha", 0.2), attrs.get("beta", 0.5)) if op == "HardSigmoid" else (1 / 6, 0.5)
    if op == "HardSigmoid":                                 # FLOAT attributes: float32 values
        alpha, beta = float(np.float32(alpha)), float(np.float32(beta))
    with np.errstate(invalid="ignore"):
        want64 = np.clip(x64 * alpha + beta, 0, 1) * (x64 if op == "HardSwish" else 1)
    tol = 2e-7 if dtype == np.float32 else 1e-15
    np.testing.assert_allclose(run(op, [x], attrs, opset).astype(np.float64), want64, rtol=tol, atol=tol)


def test_hard_swish_empty_and_corpus_shape(act_spy):
    assert run("HardSwish", [np.zeros((1, 0, 4), np.float32)], opset=14).shape == (1, 0, 4)
    x = randn(1, 480, 6, 40, scale=4)
    assert bits_equal(run("HardSwish", [x], opset=14), run("HardSwish", [x], opset=14, numpy_body=True))
    assert act_spy["hard_sigmoid"].calls == 2


# ============================================================================ the exponential
def test_exp_helper_within_one_ulp_over_the_whole_range():
    exp = act_loops.loop("exp")
    v = np.concatenate([np.linspace(-746, 711, 300001), RNG.uniform(-30, 30, 100000),
                        [709.78, 709.79, -745.13, -745.14, -708.4, -708.39, 1e-300, -1e-300, 0.0, -0.0]])
    y = np.empty_like(v)
    exp(v, y)
    with np.errstate(over="ignore"):
        ref = np.exp(v)
    normal = np.isfinite(ref) & (ref >= np.finfo(np.float64).tiny)
    rel = np.abs(y[normal] - ref[normal]) / ref[normal]
    assert rel.max() <= 2.3e-16                                     # numpy's exp is itself ~0.5 ulp
    sub = ~normal & np.isfinite(ref)
    assert np.all(np.abs(y[sub] - ref[sub]) <= 5e-324)              # subnormals: one rounding
    assert np.array_equal(np.isinf(y), np.isinf(ref)) and np.array_equal(y == 0, ref == 0)
    specials = np.array([np.nan, np.inf, -np.inf, 1e300, -1e300])
    out = np.empty_like(specials)
    exp(specials, out)
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == 0 and out[3] == np.inf and out[4] == 0
    import mpmath
    pts = RNG.uniform(-700, 700, 300)
    exact = np.array([float(mpmath.exp(mpmath.mpf(float(p)))) for p in pts])
    got = np.empty_like(pts)
    exp(pts, got)
    assert np.all(np.abs(got - exact) <= 1.5 * np.spacing(exact))


# ============================================================================ Sigmoid, Gelu
def smooth_inputs(dtype):
    return np.concatenate([randn(6000, dtype=dtype, scale=5), np.linspace(-20, 20, 4001).astype(dtype),
                           SPECIALS.astype(dtype)])


def within_ulps(got, exact, ulps, dtype):
    """|got - exact| <= ulps * eps * |exact| + (a subnormal's spacing) (``ulps`` may be an array):
    NaN and infinities equal."""
    info = np.finfo(dtype)
    assert np.array_equal(np.isnan(got), np.isnan(exact))
    ok = ~np.isnan(exact)
    g, e = got[ok].astype(np.float64), exact[ok]
    inf = np.isinf(e)
    assert np.array_equal(g[inf], e[inf])
    ulps = np.broadcast_to(ulps, exact.shape)[ok][~inf]
    bound = ulps * float(info.eps) * np.abs(e[~inf]) + float(info.smallest_subnormal)
    err = np.abs(g[~inf] - e[~inf])
    assert np.all(err <= bound), float(np.max(err / np.maximum(bound, 1e-300)))


def test_sigmoid_float64_rounded_once(act_spy):
    x = smooth_inputs(np.float64)
    pieces = np.array_split(x, 3)
    got = np.concatenate([run("Sigmoid", [p], opset=13) for p in pieces])
    assert act_spy["sigmoid"].calls == 3
    with np.errstate(over="ignore"):
        exact = 1 / (1 + np.exp(-x))
    within_ulps(got, exact, 4.0, np.float64)
    p = pieces[0].reshape(2, -1)[:, ::2]                                             # non-contiguous
    assert bits_equal(run("Sigmoid", [p], opset=13), got[:pieces[0].size].reshape(2, -1)[:, ::2])


@pytest.mark.parametrize("op,loop", [("Sigmoid", "mlas_logistic"), ("Tanh", "mlas_tanh")])
def test_float32_sigmoid_tanh_take_the_mlas_loop_bit_identical_to_the_numpy_body(act_spy, op, loop):
    """float32 Sigmoid and Tanh are onnxruntime's (test_mlas_activations.py): the compiled loop
    and the numpy body give the same bits at every size, a non-contiguous X included."""
    x = np.concatenate([smooth_inputs(np.float32), randn(50000, scale=6)])
    for piece in (x[:7], x[:4001], x):
        got = run(op, [piece], opset=13)
        assert bits_equal(got, run(op, [piece], opset=13, numpy_body=True))
    assert act_spy[loop].calls == 3
    p = x[:4000].reshape(2, -1)[:, ::2]
    assert bits_equal(run(op, [p], opset=13), run(op, [np.ascontiguousarray(p)], opset=13, numpy_body=True))


def gelu_exact(x64):
    return np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) if np.isfinite(v) else
                     (v if v > 0 else np.nan) for v in x64])


def test_gelu_float32_within_the_rational_bound_negative_tail_included(act_spy):
    x = np.concatenate([smooth_inputs(np.float32), np.linspace(-14, -5, 2001).astype(np.float32)])
    got = run("Gelu", [x], opset=20)
    assert act_spy["gelu_erf32"].calls == 1
    exact = gelu_exact(x.astype(np.float64))
    # the rational's own error is 2.8e-8 relative; evaluated in float32 with b^2 kept exact (the float32 loops):
    # within a few ulp, results flushed to 0 where exp(-x^2 / 2) would be subnormal (|x| > 13.2)
    small = np.isfinite(exact) & (np.abs(exact) < float(np.finfo(np.float32).tiny))
    within_ulps(got[~small], exact[~small], 8.0, np.float32)
    assert np.all(np.abs(got[small] - exact[small]) <= 1.2e-38)
    tail = (x < -5) & ~small & np.isfinite(x)
    assert np.max(np.abs(got[tail] - exact[tail]) / np.abs(exact[tail])) < 1e-6       # relative in the tail
    old = run("Gelu", [x], opset=20, numpy_body=True)      # the float32 body: exp(-x^2 / 2)'s argument
    within_ulps(old, exact, 4e-6 / float(np.finfo(np.float32).eps), np.float32)        # rounds (4e-6 at -12)
    assert np.isnan(got[np.isneginf(x)]).all() and (got[np.isposinf(x)] == np.inf).all()


def test_gelu_float64_against_mpmath(act_spy):
    """Within (4 + x^2) ulp: ``x / sqrt 2`` rounds (2^-53), and erfc's condition number there
    is ~x^2 (a relative error of 1e-13 at x = -37; Clause 11's float64 tolerance is 1e-9)."""
    import mpmath
    x = np.concatenate([RNG.uniform(-30, 10, 400), [0.0, -0.0, 1e-300, -37.0, 5.0]])
    got = run("Gelu", [x], opset=20)
    assert act_spy["gelu64"].calls == 1
    with mpmath.workdps(40):
        exact = np.array([float(0.5 * mpmath.mpf(float(v)) * mpmath.erfc(-mpmath.mpf(float(v)) / mpmath.sqrt(2)))
                          for v in x])
    within_ulps(got, exact, 4.0 + x * x, np.float64)
    s = np.array([np.nan, np.inf, -np.inf])
    out = run("Gelu", [s], opset=20)
    assert np.isnan(out[0]) and out[1] == np.inf and np.isnan(out[2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_tanh_rounded_once(act_spy, dtype):
    x = smooth_inputs(dtype)
    got = run("Gelu", [x], {"approximate": "tanh"}, opset=20)
    assert act_spy["gelu_tanh32" if dtype == np.float32 else "gelu_tanh"].calls == 1
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        u = math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)
        exact = x64 / (1 + np.exp(-2 * u))          # = 0.5 x (1 + tanh u), without its cancellation
    # u's few roundings (2^-24 relative each in float32, 2^-53 in float64) are amplified 2|u| times
    # in the tail; float32 results below 1e-30 (exp(-2u) near float32's overflow) absolutely
    if dtype == np.float32:
        tiny = np.abs(exact) < 1e-30
        assert np.all(np.abs(got[tiny] - exact[tiny]) <= 1e-30)
        within_ulps(got[~tiny], exact[~tiny], 6.0 + 6 * np.abs(u[~tiny]), dtype)
    else:
        within_ulps(got, exact, 8.0 + 12 * np.abs(u), dtype)


# ============================================================================ softmax family
def softmax64(x, axis=-1, log=False):
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = x64 - np.max(x64, axis=axis, keepdims=True)
        s = np.sum(np.exp(e), axis=axis, keepdims=True)
        return e - np.log(s) if log else np.exp(e) / s


def check_softmax(got, x, log, dtype, axis=-1):
    exact = softmax64(x, axis, log)
    assert got.dtype == dtype and got.shape == x.shape
    info = np.finfo(dtype)
    assert np.array_equal(np.isnan(got), np.isnan(exact))
    assert np.array_equal(got[np.isinf(exact)], exact[np.isinf(exact)])
    ok = np.isfinite(exact)
    scale = np.maximum(np.abs(exact[ok]), 1.0 if log else 0.0)
    if dtype == np.float32:
        # the float32 loop 'softmax32': x - max rounds in float32 (its error amplified |x - max|
        # times by exp), the exp within 1 ulp, the float32 sum within ~n / 64 ulp; exps that would be
        # subnormal flushed to 0
        x64 = np.moveaxis(x.astype(np.float64), axis, -1)
        with np.errstate(invalid="ignore"):
            gap = np.abs(x64 - np.nanmax(np.where(np.isnan(x64), -np.inf, x64), axis=-1, keepdims=True))
        gap = np.where(np.isfinite(gap) & (not log), gap, 0.0)
        ulps = np.moveaxis(3.0 + gap + x64.shape[-1] / 64, -1, axis)[ok]
        floor = 0.0 if log else 1.2e-38
    else:
        ulps, floor = 6.0, 0.0
    err, bound = np.abs(got[ok] - exact[ok]), ulps * float(info.eps) * scale + floor + 2 * float(info.smallest_subnormal)
    assert np.all(err <= bound), (got[ok][np.argmax(err - bound)], exact[ok][np.argmax(err - bound)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_corpus_shapes_rounded_once(act_spy, op, dtype):
    for shape in [(3, 2, 9, 9), (3, 2, 17, 17), (1, 8, 20, 20), (3, 7, 5), (5, 128), (4000, 3), (1,)]:
        x = randn(*shape, dtype=dtype, scale=6)
        flat = x.reshape(-1)
        flat[::53], flat[7::61], flat[11::67] = np.nan, np.inf, -np.inf
        check_softmax(run(op, [x], opset=13), x, op == "LogSoftmax", dtype)
        check_softmax(run(op, [np.ascontiguousarray(x)[..., ::-1]], opset=13), x[..., ::-1], op == "LogSoftmax", dtype)
    assert act_spy["softmax32" if dtype == np.float32 else "softmax"].calls == 14
    masked = np.full((2, 9), -np.inf, dtype)
    masked[1, :3] = [0, 1, 2]                                   # a fully masked row gives NaN
    got = run(op, [masked], opset=13)
    assert np.isnan(got[0]).all() and np.isfinite(got[1, :3]).all()
    assert (got[1, 3:] == (-np.inf if op == "LogSoftmax" else 0)).all()


def test_softmax_legacy_rows_other_axes_and_long_rows(act_spy):
    x = randn(2, 3, 4, scale=4)
    for axis in (0, 1, 2, 3):                                   # before 13: the trailing block
        got = run("Softmax", [x], {"axis": axis}, opset=11)
        rows = math.prod(x.shape[:axis])
        check_softmax(got.reshape(rows, -1), x.reshape(rows, -1), False, np.float32)
    assert act_spy["softmax32"].calls == 4
    for axis in (0, 1):                                         # from 13, not the last axis: numpy
        got = run("LogSoftmax", [x], {"axis": axis}, opset=13)
        check_softmax(got, x, True, np.float32, axis)
        assert bits_equal(got, run("LogSoftmax", [x], {"axis": axis}, opset=13, numpy_body=True))
    long_rows = randn(3, 197, scale=4)            # float64 rows longer than SOFTMAX_COMPILED_ROW: numpy
    got = run("Softmax", [long_rows.astype(np.float64)], opset=13)
    assert bits_equal(got, run("Softmax", [long_rows.astype(np.float64)], opset=13, numpy_body=True))
    check_softmax(run("Softmax", [long_rows], opset=13), long_rows, False, np.float32)    # float32: the loop
    assert act_spy["softmax32"].calls == 5 and ("softmax" not in act_spy or act_spy["softmax"].calls == 0)
