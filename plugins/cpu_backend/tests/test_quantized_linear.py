"""The cpu overrides of QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear
(overrides/quantization.py, compiled/quantized.py) against the portable kernels (bit for bit)
and onnxruntime (within one quantization step; exactly where no rounding tie is involved).

Cases: per tensor and per axis (every axis, negative ones), uint8 / int8, with and without a
zero point, saturation at both ends, exact ties (half to even), NaN and infinities, the
versions 10 / 13 / 19 / 21, and the inputs the fast path hands to the portable kernel (float16,
blocks, bad shapes: the same errors).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import quantized as loops  # noqa: E402

from quantized_harness import build, identical, onnxkit_outputs, portable_kernels, three_ways, within_one_step  # noqa: E402

RNG = np.random.default_rng(3232)
TYPES = {np.uint8: TP.UINT8, np.int8: TP.INT8}
needs_numba = pytest.mark.skipif(not compiled.available(), reason="numba is not installed (the portable kernels run)")


def special(shape, scale=0.1):
    """float32 values with ties (k + 0.5 steps), values beyond both saturation ends, and zeros."""
    x = (RNG.standard_normal(shape) * 60 * scale).astype(np.float32)
    flat = x.reshape(-1)
    n = flat.size
    flat[: n // 4] = (RNG.integers(-300, 300, n // 4) + 0.5).astype(np.float32) * np.float32(scale)
    flat[n // 4: n // 4 + 4] = np.float32([1e6, -1e6, 0.0, -0.0])[: max(0, min(4, n - n // 4))]
    return x


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 1), ((2, 4, 3, 3), 1), ((2, 4, 3, 3), 0),
                                        ((2, 4, 3, 3), -1), ((2, 4, 3, 6), 2)])
@pytest.mark.parametrize("per_axis", [False, True])
@pytest.mark.parametrize("with_zp", [False, True])
def test_quantize_linear_bit_identical(dtype, shape, axis, per_axis, with_zp, count_calls):
    spy = count_calls(loops, "quantize")
    x = special(shape)
    channels = shape[axis] if per_axis else 1
    scale = (RNG.uniform(0.05, 0.3, channels)).astype(np.float32)
    scale[0] = 0.1   # the ties of special() fall exactly on half steps of channel 0
    zp = RNG.integers(np.iinfo(dtype).min // 2, np.iinfo(dtype).max // 2, channels).astype(dtype) if with_zp else None
    if not per_axis:
        scale, zp = scale.reshape(()), None if zp is None else zp.reshape(())
    inputs = [x, scale, zp] if with_zp else [x, scale]
    attrs = {"axis": axis}
    if not with_zp:
        attrs["output_dtype"] = TYPES[dtype]
    fast, ref, theirs = three_ways("QuantizeLinear", inputs, attrs, out_types=[TYPES[dtype]], constants=(1, 2))
    assert spy.calls >= 1
    identical(fast[0], ref[0])
    assert fast[0].dtype == dtype
    within_one_step(fast[0], theirs[0])


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("opset", [10, 13, 19, 21])
def test_quantize_ties_saturation_nan_and_inf(opset, count_calls):
    spy = count_calls(loops, "quantize")
    x = np.float32([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, 200, -300, np.inf, -np.inf, np.nan, -0.0])
    for zp in (np.uint8(128), np.int8(-3)):
        fast, ref, _ = three_ways("QuantizeLinear", [x, np.float32(1.0), zp], {}, opset=opset,
                                  out_types=[TYPES[type(zp)]], constants=(1, 2), ort=False)
        identical(fast[0], ref[0])
        z = int(zp)
        lo, hi = np.iinfo(type(zp)).min, np.iinfo(type(zp)).max
        # the definition written out: round half to even, + zero point, saturate; NaN -> the zero point
        want = [min(hi, max(lo, v)) for v in (0 + z, 2 + z, 2 + z, 0 + z, -2 + z, -2 + z, 126 + z, 128 + z,
                                              200 + z, -300 + z, hi, lo, z, z)]
        assert fast[0].tolist() == want
    assert spy.calls == 2


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape,axis,per_axis", [((9,), 0, False), ((2, 6, 5), 1, True), ((2, 6, 5), -1, True),
                                                 ((3, 4, 2, 2), 0, True), ((3, 4, 2, 2), 1, False)])
@pytest.mark.parametrize("with_zp", [False, True])
def test_dequantize_linear_bit_identical(dtype, shape, axis, per_axis, with_zp, count_calls):
    spy = count_calls(loops, "dequantize")
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max + 1, shape).astype(dtype)
    x.reshape(-1)[:2] = [info.min, info.max]
    channels = shape[axis] if per_axis else 1
    scale = RNG.uniform(1e-3, 3.0, channels).astype(np.float32)
    zp = RNG.integers(info.min, info.max + 1, channels).astype(dtype)
    if not per_axis:
        scale, zp = scale.reshape(()), zp.reshape(())
    inputs = [x, scale, zp] if with_zp else [x, scale]
    fast, ref, theirs = three_ways("DequantizeLinear", inputs, {"axis": axis}, out_types=[TP.FLOAT], constants=(1, 2))
    assert spy.calls >= 1
    identical(fast[0], ref[0])
    want = (x.astype(np.float64) - (zp.astype(np.float64).reshape(
        [-1 if i == axis % len(shape) else 1 for i in range(len(shape))]) if with_zp and per_axis else
        (float(zp) if with_zp else 0.0))) * (scale.astype(np.float64).reshape(
            [-1 if i == axis % len(shape) else 1 for i in range(len(shape))]) if per_axis else float(scale))
    np.testing.assert_allclose(fast[0], want, rtol=1e-6)
    np.testing.assert_array_equal(fast[0], theirs[0])


def test_fallbacks_match_the_portable_kernel(count_calls):
    """float16 input, blocked quantization, an int32 DequantizeLinear, a runtime scale of two
    values over a 3-channel axis (an error) take the portable kernel: same results, same errors."""
    spy_q, spy_d = count_calls(loops, "quantize"), count_calls(loops, "dequantize")
    x16 = RNG.standard_normal((2, 4)).astype(np.float16)
    fast, ref, _ = three_ways("QuantizeLinear", [x16, np.float16(0.05), np.uint8(9)], out_types=[TP.UINT8], ort=False)
    identical(fast[0], ref[0])
    xb = RNG.standard_normal((2, 8)).astype(np.float32)
    sb = RNG.uniform(0.01, 0.1, (2, 2)).astype(np.float32)
    fast, ref, _ = three_ways("QuantizeLinear", [xb, sb, np.zeros((2, 2), np.int8)], {"axis": 1, "block_size": 4},
                              out_types=[TP.INT8], ort=False)
    identical(fast[0], ref[0])
    xi = RNG.integers(-1000, 1000, (5,)).astype(np.int32)
    fast, ref, _ = three_ways("DequantizeLinear", [xi, np.float32(0.5)], out_types=[TP.FLOAT], ort=False)
    identical(fast[0], ref[0])
    assert spy_q.calls == 0 and spy_d.calls == 0
    data, feed = build("QuantizeLinear", [RNG.standard_normal((2, 3)).astype(np.float32),
                                          np.float32([0.1, 0.2]), np.uint8([1, 2])], {"axis": 1}, out_types=[TP.UINT8])
    for portable in (False, True):
        with portable_kernels("QuantizeLinear") if portable else _nothing():
            with pytest.raises(OnnxkitError, match="y_scale of shape"):
                onnxkit_outputs(data, feed)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("shape,kind", [((3, 9, 64), "normal"), ((1,), "normal"), ((4, 5), "positive"),
                                        ((4, 5), "negative"), ((2, 3), "zeros"), ((50,), "ties"),
                                        ((6, 7), "wide")])
def test_dynamic_quantize_linear_bit_identical(shape, kind, count_calls):
    spy = count_calls(loops, "finite_range")
    x = {"normal": lambda: RNG.standard_normal(shape),
         "positive": lambda: RNG.uniform(0.5, 3.0, shape),
         "negative": lambda: -RNG.uniform(0.5, 3.0, shape),
         "zeros": lambda: np.zeros(shape),
         "ties": lambda: (np.arange(50) - 20) * 0.5,       # range 24.5: scale 24.5/255, some exact ties
         "wide": lambda: RNG.standard_normal(shape) * 1e30}[kind]().astype(np.float32)
    fast, ref, theirs = three_ways("DynamicQuantizeLinear", [x], opset=13,
                                   out_types=[TP.UINT8, TP.FLOAT, TP.UINT8])
    assert spy.calls == 1
    for f, r in zip(fast, ref):
        identical(f, r)
    if kind == "zeros":   # an empty range: 1/255 as the portable kernel documents (onnxruntime gives 1)
        assert fast[1] == np.float32(1) / np.float32(255) and fast[2] == 0 and theirs[1] == 1
    else:
        np.testing.assert_array_equal(fast[1], theirs[1])
        np.testing.assert_array_equal(fast[2], theirs[2])
    within_one_step(fast[0], theirs[0])


def test_dynamic_quantize_linear_non_finite_takes_the_portable_kernel():
    for bad in (np.nan, np.inf, -np.inf):
        x = np.float32([1.0, -2.0, bad, 0.5])
        fast, ref, _ = three_ways("DynamicQuantizeLinear", [x], opset=13, out_types=[TP.UINT8, TP.FLOAT, TP.UINT8],
                                  ort=False)
        for f, r in zip(fast, ref):
            identical(f, r)


def test_compiled_off_runs_the_portable_kernels(count_calls):
    spy = count_calls(loops, "quantize")
    x = special((3, 8))
    data, feed = build("QuantizeLinear", [x, np.float32(0.1), np.uint8(128)], out_types=[TP.UINT8], constants=(1, 2))
    with compiled.disabled():
        off = onnxkit_outputs(data, feed)
    with portable_kernels("QuantizeLinear"):
        ref = onnxkit_outputs(data, feed)
    identical(off[0], ref[0])
    assert spy.calls == 0


def _portable_parameters(lo_x, hi_x):
    """DynamicQuantizeLinear's scale and zero point as the portable kernel computes them."""
    hi = np.float32(max(0.0, float(hi_x)))
    lo = np.float32(min(0.0, float(lo_x)))
    rng = np.float32(1.0) if hi == lo else np.float32(hi - lo)
    scale = np.float32(rng / np.float32(255))
    return scale, np.rint(np.clip(np.float32(0) - lo / scale, 0, 255)).astype(np.float32)


def test_dynamic_parameters_equal_the_portable_formulas_ties_included():
    from onnxkit_cpu.overrides.quantization import dynamic_parameters

    pairs = [(np.float32(-(t + 0.5) / 8), np.float32(-(t + 0.5) / 8 + 255 / 8)) for t in range(0, 255)]
    spread = RNG.standard_normal((3000, 2)) * 10.0 ** RNG.uniform(-6, 6, (3000, 2))
    pairs += [(np.float32(-abs(a)), np.float32(abs(b))) for a, b in spread]
    pairs += [(np.float32(0.5), np.float32(3.0)), (np.float32(-3.0), np.float32(-0.5)), (np.float32(0), np.float32(0))]
    ties = 0
    for lo, hi in pairs:
        scale, zp = dynamic_parameters(lo, hi)
        want_scale, want_zp = _portable_parameters(lo, hi)
        assert scale == want_scale and zp == want_zp and zp.dtype == np.float32, (lo, hi)
        q = np.float32(0) - np.float32(min(0.0, float(lo))) / want_scale
        ties += float(q) % 1 == 0.5
    assert ties > 100          # half of them even, half odd: both ways of rounding a tie are met
