"""QuantizeLinear, DequantizeLinear, DynamicQuantizeMatMul, MatMulIntegerToFloat, QLinearSigmoid,
QLinearLeakyRelu, QLinearSoftmax, QLinearConcat, QLinearWhere, QLinearAveragePool (com.microsoft),
one node each against onnxruntime on cpu and gpu (8-bit results within one quantization step)."""

from __future__ import annotations

import numpy as np
import pytest

from ms_harness import build, check, run_onnxkit

from test_quantized import close_q, q8

RNG = np.random.default_rng(31)
F = np.float32


def s(v):
    return np.array(v, F)


def z(v, dtype):
    """A zero point ``v`` (shifted by 128 for uint8)."""
    return np.array(v + (128 if dtype == np.uint8 else 0), dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_dequantize(dtype, per_axis):
    x = (RNG.standard_normal((2, 3, 4)) * 3).astype(F)
    scale = (RNG.random(3) * 0.05 + 0.01).astype(F) if per_axis else s(0.03)
    zp = (np.array([1, -2, 3]) + (128 if dtype == np.uint8 else 0)).astype(dtype) if per_axis else np.array(
        5, dtype)
    q = close_q("QuantizeLinear", [x, scale, zp])
    assert q.dtype == dtype and len(np.unique(q)) > 10
    check("DequantizeLinear", [q8((2, 3, 4), dtype), scale, zp], rtol=1e-6, atol=1e-6)


def test_quantize_without_zero_point_is_uint8_and_axis_attribute():
    x = (RNG.standard_normal((4, 5)) * 2).astype(F)
    assert close_q("QuantizeLinear", [x, s(0.02)]).dtype == np.uint8
    close_q("QuantizeLinear", [x, (RNG.random(5) * 0.02 + 0.01).astype(F), np.zeros(5, np.int8)], {"axis": -1})


# onnxruntime 1.32 registers no int8 A with uint8 B
@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("per_column,bias", [(False, False), (True, True)])
def test_matmul_integer_to_float(a_type, b_type, per_column, bias):
    a, b = q8((2, 3, 6), a_type), q8((6, 4), b_type)
    bs = (RNG.random(4) * 0.02 + 0.005).astype(F) if per_column else s(0.01)
    bz = q8((4,), b_type) if per_column else np.array(3, b_type)
    ins = [a, b, s(0.02), bs, np.array(2, a_type), bz, RNG.standard_normal(4).astype(F) if bias else None]
    check("MatMulIntegerToFloat", ins, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("b_type", [np.uint8, np.int8])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("a_shape", [(3, 8), (2, 3, 8), (3, 8) and (1, 8)])
def test_dynamic_quantize_matmul(b_type, per_column, a_shape):
    a = RNG.standard_normal(a_shape).astype(F)
    b = q8((8, 5), b_type)
    bs = (RNG.random(5) * 0.02 + 0.005).astype(F) if per_column else s(0.01)
    bz = q8((5,), b_type) if per_column else np.array(0, b_type)
    check("DynamicQuantizeMatMul", [a, b, bs, bz, RNG.standard_normal(5).astype(F)], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {}),
                                      ("QLinearLeakyRelu", {"alpha": 0.3})])
def test_qlinear_unary(dtype, op, attrs):
    x = q8((2, 3, 7), dtype)
    zy = np.array(0 if dtype == np.int8 else 10, dtype) if op == "QLinearLeakyRelu" else np.array(
        -128 if dtype == np.int8 else 0, dtype)
    ys = 0.06 if op == "QLinearLeakyRelu" else 1 / 256
    close_q(op, [x, s(0.05), np.array(4, dtype), s(ys), zy], attrs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("attrs", [{"opset": 13}, {"opset": 13, "axis": 1}, {"opset": 12, "axis": 1},
                                   {"opset": 11}])
def test_qlinear_softmax(dtype, attrs):
    x = q8((2, 3, 5), dtype)
    zy = np.array(-128 if dtype == np.int8 else 0, dtype)
    close_q("QLinearSoftmax", [x, s(0.08), np.array(1, dtype), s(1 / 256), zy], attrs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_qlinear_concat(dtype, axis):
    shapes = {0: [(2, 3, 4), (1, 3, 4)], 1: [(2, 3, 4), (2, 5, 4)], -1: [(2, 3, 4), (2, 3, 2)]}[axis]
    ins = [s(0.07), np.array(2, dtype)]
    for k, shape in enumerate(shapes + [shapes[0]]):
        ins += [q8(shape, dtype), s(0.03 * (k + 1)), z(k - 1, dtype)]
    close_q("QLinearConcat", ins, {"axis": axis})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_where(dtype):
    cond = RNG.random((3, 1)) > 0.5
    x, y = q8((3, 4), dtype), q8((4,), dtype)
    close_q("QLinearWhere", [cond, x, s(0.02), z(3, dtype), y, s(0.05), z(-1, dtype), s(0.04),
                             np.array(1, dtype)])


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("attrs", [{"kernel_shape": [2, 2]},
                                   {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
                                   {"kernel_shape": [3, 2], "strides": [2, 1], "ceil_mode": 1},
                                   {"kernel_shape": [2, 2], "channels_last": 1},
                                   {"kernel_shape": [3], "auto_pad": "SAME_UPPER"}])
def test_qlinear_average_pool(dtype, attrs):
    shape = (2, 3, 7) if len(attrs["kernel_shape"]) == 1 else (2, 3, 6, 5)
    close_q("QLinearAveragePool", [q8(shape, dtype), s(0.1), np.array(2, dtype), s(0.07), z(-3, dtype)],
            attrs)


def test_bad_inputs_are_clear_onnxkit_errors():
    from onnxkit.errors import OnnxkitError

    model, feed = build("MatMulIntegerToFloat", [q8((2, 6), np.uint8), q8((5, 4), np.int8), s(0.1), s(0.1)])
    for backend in ("cpu", "gpu"):
        with pytest.raises(OnnxkitError, match="do not multiply"):
            run_onnxkit(model, feed, backend)
    model, feed = build("QLinearConcat", [s(0.1), np.array(1, np.uint8), q8((2, 3), np.uint8), s(0.1),
                                          np.array(0, np.uint8), q8((2, 3, 1), np.uint8), s(0.1),
                                          np.array(0, np.uint8)], {"axis": 0})
    with pytest.raises(OnnxkitError, match="rank"):
        run_onnxkit(model, feed, "cpu")


@pytest.mark.parametrize("xt,wt", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("attrs,per_channel,bias", [
    ({}, False, False),
    ({"pads": [1, 1, 1, 1], "strides": [2, 1]}, True, True),
    ({"group": 2, "dilations": [2, 2]}, True, False),
    ({"auto_pad": "SAME_UPPER", "channels_last": 1}, False, True)])
def test_qlinear_conv(xt, wt, attrs, per_channel, bias):
    last = attrs.get("channels_last")
    x = q8((1, 7, 6, 4) if last else (1, 4, 7, 6), xt)
    g = attrs.get("group", 1)
    w = q8((6, 4 // g, 3, 3), wt)
    ws = (RNG.random(6) * 0.004 + 0.002).astype(F) if per_channel else s(0.003)
    wz = np.asarray(np.zeros(6 if per_channel else (), np.int64) + (0 if wt == np.int8 else 128))
    b = RNG.integers(-2000, 2000, 6).astype(np.int32) if bias else None
    close_q("QLinearConv", [x, s(0.05), z(1, xt), w, ws, wz.astype(wt), s(0.4), z(-2, xt), b], attrs)


@pytest.mark.parametrize("xt,wt", [(np.uint8, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("mask,unidirectional,per_column", [(False, 0, False), (True, 0, True), (False, 1, False)])
def test_qattention(xt, wt, mask, unidirectional, per_column):
    b, sq, d, heads = 2, 5, 8, 2
    x, w = q8((b, sq, d), xt), q8((d, 3 * d), wt)
    bias = (RNG.standard_normal(3 * d) * 0.1).astype(F)
    ws = (RNG.random(3 * d) * 0.002 + 0.001).astype(F) if per_column else s(0.0015)
    wz = np.asarray(np.zeros(3 * d if per_column else (), np.int64) + (0 if wt == np.int8 else 128)).astype(wt)
    mi = np.array([5, 3], np.int32) if mask else None
    check("QAttention", [x, w, bias, s(0.01), ws, mi, z(2, xt), wz], {"num_heads": heads,
                                                                       "unidirectional": unidirectional},
          rtol=1e-4, atol=1e-4)
