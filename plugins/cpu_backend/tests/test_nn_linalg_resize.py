"""The cpu backend's linear algebra, Resize / Upsample, GridSample / AffineGrid, transformer and
image operators beyond the node vectors, against onnx's ReferenceEvaluator (the oracle, a
test-only import) or values written out by hand; the convolution, pool, normalization and
Dropout families: test_nn.py."""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from nn_cases import close, oracle, randn, run  # noqa: E402
import nn_cases  # noqa: E402


# ============================================================================ linalg

def test_gemm_1_broadcast_attribute():
    a, b = randn(2, 3), randn(3, 4)
    c = randn(4)
    with pytest.raises(OnnxkitError, match="broadcast"):
        run("Gemm", 1, [a, b, c])
    got = run("Gemm", 6, [a, b, c], {"broadcast": 1, "alpha": 2.0, "beta": 0.5})
    close(got, 2 * a @ b + 0.5 * c)
    full = randn(2, 4)
    close(run("Gemm", 1, [a, b, full]), a @ b + full)


def test_gemm_11_optional_c_transposes_and_integers():
    a, b = randn(3, 2), randn(4, 3)
    close(run("Gemm", 11, [a, b], {"transA": 1, "transB": 1}), a.T @ b.T)
    ai = np.arange(6, dtype=np.int32).reshape(2, 3)
    bi = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = run("Gemm", 13, [ai, bi, np.int32([1, 2, 3, 4])], {"beta": 2.0})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ai @ bi + 2 * np.int32([1, 2, 3, 4]))


def test_matmul_vectors_broadcast_and_types():
    a, b = randn(4), randn(2, 4, 3)
    close(run("MatMul", 13, [a, b], out_rank=2), np.matmul(a, b))
    h = run("MatMul", 1, [randn(2, 3).astype(np.float16), randn(3, 2).astype(np.float16)])
    assert h.dtype == np.float16
    i = run("MatMul", 9, [np.int64([[1, 2], [3, 4]]), np.int64([[5], [6]])])
    np.testing.assert_array_equal(i, [[17], [39]])
    assert i.dtype == np.int64


def test_matmul_integer_row_and_column_zero_points():
    a = nn_cases.RNG.integers(0, 255, (2, 3, 4)).astype(np.uint8)
    b = nn_cases.RNG.integers(-128, 127, (4, 5)).astype(np.int8)
    az, bz = np.array([3, 250, 7], np.uint8), np.array([1, -1, 0, 5, -128], np.int8)
    got = run("MatMulInteger", 10, [a, b, az, bz], out_elem=TensorProto.INT32)
    want = np.matmul(a.astype(np.int64) - az.reshape(3, 1), b.astype(np.int64) - bz)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_einsum_implicit_order_case_and_bfloat16():
    a, b = randn(2, 3), randn(3, 4)
    # implicit output: labels appearing once, sorted (upper case first): 'Ab,bC' -> 'AC'
    close(run("Einsum", 12, [a, b], {"equation": "Ab, bC"}), a @ b)
    close(run("Einsum", 12, [a, b], {"equation": "ij,jk->ki"}), (a @ b).T)
    x = randn(2, 3, 3)
    close(run("Einsum", 12, [x], {"equation": "...ii->...i"}, out_rank=2), np.einsum("...ii->...i", x))
    bf = run("Einsum", 28, [a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)], {"equation": "ij,jk"})
    assert bf.dtype == ml_dtypes.bfloat16
    close(bf.astype(np.float32), a @ b, rtol=5e-2, atol=5e-2)


def test_det_batch():
    x = randn(3, 2, 4, 4)
    close(run("Det", 11, [x], out_rank=2), np.linalg.det(x), rtol=1e-4, atol=1e-4)


# ============================================================================ Resize / Upsample

def test_upsample_forms():
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    y1 = run("Upsample", 1, [x], {"height_scale": 2.0, "width_scale": 1.0, "mode": "nearest"})
    np.testing.assert_array_equal(y1[0, 0], [[0, 1, 2], [0, 1, 2], [3, 4, 5], [3, 4, 5]])
    y7 = run("Upsample", 7, [x], {"scales": [1.0, 1.0, 1.0, 2.0], "mode": "linear"})
    # asymmetric: source x = out / 2, last column clamps to the edge
    np.testing.assert_allclose(y7[0, 0, 0], [0, 0.5, 1, 1.5, 2, 2])
    y9 = run("Upsample", 9, [x, np.float32([1, 1, 2, 2])])
    assert y9.shape == (1, 1, 4, 6) and y9[0, 0, 3, 5] == 5
    y10 = run("Upsample", 10, [x, np.float32([1, 1, 1.5, 1])], {"mode": "linear"})
    np.testing.assert_allclose(y10[0, 0, :, 0], [0, 2, 3])


def test_resize_10_nearest_floors_up_and_ceils_down():
    x = np.arange(10, dtype=np.float32).reshape(1, 1, 1, 10)
    down = run("Resize", 10, [x, np.float32([1, 1, 1, 0.4])])
    # out = 4; source = i / 0.4 = 0, 2.5, 5, 7.5 -> ceil when shrinking -> 0, 3, 5, 8
    np.testing.assert_array_equal(down[0, 0, 0], [0, 3, 5, 8])
    up = run("Resize", 10, [x[..., :3], np.float32([1, 1, 1, 1.5])])
    np.testing.assert_array_equal(up[0, 0, 0], [0, 0, 1, 2])     # floor(0, .67, 1.33, 2) when growing


@pytest.mark.parametrize("attrs", [
    {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
    {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1},
    {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "ceil"},
    {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
])
def test_resize_11_sizes_with_empty_roi_and_scales(attrs):
    x = randn(1, 2, 4, 5)
    empty = np.zeros((0,), np.float32)
    sizes = np.int64([1, 2, 7, 3])
    got = run("Resize", 11, [x, empty, empty, sizes], attrs)
    assert got.shape == (1, 2, 7, 3)
    close(got, oracle("Resize", 13, [x, None, None, sizes], attrs))


def test_resize_11_tf_half_pixel_for_nn_and_pytorch_single_output():
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4)
    empty = np.zeros((0,), np.float32)
    y = run("Resize", 11, [x, empty, np.float32([1, 1, 1, 1.5])],
            {"coordinate_transformation_mode": "tf_half_pixel_for_nn"})
    # source (i + .5) / 1.5 = .33, 1, 1.67, 2.33, 3, 3.67 -> round_prefer_floor, clamped to 3
    np.testing.assert_array_equal(y[0, 0, 0], [0, 1, 2, 2, 3, 3])
    with pytest.raises(OnnxkitError, match="not defined"):
        run("Resize", 13, [x, None, np.float32([1, 1, 1, 1.5])], {"coordinate_transformation_mode": "tf_half_pixel_for_nn"})
    # pytorch_half_pixel: a length-1 output samples source 0 (cubic would weigh -1..2 around -0.5 otherwise)
    one = run("Resize", 11, [x, empty, empty, np.int64([1, 1, 1, 1])],
              {"mode": "cubic", "coordinate_transformation_mode": "pytorch_half_pixel"})
    np.testing.assert_allclose(one.reshape(-1), [0.0], atol=1e-6)


def test_resize_13_uint8_rounds_and_saturates():
    x = np.array([[[[0, 255], [255, 0]]]], np.uint8)
    y = run("Resize", 13, [x, None, np.float32([1, 1, 1, 2])], {"mode": "linear"})
    assert y.dtype == np.uint8
    # half_pixel source x = (i + .5) / 2 - .5 = -.25, .25, .75, 1.25 -> 0, 63.75, 191.25, 255
    np.testing.assert_array_equal(y[0, 0, 0], [0, 64, 191, 255])


def test_resize_18_axes_keep_aspect_ratio_and_antialias():
    x = randn(1, 3, 6, 8)
    attrs = {"axes": [3, 2], "keep_aspect_ratio_policy": "not_larger", "mode": "linear"}
    got = run("Resize", 18, [x, None, None, np.int64([4, 6])], attrs)
    assert got.shape == (1, 3, 3, 4)                     # scale min(4/8, 6/6) = 0.5
    close(got, oracle("Resize", 18, [x, None, None, np.int64([4, 6])], attrs))
    aa = {"mode": "cubic", "antialias": 1}
    close(run("Resize", 18, [x, None, np.float32([1, 1, 0.5, 0.4])], aa),
          oracle("Resize", 18, [x, None, np.float32([1, 1, 0.5, 0.4])], aa))


def test_resize_19_half_pixel_symmetric():
    x = randn(1, 1, 5, 7)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"}
    sc = np.float32([1, 1, 0.7, 1.3])
    close(run("Resize", 19, [x, None, sc], attrs), oracle("Resize", 19, [x, None, sc], attrs))


def test_resize_rejects_scales_and_sizes_together():
    x = randn(1, 1, 2, 2)
    with pytest.raises(OnnxkitError, match="only one"):
        run("Resize", 13, [x, None, np.float32([1, 1, 2, 2]), np.int64([1, 1, 4, 4])])


# ============================================================================ GridSample / AffineGrid

def test_gridsample_16_names_and_3d_refused():
    x = randn(1, 2, 4, 5)
    g = (nn_cases.RNG.random((1, 3, 2, 2)) * 2.2 - 1.1).astype(np.float32)
    for old, new in (("bilinear", "linear"), ("bicubic", "cubic")):
        close(run("GridSample", 16, [x, g], {"mode": old, "padding_mode": "reflection"}),
              oracle("GridSample", 20, [x, g], {"mode": new, "padding_mode": "reflection"}))
    with pytest.raises(OnnxkitError, match="4-D"):
        run("GridSample", 16, [randn(1, 1, 2, 2, 2), np.zeros((1, 1, 1, 1, 3), np.float32)])


def test_affine_grid_identity_maps_pixel_centres():
    theta = np.float32([[[1, 0, 0], [0, 1, 0]]])
    g = run("AffineGrid", 20, [theta, np.int64([1, 1, 2, 4])], out_rank=4)
    np.testing.assert_allclose(g[0, :, :, 0], [[-0.75, -0.25, 0.25, 0.75]] * 2)
    np.testing.assert_allclose(g[0, :, 0, 1], [-0.5, 0.5])


# ============================================================================ transformer ops

def test_attention_mode0_is_before_softcap_and_4d_heads_refused_in_25():
    q, k, v = randn(1, 2, 3, 4), randn(1, 2, 5, 4), randn(1, 2, 5, 4)
    _, qk = run("Attention", 23, [q, k, v], {"softcap": 1.5, "qk_matmul_output_mode": 0}, n_out=4)[::3]
    np.testing.assert_allclose(qk, q @ k.transpose(0, 1, 3, 2) / 2, rtol=1e-5, atol=1e-6)
    with pytest.raises(OnnxkitError, match="4-D"):
        run("Attention", 25, [q, k, v], {"q_num_heads": 2, "kv_num_heads": 2})


def test_attention_gqa_causal_against_definition():
    q, k, v = randn(2, 4, 3, 8), randn(2, 2, 3, 8), randn(2, 2, 3, 6)
    y = run("Attention", 23, [q, k, v], {"is_causal": 1})
    kr, vr = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    s = q @ kr.transpose(0, 1, 3, 2) / np.sqrt(8) + np.triu(np.full((3, 3), -np.inf), 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    close(y, (p / p.sum(-1, keepdims=True)) @ vr, rtol=1e-4, atol=1e-5)


def test_tensor_scatter_linear_overflow_is_an_error():
    cache, upd = np.zeros((2, 5, 3), np.float32), np.ones((2, 2, 3), np.float32)
    out = run("TensorScatter", 24, [cache, upd, np.int64([3, 0])], {"axis": 1})
    assert out[0, 3:].all() and out[1, :2].all() and out.sum() == 12
    with pytest.raises(OnnxkitError, match="exceeds"):
        run("TensorScatter", 24, [cache, upd, np.int64([4, 0])], {"axis": 1})
    circ = run("TensorScatter", 24, [cache, upd, np.int64([4, 0])], {"axis": 1, "mode": "circular"})
    assert circ[0, 4].all() and circ[0, 0].all()


def test_swiglu_and_rotary_partial():
    a, b = randn(3, 4), randn(3, 4)
    close(run("SwiGLU", 28, [a, b], {"alpha": 1.7}), a / (1 + np.exp(-1.7 * a)) * b)
    x = randn(1, 2, 3, 6)                                      # (B, H, S, D), rotate the first 4
    cos, sin = randn(3, 2), randn(3, 2)
    y = run("RotaryEmbedding", 23, [x, cos, sin, np.int64([[2, 0, 1]])], {"rotary_embedding_dim": 4})
    c, s = cos[[2, 0, 1]][None, None], sin[[2, 0, 1]][None, None]
    x1, x2 = x[..., :2], x[..., 2:4]
    close(y[..., :2], c * x1 - s * x2)
    close(y[..., 2:4], s * x1 + c * x2)
    np.testing.assert_array_equal(y[..., 4:], x[..., 4:])


# ============================================================================ image

def _png(arr):
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return np.frombuffer(buf.getvalue(), np.uint8)


def test_image_decoder_formats_and_invalid_stream():
    img = nn_cases.RNG.integers(0, 255, (3, 4, 3)).astype(np.uint8)
    data = _png(img)
    np.testing.assert_array_equal(run("ImageDecoder", 20, [data], out_rank=3), img)
    np.testing.assert_array_equal(run("ImageDecoder", 20, [data], {"pixel_format": "BGR"}, out_rank=3),
                                  img[:, :, ::-1])
    gray = run("ImageDecoder", 20, [data], {"pixel_format": "Grayscale"}, out_rank=3)
    assert gray.shape == (3, 4, 1) and gray.dtype == np.uint8
    bad = run("ImageDecoder", 20, [np.frombuffer(b"not an image", np.uint8)], out_rank=3)
    assert bad.shape == (0, 0, 3)


def test_nms_ties_threshold_and_center_format():
    boxes = np.float32([[[0, 0, 1, 1], [0, 0, 1, 1], [0, 0.5, 1, 1.5], [5, 5, 6, 6]]])
    scores = np.float32([[[0.9, 0.9, 0.8, 0.5]]])
    out_t = TensorProto.INT64
    sel = run("NonMaxSuppression", 10, [boxes, scores, np.int64([10]), np.float32([0.5]), np.float32([0.5])],
              out_elem=out_t, out_rank=2)
    # equal scores: lower index first; box 1 is identical (IOU 1); box 2 IOU 1/3 kept; 0.5 is not > 0.5
    np.testing.assert_array_equal(sel, [[0, 0, 0], [0, 0, 2]])
    centre = np.float32([[[0.5, 0.5, 1, 1], [0.5, 0.5, 1, 1], [1.0, 0.5, 1, 1], [5.5, 5.5, 1, 1]]])  # xc yc w h
    sel_c = run("NonMaxSuppression", 11, [centre, scores, np.int64([2]), np.float32([0.5])],
                {"center_point_box": 1}, out_elem=out_t, out_rank=2)
    np.testing.assert_array_equal(sel_c, [[0, 0, 0], [0, 0, 2]])
    none = run("NonMaxSuppression", 11, [boxes, scores], out_elem=out_t, out_rank=2)
    assert none.shape == (0, 3)
