"""float16 / bfloat16 Gelu (approximate 'none') through the compiled float32 loop
(overrides/activation.py with overrides/half.py's ``Narrowed``: X widened, the float32 loop, Y
rounded once).

Against an independent reference written here (``x Phi(x)`` in float64 by ``math.erfc``, rounded
once to X's type): within one unit in the last place (the float32 loop's own error can move a
value across a rounding boundary of the half type); float16 against onnxruntime's Gelu-20 within
two units (its float16 Gelu is itself up to two units from the exact value on these data).  Near misses: a 0-d X and the 'tanh' approximation keep the portable wrapper (the
spy counts the widened loop's calls); float32 X does not take it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides import half as half_mod  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies")]

RNG = np.random.default_rng(4420)
BF16 = np.dtype(ml_dtypes.bfloat16)
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


@pytest.fixture
def narrowed(monkeypatch):
    calls = [0]
    real = half_mod.Narrowed.__call__

    def spy(self, x):
        calls[0] += 1
        return real(self, x)

    monkeypatch.setattr(half_mod.Narrowed, "__call__", spy)
    return calls


def gelu_model(dtype, rank, approximate="none"):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    x = helper.make_tensor_value_info("x", elem, [None] * rank)
    y = helper.make_tensor_value_info("y", elem, None)
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    return helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 20)])


def run(model, x):
    return InferenceSession(model.SerializeToString(), validate=False).run(None, {"x": x})[0]


def reference(x):
    v = x.astype(np.float64)
    return (v * 0.5 * _ERFC(-v / math.sqrt(2.0))).astype(x.dtype)      # erfc: no cancellation in the tail


def ulps(a, b):
    ia, ib = a.view(np.uint16).astype(np.int32), b.view(np.uint16).astype(np.int32)
    ia = np.where(ia & 0x8000, 0x8000 - ia, ia)
    ib = np.where(ib & 0x8000, 0x8000 - ib, ib)
    return int(np.max(np.abs(ia - ib)))


def data(shape, dtype):
    x = RNG.standard_normal(shape) * 3
    x.reshape(-1)[:8] = [0.0, -0.0, 10.0, -10.0, 60000.0, -60000.0, 6e-8, -6e-8]
    return x.astype(np.float32).astype(dtype)


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
def test_half_gelu_takes_the_float32_loop(dtype, narrowed):
    x = data((37, 129), dtype)
    got = run(gelu_model(dtype, 2), x)
    assert narrowed[0] == 1 and got.dtype == dtype
    assert ulps(got, reference(x)) <= 1
    special = np.array([np.inf, -np.inf, np.nan], np.float32).astype(dtype)
    s = run(gelu_model(dtype, 1), special).astype(np.float32)
    assert s[0] == np.inf and np.isnan(s[1]) and np.isnan(s[2])    # -inf: NaN, as float32 X and onnxruntime


def test_float16_gelu_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    model = gelu_model(np.float16, 2)
    x = data((64, 96), np.float16)
    try:
        peer = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:    # noqa: BLE001 (a type onnxruntime has no kernel for: the reference alone)
        pytest.fail(f"onnxruntime refused float16 Gelu-20: {e}")
    want = peer.run(None, {"x": x})[0]
    assert ulps(run(model, x), want) <= 2


def test_near_misses_keep_the_portable_wrapper(narrowed):
    x0 = np.array(1.5, np.float16)
    assert run(gelu_model(np.float16, 0), x0).astype(np.float32) == reference(x0.reshape(1)).astype(np.float32)[0]
    x = data((5, 7), np.float16)
    tanh = run(gelu_model(np.float16, 2, "tanh"), x)
    v = x.astype(np.float64)
    want = (0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))).astype(np.float16)
    assert ulps(tanh, want) <= 1
    run(gelu_model(np.float32, 2), x.astype(np.float32))
    assert narrowed[0] == 0
