"""The gpu backend (torch) against the cpu backend (numpy) and onnx.reference for the kernels of
elementwise.py and activation.py of onnxkit_gpu: unary, binary, variadic operators, Clip, Where,
the activations and the softmax family.

Each test builds one-node models (gpu_parity.py) and runs them on both backends and on onnx's
ReferenceEvaluator (an independent oracle; gpu_oracle.py names where it is none): old operator
versions (legacy broadcasting, attribute forms, 2-D coercion of the softmax family before 13),
integer and half types, edge values.  Where the two backends may differ (undefined behaviour) or
the cpu backend is not the reference, the expected values are written out by hand.  On a machine
without CUDA the gpu backend runs on torch's CPU device.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

import gpu_parity as parity  # noqa: E402
from gpu_parity import BF16, FLOATS, INTS, rand, run, same  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402


@pytest.fixture(autouse=True)
def _seeded():
    parity.reseed()


# ============================================================================ unary
@pytest.mark.parametrize("op,opset,lo,hi", [
    ("Abs", 6, -3, 3), ("Neg", 6, -3, 3), ("Ceil", 6, -3, 3), ("Floor", 6, -3, 3), ("Sqrt", 6, 0, 9),
    ("Exp", 6, -5, 5), ("Log", 6, 0.01, 9), ("Reciprocal", 6, 0.5, 4), ("Sin", 7, -4, 4), ("Cos", 7, -4, 4),
    ("Tan", 7, -1, 1), ("Asin", 7, -1, 1), ("Acos", 7, -1, 1), ("Atan", 7, -4, 4), ("Sinh", 9, -3, 3),
    ("Cosh", 9, -3, 3), ("Asinh", 9, -3, 3), ("Acosh", 9, 1, 5), ("Atanh", 9, -0.9, 0.9), ("Round", 11, -4, 4),
    ("Sign", 9, -3, 3), ("Erf", 9, -4, 4), ("Abs", 1, -3, 3), ("Exp", 13, -5, 5), ("Sin", 22, -4, 4),
])
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float(op, opset, lo, hi, dtype):
    same(op, [rand((3, 5), dtype, lo, hi)], opset=opset)


@pytest.mark.parametrize("dtype", INTS)
def test_unary_int(dtype):
    x = rand((4, 6), dtype)
    same("Abs", [x])
    same("Sign", [x])
    if np.dtype(dtype).kind == "i":
        same("Neg", [x])


def test_round_is_half_to_even_and_sign_keeps_nan():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, np.nan, -2.0, 0.0], np.float32)
    got = same("Round", [x], opset=11)
    assert got[:5].tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]
    got = same("Sign", [x], opset=13)
    assert np.isnan(got[5]) and got[6] == -1 and got[7] == 0


def test_erf9_on_integers_truncates():
    x = np.array([-7, -1, 0, 1, 7], np.int32)
    got = run("gpu", "Erf", [x], opset=9)
    assert got.dtype == np.int32 and got.tolist() == [-1, 0, 0, 0, 1]


def test_isnan_isinf_not_bitwisenot():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    same("IsNaN", [x], opset=9)
    same("IsNaN", [x.astype(np.float16)], opset=20)
    for attrs in ({}, {"detect_negative": 0}, {"detect_positive": 0},
                  {"detect_negative": 0, "detect_positive": 0}):
        same("IsInf", [x], attrs, opset=10)
    same("Not", [rand((3, 4), np.bool_)], opset=1)
    for dt in INTS:
        same("BitwiseNot", [rand((5,), dt)], opset=18)


def test_identity_keeps_the_value():
    for dt in (np.float32, np.int64, np.bool_, BF16):
        same("Identity", [rand((2, 3), dt)], opset=1)
        same("Identity", [rand((2, 3), dt)], opset=21)


# ============================================================================ binary
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_arithmetic_broadcast(op, dtype):
    a, b = rand((2, 3, 4), dtype), rand((3, 1), dtype)
    if op == "Div":
        b = np.where(b == 0, np.ones_like(b), b)
    same(op, [a, b], opset=14)


def test_integer_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, -128], np.int8)
    b = np.array([2, 2, -2, -2, -1], np.int8)
    assert same("Div", [a, b], opset=14).tolist() == [3, -3, -3, 3, -128]


def test_integer_division_by_zero_is_refused_not_a_crash():
    from onnxkit.errors import EvaluationError

    a = np.array([5, -5, 0], np.int32)
    b = np.array([1, 0, 2], np.int32)
    for op, attrs_, opset in (("Div", {}, None), ("Mod", {}, 13), ("Mod", {"fmod": 1}, 13)):
        with pytest.raises(EvaluationError, match="integer division by zero"):
            run("gpu", op, [a, b], attrs_, **({"opset": opset} if opset else {}))


@pytest.mark.parametrize("opset", [1, 6])
def test_legacy_broadcast_at_axis_and_suffix(opset):
    a = rand((2, 3, 4))
    same("Add", [a, rand((3,))], {"broadcast": 1, "axis": 1}, opset=opset)
    same("Mul", [a, rand((3, 4))], {"broadcast": 1}, opset=opset)
    same("Sub", [a, rand((1,))], {"broadcast": 1}, opset=opset)
    same("Div", [a, rand((2, 1), lo=1, hi=2)], {"broadcast": 1, "axis": 0}, opset=opset)
    same("Pow", [np.abs(a), rand((4,))], {"broadcast": 1}, opset=1)
    same("Add", [a, rand((2, 3, 4))], opset=opset)


def test_legacy_broadcast_refusals():
    a = rand((2, 3, 4))
    with pytest.raises(OnnxkitError, match="broadcast=0"):
        run("gpu", "Add", [a, rand((4,))], opset=6)
    with pytest.raises(OnnxkitError, match="legacy broadcasting"):
        run("gpu", "Add", [a, rand((3,))], {"broadcast": 1}, opset=6)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8])
def test_mod(fmod, dtype):
    if np.dtype(dtype).kind == "f" and not fmod:
        a = np.array([5.5, -5.5, 5.5, -5.5, 4.0, -4.0, 0.0], dtype)
        b = np.array([2.0, 2.0, -2.0, -2.0, 2.0, -2.0, 3.0], dtype)
        got = same("Mod", [a, b], {"fmod": 0})
        assert np.signbit(got[4:6]).tolist() == [False, True]    # a zero result takes the divisor's sign
        return
    a, b = rand((3, 7), dtype), rand((7,), dtype)
    b = np.where(b == 0, np.ones_like(b), b)
    same("Mod", [a, b], {"fmod": fmod}, opset=10)


@pytest.mark.parametrize("xt,yt", [(np.float32, np.float32), (np.float32, np.int64), (np.float64, np.int32),
                                   (np.int64, np.int64), (np.int32, np.float32), (np.int64, np.float64),
                                   (np.float16, np.float16), (np.float16, np.int8)])
def test_pow_types(xt, yt):
    x = rand((3, 4), xt, 1, 3)
    y = rand((4,), yt, 0, 3)
    same("Pow", [x, y], opset=15)


def test_pow_integer_edge_values():
    x = np.array([2, 2, -3, 3, 2, 0], np.int64)
    y = np.array([62, -1, 3, 0, 64, 0], np.int64)
    got = run("gpu", "Pow", [x, y], opset=15)
    assert got.tolist() == [2 ** 62, 0, -27, 1, 0, 1]
    x32 = np.array([2, 3, 2], np.int32)
    got = run("gpu", "Pow", [x32, np.array([31, 2, 33], np.int64)], opset=15)
    assert got.dtype == np.int32 and got.tolist() == [-2 ** 31, 9, 0]      # wraps, exponent not wrapped


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(direction):
    x = np.array([1, 7, 128, 255, 16], np.uint8)
    y = np.array([1, 2, 7, 9, 8], np.uint8)
    got = same("BitShift", [x, y], {"direction": direction}, opset=11)
    want = [2, 28, 0, 0, 0] if direction == "LEFT" else [0, 1, 1, 0, 0]
    assert got.tolist() == want
    xi = np.array([-8, 8, -1, 5], np.int32)
    yi = np.array([1, 40, 2, -1], np.int32)
    same("BitShift", [xi, yi], {"direction": direction}, opset=28)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", INTS)
def test_bitwise(op, dtype):
    same(op, [rand((3, 4), dtype), rand((4,), dtype)], opset=18)


@pytest.mark.parametrize("op,opset", [("Equal", 19), ("Equal", 7), ("Equal", 11), ("Greater", 9), ("Less", 13),
                                      ("GreaterOrEqual", 16), ("LessOrEqual", 12)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8, np.uint8, np.int64])
def test_comparison(op, opset, dtype):
    a, b = rand((3, 4), dtype, -2, 2), rand((4,), dtype, -2, 2)
    same(op, [a, b], opset=opset)


def test_comparison_legacy_and_logic():
    a, b = rand((2, 3)), rand((3,))
    same("Greater", [a, b], {"broadcast": 1}, opset=1)
    same("Less", [a, a], opset=1)
    for op in ("And", "Or", "Xor"):
        p, q = rand((2, 3, 4), np.bool_), rand((3, 4), np.bool_)
        same(op, [p, q], opset=7)
        same(op, [p, rand((3,), np.bool_)], {"broadcast": 1, "axis": 1}, opset=1)
    same("Equal", [np.array([True, False]), np.array([True, True])], opset=13)


# ============================================================================ variadic, Clip, Where
@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_variadic(op, dtype):
    xs = [rand((2, 3), dtype), rand((3,), dtype), rand((2, 1), dtype)]
    same(op, xs, opset=13)
    same(op, xs[:1], opset=13)
    same(op, [rand((2, 3), dtype), rand((2, 3), dtype)], opset=6)


def test_variadic_integers_and_old_shapes():
    for op in ("Max", "Min"):
        same(op, [rand((3, 4), np.int8), rand((4,), np.int8), rand((3, 1), np.int8)], opset=12)
        same(op, [rand((3, 4), np.uint8), rand((3, 4), np.uint8)], opset=13)
    same("Max", [np.array([1.0, np.nan], np.float32), np.array([np.nan, 2.0], np.float32)])
    with pytest.raises(OnnxkitError, match="same shape"):
        run("gpu", "Sum", [rand((2, 3)), rand((3,))], opset=6)


def test_clip_attribute_forms():
    x = rand((4, 5), lo=-5, hi=5)
    same("Clip", [x], {"min": -1.0, "max": 2.0}, opset=6)
    same("Clip", [x], {"min": -1.0}, opset=6)
    same("Clip", [x], {"max": 0.5}, opset=1)
    same("Clip", [x], opset=6)
    same("Clip", [x.astype(np.float16)], {"min": 0.1, "max": 0.2}, opset=6)
    got = same("Clip", [x], {"min": 2.0, "max": 1.0}, opset=6)
    assert (got == 1.0).all()                                       # min > max: everything is max


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint8, np.int64, BF16])
def test_clip_input_forms(dtype):
    x = rand((4, 5), dtype)
    lo, hi = np.array(-1 if np.dtype(dtype).kind != "u" else 30, dtype), np.array(2 if np.dtype(dtype).kind != "u" else 200, dtype)
    same("Clip", [x, lo, hi], opset=13)
    same("Clip", [x, lo], opset=12)
    same("Clip", [x, None, hi], opset=11)
    same("Clip", [x], opset=13)
    same("Clip", [x, hi, lo], opset=13)


def test_where():
    for dt in (np.float32, np.int64, np.bool_, np.float16, np.uint8):
        c = rand((2, 3, 4), np.bool_)
        same("Where", [c, rand((3, 4), dt), rand((2, 1, 4), dt)], opset=16)
        same("Where", [c, rand((3, 4), dt), rand((2, 1, 4), dt)], opset=9)


# ============================================================================ activations
@pytest.mark.parametrize("op,attrs,opsets", [
    ("Relu", {}, (1, 6, 13, 14)), ("LeakyRelu", {"alpha": 0.2}, (1, 6, 16)), ("LeakyRelu", {"alpha": -1.5}, (16,)),
    ("Elu", {"alpha": 0.7}, (1, 6, 22)), ("Selu", {}, (6, 22)), ("Selu", {"alpha": 1.2, "gamma": 0.9}, (1,)),
    ("Celu", {"alpha": 0.6}, (12, 28)), ("Sigmoid", {}, (1, 6, 13)), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, (1, 6, 22)),
    ("HardSwish", {}, (14, 22)), ("Softplus", {}, (1, 22)), ("Softsign", {}, (1, 22)), ("Tanh", {}, (1, 6, 13)),
    ("Gelu", {}, (20,)), ("Gelu", {"approximate": "tanh"}, (20,)), ("Mish", {}, (18, 22)),
    ("ThresholdedRelu", {"alpha": 0.5}, (10, 22)), ("Shrink", {"bias": 0.3, "lambd": 1.0}, (9,)),
    ("Swish", {"alpha": 0.7}, (24,)),
])
@pytest.mark.parametrize("dtype", FLOATS)
def test_activations(op, attrs, opsets, dtype):
    x = rand((3, 7), dtype, -6, 6)
    for opset in opsets:
        f32 = np.dtype(dtype) == np.float32
        # the cpu backend's float32 logistic / tanh are MLAS's approximations (docs/decisions.md), torch's are not
        same(op, [x], attrs, opset=opset, rtol=3e-6 if f32 else None,
             atol=2.4e-6 if f32 and op in ("Sigmoid", "Tanh", "Swish", "Mish") else None)


def test_activation_extremes():
    x = np.array([-1000.0, -30.0, -1e-8, 0.0, 1e-8, 30.0, 1000.0, np.nan, np.inf, -np.inf], np.float32)
    for op, opset in (("Softplus", 1), ("Sigmoid", 13), ("Mish", 18), ("Elu", 6), ("Selu", 6), ("Softsign", 1),
                      ("Tanh", 13), ("HardSwish", 14), ("Relu", 14), ("ThresholdedRelu", 10)):
        same(op, [x], opset=opset)
    same("Gelu", [x[:-1]], opset=20)
    g = run("gpu", "Gelu", [x], opset=20)
    assert g[0] == 0 and g[6] == 1000 and np.isnan(g[9])      # 0.5 x (1 + erf(x/sqrt 2)) at -inf: -inf * 0
    x64 = np.array([-30.0, -10.0, 40.0, 1e-300], np.float64)
    got = same("Gelu", [x64], opset=20, rtol=1e-9)
    assert -1e-190 < got[0] < 0                           # the negative tail keeps its precision
    assert run("gpu", "Softplus", [x64], opset=1)[2] == 40.0


def test_relu_and_prelu_on_integers():
    x = rand((3, 4), np.int8)
    same("Relu", [x], opset=14)
    for dt in (np.int32, np.int64):
        same("PRelu", [rand((3, 4), dt), rand((4,), dt)], opset=16)
        same("PRelu", [rand((3, 4), dt), rand((1,), dt)], opset=9)


def test_shrink_on_integers():
    x = np.arange(-5, 6, dtype=np.int32)
    got = same("Shrink", [x], {"bias": 1.5, "lambd": 1.5}, opset=9)
    assert got.dtype == np.int32 and got.tolist() == [-3, -2, -1, 0, 0, 0, 0, 0, 1, 2, 3]


@pytest.mark.parametrize("dtype", FLOATS)
def test_prelu_versions(dtype):
    x = rand((2, 3, 4, 5), dtype)
    same("PRelu", [x, rand((3,), dtype)], opset=6)                  # one slope per channel
    same("PRelu", [x, rand((3,), dtype)], opset=1)
    same("PRelu", [x, rand((1,), dtype)], opset=6)
    same("PRelu", [x, rand((2, 3, 4, 5), dtype)], opset=6)
    same("PRelu", [x, rand((3, 1, 1), dtype)], opset=7)
    same("PRelu", [x, rand((5,), dtype)], opset=16)
    with pytest.raises(OnnxkitError, match="unidirectionally"):
        run("gpu", "PRelu", [rand((3, 4)), rand((2, 3, 4))], opset=9)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_family_versions(op, dtype):
    x = rand((2, 3, 4), dtype)
    # float16: both round every step to float16, but numpy sums along a strided axis in float16
    rtol, atol = (2e-3, 1e-3) if np.dtype(dtype) == np.float16 else (None, None)
    for opset in (1, 11):
        for axis in (0, 1, 2, -1, 3, None):
            attrs = {} if axis is None else {"axis": axis}
            same(op, [x], attrs, opset=opset, rtol=rtol, atol=atol)   # coerced to 2-D at axis
    for axis in (0, 1, -1, None):
        same(op, [x], {} if axis is None else {"axis": axis}, opset=13, rtol=rtol, atol=atol)


def test_softmax_float16_steps():
    """float16: each step rounded to float16 (sums accumulated in float32), as the reference does."""
    x = rand((4, 9), np.float16)
    e = np.exp(x - x.max(axis=1, keepdims=True))                    # float16 steps
    s = e.astype(np.float32).sum(axis=1, keepdims=True).astype(np.float16)
    got = run("gpu", "Softmax", [x], opset=13)
    assert got.dtype == np.float16 and np.array_equal(got, e / s)
    d = x - x.max(axis=1, keepdims=True)
    s = np.exp(d).astype(np.float32).sum(axis=1, keepdims=True).astype(np.float16)
    assert np.array_equal(run("gpu", "LogSoftmax", [x], opset=13), d - np.log(s))


def test_softmax_legacy_coercion_by_hand():
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    got = run("gpu", "Softmax", [x], {"axis": 1}, opset=11)
    e = np.exp(np.arange(6) - 5.0)
    np.testing.assert_allclose(got.reshape(-1), e / e.sum(), rtol=1e-6)
    h = run("gpu", "Hardmax", [np.array([[3.0, 1.0, 3.0]], np.float32)], opset=13)
    assert h.tolist() == [[1.0, 0.0, 0.0]]                           # the first maximum
