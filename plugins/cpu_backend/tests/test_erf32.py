"""The compiled float32 Erf (onnxkit_cpu/compiled/activation.py's 'erf32', taken by
overrides/elementwise_math.py's Erf kernel), against independent references: float64
``math.erf`` (the definition), the numpy body (the same node planned under
``compiled.disabled()``) and onnxruntime 1.32.

* a sweep of float32 bit patterns over the whole range (subnormals, normals, large |x|) and a
  dense grid of [-4.2, 4.2]: within the stated 4e-7 relative of ``math.erf`` where the result is
  normal (7 ulp), 1 ulp where it is subnormal;
* ±0 (sign kept), ±inf (±1), NaN (NaN), the largest finite values, the cap of x^2;
* sessions: within Clause 11's float32 tolerance of onnxruntime and of the numpy body, the loop
  taken for float32 and float16 (a spy counts its calls) and not for float64 / integers;
* 1, 2 and 3 intra-op threads give the same bits, the input split into blocks.
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
from onnxkit_cpu.overrides.elementwise_math import _ERF32_PQ, _ERF32_T_CAP  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.available(), reason="numba is not installed"),
              pytest.mark.usefixtures("warm_bodies")]

RNG = np.random.default_rng(4444)
_erf = np.vectorize(math.erf, otypes=[np.float64])


class Spy:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


@pytest.fixture
def spy(monkeypatch):
    """The spy around the compiled 'erf32' loop the Erf kernels plan with (None until planned)."""
    real, made = act_loops.loop, {}

    def loop(name):
        if not compiled.enabled():
            return None
        if name not in made:
            made[name] = Spy(real(name))
        return made[name]
    monkeypatch.setattr(act_loops, "loop", loop)
    return made


def erf32(x):
    y = np.empty_like(x)
    act_loops.loop("erf32")(x, y, _ERF32_PQ, _ERF32_T_CAP)
    return y


def check_bound(y, x):
    """The stated bound: 4e-7 relative where erf(x) is a normal float32, else 1 ulp; 7 ulp overall."""
    want = _erf(x.astype(np.float64))
    normal = np.abs(want) >= np.finfo(np.float32).tiny
    rel = np.abs(y[normal].astype(np.float64) - want[normal]) / np.abs(want[normal])
    assert np.max(rel, initial=0) <= 4e-7
    u = ulps(y, x)
    assert np.max(u[~normal], initial=0) <= 1.0
    assert np.max(u, initial=0) <= 7.0


def ulps(y, x):
    """|y - erf(x)| in units of the float32 spacing at erf(x) (subnormal spacing below tiny)."""
    want = _erf(x.astype(np.float64))
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(y.astype(np.float64) - want) / spacing


def test_erf32_within_its_bound_over_a_sweep_of_all_float32_values():
    bits = np.arange(0, 1 << 31, 4099, dtype=np.int64).astype(np.uint32)   # every exponent, + and -
    x = np.concatenate([bits, bits | np.uint32(1 << 31)]).view(np.float32)
    x = x[np.isfinite(x)]
    x = np.concatenate([x, RNG.uniform(-6, 6, 200_000).astype(np.float32),
                        np.linspace(-4.2, 4.2, 1_000_001, dtype=np.float32)])
    y = erf32(x)
    assert np.all(np.abs(y) <= 1)
    check_bound(y, x)
    sub = np.abs(x) < np.finfo(np.float32).tiny
    assert sub.sum() > 1000 and np.all(y[sub & (x != 0)] != 0)          # subnormals: not flushed
    big = np.abs(x) >= 4
    assert np.all(y[big] == np.sign(x[big]))                             # large |x|: exactly ±1


def test_erf32_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 3.4028235e38, -3.4028235e38,
                  1e-45, -1e-45, 1.17549435e-38, 3.9999998, 4.0, 4.0000005, -3.9999998, 1e19, -1e20],
                 np.float32)
    y = erf32(x)
    assert y[0] == 0 and not np.signbit(y[0]) and y[1] == 0 and np.signbit(y[1])
    assert y[2] == 1 and y[3] == -1 and np.isnan(y[4]) and np.isnan(y[5])
    assert y[6] == 1 and y[7] == -1 and y[15] == 1 and y[16] == -1
    assert y[8] > 0 and y[9] < 0                                         # the smallest subnormal: kept
    check_bound(y[6:], x[6:])


def model(dtype=TP.FLOAT, opset=13):
    node = helper.make_node("Erf", ["x"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dtype, None)],
                          [helper.make_tensor_value_info("y", dtype, None)])
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
    """Clause 11's float32 tolerance (onnxkit/tolerances.py): |a - e| <= 1e-7 + 1e-3 |e|, NaN equal."""
    a, e = a.astype(np.float64), e.astype(np.float64)
    assert np.array_equal(np.isnan(a), np.isnan(e))
    fin = ~np.isnan(e)
    over = np.abs(a[fin] - e[fin]) - (1e-7 + 1e-3 * np.abs(e[fin]))
    assert np.all(over <= 0), (a[fin][np.argmax(over)], e[fin][np.argmax(over)])


@pytest.mark.parametrize("shape", [(1,), (15,), (17,), (3, 197, 64), (2, 1, 40000)])
def test_session_erf_float32_against_onnxruntime_and_the_numpy_body(spy, shape):
    x = (RNG.standard_normal(shape) * 2.5).astype(np.float32)
    x.reshape(-1)[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40][:x.size]
    data = model()
    got = run(data, x)
    assert spy["erf32"].calls >= 1
    assert got.dtype == np.float32 and got.shape == shape
    within_tolerance(got, run_ort(data, x))
    within_tolerance(got, run(data, x, numpy_body=True))
    check_bound(got[~np.isnan(x)], x[~np.isnan(x)])


def test_session_erf_non_contiguous_and_empty_and_scalar(spy):
    data = model()
    x = (RNG.standard_normal((64, 48)) * 2).astype(np.float32)[:, ::3]
    got = run(data, x)
    within_tolerance(got, run_ort(data, np.ascontiguousarray(x)))
    assert run(data, np.zeros((0, 5), np.float32)).shape == (0, 5)
    s = run(data, np.array(0.5, np.float32))
    assert s.shape == () and abs(float(s) - math.erf(0.5)) <= 1e-7


def test_session_erf_float16_widens_to_the_loop_and_float64_does_not(spy):
    x16 = (RNG.standard_normal(5000) * 2).astype(np.float16)
    got = run(model(TP.FLOAT16), x16)
    assert got.dtype == np.float16 and spy["erf32"].calls >= 1
    want = _erf(x16.astype(np.float64)).astype(np.float16)       # rounded once: within 1 half ulp
    assert np.max(np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want))) <= 1.0
    calls = spy["erf32"].calls
    x64 = RNG.standard_normal(5000) * 2
    got64 = run(model(TP.DOUBLE), x64)
    assert spy["erf32"].calls == calls                            # float64: the numpy float64 body
    assert np.max(np.abs(got64 - _erf(x64))) <= 1e-14


def test_one_two_three_threads_same_bits(spy):
    x = (RNG.standard_normal((4, 70001)) * 3).astype(np.float32)
    data = model()
    outs = [run(data, x, threads=n) for n in (1, 2, 3)]
    assert spy["erf32"].calls >= 1 + 2 + 3                     # split into blocks at 2 and 3 threads
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint32), outs[0].view(np.uint32))
    within_tolerance(outs[0], run_ort(data, x))
