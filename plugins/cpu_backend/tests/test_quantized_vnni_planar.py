"""The planar VNNI convolution (onnxkit_cpu/compiled/quantized_vnni.py ``conv_planar``: the
weights the u8 rows operand, the input's im2col columns the s8 one, the sums written
channel-first) against an int64 convolution written in test_quantized_vnni.py: every operand
type pair, x zero points at the types' ends, w zero points one or per channel at the ends,
pads, strides (its two packers: stride 1's runs of padded planes, the general columns), dilations,
groups, 1-D; its fused requantization against the separate requantize pass; the choice of
orientation; and QLinearConv / ConvInteger sessions taking it against the same sessions without
VNNI (bit for bit), the portable kernels and onnxruntime (ConvInteger exactly, QLinearConv
within one step: onnxruntime requantizes in float32).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_quantized_vnni import IMPL, RNG, TYPES, Plan, int_conv, ints

from onnxkit_cpu.compiled import quantized_vnni as vnni

pytestmark = pytest.mark.skipif(IMPL is None, reason="the host has no AVX-512 VNNI (or compiled loops are off)")

CONVS = [
    # stride 1 (padded-plane runs): pads, uneven pads, dilation, groups, a 1x1
    ((2, 16, 12, 11), (24, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 6, 13, 10), (6, 3, 3, 2), (1, 1), (2, 0, 0, 3), (2, 3), 2),
    ((1, 20, 9, 9), (7, 20, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 3, 8, 40), (9, 3, 5, 5), (1, 1), (0, 2, 4, 1), (1, 1), 1),
    # other strides (the columns packer)
    ((1, 3, 17, 17), (16, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),
    ((1, 16, 10, 10), (24, 8, 3, 3), (2, 1), (0, 1, 2, 0), (2, 1), 2),
]


def _rows(w, w_zp, group):
    mg = w.shape[0] // group
    flat = vnni.conv_weights(w)
    zp = None if w_zp is None else w_zp.reshape(-1)
    return [vnni.PackedRows(IMPL, flat[g * mg:(g + 1) * mg],
                            None if zp is None else zp if zp.size == 1 else zp[g * mg:(g + 1) * mg])
            for g in range(group)]


@pytest.mark.parametrize("geometry", CONVS)
@pytest.mark.parametrize("x_type", TYPES)
@pytest.mark.parametrize("w_type", TYPES)
def test_planar_conv_is_the_exact_integer_convolution(geometry, x_type, w_type):
    xs, ws, strides, pads, dil, group = geometry
    x, w = ints(x_type, xs), ints(w_type, ws)
    info, winfo = np.iinfo(x_type), np.iinfo(w_type)
    plan = Plan(x, w, strides, pads, dil, group)
    for x_zp in (info.min, info.max, 3):
        for w_zp in (None, np.array(winfo.min, w_type), np.array(winfo.max, w_type), ints(w_type, (ws[0],))):
            got = vnni.conv_planar(IMPL, x, x_zp, _rows(w, w_zp, group), plan)
            wz = 0 if w_zp is None else (w_zp.astype(np.int64).reshape(-1, 1, 1, 1) if w_zp.size > 1
                                         else w_zp.astype(np.int64))
            want = int_conv(x.astype(np.int64) - x_zp, w.astype(np.int64) - wz, strides, pads, dil, group)
            assert got.dtype == np.float64 and np.array_equal(got, want)


def test_planar_conv_one_spatial_axis():
    x, w = ints(np.int8, (2, 8, 37)), ints(np.uint8, (16, 8, 5))
    plan = Plan(x, w, (1,), (2, 1), (1,), 1, nd=1)
    got = vnni.conv_planar(IMPL, x, -5, _rows(w, np.array(200, np.uint8), 1), plan)
    want = int_conv(x[:, :, None, :].astype(np.int64) + 5, w[:, :, None, :].astype(np.int64) - 200, (1, 1),
                    (0, 2, 0, 1), (1, 1), 1)[:, :, 0]
    assert np.array_equal(got, want)


@pytest.mark.parametrize("strides,kernel", [((1, 1), 3), ((2, 2), 3), ((1, 1), 1)])
def test_planar_requantized_equals_the_sums_requantized(strides, kernel):
    """The fused requantization (finish_planar) is the separate requantize pass's, bit for bit: a
    3x3 with padded columns (rows of ``pitch``), stride 2 (the columns packer), and a 1x1 (no
    padded column: each channel one run)."""
    from onnxkit_cpu.compiled import quantized as loops

    x, w = ints(np.uint8, (2, 16, 12, 12)), ints(np.int8, (20, 16, kernel, kernel))
    plan = Plan(x, w, strides, (kernel // 2,) * 4, (1, 1), 1)
    rows = _rows(w, None, 1)
    acc = vnni.conv_planar(IMPL, x, 128, rows, plan)
    bias = RNG.integers(-5000, 5000, 20).astype(np.float64)
    mult = np.float32(RNG.uniform(1e-4, 3e-3, 20) * (9 // kernel ** 2)).astype(np.float64)   # both ends met
    for zp, lo, hi, dtype in ((0.0, 0.0, 255.0, np.uint8), (255.0, 0.0, 255.0, np.uint8), (-128.0, -128.0, 127.0, np.int8)):
        want = np.empty(acc.shape, dtype)
        loops.requantize.get()(acc.reshape(2, 20, -1), bias, mult, zp, lo, hi, want.reshape(2, 20, -1))
        got = np.empty(acc.shape, dtype)
        vnni.conv_planar(IMPL, x, 128, rows, plan, (bias, mult, zp, lo, hi, got))
        assert np.array_equal(got, want)
        assert (got == lo).any() and (got == hi).any()


def test_orientation_choice():
    """Stride 1 with few unused positions and a product of at most PLANAR_MAX_K: planar; a stride
    of 2, a small output whose padded rows and last panel add too many, or a long product: the
    rows orientation."""
    def prefers(xs, ws, strides, pads):
        x, w = np.zeros(xs, np.uint8), np.zeros(ws, np.int8)
        return vnni.prefers_planar(IMPL, x, Plan(x, w, strides, pads, (1, 1), 1))

    assert prefers((1, 16, 56, 56), (96, 16, 1, 1), (1, 1), (0, 0, 0, 0))
    assert prefers((1, 64, 28, 28), (64, 64, 3, 3), (1, 1), (1, 1, 1, 1))
    assert not prefers((1, 64, 28, 28), (64, 64, 3, 3), (2, 2), (1, 1, 1, 1))
    assert not prefers((1, 160, 7, 7), (960, 160, 1, 1), (1, 1), (0, 0, 0, 0))
    assert not prefers((1, 64, 7, 7), (64, 64, 3, 3), (1, 1), (1, 1, 1, 1))
    assert not prefers((1, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1, 1, 1))     # a product past PLANAR_MAX_K


@pytest.mark.parametrize("x_type,w_type", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_session_takes_the_planar_product(monkeypatch, x_type, w_type, per_channel):
    pytest.importorskip("onnx")
    from onnx import TensorProto as TP
    from quantized_harness import identical, three_ways, within_one_step

    seen = []
    real = vnni.conv_planar

    def counted(*args, **kwargs):
        seen.append("planar")
        return real(*args, **kwargs)
    monkeypatch.setattr(vnni, "conv_planar", counted)
    m = 24
    x, w = ints(x_type, (1, 16, 16, 14)), ints(w_type, (m, 16, 3, 3))
    w_zp = ints(w_type, (m,)) if per_channel and w_type == np.uint8 else (
        np.zeros(m, w_type) if per_channel else np.array(128 if w_type == np.uint8 else 0, w_type))
    w_scale = np.float32(RNG.uniform(0.001, 0.01, m if per_channel else 1)).reshape(-1 if per_channel else ())
    inputs = [x, np.float32(0.02), np.array(np.iinfo(x_type).min + 7, x_type), w, w_scale, w_zp, np.float32(0.5),
              np.array(0 if x_type == np.int8 else 128, x_type), RNG.integers(-3000, 3000, m).astype(np.int32)]
    tp = TP.UINT8 if x_type == np.uint8 else TP.INT8
    fast, ref, theirs = three_ways("QLinearConv", inputs, {"pads": [1, 1, 1, 1]}, out_types=(tp,), constants=(3, 4, 5, 8))
    assert seen
    monkeypatch.setattr(vnni, "ENABLED", False)
    plain, _, _ = three_ways("QLinearConv", inputs, {"pads": [1, 1, 1, 1]}, out_types=(tp,), constants=(3, 4, 5, 8),
                             ort=False)
    identical(fast[0], plain[0])
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    assert len(np.unique(fast[0])) > 20


def test_conv_integer_session_takes_the_planar_product(monkeypatch):
    pytest.importorskip("onnx")
    from onnx import TensorProto as TP
    from quantized_harness import identical, three_ways

    seen = []
    real = vnni.conv_planar

    def counted(*args, **kwargs):
        seen.append("planar")
        return real(*args, **kwargs)
    monkeypatch.setattr(vnni, "conv_planar", counted)
    x, w = ints(np.uint8, (2, 12, 16, 16)), ints(np.uint8, (16, 12, 1, 1))
    inputs = [x, w, np.array(255, np.uint8), np.array(3, np.uint8)]
    fast, ref, theirs = three_ways("ConvInteger", inputs, {}, out_types=(TP.INT32,), constants=(1, 3))
    assert seen
    identical(fast[0], ref[0])
    identical(fast[0], theirs[0])
