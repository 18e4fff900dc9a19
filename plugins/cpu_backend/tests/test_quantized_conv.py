"""The cpu overrides of ConvInteger and QLinearConv (overrides/quantized_conv.py) against the
portable kernels (bit for bit), a plain int64 convolution written here, and onnxruntime
(ConvInteger exactly, QLinearConv within one quantization step), over shapes, strides, pads,
dilations, groups (depthwise included), 1x1 and 1-D convolutions, zero points per tensor and per
output channel, uint8 / int8, bias, and weights on both sides of the float32 exactness bound.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402

from quantized_harness import count_products, identical, three_ways, within_one_step  # noqa: E402

from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides import quantized_conv as fast_module  # noqa: E402


@pytest.fixture(autouse=True, params=["vnni", "float32"])
def product_path(request, monkeypatch):
    """Each test twice: with the VNNI products where the host has them, and with them off (the
    float32 / K-split products of the hosts without AVX-512 VNNI)."""
    from onnxkit_cpu.compiled import quantized_vnni

    if request.param == "float32":
        monkeypatch.setattr(quantized_vnni, "ENABLED", False)
    elif quantized_vnni.get() is None:
        pytest.skip("no AVX-512 VNNI here: the float32 products run (the float32 case covers them)")
    return request.param

RNG = np.random.default_rng(3234)


def ints(dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    return RNG.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dtype)


def int_conv(x, w, strides, pads, dil, group):
    """The convolution in int64, loop by loop over the output (x, w already minus zero points)."""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    m = w.shape[0]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    k = w.shape[2:]
    out = [(xp.shape[2 + i] - (k[i] - 1) * dil[i] - 1) // strides[i] + 1 for i in range(nd)]
    y = np.zeros((n, m, *out), np.int64)
    cg, mg = c // group, m // group
    for o in itertools.product(*(range(v) for v in out)):
        for off in itertools.product(*(range(v) for v in k)):
            idx = tuple(o[i] * strides[i] + off[i] * dil[i] for i in range(nd))
            patch = xp[(slice(None), slice(None)) + idx]                      # (n, c)
            for g in range(group):
                wg = w[g * mg:(g + 1) * mg, :, *off]                          # (mg, cg)
                y[(slice(None), slice(g * mg, (g + 1) * mg)) + o] += patch[:, g * cg:(g + 1) * cg] @ wg.T
    return y


@pytest.fixture
def paths(monkeypatch):
    """Counts of convolutions taken in float32 (``exact``) and handed to the portable kernel (``wide``);
    the compiled depthwise loop (which bypasses ``exact_conv``: ``depthwise``, QLinearConv's
    ``depthwise_body``) counts as ``exact``."""
    seen = count_products(monkeypatch, fast_module, "exact_conv")
    real = fast_module.depthwise

    def counted(*args):
        seen["exact"] += 1
        return real(*args)
    monkeypatch.setattr(fast_module, "depthwise", counted)
    real_body = fast_module.depthwise_body

    def counted_body(*args):        # QLinearConv's depthwise body: each call of it counted
        body = real_body(*args)

        def run(x):
            seen["exact"] += 1
            return body(x)
        return run
    monkeypatch.setattr(fast_module, "depthwise_body", counted_body)
    return seen


GEOMETRIES = [
    ((2, 4, 7, 6), (5, 4, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 9, 9), (4, 3, 3, 3), {"strides": [2, 2], "pads": [0, 1, 1, 0]}),
    ((2, 6, 8, 8), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
    ((1, 4, 8, 8), (6, 2, 2, 2), {"group": 2, "dilations": [2, 2]}),
    ((3, 8, 5, 5), (4, 8, 1, 1), {}),
    ((2, 3, 12), (4, 3, 5), {"strides": [2], "pads": [2, 1]}),
    ((1, 2, 6, 6), (3, 2, 3, 3), {"auto_pad": "SAME_UPPER"}),
    # depthwise (the compiled depthwise loop): stride 2 with uneven pads and dilation; 7x7 past the input
    ((1, 5, 11, 10), (5, 1, 3, 3), {"group": 5, "strides": [2, 3], "pads": [0, 2, 1, 1], "dilations": [1, 2]}),
    ((2, 3, 6, 5), (3, 1, 7, 7), {"group": 3, "pads": [3, 3, 3, 3]}),
    # outputs at least DEPTHWISE_PLANAR_MIN_WIDTH wide (the planar depthwise loop; the ones above
    # take the channels-last loop): stride 1; MobileNet's stride 2 (two phases a side); strides
    # 3 x 2 with dilation 2 x 1, a 5 x 4 kernel (taps three at a time: a pass of two, one of one)
    ((1, 3, 6, 33), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    ((2, 6, 9, 30), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 13, 40), (4, 1, 5, 4), {"group": 4, "strides": [3, 2], "pads": [2, 0, 1, 3], "dilations": [2, 1]}),
    # column stride 2 (both phases of a row filled in one pass): an odd width, the left pad 0 and 1
    ((1, 3, 9, 31), (3, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ((2, 3, 8, 27), (3, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [0, 1, 1, 2]}),
]


def _pads(x_shape, w_shape, attrs):
    nd = len(x_shape) - 2
    if attrs.get("auto_pad") == "SAME_UPPER":
        pads = [0] * (2 * nd)
        for i in range(nd):
            total = max(0, (x_shape[2 + i] - 1) + w_shape[2 + i] - x_shape[2 + i])
            pads[i], pads[i + nd] = total // 2, total - total // 2
        return pads
    return attrs.get("pads", [0] * (2 * nd))


@pytest.mark.parametrize("x_shape,w_shape,attrs", GEOMETRIES)
@pytest.mark.parametrize("w_type", [np.uint8, np.int8])
@pytest.mark.parametrize("zps", ["none", "tensor", "channel"])
def test_conv_integer(x_shape, w_shape, attrs, w_type, zps, paths):
    x, w = ints(np.uint8, x_shape), ints(w_type, w_shape)
    inputs = [x, w]
    if zps != "none":
        m = w_shape[0]
        inputs += [ints(np.uint8, ()), ints(w_type, (m,) if zps == "channel" else ())]
    fast, ref, theirs = three_ways("ConvInteger", inputs, attrs, opset=13, out_types=[TP.INT32], constants=(1, 3),
                                   ort=w_type == np.uint8 and zps != "channel")
    identical(fast[0], ref[0])
    nd = len(x_shape) - 2
    zx = int(inputs[2]) if zps != "none" else 0
    zw = inputs[3].astype(np.int64).reshape((-1,) + (1,) * (nd + 1)) if zps != "none" else 0
    want = int_conv(x.astype(np.int64) - zx, w.astype(np.int64) - zw, attrs.get("strides", [1] * nd),
                    _pads(x_shape, w_shape, attrs), attrs.get("dilations", [1] * nd), attrs.get("group", 1))
    np.testing.assert_array_equal(fast[0], want)
    if theirs is not None:
        np.testing.assert_array_equal(fast[0], theirs[0])
    assert paths == {"exact": 1, "wide": 0}


def test_conv_integer_past_the_bound_splits_k(paths):
    """64 channels of 3x3 weights near 255: sums near 3e7, past 2^24 (a float32 product is off): the
    product is split along C * K into exact float32 parts (equal to the integer convolution)."""
    x = ints(np.uint8, (1, 64, 5, 5), 200, 255)
    w = ints(np.uint8, (2, 64, 3, 3), 200, 255)
    fast, ref, theirs = three_ways("ConvInteger", [x, w], {}, opset=13, out_types=[TP.INT32], constants=(1,))
    identical(fast[0], ref[0])
    np.testing.assert_array_equal(fast[0], theirs[0])
    want = int_conv(x.astype(np.int64), w.astype(np.int64), [1, 1], [0] * 4, [1, 1], 1)
    np.testing.assert_array_equal(fast[0], want)
    assert paths == {"exact": 1, "wide": 0}      # split along K (k_chunks), exact
    cols = np.lib.stride_tricks.sliding_window_view(x.astype(np.float32), (3, 3), axis=(2, 3))
    as_float32 = np.einsum("ncijkl,mckl->nmij", cols, w.astype(np.float32), optimize=True)
    assert not np.array_equal(as_float32.astype(np.int64), want)


needs_numba = pytest.mark.skipif(not compiled.available(), reason="numba is not installed (the portable kernel runs)")


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("x_shape,w_shape,attrs", GEOMETRIES)
@pytest.mark.parametrize("x_type,w_type", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_qlinear_conv(x_shape, w_shape, attrs, x_type, w_type, per_channel, bias, paths):
    m = w_shape[0]
    x, w = ints(x_type, x_shape), ints(w_type, w_shape)
    shape = (m,) if per_channel else ()
    x_scale = np.float32(0.05)
    w_scale = RNG.uniform(0.002, 0.02, shape).astype(np.float32)
    k = int(np.prod(w_shape[1:]))
    y_scale = np.float32(0.05 * 0.01 * 50 * np.sqrt(k))
    mid_x = 0 if x_type == np.int8 else 128
    x_zp = np.asarray(mid_x + RNG.integers(-4, 5), x_type)
    w_zp = (np.zeros(shape, w_type) if w_type == np.int8 else ints(w_type, shape, 120, 136))
    y_zp = np.asarray(mid_x + RNG.integers(-4, 5), x_type)
    b = RNG.integers(-3000, 3000, m).astype(np.int32) if bias else None
    inputs = [x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp] + ([b] if bias else [])
    out = TP.INT8 if x_type == np.int8 else TP.UINT8
    fast, ref, theirs = three_ways("QLinearConv", inputs, attrs, opset=13, out_types=[out],
                                   constants=tuple(range(1, 9)), ort=(w_type == np.int8 or x_type == np.uint8))
    identical(fast[0], ref[0])
    assert paths == {"exact": 1, "wide": 0}
    if theirs is not None:
        within_one_step(fast[0], theirs[0])
    if fast[0].size >= 32:
        assert np.ptp(fast[0].astype(np.int64)) > 2       # not all saturated


@needs_numba
def test_qlinear_conv_saturates_and_rounds_ties_as_the_definition():
    """A 1x1 convolution of one channel by weight 1 and multiplier 0.5: y = rint(x * 0.5) + zp,
    ties to even, saturated at both ends."""
    x = np.arange(0, 256, dtype=np.uint8).reshape(1, 1, 16, 16)
    inputs = [x, np.float32(1.0), np.uint8(0), np.ones((1, 1, 1, 1), np.uint8), np.float32(1.0), np.uint8(0),
              np.float32(2.0), np.uint8(100)]
    fast, ref, theirs = three_ways("QLinearConv", inputs, {}, opset=13, out_types=[TP.UINT8], constants=(3,))
    identical(fast[0], ref[0])
    want = np.clip(np.rint(np.arange(256) * 0.5) + 100, 0, 255).astype(np.uint8).reshape(1, 1, 16, 16)
    np.testing.assert_array_equal(fast[0], want)
    within_one_step(fast[0], theirs[0])


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
def test_qlinear_conv_past_the_bound(paths):
    x = ints(np.uint8, (1, 64, 5, 5), 200, 255)
    w = ints(np.uint8, (3, 64, 3, 3), 200, 255)
    inputs = [x, np.float32(0.01), np.uint8(0), w, np.float32(0.01), np.uint8(0), np.float32(40.0), np.uint8(0)]
    fast, ref, theirs = three_ways("QLinearConv", inputs, {}, opset=13, out_types=[TP.UINT8], constants=(3,))
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    assert paths == {"exact": 1, "wide": 0}      # split along K (k_chunks), exact


@needs_numba
def test_qlinear_conv_runtime_weights_changing():
    """W a graph input, changed between runs (a new array, then the same array written in place):
    nothing derived from an earlier W is reused."""
    from quantized_harness import build
    from onnxkit.runtime import InferenceSession

    x = ints(np.uint8, (1, 2, 4, 4))
    w = ints(np.int8, (3, 2, 3, 3), -20, 20)
    inputs = [x, np.float32(0.1), np.uint8(128), w, np.float32(0.05), np.int8(0), np.float32(0.5), np.uint8(128)]
    data, feed = build("QLinearConv", inputs, {"pads": [1, 1, 1, 1]}, opset=13, out_types=[TP.UINT8],
                       constants=(1, 2, 4, 5, 6, 7))
    s = InferenceSession(data, validate=False)

    def want(wv):
        acc = int_conv(x.astype(np.int64) - 128, wv.astype(np.int64), [1, 1], [1, 1, 1, 1], [1, 1], 1)
        return np.clip(np.rint(acc * np.float64(np.float32(0.1) * np.float32(0.05) / np.float32(0.5))) + 128,
                       0, 255).astype(np.uint8)
    first = s.run(None, {"x0": x, "x3": w})[0]
    np.testing.assert_array_equal(first, want(w))
    w2 = w.copy()
    w2[0] += 7
    np.testing.assert_array_equal(s.run(None, {"x0": x, "x3": w2})[0], want(w2))
    w2[1] -= 9                       # the same object, written in place
    np.testing.assert_array_equal(s.run(None, {"x0": x, "x3": w2})[0], want(w2))


@pytest.mark.parametrize("x_shape,w_shape,attrs", GEOMETRIES[:3] + GEOMETRIES[4:6])
def test_conv_integer_without_compiled_loops(x_shape, w_shape, attrs, paths):
    """Compiled loops off: the float32 product of the portable im2col, the same exact sums."""
    x, w = ints(np.uint8, x_shape), ints(np.uint8, w_shape)
    with compiled.disabled():
        fast, ref, _ = three_ways("ConvInteger", [x, w, np.uint8(7), np.uint8(130)], attrs, opset=13,
                                  out_types=[TP.INT32], constants=(1, 3), ort=False)
    identical(fast[0], ref[0])
    assert paths == {"exact": 1, "wide": 0}


def test_conv_integer_three_spatial_axes(paths):
    x, w = ints(np.uint8, (1, 2, 4, 5, 3)), ints(np.int8, (3, 2, 2, 3, 2))
    fast, ref, _ = three_ways("ConvInteger", [x, w, np.uint8(100)], {"pads": [1, 0, 1, 0, 1, 1]}, opset=13,
                              out_types=[TP.INT32], constants=(1,), ort=False)
    identical(fast[0], ref[0])
    want = int_conv(x.astype(np.int64) - 100, w.astype(np.int64), [1, 1, 1], [1, 0, 1, 0, 1, 1], [1, 1, 1], 1)
    np.testing.assert_array_equal(fast[0], want)
    assert paths == {"exact": 1, "wide": 0}


def test_conv_integer_constant_weights_with_a_changing_zero_point():
    """W an initializer, its zero point a graph input changed between runs (a new array, then the
    same array written in place): the kept centered W follows the zero point's values."""
    from quantized_harness import build
    from onnxkit.runtime import InferenceSession

    x, w = ints(np.uint8, (1, 3, 5, 5)), ints(np.uint8, (2, 3, 3, 3))
    data, _ = build("ConvInteger", [x, w, np.uint8(3), np.uint8(10)], {}, opset=13, out_types=[TP.INT32],
                    constants=(1,))
    s = InferenceSession(data, validate=False)
    zw = np.asarray(10, np.uint8)
    for value in (10, 200, 200, 7):
        if value == 200 and zw == 200:
            zw[...] = 201          # in place
            value = 201
        else:
            zw = np.asarray(value, np.uint8)
        got = s.run(None, {"x0": x, "x2": np.uint8(3), "x3": zw})[0]
        want = int_conv(x.astype(np.int64) - 3, w.astype(np.int64) - value, [1, 1], [0] * 4, [1, 1], 1)
        np.testing.assert_array_equal(got, want)


@needs_numba
def test_qlinear_conv_runtime_scales_and_bias_changing():
    """y_scale and B graph inputs, changed between runs (B written in place): the multiplier and
    bias follow them (only what is derived from plan constants is kept)."""
    from quantized_harness import build
    from onnxkit.runtime import InferenceSession

    x = ints(np.uint8, (1, 2, 4, 4))
    w = ints(np.int8, (3, 2, 3, 3), -20, 20)
    b = np.int32([100, -50, 7])
    inputs = [x, np.float32(0.1), np.uint8(128), w, np.float32(0.05), np.int8(0), np.float32(0.5), np.uint8(128), b]
    data, _ = build("QLinearConv", inputs, {}, opset=13, out_types=[TP.UINT8], constants=(1, 2, 3, 4, 5, 7))
    s = InferenceSession(data, validate=False)
    acc = int_conv(x.astype(np.int64) - 128, w.astype(np.int64), [1, 1], [0] * 4, [1, 1], 1)

    def want(ys, bias):
        mult = np.float64(np.float32(np.float32(0.1) * np.float32(0.05) / ys))
        return np.clip(np.rint((acc + bias.reshape(1, 3, 1, 1)) * mult) + 128, 0, 255).astype(np.uint8)
    ys_given = np.asarray(np.float32(0.5))
    for step in range(3):
        if step == 1:
            b, ys_given = b.copy(), np.asarray(np.float32(0.25))      # new arrays
        elif step == 2:
            b[1] -= 300            # the same array, written in place
        ys = np.float32(ys_given)
        got = s.run(None, {"x0": x, "x6": ys_given, "x8": b})[0]
        np.testing.assert_array_equal(got, want(ys, b))
