"""The VNNI integer product (onnxkit_cpu/compiled/quantized_vnni.py) against int64 products
written here: every operand type pair (uint8 / int8 both sides), zero points at the types' ends
and per column, saturated operands, K past float32's exactness bound, sizes off the tiles'
multiples; convolutions with pads, strides, dilations, groups, 1-D, against an int64 convolution;
and QLinearConv / QLinearMatMul / MatMulInteger / ConvInteger sessions with the VNNI product
against the same sessions without it (bit for bit) and onnxruntime (the integer operators
exactly, the requantized ones within one step: onnxruntime requantizes in float32).
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit_cpu.compiled import quantized_vnni as vnni

IMPL = vnni.get()
pytestmark = pytest.mark.skipif(IMPL is None, reason="the host has no AVX-512 VNNI (or compiled loops are off)")

RNG = np.random.default_rng(44)
TYPES = (np.uint8, np.int8)


def ints(dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    return RNG.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dtype)


def zero_points(dtype, n):
    info = np.iinfo(dtype)
    return [None, np.array(info.min, dtype), np.array(info.max, dtype), ints(dtype, (n,))]


@pytest.mark.parametrize("a_type", TYPES)
@pytest.mark.parametrize("w_type", TYPES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 3), (13, 65, 33), (7, 300, 64), (6, 4100, 40)])
def test_product_is_the_exact_integer_product(a_type, w_type, shape):
    p, k, n = shape
    a, w = ints(a_type, (p, k)), ints(w_type, (k, n))
    info = np.iinfo(a_type)
    for a_zp in (info.min, info.max, 3):
        for w_zp in zero_points(w_type, n):
            got = vnni.product(IMPL, a, a_zp, vnni.PackedW(IMPL, w, w_zp))
            want = (a.astype(np.int64) - a_zp) @ (w.astype(np.int64) - (0 if w_zp is None else w_zp.astype(np.int64)))
            assert got.dtype == np.float64 and np.array_equal(got, want)


def test_saturated_operands_past_the_float32_bound():
    """Every operand at the end of its range: the sums pass 2^24 (where float32 would round)."""
    k = 4096
    a = np.full((6, k), 255, np.uint8)
    w = np.full((k, 32), -128, np.int8)
    got = vnni.product(IMPL, a, 0, vnni.PackedW(IMPL, w, None), np.int64)
    assert (got == 255 * -128 * k).all() and abs(int(got[0, 0])) > 1 << 24
    w8 = np.full((k, 32), 255, np.uint8)
    got = vnni.product(IMPL, np.full((3, k), -128, np.int8), 127, vnni.PackedW(IMPL, w8, np.array(0, np.uint8)))
    assert (got == (-255) * 255 * k).all()


def int_conv(x, w, strides, pads, dil, group):
    """The 2-D convolution in int64 (x and w already minus their zero points)."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    oh = (xp.shape[2] - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (xp.shape[3] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    mg = m // group
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dil[0]:i * dil[0] + (oh - 1) * strides[0] + 1:strides[0],
                       j * dil[1]:j * dil[1] + (ow - 1) * strides[1] + 1:strides[1]]
            for g in range(group):
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch[:, g * cg:(g + 1) * cg],
                                                       w[g * mg:(g + 1) * mg, :, i, j])
    return y


class Plan:
    """The geometry :func:`vnni.conv` reads (the portable ConvPlan's fields)."""

    def __init__(self, x, w, strides, pads, dil, group, nd=2):
        self.n, self.c, self.m, self.group = x.shape[0], x.shape[1], w.shape[0], group
        self.kernel, self.strides, self.dil = tuple(w.shape[2:]), tuple(strides), tuple(dil)
        self.begin, self.end = tuple(pads[:nd]), tuple(pads[nd:])
        self.out_shape = tuple((x.shape[2 + i] + pads[i] + pads[i + nd] - (w.shape[2 + i] - 1) * dil[i] - 1)
                               // strides[i] + 1 for i in range(nd))


CONVS = [
    ((1, 3, 17, 17), (16, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),
    ((2, 32, 9, 8), (40, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 16, 10, 10), (24, 8, 3, 3), (2, 1), (0, 1, 2, 0), (2, 1), 2),
    ((1, 64, 6, 6), (72, 64, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 24, 9, 9), (24, 2, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 12),
]


@pytest.mark.parametrize("geometry", CONVS)
@pytest.mark.parametrize("x_type", TYPES)
@pytest.mark.parametrize("w_type", TYPES)
def test_conv_is_the_exact_integer_convolution(geometry, x_type, w_type):
    xs, ws, strides, pads, dil, group = geometry
    x, w = ints(x_type, xs), ints(w_type, ws)
    info = np.iinfo(x_type)
    for x_zp in (info.min, info.max):
        for w_zp in zero_points(w_type, ws[0])[1:]:
            plan = Plan(x, w, strides, pads, dil, group)
            mg = ws[0] // group
            flat = vnni.conv_weights(w)
            zp = w_zp.reshape(-1)
            groups = [vnni.PackedW(IMPL, flat[g * mg:(g + 1) * mg].T, zp if zp.size == 1 else zp[g * mg:(g + 1) * mg])
                      for g in range(group)]
            got = vnni.conv(IMPL, x, x_zp, groups, plan)
            wz = w_zp.astype(np.int64).reshape(-1, 1, 1, 1) if w_zp.size > 1 else w_zp.astype(np.int64)
            want = int_conv(x.astype(np.int64) - x_zp, w.astype(np.int64) - wz, strides, pads, dil, group)
            assert np.array_equal(got, want)


def test_conv_one_spatial_axis():
    x, w = ints(np.uint8, (2, 8, 30)), ints(np.int8, (16, 8, 5))
    plan = Plan(x, w, (2,), (2, 1), (1,), 1, nd=1)
    got = vnni.conv(IMPL, x, 7, [vnni.PackedW(IMPL, vnni.conv_weights(w).T, None)], plan)
    want = int_conv(x[:, :, None, :].astype(np.int64) - 7, w[:, :, None, :].astype(np.int64), (1, 2), (0, 2, 0, 1),
                    (1, 1), 1)[:, :, 0]
    assert np.array_equal(got, want)


def test_requantized_conv_equals_the_sums_requantized():
    """The fused requantization (finish_conv_requantized) is the separate requantize pass's, bit for bit."""
    from onnxkit_cpu.compiled import quantized as loops

    x, w = ints(np.uint8, (1, 16, 12, 12)), ints(np.int8, (48, 16, 3, 3))
    plan = Plan(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    groups = [vnni.PackedW(IMPL, vnni.conv_weights(w).T, None)]
    acc = vnni.conv(IMPL, x, 128, groups, plan)
    bias = RNG.integers(-5000, 5000, 48).astype(np.float64)
    mult = np.float32(RNG.uniform(1e-4, 3e-3, 48)).astype(np.float64)
    for zp, lo, hi, dtype in ((0.0, 0.0, 255.0, np.uint8), (255.0, 0.0, 255.0, np.uint8), (-128.0, -128.0, 127.0, np.int8)):
        want = np.empty(acc.shape, dtype)
        loops.requantize.get()(acc.reshape(1, 48, -1), bias, mult, zp, lo, hi, want.reshape(1, 48, -1))
        got = np.empty(acc.shape, dtype)
        vnni.conv(IMPL, x, 128, groups, plan, (bias, mult, zp, lo, hi, got))
        assert np.array_equal(got, want)
        assert (got == lo).any() and (got == hi).any()       # saturation on both sides was met


# ---------------------------------------------------------------- sessions: VNNI, without, onnxruntime
def _sessions(monkeypatch, op, inputs, attrs, out_type, constants, domain=""):
    """``(with VNNI, without, onnxruntime)`` outputs of one node, and the VNNI calls seen."""
    from quantized_harness import three_ways

    seen = []
    for name in ("product", "conv"):
        real = getattr(vnni, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            seen.append(_name)
            return _real(*args, **kwargs)
        monkeypatch.setattr(vnni, name, counted)
    fast, ref, theirs = three_ways(op, inputs, attrs, out_types=(out_type,), constants=constants, domain=domain)
    monkeypatch.setattr(vnni, "ENABLED", False)
    plain, _, _ = three_ways(op, inputs, attrs, out_types=(out_type,), constants=constants, domain=domain, ort=False)
    return fast[0], plain[0], ref[0], theirs[0], seen


@pytest.mark.parametrize("x_type,w_type", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_session(monkeypatch, x_type, w_type, per_channel):
    pytest.importorskip("onnx")
    from onnx import TensorProto as TP

    from quantized_harness import identical, within_one_step

    m = 32
    x, w = ints(x_type, (1, 16, 11, 11)), ints(w_type, (m, 16, 3, 3))
    w_zp = ints(w_type, (m,)) if per_channel and w_type == np.uint8 else (
        np.zeros(m, w_type) if per_channel else np.array(128 if w_type == np.uint8 else 0, w_type))
    w_scale = np.float32(RNG.uniform(0.001, 0.01, m if per_channel else 1)).reshape(-1 if per_channel else ())
    x_zp = np.array(np.iinfo(x_type).min, x_type)
    inputs = [x, np.float32(0.02), x_zp, w, w_scale, w_zp, np.float32(0.5), np.array(0 if x_type == np.int8 else 128, x_type),
              RNG.integers(-3000, 3000, m).astype(np.int32)]
    tp = TP.UINT8 if x_type == np.uint8 else TP.INT8
    fast, plain, ref, theirs, seen = _sessions(monkeypatch, "QLinearConv", inputs, {"pads": [1, 1, 1, 1], "strides": [2, 1]},
                                               tp, constants=(3, 4, 5, 8))
    assert seen and set(seen) == {"conv"}
    identical(fast, plain)
    identical(fast, ref)
    within_one_step(fast, theirs)
    assert len(np.unique(fast)) > 20


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8), (np.int8, np.int8)])
def test_matmul_integer_session_is_exact(monkeypatch, a_type, b_type):
    pytest.importorskip("onnx")
    from onnx import TensorProto as TP

    from quantized_harness import identical

    a, b = ints(a_type, (3, 10, 700)), ints(b_type, (700, 50))
    inputs = [a, b, np.array(np.iinfo(a_type).max, a_type), ints(b_type, (50,))]
    fast, plain, ref, theirs, seen = _sessions(monkeypatch, "MatMulInteger", inputs, {}, TP.INT32, constants=(1, 3))
    assert "product" in seen
    identical(fast, plain)
    identical(fast, ref)
    identical(fast, theirs)


def test_qlinear_matmul_session(monkeypatch):
    pytest.importorskip("onnx")
    from onnx import TensorProto as TP

    from quantized_harness import identical, within_one_step

    a, b = ints(np.uint8, (2, 9, 320)), ints(np.int8, (320, 40))
    inputs = [a, np.float32(0.03), np.array(255, np.uint8), b, np.float32(RNG.uniform(0.001, 0.01, 40)),
              np.zeros(40, np.int8), np.float32(0.8), np.array(10, np.uint8)]
    fast, plain, ref, theirs, seen = _sessions(monkeypatch, "QLinearMatMul", inputs, {}, TP.UINT8, constants=(3, 4, 5))
    assert "product" in seen
    identical(fast, plain)
    identical(fast, ref)
    within_one_step(fast, theirs)


def test_qlinear_matmul_fed_scales_are_read_at_each_call():
    """The fused requantization's multiplier is kept only while the plan holds the scales: a fed
    y_scale / y_zero_point that changes between runs gives each run's own result."""
    pytest.importorskip("onnx")
    from onnx import TensorProto as TP

    from quantized_harness import build, identical, onnxkit_outputs, portable_kernels

    from onnxkit.runtime import InferenceSession

    a, b = ints(np.uint8, (4, 64)), ints(np.int8, (64, 40))
    inputs = [a, np.float32(0.03), np.array(128, np.uint8), b, np.float32(0.004), np.array(0, np.int8),
              np.float32(0.8), np.array(10, np.uint8)]
    data, feed = build("QLinearMatMul", inputs, out_types=(TP.UINT8,), constants=(1, 2, 3, 4, 5))
    sess = InferenceSession(data, validate=False)
    feed = dict(feed, x6=np.array(0.8, np.float32), x7=np.array(10, np.uint8))
    for y_scale, y_zp in ((0.8, 10), (0.3, 200), (0.8, 10)):
        # the same arrays each run, their values changed in place (a caller reusing its buffers)
        feed["x6"][...], feed["x7"][...] = y_scale, y_zp
        got = sess.run(None, feed)[0]
        with portable_kernels("QLinearMatMul"):
            want = onnxkit_outputs(data, feed)[0]
        identical(got, want)
        assert len(np.unique(got)) > 10
