"""The float32 loops of the softmax family and Gelu (onnxkit_cpu/compiled/activation.py: 'softmax32', 'gelu_erf32', 'gelu_tanh32', 'exp32'), against
independent references: numpy's float64 exp and the definitions evaluated in float64, the
numpy bodies (the same nodes planned under ``compiled.disabled()``) and onnxruntime 1.32.

* the float32 exp: within 1 ulp of the float64 exp over the whole range of normal results,
  0 where the result would be subnormal, inf above the overflow, the special values;
* Softmax / LogSoftmax rows of lengths on and off the vector width (1, 15, 16, 17, 127, 197,
  1000, 30001), -inf entries, large spreads (rows all below -100, spreads beyond exp's range,
  which a wrong row maximum would overflow), additive masks (-1e9, float32's lowest, -inf,
  fully masked rows), NaN rows: within the stated bound of the float64 definition, NaN where
  the numpy body has NaN, and within Clause 11's float32 tolerance of onnxruntime and the numpy
  body;
* Gelu ('none', 'tanh') near the flush and overflow thresholds and in the tails;
* 1, 2 and 3 intra-op threads give the same bits.
Each test counts the loop's calls (a spy), so it fails if a kernel stops taking it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import activation as act_loops  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.available(), reason="numba is not installed"),
              pytest.mark.usefixtures("warm_bodies")]

RNG = np.random.default_rng(4401)
EPS = float(np.finfo(np.float32).eps)
TINY = float(np.finfo(np.float32).tiny)


class Spy:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


@pytest.fixture
def spies(monkeypatch):
    """``spies[name]``: the spy around compiled activation loop ``name`` (made on demand)."""
    real, made = act_loops.loop, {}

    def loop(name):
        if not compiled.enabled():
            return None
        if name not in made:
            made[name] = Spy(real(name))
        return made[name]
    monkeypatch.setattr(act_loops, "loop", loop)
    return made


def model(op, attrs=None, opset=13):
    node = helper.make_node(op, ["x"], ["y"], **(attrs or {}))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9).SerializeToString()


def run(data, x, threads=0, numpy_body=False):
    so = SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.split_kernels", "1")
    if numpy_body:
        with compiled.disabled():
            s = InferenceSession(data, so, validate=False)
    else:
        s = InferenceSession(data, so, validate=False)
    return s.run(None, {"x": x})[0]


def run_ort(data, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def within_tolerance(a, e):
    """Clause 11's float32 tolerance (onnxkit/tolerances.py): |a - e| <= 1e-7 + 1e-3 |e|, NaN and
    infinities equal."""
    a, e = a.astype(np.float64), e.astype(np.float64)
    assert np.array_equal(np.isnan(a), np.isnan(e))
    fin = np.isfinite(e)
    assert np.array_equal(a[~fin & ~np.isnan(e)], e[~fin & ~np.isnan(e)])
    over = np.abs(a[fin] - e[fin]) - (1e-7 + 1e-3 * np.abs(e[fin]))
    assert np.all(over <= 0), (a[fin][np.argmax(over)], e[fin][np.argmax(over)])


# ============================================================================ exp
def test_exp32_within_one_ulp_over_the_normal_range_and_special_values():
    fn = act_loops.loop("exp32")
    x = np.concatenate([RNG.uniform(-87.33, 88.72, 400_000), RNG.uniform(-1, 1, 50_000) * 1e-3,
                        np.arange(-87.25, 88.5, 0.25)]).astype(np.float32)
    y = np.empty_like(x)
    fn(x, y)
    want = np.exp(x.astype(np.float64))
    normal = want >= TINY
    spacing = np.spacing(want[normal].astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(y[normal].astype(np.float64) - want[normal]) / spacing) <= 1.0
    assert np.all(y[~normal] == 0)                        # would be subnormal: flushed
    edge = np.array([-87.3365, -87.34, -88.0, -103.0, -1e30, -np.inf, 88.72, 88.73, 1e30, np.inf,
                     np.nan, 0.0, -0.0], np.float32)
    ye = np.empty_like(edge)
    fn(edge, ye)
    assert ye[0] > 0 and np.all(ye[1:6] == 0)
    assert np.isfinite(ye[6]) and np.all(np.isposinf(ye[7:10]))
    assert np.isnan(ye[10]) and ye[11] == 1 and ye[12] == 1


# ============================================================================ softmax family
def softmax64(x, log):
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = x64 - np.max(x64, axis=-1, keepdims=True)
        s = np.sum(np.exp(e), axis=-1, keepdims=True)
        return e - np.log(s) if log else np.exp(e) / s


def check_bound(got, x, log):
    """The module docstring's bound: 3 + |x - max| (Softmax) + n / 64 ulp of the result (LogSoftmax:
    of max(|y|, 1)); results that would be subnormal may be 0."""
    exact = softmax64(x, log)
    assert np.array_equal(np.isnan(got), np.isnan(exact))
    ok = np.isfinite(exact)
    assert np.array_equal(got[~ok & ~np.isnan(exact)], exact[~ok & ~np.isnan(exact)])
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        gap = np.abs(x64 - np.max(x64, axis=-1, keepdims=True))
    gap = np.where(np.isfinite(gap) & (not log), gap, 0.0)
    ulps = (3.0 + gap + x.shape[-1] / 64)[ok]
    scale = np.maximum(np.abs(exact[ok]), 1.0 if log else 0.0)
    err = np.abs(got[ok].astype(np.float64) - exact[ok])
    assert np.all(err <= ulps * EPS * scale + (0.0 if log else 1.2e-38))


def softmax_inputs():
    """``(name, x)`` near misses of the row loop."""
    for n in (1, 15, 16, 17, 127, 197, 1000):
        yield f"rows of {n}", (RNG.standard_normal((5, 3, n)) * 4).astype(np.float32)
    yield "one long row", (RNG.standard_normal((2, 30001)) * 3).astype(np.float32)
    far = RNG.uniform(-300, -100, (4, 33)).astype(np.float32)          # all negative, spread beyond exp's range
    far[:, 5] = -100.0
    yield "far negative", far
    wide = RNG.uniform(-200, 200, (6, 48)).astype(np.float32)
    wide[0] = np.float32(3e38)
    wide[1, ::3] = -3e38
    yield "wide", wide
    scores = (RNG.standard_normal((2, 4, 9, 9)) * 3).astype(np.float32)
    causal = np.triu(np.ones((9, 9), bool), 1)
    for fill in (-1e9, float(np.finfo(np.float32).min), -np.inf):
        masked = scores + np.where(causal, np.float32(fill), np.float32(0))
        yield f"causal {fill}", masked.astype(np.float32)
    pad = scores.copy()
    pad[..., 6:] = -np.inf
    pad[0, 1, 3] = -np.inf                                              # a fully masked row
    yield "padding", pad
    specials = (RNG.standard_normal((8, 19)) * 5).astype(np.float32)
    specials[0, 3], specials[1, 0], specials[2, 18], specials[3, 7] = np.nan, np.inf, -np.inf, -np.nan
    specials[4] = -np.inf
    specials[5, 2] = -0.0
    yield "specials", specials


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_rows_against_float64_numpy_body_and_onnxruntime(spies, op):
    data = model(op)
    log = op == "LogSoftmax"
    count = 0
    for name, x in softmax_inputs():
        got = run(data, x)
        count += 1
        assert got.dtype == np.float32 and got.shape == x.shape, name
        check_bound(got, x, log)
        within_tolerance(got, run(data, x, numpy_body=True))
        finite_rows = np.isfinite(x).all(axis=-1) | (np.isneginf(x) | np.isfinite(x)).all(axis=-1)
        if finite_rows.all() and not np.isneginf(x.max(axis=-1)).any():   # onnxruntime's NaN rules differ
            within_tolerance(got, run_ort(data, x))
    assert spies["softmax32"].calls == count


def test_softmax_nan_rows_and_fully_masked_rows(spies):
    x = np.zeros((6, 17), np.float32)
    x[0, 4] = np.nan
    x[1, 16] = -np.nan                 # a NaN whose sign bit is set (below -inf in the maximum's order)
    x[2, 0] = np.inf
    x[3] = -np.inf
    x[4, :5] = -np.inf
    for op in ("Softmax", "LogSoftmax"):
        got = run(model(op), x)
        assert np.isnan(got[:4]).all()
        assert np.isfinite(got[5]).all() and not np.isnan(got[4]).any()
        want = run(model(op), x, numpy_body=True)
        assert np.array_equal(np.isnan(got), np.isnan(want))
    assert spies["softmax32"].calls == 2


def test_legacy_softmax_trailing_block(spies):
    x = (RNG.standard_normal((2, 3, 5, 7)) * 3).astype(np.float32)
    for axis in (1, 2):
        got = run(model("Softmax", {"axis": axis}, opset=11), x)
        rows = math.prod(x.shape[:axis])
        check_bound(got.reshape(rows, -1), x.reshape(rows, -1), False)
    assert spies["softmax32"].calls == 2


# ============================================================================ Gelu
def gelu64(x, tanh):
    x64 = x.astype(np.float64)
    if tanh:
        with np.errstate(all="ignore"):
            u = math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)
            return x64 / (1 + np.exp(-2 * u)), u
    return np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) if np.isfinite(v) else (v if v > 0 else np.nan)
                     for v in x64]), None


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_against_float64_numpy_body_and_onnxruntime(spies, approximate):
    tanh = approximate == "tanh"
    x = np.concatenate([RNG.standard_normal(20_001) * 4, np.linspace(-14, 14, 4001), RNG.uniform(-13.5, -12.9, 300),
                        RNG.uniform(-10.2, -9.9, 300), [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30]]
                       ).astype(np.float32)
    data = model("Gelu", {"approximate": approximate}, opset=20)
    got = run(data, x)
    assert spies["gelu_tanh32" if tanh else "gelu_erf32"].calls == 1
    exact, u = gelu64(x, tanh)
    small = np.isfinite(exact) & (np.abs(exact) < (1e-30 if tanh else TINY))
    assert np.all(np.abs(got[small] - exact[small]) <= (1e-30 if tanh else 1.2e-38))
    big = ~small & np.isfinite(exact)
    ulps = 6.0 + 6.0 * np.abs(u[big]) if tanh else 8.0
    spacing = np.spacing(np.abs(exact[big]).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got[big].astype(np.float64) - exact[big]) <= ulps * spacing)
    assert np.isnan(got[-7]) and got[-6] == np.inf and np.isnan(got[-5])
    within_tolerance(got, run(data, x, numpy_body=True))
    ok = np.isfinite(x) & (x > -3 if tanh else True)   # onnxruntime's 'tanh' cancels below -3 (decisions.md)
    within_tolerance(got[ok], run_ort(data, x[ok]))


# ============================================================================ threads
@pytest.mark.parametrize("op,attrs,opset", [("Softmax", None, 13), ("LogSoftmax", None, 13),
                                            ("Gelu", None, 20), ("Gelu", {"approximate": "tanh"}, 20)])
def test_one_two_three_threads_same_bits(spies, op, attrs, opset):
    data = model(op, attrs, opset)
    x = (RNG.standard_normal((64, 4, 517)) * 4).astype(np.float32)      # rows and blocks off the vector width
    x.reshape(-1)[::997] = -np.inf
    outs = [run(data, x, threads=n) for n in (1, 2, 3)]
    assert all(np.array_equal(o.view(np.uint32), outs[0].view(np.uint32)) for o in outs[1:])
    assert sum(s.calls for s in spies.values()) >= 4            # split into blocks at 2 and 3 threads
