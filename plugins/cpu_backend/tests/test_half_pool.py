"""float16 / bfloat16 MaxPool and AveragePool through the compiled float32 loop
(overrides/pool.py with overrides/half.py's ``Narrowed``: X widened, the float32 loop, Y
rounded once).

Each case runs a one-node model planned with the compiled loops and under
``compiled.disabled()`` (the numpy passes, which compute in float32 and round once too): the two
agree bit for bit for a max (NaN patterns and the sign of zero included) and for an average
(NaN as NaN: which of two NaNs a sum keeps is the loop's); against an independent reference
written here (float64 over each window, rounded once to X's type) to one unit in the last
place; and float16 MaxPool against onnxruntime.  Near misses: an AveragePool window past
``HALF_EXACT`` taps and a 5-D input keep the numpy passes (the spy counts the loop's calls).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides import half as half_mod  # noqa: E402
from onnxkit_cpu.overrides import pool as pool_mod  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies")]

RNG = np.random.default_rng(44)
BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture
def narrowed(monkeypatch):
    """Counts the calls of half.Narrowed (the widened float32 loop)."""
    calls = [0]
    real = half_mod.Narrowed.__call__

    def spy(self, x):
        calls[0] += 1
        return real(self, x)

    monkeypatch.setattr(half_mod.Narrowed, "__call__", spy)
    return calls


def session(op, attrs, dtype, rank):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    x = helper.make_tensor_value_info("x", elem, [None] * rank)
    y = helper.make_tensor_value_info("y", elem, None)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    return model, InferenceSession(model.SerializeToString(), validate=False)


def data(shape, dtype):
    """Normal values with ties, signed zeros, NaNs of both signs and infinities."""
    x = RNG.standard_normal(shape) * 4
    pick = RNG.random(shape)
    x[pick < 0.15] = np.round(x[pick < 0.15])
    x[(pick >= 0.15) & (pick < 0.2)] = -0.0
    x[(pick >= 0.25) & (pick < 0.26)] = np.nan
    x[(pick >= 0.26) & (pick < 0.27)] = -np.nan
    x[(pick >= 0.27) & (pick < 0.28)] = np.inf
    x[(pick >= 0.28) & (pick < 0.29)] = -np.inf
    return x.astype(np.float32).astype(dtype)


def reference(op, attrs, x):
    """float64 over each window (2-D, explicit pads, ceil_mode 0), rounded once to X's type."""
    k, s = attrs["kernel_shape"], attrs.get("strides", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    xf = x.astype(np.float64)
    h, w = xf.shape[2:]
    oh, ow = (h + p[0] + p[2] - k[0]) // s[0] + 1, (w + p[1] + p[3] - k[1]) // s[1] + 1
    y = np.empty(xf.shape[:2] + (oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        r0, c0 = i * s[0] - p[0], j * s[1] - p[1]
        r = slice(max(r0, 0), min(r0 + k[0], h))
        c = slice(max(c0, 0), min(c0 + k[1], w))
        win = xf[:, :, r, c].reshape(xf.shape[:2] + (-1,))
        if op == "MaxPool":
            y[:, :, i, j] = np.max(win, axis=-1)
        else:
            count = k[0] * k[1] if attrs.get("count_include_pad", 0) else win.shape[-1]
            y[:, :, i, j] = np.sum(win, axis=-1) / count
    return y.astype(x.dtype)


def ulps(a, b):
    """Largest distance in units in the last place between finite a and b (same type)."""
    u = np.uint16
    ia, ib = a.view(u).astype(np.int32), b.view(u).astype(np.int32)
    ia = np.where(ia & 0x8000, 0x8000 - ia, ia)
    ib = np.where(ib & 0x8000, 0x8000 - ib, ib)
    return int(np.max(np.abs(ia - ib))) if a.size else 0


CASES = [
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]}),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
]


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("op,attrs", CASES, ids=[f"{o}-{i}" for i, (o, _) in enumerate(CASES)])
def test_half_pool_takes_the_loop_and_equals_the_passes(op, attrs, dtype, narrowed):
    x = data((2, 3, 11, 13), dtype)
    _, sess = session(op, attrs, dtype, 4)
    got = sess.run(None, {"x": x})[0]
    assert narrowed[0] == 1 and got.dtype == dtype
    with compiled.disabled():
        _, slow = session(op, attrs, dtype, 4)
        want = slow.run(None, {"x": x})[0]
    assert narrowed[0] == 1
    if op == "MaxPool":
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    else:
        nan = np.isnan(want.astype(np.float32))
        assert np.array_equal(nan, np.isnan(got.astype(np.float32)))
        assert np.array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    finite = x.astype(np.float32)
    finite[~np.isfinite(finite)] = 0.5
    finite = finite.astype(dtype)
    got = sess.run(None, {"x": finite})[0]
    assert ulps(got, reference(op, attrs, finite)) <= 1


def test_float16_max_pool_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    model, sess = session("MaxPool", attrs, np.float16, 4)
    x = data((1, 4, 17, 16), np.float16)
    x[~np.isfinite(x)] = 1.5
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.array_equal(sess.run(None, {"x": x})[0].view(np.uint16), want.view(np.uint16))


def test_near_misses_keep_the_passes(narrowed):
    """A 17x17 average (289 taps, past HALF_EXACT: a count bfloat16 does not hold exactly) and a
    3-D window (the loop takes one or two spatial axes) run the numpy passes; still right."""
    attrs = {"kernel_shape": [17, 17], "strides": [1, 1]}
    assert 17 * 17 > pool_mod.HALF_EXACT
    x = data((1, 2, 18, 18), np.float16)
    x[~np.isfinite(x)] = 0.25
    _, sess = session("AveragePool", attrs, np.float16, 4)
    got = sess.run(None, {"x": x})[0]
    assert narrowed[0] == 0
    assert ulps(got, reference("AveragePool", attrs, x)) <= 1
    _, sess3 = session("MaxPool", {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}, np.float16, 5)
    x3 = data((1, 2, 4, 4, 4), np.float16)
    x3[np.isnan(x3)] = -3.0
    got3 = sess3.run(None, {"x": x3})[0]
    assert narrowed[0] == 0
    want = x3.astype(np.float32).reshape(1, 2, 2, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 6, 3, 5, 7)
    want = np.max(want.reshape(1, 2, 2, 2, 2, 8), axis=-1).astype(np.float16)
    assert np.array_equal(got3.view(np.uint16), want.view(np.uint16))
