"""Unit tests of the cpu kernels in nn_conv.py, nn_pool.py and nn_norm.py (linalg.py, resize.py,
attention.py and image.py: test_nn_linalg_resize.py).

The ONNX node vectors cover the current definitions at a few shapes; these tests cover what
they do not: old definitions (attribute forms, ``is_test`` / ``spatial`` / ``broadcast``,
Upsample, Resize-10), 1-D and 3-D windows, groups and channel multipliers, batches, narrow
and integer types, per-channel zero points, ``storage_order``, error paths.  Expected values
are hand-computed, plain numpy formulas, or ``onnx.reference.ReferenceEvaluator`` used as an
oracle (tests only).
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402

from nn_cases import close, naive_conv, oracle, randn, run  # noqa: E402
import nn_cases  # noqa: E402


# ============================================================================ Conv

@pytest.mark.parametrize("opset", [1, 11, 22])
@pytest.mark.parametrize("case", [
    dict(c=4, m=6, k=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1), dil=(1, 1), group=1),
    dict(c=4, m=6, k=(3, 2), strides=(2, 1), pads=(2, 0, 1, 3), dil=(2, 2), group=2),
    dict(c=6, m=6, k=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1), dil=(1, 1), group=6),      # depthwise
    dict(c=3, m=6, k=(3, 3), strides=(2, 2), pads=(1, 0, 0, 1), dil=(1, 2), group=3),      # multiplier 2, strided
    dict(c=3, m=6, k=(3, 3), strides=(1, 1), pads=(0, 2, 1, 0), dil=(2, 1), group=3),      # multiplier 2, flat path
    dict(c=4, m=5, k=(1, 1), strides=(2, 3), pads=(0, 0, 0, 0), dil=(1, 1), group=1),      # 1x1 strided
])
def test_conv_2d_matches_the_definition(opset, case):
    x = randn(2, case["c"], 7, 8)
    w = randn(case["m"], case["c"] // case["group"], *case["k"])
    b = randn(case["m"])
    attrs = dict(kernel_shape=list(case["k"]), strides=list(case["strides"]), pads=list(case["pads"]),
                 dilations=list(case["dil"]), group=case["group"])
    got = run("Conv", opset, [x, w, b], attrs)
    want = naive_conv(x, w, case["strides"], case["pads"], case["dil"], case["group"]) + b.reshape(1, -1, 1, 1)
    assert got.dtype == np.float32
    close(got, want)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad_splits_odd_padding(auto_pad):
    x = randn(1, 2, 6, 7)
    w = randn(3, 2, 2, 4)
    got = run("Conv", 11, [x, w], {"auto_pad": auto_pad, "strides": [2, 1]})
    # total pads: H (3-1)*2+2-6 = 0, W (7-1)*1+4-7 = 3 -> odd: UPPER puts 2 at the end, LOWER at the start
    pads = {"SAME_UPPER": (0, 1, 0, 2), "SAME_LOWER": (0, 2, 0, 1), "VALID": (0, 0, 0, 0)}[auto_pad]
    want = naive_conv(x, w, (2, 1), pads, (1, 1), 1)
    close(got, want)
    assert got.shape == ((1, 3, 3, 7) if auto_pad != "VALID" else (1, 3, 3, 4))


def test_conv_1d_and_3d_against_reference():
    x1, w1 = randn(2, 4, 11), randn(6, 2, 3)
    attrs1 = {"pads": [2, 1], "strides": [2], "dilations": [2], "group": 2}
    close(run("Conv", 11, [x1, w1], attrs1), oracle("Conv", 11, [x1, w1], attrs1))
    x3, w3 = randn(1, 2, 5, 6, 4), randn(3, 2, 2, 3, 2)
    attrs3 = {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]}
    close(run("Conv", 11, [x3, w3], attrs3), oracle("Conv", 11, [x3, w3], attrs3))
    x4, w4 = randn(1, 3, 4, 5, 6), randn(3, 1, 3, 3, 3)                            # 3-D depthwise, flat path
    attrs4 = {"pads": [1] * 6, "group": 3}
    close(run("Conv", 11, [x4, w4], attrs4), oracle("Conv", 11, [x4, w4], attrs4))


def test_conv_keeps_narrow_and_double_types():
    x, w = randn(1, 2, 5, 5), randn(3, 2, 3, 3)
    want = naive_conv(x, w, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    y16 = run("Conv", 11, [x.astype(np.float16), w.astype(np.float16)])
    assert y16.dtype == np.float16
    close(y16, want, rtol=1e-2, atol=2e-2)
    y64 = run("Conv", 11, [x.astype(np.float64), w.astype(np.float64)])
    assert y64.dtype == np.float64
    close(y64, want, rtol=1e-10, atol=1e-10)
    ybf = run("Conv", 22, [x.astype(ml_dtypes.bfloat16), w.astype(ml_dtypes.bfloat16)])
    assert ybf.dtype == ml_dtypes.bfloat16
    close(ybf.astype(np.float32), want, rtol=5e-2, atol=1e-1)


def test_conv_rejects_mismatched_groups():
    with pytest.raises(OnnxkitError, match="group"):
        run("Conv", 11, [randn(1, 4, 5, 5), randn(2, 3, 3, 3)], {"group": 2})


def test_conv_integer_per_channel_weight_zero_point_int8():
    x = nn_cases.RNG.integers(-128, 127, (1, 2, 4, 4)).astype(np.int8)
    w = nn_cases.RNG.integers(-128, 127, (3, 2, 2, 2)).astype(np.int8)
    xz, wz = np.array(-3, np.int8), np.array([1, -2, 5], np.int8)
    got = run("ConvInteger", 10, [x, w, xz, wz], {"pads": [1, 0, 0, 1]}, out_elem=TensorProto.INT32)
    want = naive_conv(x.astype(np.int64) + 3, w.astype(np.int64) - wz.reshape(3, 1, 1, 1), (1, 1), (1, 0, 0, 1),
                      (1, 1), 1)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int64))


# ============================================================================ ConvTranspose

def naive_conv_transpose_2d(x, w, strides, dil, out_pad, begin, end):
    """Definition: scatter x[c, i, j] * w[c, o] to (i*s + k*d, j*s + l*d), then drop ``begin`` / ``end``
    (a negative pad adds zeros)."""
    n, c, h, wd = x.shape
    _, m, kh, kw = w.shape
    full = np.zeros((n, m, (h - 1) * strides[0] + (kh - 1) * dil[0] + 1 + out_pad[0],
                     (wd - 1) * strides[1] + (kw - 1) * dil[1] + 1 + out_pad[1]))
    for i, j, k, l in itertools.product(range(h), range(wd), range(kh), range(kw)):
        full[:, :, i * strides[0] + k * dil[0], j * strides[1] + l * dil[1]] += \
            np.einsum("nc,cm->nm", x[:, :, i, j], w[:, :, k, l])
    full = np.pad(full, ((0, 0), (0, 0), (max(0, -begin[0]), max(0, -end[0])), (max(0, -begin[1]), max(0, -end[1]))))
    b0, b1 = max(0, begin[0]), max(0, begin[1])
    return full[:, :, b0:full.shape[2] - max(0, end[0]), b1:full.shape[3] - max(0, end[1])]


@pytest.mark.parametrize("attrs, begin, end", [
    ({"strides": [2, 3], "output_padding": [1, 2], "pads": [1, 0, 0, 1], "dilations": [1, 2]}, (1, 0), (0, 1)),
    ({"strides": [2, 2], "auto_pad": "SAME_LOWER"}, (1, 1), (0, 0)),         # total 11 - 10 = 1, 13 - 12 = 1
    ({"strides": [2, 2], "auto_pad": "SAME_UPPER"}, (0, 0), (1, 1)),
    ({"strides": [2, 2], "output_shape": [15, 18]}, (-2, -2), (-2, -3)),     # totals -4, -5: zeros around
    ({"strides": [3, 1], "output_shape": [1, 2, 17, 9], "output_padding": [1, 0]}, (0, 0), (-1, -1)),
])
def test_conv_transpose_geometry(attrs, begin, end):
    x, w = randn(2, 3, 5, 6), randn(3, 2, 3, 3)
    got = run("ConvTranspose", 11, [x, w], attrs)
    want = naive_conv_transpose_2d(x, w, attrs["strides"], attrs.get("dilations", [1, 1]),
                                   attrs.get("output_padding", [0, 0]), begin, end)
    close(got, want)


def test_conv_transpose_groups_bias_1d_and_opset1():
    x, w, b = randn(2, 4, 5), randn(4, 3, 3), randn(6)
    attrs = {"group": 2, "strides": [2], "pads": [1, 2]}
    got = run("ConvTranspose", 1, [x, w, b], attrs)
    # definition: scatter x[c, i] * w[c, o, k] to output position i*s + k - pad_begin
    full = np.zeros((2, 6, (5 - 1) * 2 + 3))
    for n, c, i, o, k in itertools.product(range(2), range(4), range(5), range(3), range(3)):
        full[n, (c // 2) * 3 + o, i * 2 + k] += x[n, c, i] * w[c, o, k]
    want = full[:, :, 1:full.shape[2] - 2] + b.reshape(1, -1, 1)
    close(got, want)


# ============================================================================ DeformConv / Col2Im

def test_deform_conv_zero_offsets_is_conv_and_mask_scales():
    x, w = randn(2, 4, 6, 5), randn(6, 2, 3, 3)
    attrs = {"strides": [2, 1], "pads": [1, 1, 0, 1], "dilations": [1, 2], "group": 2}
    oh, ow = (6 + 1 + 0 - 3) // 2 + 1, (5 + 2 - 5) // 1 + 1
    off = np.zeros((2, 2 * 9, oh, ow), np.float32)
    got = run("DeformConv", 19, [x, w, off], attrs)
    close(got, naive_conv(x, w, (2, 1), (1, 1, 0, 1), (1, 2), 2))
    mask = np.full((2, 9, oh, ow), 0.5, np.float32)
    got = run("DeformConv", 22, [x, w, off, None, mask], attrs)
    close(got, 0.5 * naive_conv(x, w, (2, 1), (1, 1, 0, 1), (1, 2), 2))


def test_deform_conv_half_pixel_offset_interpolates_and_zero_outside():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    w = np.ones((1, 1, 1, 1), np.float32)
    off = np.zeros((1, 2, 4, 4), np.float32)
    off[0, 1] = 0.5                                     # shift right by half a pixel
    got = run("DeformConv", 19, [x, w, off])
    want = x.copy()
    want[..., :3] = (x[..., :3] + x[..., 1:]) / 2
    want[..., 3] = x[..., 3] / 2                         # the right neighbour is outside: zero
    close(got, want)


def test_col2im_inverts_im2col_sums():
    # 1 channel, 3x3 image, 2x2 blocks, stride 1: every pixel is summed once per block covering it
    cols = np.ones((1, 4, 4), np.float32)
    got = run("Col2Im", 18, [cols, np.array([3, 3], np.int64), np.array([2, 2], np.int64)])
    np.testing.assert_array_equal(got[0, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])


# ============================================================================ pools

def test_maxpool_indices_row_and_column_major():
    x = randn(2, 3, 5, 4)
    for order in (0, 1):
        y, idx = run("MaxPool", 8, [x], {"kernel_shape": [2, 2], "strides": [2, 1], "storage_order": order}, n_out=2,
                     out_elem=[TensorProto.FLOAT, TensorProto.INT64])
        assert idx.dtype == np.int64 and y.shape == (2, 3, 2, 3)
        for n, c, i, j in itertools.product(range(2), range(3), range(2), range(3)):
            win = x[n, c, 2 * i:2 * i + 2, j:j + 2]
            h, v = np.unravel_index(np.argmax(win), win.shape)
            h, v = 2 * i + h, j + v
            assert y[n, c, i, j] == win.max()
            spatial = h * 4 + v if order == 0 else v * 5 + h
            assert idx[n, c, i, j] == (n * 3 + c) * 20 + spatial


def test_maxpool_indices_with_pads_and_dilation_against_reference():
    x = randn(1, 2, 7, 6)
    attrs = {"kernel_shape": [3, 2], "pads": [1, 1, 2, 0], "dilations": [2, 1], "strides": [2, 2], "ceil_mode": 1}
    y, i = run("MaxPool", 12, [x], attrs, n_out=2, out_elem=[TensorProto.FLOAT, TensorProto.INT64])
    ry, ri = oracle("MaxPool", 12, [x], attrs, n_out=2, out_elem=[TensorProto.FLOAT, TensorProto.INT64])
    close(y, ry)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(x.reshape(-1)[i], y)


def test_maxpool_1_has_no_indices_and_int8_keeps_type():
    x = np.array([[[[-128, 5, -7], [3, -100, 127]]]], np.int8)
    y = run("MaxPool", 12, [x], {"kernel_shape": [2, 2], "pads": [0, 1, 0, 1]})
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, [[[[3, 5, 127, 127]]]])
    y1 = run("MaxPool", 1, [x.astype(np.float32)], {"kernel_shape": [1, 3]})
    np.testing.assert_array_equal(y1, [[[[5], [127]]]])


def test_maxpool_same_upper_uses_the_dilated_window():
    x = np.arange(7, dtype=np.float32).reshape(1, 1, 7)
    y = run("MaxPool", 12, [x], {"kernel_shape": [3], "dilations": [2], "auto_pad": "SAME_UPPER"})
    # effective window 5, total pad 4 -> 2 each side; output i covers i-2, i, i+2
    np.testing.assert_array_equal(y[0, 0], [2, 3, 4, 5, 6, 5, 6])


def test_averagepool_versions_count_include_pad():
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    attrs = {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]}
    y1 = run("AveragePool", 1, [x], attrs)          # version 1: pads are never counted
    np.testing.assert_allclose(y1[0, 0], [[1, 1.5, 2.5], [2.5, 3, 4], [5.5, 6, 7]])
    y7 = run("AveragePool", 7, [x], dict(attrs, count_include_pad=1))
    np.testing.assert_allclose(y7[0, 0], [[0.25, 0.75, 1.25], [1.25, 3, 4], [2.75, 6, 7]])


def test_averagepool_ceil_mode_divisor_excludes_the_overhang():
    x = np.ones((1, 1, 5, 5), np.float32)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
             "count_include_pad": 1}
    got = run("AveragePool", 10, [x], attrs)
    close(got, oracle("AveragePool", 10, [x], attrs))
    assert got.shape == (1, 1, 3, 3)


def test_lppool_float_p_of_version_1_and_int_p_later():
    x = np.array([[[[3.0, -4.0, 12.0]]]], np.float32)
    y1 = run("LpPool", 1, [x], {"kernel_shape": [1, 2], "p": 2.0})
    np.testing.assert_allclose(y1[0, 0, 0], [5.0, np.hypot(4, 12)], rtol=1e-6)
    y2 = run("LpPool", 2, [x], {"kernel_shape": [1, 3], "p": 1})
    np.testing.assert_allclose(y2[0, 0, 0], [19.0])
    g1 = run("GlobalLpPool", 1, [x], {"p": 3.0})
    np.testing.assert_allclose(g1.reshape(-1), [(27 + 64 + 1728) ** (1 / 3)], rtol=1e-6)
    g2 = run("GlobalLpPool", 2, [x])
    np.testing.assert_allclose(g2.reshape(-1), [13.0], rtol=1e-6)


def test_global_pools_3d_and_float16():
    x = randn(2, 3, 4, 5, 6).astype(np.float16)
    ga = run("GlobalAveragePool", 1, [x])
    gm = run("GlobalMaxPool", 22, [x])
    assert ga.dtype == gm.dtype == np.float16 and ga.shape == (2, 3, 1, 1, 1)
    close(ga, x.astype(np.float32).mean(axis=(2, 3, 4), keepdims=True), rtol=1e-2, atol=1e-3)
    np.testing.assert_array_equal(gm, x.max(axis=(2, 3, 4), keepdims=True))


def test_maxunpool_round_trip_and_output_shape():
    x = randn(1, 2, 4, 6)
    y, idx = run("MaxPool", 12, [x], {"kernel_shape": [2, 2], "strides": [2, 2]}, n_out=2,
                 out_elem=[TensorProto.FLOAT, TensorProto.INT64])
    up = run("MaxUnpool", 11, [y, idx], {"kernel_shape": [2, 2], "strides": [2, 2]})
    assert up.shape == x.shape
    np.testing.assert_array_equal(up.reshape(-1)[idx.reshape(-1)], y.reshape(-1))
    assert np.count_nonzero(up) == y.size
    big = run("MaxUnpool", 22, [y, idx, np.array([1, 2, 5, 7], np.int64)], {"kernel_shape": [2, 2], "strides": [2, 2]})
    assert big.shape == (1, 2, 5, 7)
    np.testing.assert_array_equal(big[:, :, :4, :6], up)


def test_max_roi_pool_hand_values():
    x = np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)
    rois = np.array([[0, 1, 1, 4, 3]], np.float32)     # x1=1 y1=1 x2=4 y2=3: rows 1..3, cols 1..4
    y = run("MaxRoiPool", 1, [x, rois], {"pooled_shape": [1, 2]})
    # width 4 in 2 bins: cols 1-2 and 3-4; max over rows 1..3
    np.testing.assert_array_equal(y[0, 0], [[20, 22]])
    y = run("MaxRoiPool", 22, [x, rois * np.float32([1, 2, 2, 2, 2])], {"pooled_shape": [3, 1], "spatial_scale": 0.5})
    np.testing.assert_array_equal(y[0, 0, :, 0], [10, 16, 22])


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_10_is_output_half_pixel(mode):
    x = randn(2, 3, 8, 9)
    rois = np.array([[0.5, 1, 6, 5.5], [2, 2.5, 3, 7]], np.float32)
    bi = np.array([1, 0], np.int64)
    attrs = {"output_height": 3, "output_width": 2, "mode": mode, "sampling_ratio": 2, "spatial_scale": 0.9}
    got10 = run("RoiAlign", 10, [x, rois, bi], attrs)
    ref = oracle("RoiAlign", 16, [x, rois, bi], dict(attrs, coordinate_transformation_mode="output_half_pixel"))
    close(got10, ref)
    got16 = run("RoiAlign", 16, [x, rois, bi], attrs)
    close(got16, oracle("RoiAlign", 16, [x, rois, bi], attrs))
    assert not np.allclose(got10, got16)


# ============================================================================ normalization

def test_batchnorm_1_and_6_test_mode_and_spatial_0():
    x = randn(2, 3, 4)
    s, b, m, v = randn(3), randn(3), randn(3), np.abs(randn(3)) + 0.5
    want = (x - m.reshape(1, 3, 1)) / np.sqrt(v.reshape(1, 3, 1) + 1e-5) * s.reshape(1, 3, 1) + b.reshape(1, 3, 1)
    y1 = run("BatchNormalization", 1, [x, s, b, m, v], {"is_test": 1, "consumed_inputs": [0, 0, 0, 1, 1]})
    close(y1, want)
    y6 = run("BatchNormalization", 6, [x, s, b, m, v], {"is_test": 1})
    close(y6, want)
    # spatial = 0: one statistic per activation (C x L)
    s2, b2, m2, v2 = randn(3, 4), randn(3, 4), randn(3, 4), np.abs(randn(3, 4)) + 0.5
    y = run("BatchNormalization", 7, [x, s2, b2, m2, v2], {"spatial": 0})
    close(y, (x - m2) / np.sqrt(v2 + 1e-5) * s2 + b2)


def test_batchnorm_7_training_outputs():
    x = randn(4, 2, 3)
    s, b, m, v = randn(2), randn(2), randn(2), np.abs(randn(2))
    y, rm, rv, sm, sv = run("BatchNormalization", 7, [x, s, b, m, v], {"momentum": 0.7}, n_out=5,
                            out_rank=[3, 1, 1, 1, 1])
    bm, bv = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    close(sm, bm)
    close(sv, bv)
    close(rm, 0.7 * m + 0.3 * bm)
    close(rv, 0.7 * v + 0.3 * bv)
    close(y, (x - bm.reshape(1, 2, 1)) / np.sqrt(bv.reshape(1, 2, 1) + 1e-5) * s.reshape(1, 2, 1) + b.reshape(1, 2, 1))


def test_batchnorm_14_inference_ignores_momentum_and_float16():
    x = randn(2, 3, 2, 2).astype(np.float16)
    s, b, m, v = (a.astype(np.float16) for a in (randn(3), randn(3), randn(3), np.abs(randn(3)) + 1))
    y = run("BatchNormalization", 14, [x, s, b, m, v], {"momentum": 0.1})
    assert y.dtype == np.float16
    f = [a.astype(np.float32) for a in (x, s, b, m, v)]
    want = (f[0] - f[3].reshape(1, 3, 1, 1)) / np.sqrt(f[4].reshape(1, 3, 1, 1) + 1e-5) * f[1].reshape(1, 3, 1, 1) \
        + f[2].reshape(1, 3, 1, 1)
    close(y, want, rtol=1e-2, atol=1e-2)


def test_instance_norm_1_with_consumed_inputs():
    x, s, b = randn(2, 3, 5), randn(3), randn(3)
    y = run("InstanceNormalization", 1, [x, s, b], {"consumed_inputs": [0, 0, 0], "epsilon": 1e-3})
    mu, var = x.mean(axis=2, keepdims=True), x.var(axis=2, keepdims=True)
    close(y, (x - mu) / np.sqrt(var + 1e-3) * s.reshape(1, 3, 1) + b.reshape(1, 3, 1))


def test_group_norm_18_per_group_and_21_per_channel():
    x = randn(2, 4, 3)
    xg = x.reshape(2, 2, 6)
    norm = ((xg - xg.mean(axis=2, keepdims=True)) / np.sqrt(xg.var(axis=2, keepdims=True) + 1e-5)).reshape(2, 4, 3)
    sg, bg = randn(2), randn(2)
    y18 = run("GroupNormalization", 18, [x, sg, bg], {"num_groups": 2})
    close(y18, norm * np.repeat(sg, 2).reshape(1, 4, 1) + np.repeat(bg, 2).reshape(1, 4, 1))
    sc, bc = randn(4), randn(4)
    y21 = run("GroupNormalization", 21, [x, sc, bc], {"num_groups": 2})
    close(y21, norm * sc.reshape(1, 4, 1) + bc.reshape(1, 4, 1))
    with pytest.raises(OnnxkitError, match="values"):
        run("GroupNormalization", 18, [x, sc, bc], {"num_groups": 2})


def test_layer_norm_outputs_and_rms_norm():
    x, s, b = randn(2, 3, 4), randn(3, 4), randn(3, 4)
    y, mean, inv = run("LayerNormalization", 17, [x, s, b], {"axis": 1}, n_out=3)
    mu = x.mean(axis=(1, 2), keepdims=True)
    sd = np.sqrt(x.var(axis=(1, 2), keepdims=True) + 1e-5)
    close(y, (x - mu) / sd * s + b)
    close(mean, mu)
    close(inv, 1 / sd)
    r = run("RMSNormalization", 23, [x, s[0]], {"axis": -1, "epsilon": 1e-3})
    close(r, x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-3) * s[0])


def test_lp_normalization_zero_vector_and_lrn_definition():
    x = np.array([[3.0, -4.0], [0.0, 0.0]], np.float32)
    np.testing.assert_allclose(run("LpNormalization", 1, [x], {"p": 1}), [[3 / 7, -4 / 7], [0, 0]], rtol=1e-6)
    np.testing.assert_allclose(run("LpNormalization", 22, [x], {"p": 2, "axis": 0}), [[1, -1], [0, 0]])
    x = randn(1, 5, 2, 2)
    y = run("LRN", 1, [x], {"size": 4, "alpha": 0.3, "beta": 0.6, "bias": 1.5})
    want = np.empty_like(x)
    for c in range(5):                                     # window [c - 1, c + 2]
        ssum = (x[:, max(0, c - 1):min(5, c + 3)] ** 2).sum(axis=1)
        want[:, c] = x[:, c] / (1.5 + 0.3 / 4 * ssum) ** 0.6
    close(y, want)


def test_mvn_9_default_axes():
    x = randn(2, 3, 4, 5)
    y = run("MeanVarianceNormalization", 9, [x])
    mu = x.mean(axis=(0, 2, 3), keepdims=True)
    close(y, (x - mu) / (x.std(axis=(0, 2, 3), keepdims=True) + 1e-9), atol=1e-4)


# ============================================================================ Dropout

def test_dropout_inference_forms_and_mask_types():
    x = randn(3, 4)
    y, mask = run("Dropout", 7, [x], {"ratio": 0.4}, n_out=2)
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == np.float32 and (mask == 1).all()       # versions 1-7: mask of type T
    y, mask = run("Dropout", 10, [x], n_out=2, out_elem=[TensorProto.FLOAT, TensorProto.BOOL])
    assert mask.dtype == np.bool_ and mask.all()
    y = run("Dropout", 6, [x], {"is_test": 1})
    np.testing.assert_array_equal(y, x)


def test_dropout_training_seed_ratio_and_scaling():
    x = np.ones((50, 40), np.float32)
    args = [x, np.array(0.25, np.float32), np.array(True)]
    y, mask = run("Dropout", 13, args, {"seed": 7}, n_out=2, out_elem=[TensorProto.FLOAT, TensorProto.BOOL])
    assert mask.dtype == np.bool_
    np.testing.assert_allclose(y, mask / 0.75, rtol=1e-6)
    assert 0.6 < mask.mean() < 0.9
    y2, mask2 = run("Dropout", 13, args, {"seed": 7}, n_out=2, out_elem=[TensorProto.FLOAT, TensorProto.BOOL])
    np.testing.assert_array_equal(mask, mask2)                  # the seed fixes the draw
    np.testing.assert_array_equal(run("Dropout", 22, [x, np.array(0.0, np.float32), np.array(True)]), x)
    y6, m6 = run("Dropout", 6, [x], {"is_test": 0, "ratio": 0.5}, n_out=2)
    assert m6.dtype == np.float32 and set(np.unique(m6)) <= {0.0, 1.0}
    np.testing.assert_allclose(y6, m6 * 2)
