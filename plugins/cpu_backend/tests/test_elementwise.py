"""Unit tests of the cpu kernels in elementwise.py, activation.py and cast.py.

The ONNX node vectors cover the current definitions; these tests cover what they do not:
old definitions (legacy broadcasting, attribute forms, 2-D coercion of Softmax before 13),
integer and narrow types, edge values and dtype preservation.  Expected values are computed
independently (by hand, with Python's ``math`` in float64, or with plain numpy formulas).
``onnx`` is used to build the test models only.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

from onnxkit_cpu.overrides.elementwise_math import erf  # noqa: E402


def _tensor_type(a) -> int:
    return helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype)


def run(op, inputs, attrs=None, opset=13, out_type=None, out_rank=None, n_out=1, symbolic=False):
    """Evaluate one ``op`` node; ``inputs`` are arrays, lists (sequences) or None (omitted).
    ``symbolic``: declare the input extents as dimension variables (the checker cannot see
    a shape error then, the kernel has to)."""
    names, graph_inputs, feed = [], [], {}
    for k, v in enumerate(inputs):
        if v is None:
            names.append("")
            continue
        name = f"x{k}"
        names.append(name)
        if isinstance(v, list):
            graph_inputs.append(helper.make_tensor_sequence_value_info(name, _tensor_type(v[0]), None))
        else:
            v = np.asarray(v)
            et = TP.STRING if v.dtype == object else _tensor_type(v)
            shape = [f"{name}_{j}" for j in range(v.ndim)] if symbolic else v.shape
            graph_inputs.append(helper.make_tensor_value_info(name, et, shape))
        feed[name] = v
    first = next(v for v in inputs if v is not None)
    outs = [f"y{i}" for i in range(n_out)]
    if isinstance(first, list):
        graph_outputs = [helper.make_tensor_sequence_value_info(o, _tensor_type(first[0]), None) for o in outs]
    else:
        arrays = [np.asarray(v) for v in inputs if v is not None]
        et = out_type if out_type is not None else (TP.STRING if arrays[0].dtype == object else _tensor_type(arrays[0]))
        rank = max(a.ndim for a in arrays) if out_rank is None else out_rank
        graph_outputs = [helper.make_tensor_value_info(o, et, [f"d{j}" for j in range(rank)]) for o in outs]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], "g", graph_inputs, graph_outputs)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = helper.find_min_ir_version_for(opsets)
    got = InferenceSession(model.SerializeToString()).run(None, feed)
    return got[0] if n_out == 1 else got


def f32(*v):
    return np.array(v, dtype=np.float32)


# ============================================================================ legacy broadcasting
def test_add1_broadcast_at_axis():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = f32(10, 20, 30)
    got = run("Add", [a, b], {"broadcast": 1, "axis": 1}, opset=1)
    assert got.dtype == np.float32
    assert np.array_equal(got, a + b.reshape(3, 1))
    assert got[1, 2, 3] == 23 + 30


def test_sub6_suffix_matching_and_one_element_b():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert np.array_equal(run("Sub", [a, f32(1, 2, 3, 4)], {"broadcast": 1}, opset=6), a - f32(1, 2, 3, 4))
    assert np.array_equal(run("Mul", [a, np.full((1, 1), 3, np.float32)], {"broadcast": 1}, opset=6), a * 3)
    got = run("Div", [a, f32(2, 4)], {"broadcast": 1, "axis": 0}, opset=6)
    assert np.array_equal(got, a / f32(2, 4).reshape(2, 1, 1))


def test_legacy_broadcast_needs_the_attribute():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(OnnxkitError, match="broadcast=0"):
        run("Add", [a, f32(1, 2, 3)], opset=6)
    assert np.array_equal(run("Add", [a, a], opset=6), a + a)


def test_legacy_broadcast_rejects_misaligned_b():
    with pytest.raises(OnnxkitError, match="legacy broadcasting"):
        run("Add", [np.ones((2, 3, 4), np.float32), f32(1, 2, 3, 4)], {"broadcast": 1, "axis": 1}, opset=6)


def test_legacy_pow_and_comparisons():
    x = np.array([[1, 2], [3, 4]], np.float32)
    assert np.array_equal(run("Pow", [x, f32(2, 3)], {"broadcast": 1}, opset=1), x ** f32(2, 3))
    got = run("Greater", [x, f32(2, 2)], {"broadcast": 1, "axis": 0}, opset=1, out_type=TP.BOOL)
    assert got.tolist() == [[False, False], [True, True]]
    i = np.array([[1, 2], [3, 4]], np.int32)
    got = run("Equal", [i, np.array([1, 4], np.int32)], {"broadcast": 1}, opset=1, out_type=TP.BOOL)
    assert got.tolist() == [[True, False], [False, True]]
    b = np.array([[True, False], [True, True]])
    got = run("And", [b, np.array([True, False])], {"broadcast": 1}, opset=1, out_type=TP.BOOL)
    assert got.tolist() == [[True, False], [True, False]]


def test_multidirectional_broadcast():
    a = np.arange(15, dtype=np.float64).reshape(3, 1, 5)
    b = np.arange(4, dtype=np.float64).reshape(4, 1)
    got = run("Add", [a, b], opset=14)
    assert got.shape == (3, 4, 5) and got[2, 3, 4] == 14 + 3


# ============================================================================ variadic
def test_variadic_before_8_needs_equal_shapes():
    with pytest.raises(OnnxkitError, match="same shape"):
        run("Max", [np.ones((2, 3), np.float32), f32(1, 2, 3)], opset=6)
    got = run("Max", [np.zeros((2, 3), np.float32), f32(-1, 2, 0.5)], opset=8)
    assert got.tolist() == [[0, 2, 0.5], [0, 2, 0.5]]


def test_sum_mean_min_many_inputs():
    xs = [f32(1, 5), f32(3, -1), f32(2, 2)]
    assert run("Sum", xs, opset=8).tolist() == [6, 6]
    assert run("Mean", xs, opset=13).tolist() == [2, 2]
    assert run("Min", xs, opset=13).tolist() == [1, -1]
    assert run("Max", [np.array([3, -7], np.int8)], opset=12).tolist() == [3, -7]


def test_sum_float16_is_not_accumulated_in_float16():
    xs = [np.array([2048], np.float16), np.array([1], np.float16), np.array([1], np.float16)]
    got = run("Sum", xs, opset=13)
    assert got.dtype == np.float16 and got[0] == 2050    # float16 steps would give 2048


# ============================================================================ Clip
def test_clip6_without_bounds_is_unbounded():
    x = np.array([-1e300, 0.5, 1e300], np.float64)
    assert np.array_equal(run("Clip", [x], opset=6), x)       # not clipped at +/-FLT_MAX
    assert run("Clip", [f32(-3, 0, 3)], {"min": -1.0}, opset=1).tolist() == [-1, 0, 3]
    assert run("Clip", [f32(-3, 0, 3)], {"min": 2.0, "max": 1.0}, opset=6).tolist() == [1, 1, 1]


def test_clip_input_forms():
    x = f32(-3, 0, 3)
    assert run("Clip", [x, None, np.array(1, np.float32)], opset=11).tolist() == [-3, 0, 1]
    assert run("Clip", [x, np.array(-1, np.float32)], opset=11).tolist() == [-1, 0, 3]
    assert run("Clip", [x], opset=13).tolist() == [-3, 0, 3]
    i = np.array([-100, 5, 100], np.int8)
    got = run("Clip", [i, np.array(-10, np.int8), np.array(10, np.int8)], opset=12)
    assert got.dtype == np.int8 and got.tolist() == [-10, 5, 10]
    got = run("Clip", [i, np.array(10, np.int8), np.array(-10, np.int8)], opset=13)   # min > max: max
    assert got.tolist() == [-10, -10, -10]


# ============================================================================ integer arithmetic
def test_integer_div_truncates_toward_zero():
    a = np.array([-7, 7, -7, 7, 6], np.int32)
    b = np.array([2, -2, -2, 2, 3], np.int32)
    got = run("Div", [a, b], opset=14)
    assert got.dtype == np.int32 and got.tolist() == [-3, -3, 3, 3, 2]
    assert run("Div", [np.array([7, 255], np.uint8), np.array([2, 16], np.uint8)], opset=14).tolist() == [3, 15]


def test_integer_overflow_wraps_and_keeps_dtype():
    got = run("Add", [np.array([127], np.int8), np.array([1], np.int8)], opset=14)
    assert got.dtype == np.int8 and got[0] == -128
    got = run("Mul", [np.array([200], np.uint8), np.array([2], np.uint8)], opset=14)
    assert got.dtype == np.uint8 and got[0] == 144


def test_mod_signs():
    a, b = np.array([-7, 7, -7, 7], np.int32), np.array([3, -3, -3, 3], np.int32)
    assert run("Mod", [a, b], opset=13).tolist() == [2, -2, -1, 1]                   # sign of divisor
    assert run("Mod", [a, b], {"fmod": 1}, opset=13).tolist() == [-1, 1, -1, 1]      # sign of dividend
    got = run("Mod", [f32(-7.5, 7.5), f32(2, -2)], opset=10)
    assert got.tolist() == [0.5, -0.5]
    got = run("Mod", [f32(-7.5, 7.5), f32(2, -2)], {"fmod": 1}, opset=28)
    assert got.tolist() == [-1.5, 1.5]


def test_bitshift_edges():
    u = np.array([1, 1, 255, 16], np.uint8)
    n = np.array([3, 9, 1, 4], np.uint8)
    assert run("BitShift", [u, n], {"direction": "LEFT"}, opset=11).tolist() == [8, 0, 254, 0]
    assert run("BitShift", [u, n], {"direction": "RIGHT"}, opset=11).tolist() == [0, 0, 127, 1]
    s = np.array([-8, -8, 64, 5, -1], np.int8)
    k = np.array([1, 10, 1, -1, 8], np.int8)
    assert run("BitShift", [s, k], {"direction": "RIGHT"}, opset=28).tolist() == [-4, -1, 32, 0, -1]
    assert run("BitShift", [s, k], {"direction": "LEFT"}, opset=28).tolist() == [-16, 0, -128, 0, 0]


def test_bitwise_ops():
    a, b = np.array([0b1100, -1], np.int16), np.array([0b1010, 5], np.int16)
    assert run("BitwiseAnd", [a, b], opset=18).tolist() == [0b1000, 5]
    assert run("BitwiseOr", [a, b], opset=18).tolist() == [0b1110, -1]
    assert run("BitwiseXor", [a, b], opset=18).tolist() == [0b0110, -6]
    assert run("BitwiseNot", [np.array([0, 255], np.uint8)], opset=18).tolist() == [255, 0]


def test_pow_mixed_types():
    got = run("Pow", [f32(2, 3), np.array([3, -1], np.int64)], opset=15)
    assert got.dtype == np.float32 and np.allclose(got, [8, 1 / 3])
    got = run("Pow", [np.array([2, 1, -1, 3], np.int32), np.array([-1, -2, -1, 2], np.int32)], opset=15)
    assert got.dtype == np.int32 and got.tolist() == [0, 1, -1, 9]
    got = run("Pow", [np.array([2, 10], np.int64), f32(0.5, 2)], opset=12)
    assert got.dtype == np.int64 and got.tolist() == [1, 100]
    got = run("Pow", [np.array([2, 4], np.float16), np.array([0.5, 2], np.float16)], opset=7)
    assert got.dtype == np.float16 and got.tolist() == [np.float16(math.sqrt(2)), 16]


# ============================================================================ unary math
def test_round_is_half_to_even():
    got = run("Round", [f32(0.5, 1.5, 2.5, -0.5, -2.5, 2.6)], opset=11)
    assert got.tolist() == [0, 2, 2, -0.0, -2, 3]


def test_erf_float64_accuracy():
    xs = np.concatenate([np.linspace(-7, 7, 2001), np.geomspace(1e-300, 5, 300), -np.geomspace(1e-300, 5, 300)])
    expected = np.array([math.erf(v) for v in xs])
    got = erf(xs)
    assert got.dtype == np.float64
    assert np.max(np.abs(got - expected) / np.maximum(np.abs(expected), 1e-300)) < 1e-14


def test_erf_float32_accuracy_and_specials():
    xs = np.concatenate([np.linspace(-6, 6, 4001), np.geomspace(1e-30, 4, 300)]).astype(np.float32)
    expected = np.array([math.erf(float(v)) for v in xs])
    got = run("Erf", [xs], opset=13)
    assert got.dtype == np.float32
    assert np.max(np.abs(got - expected) / np.maximum(np.abs(expected), 1e-38)) < 1e-6
    got = run("Erf", [f32(np.nan, np.inf, -np.inf, 0)], opset=13)
    assert np.isnan(got[0]) and got[1:].tolist() == [1, -1, 0]
    got = run("Erf", [np.array([0, 1, 3], np.int32)], opset=9)        # Erf-9 takes integers
    assert got.dtype == np.int32 and got.tolist() == [0, 0, 0]


def test_isinf_isnan():
    x = f32(np.inf, -np.inf, np.nan, 1)
    assert run("IsInf", [x], opset=10, out_type=TP.BOOL).tolist() == [True, True, False, False]
    assert run("IsInf", [x], {"detect_negative": 0}, opset=10, out_type=TP.BOOL).tolist() == [True, False, False, False]
    assert run("IsInf", [x], {"detect_positive": 0}, opset=20, out_type=TP.BOOL).tolist() == [False, True, False, False]
    f8 = np.array([np.nan, 1.0, 448], np.float32).astype(ml_dtypes.float8_e4m3fn)
    assert run("IsNaN", [f8], opset=20, out_type=TP.BOOL).tolist() == [True, False, False]
    assert run("IsInf", [f8], opset=20, out_type=TP.BOOL).tolist() == [False, False, False]


@pytest.mark.parametrize("dtype", [np.int8, np.float16, ml_dtypes.bfloat16, np.float64])
def test_dtypes_preserved(dtype):
    x = np.array([1, -2, 3], np.float32).astype(dtype)
    for op, opset in [("Abs", 13), ("Neg", 13), ("Add", 14), ("Max", 13)]:
        got = run(op, [x, x] if op in ("Add", "Max") else [x], opset=opset)
        assert got.dtype == np.dtype(dtype), op
    assert np.array_equal(run("Abs", [x], opset=13).astype(np.float64), [1, 2, 3])


def test_bfloat16_math_goes_through_float32():
    x = np.array([0.5, 1, 2], np.float32).astype(ml_dtypes.bfloat16)
    got = run("Exp", [x], opset=13)
    assert got.dtype == ml_dtypes.bfloat16
    assert np.array_equal(got, np.exp(np.array([0.5, 1, 2], np.float32)).astype(ml_dtypes.bfloat16))
    got = run("Greater", [x, x[::-1].copy()], opset=13, out_type=TP.BOOL)
    assert got.tolist() == [False, False, True]


def test_scalars_stay_arrays():
    got = run("Add", [np.array(1.5, np.float32), np.array(2, np.float32)], opset=14, out_rank=0)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.float32 and got == 3.5
    got = run("Sigmoid", [np.array(0, np.float32)], opset=13, out_rank=0)
    assert isinstance(got, np.ndarray) and got.shape == () and got == 0.5


# ============================================================================ logic, Where, Identity
def test_equal_strings_bytes_and_str():
    a = np.array(["abc", "x"], dtype=object)
    b = np.array([b"abc", b"y"], dtype=object)
    assert run("Equal", [a, b], opset=19, out_type=TP.BOOL).tolist() == [True, False]


def test_logic():
    a, b = np.array([True, True, False]), np.array([True, False, False])
    assert run("Xor", [a, b], opset=7, out_type=TP.BOOL).tolist() == [False, True, False]
    assert run("Or", [a, b], opset=7, out_type=TP.BOOL).tolist() == [True, True, False]
    assert run("Not", [a], opset=1, out_type=TP.BOOL).tolist() == [False, False, True]
    got = run("LessOrEqual", [np.array([1, 2, 3], np.uint64), np.array([2], np.uint64)], opset=16, out_type=TP.BOOL)
    assert got.tolist() == [True, True, False]


def test_where_broadcasts_and_takes_strings():
    cond = np.array([[True], [False]])
    got = run("Where", [cond, f32(1, 2), np.array(9, np.float32)], opset=16, out_type=TP.FLOAT)
    assert got.tolist() == [[1, 2], [9, 9]]
    got = run("Where", [np.array([True, False]), np.array(["a", "b"], dtype=object),
                        np.array(["c", "d"], dtype=object)], opset=9, out_type=TP.STRING)
    assert [v.decode() if isinstance(v, bytes) else v for v in got.tolist()] == ["a", "d"]


def test_identity_tensor_and_sequence():
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert np.array_equal(run("Identity", [x], opset=1), x)
    seq = [f32(1, 2), f32(3)]
    got = run("Identity", [seq], opset=14)
    assert isinstance(got, list) and len(got) == 2 and got[1].tolist() == [3]


# ============================================================================ activations
def _ref(fn, x):
    return np.array([fn(float(v)) for v in np.asarray(x, dtype=np.float64).ravel()]).reshape(np.shape(x))


EDGE = f32(-100, -20, -3, -1, -0.25, 0, 0.25, 1, 3, 20, 100)
#: float32 operators computed with onnxruntime's sigmoid / tanh (MLAS's rationals): their largest
#: absolute error over every float32 input (tools/mlas_activation_error.py: 1.8e-7 and 3.3e-7),
#: scaled by |x| where the operator multiplies by x
_MLAS32 = {"Sigmoid", "Tanh", "Swish", "Mish"}
MLAS32_ABS = 3.5e-7


def _F(v):
    return float(np.float32(v))


def _sig(v):
    return 1 / (1 + math.exp(-v)) if v >= 0 else math.exp(v) / (1 + math.exp(v))


def _softplus(v):
    return max(v, 0) + math.log1p(math.exp(-abs(v)))


ACTIVATIONS = [   # attribute values are FLOAT (float32): the formulas use them rounded so
    ("Sigmoid", {}, 6, _sig),
    ("Tanh", {}, 13, math.tanh),
    ("Elu", {"alpha": 0.7}, 6, lambda v: v if v > 0 else _F(0.7) * (math.exp(v) - 1)),
    ("Selu", {}, 22, lambda v: _F(1.0507009873554805) * (v if v > 0 else _F(1.6732632423543772) * (math.exp(v) - 1))),
    ("Celu", {"alpha": 2.0}, 12, lambda v: max(0, v) + min(0, 2 * (math.exp(v / 2) - 1))),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 6, lambda v: max(0, min(1, _F(0.3) * v + _F(0.4)))),
    ("HardSwish", {}, 14, lambda v: v * max(0, min(1, v / 6 + 0.5))),
    ("Softplus", {}, 1, _softplus),
    ("Softsign", {}, 22, lambda v: v / (1 + abs(v))),
    ("Mish", {}, 18, lambda v: v * math.tanh(_softplus(v))),
    ("Swish", {"alpha": 1.5}, 24, lambda v: v * _sig(1.5 * v)),
    ("ThresholdedRelu", {"alpha": 0.5}, 10, lambda v: v if v > 0.5 else 0.0),
    ("LeakyRelu", {"alpha": 0.2}, 6, lambda v: v if v >= 0 else _F(0.2) * v),
    ("LeakyRelu", {"alpha": -1.5}, 16, lambda v: v if v >= 0 else -1.5 * v),
    ("Relu", {}, 14, lambda v: max(v, 0.0)),
    ("Gelu", {}, 20, lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2)))),
    ("Gelu", {"approximate": "tanh"}, 20,
     lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))),
    ("Shrink", {"lambd": 1.0, "bias": 0.5}, 9, lambda v: v + 0.5 if v < -1 else (v - 0.5 if v > 1 else 0.0)),
]


@pytest.mark.parametrize("op,attrs,opset,fn", ACTIVATIONS,
                         ids=[f"{a[0]}-{a[2]}-{i}" for i, a in enumerate(ACTIVATIONS)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_values(op, attrs, opset, fn, dtype):
    x = np.concatenate([EDGE, np.linspace(-6, 6, 97, dtype=np.float32)]).astype(dtype)
    got = run(op, [x], attrs, opset=28 if op == "Celu" and dtype != np.float32 else opset)
    assert got.dtype == np.dtype(dtype)
    expected = _ref(fn, x)
    tol = 2e-6 if dtype == np.float32 else 1e-12
    # float64 Gelu 'none' is 0.5*x*(1 + erf(..)) as defined: in the negative tail 1 + erf
    # cancels to the precision of 1, hence an absolute tolerance there (float32 uses erfc).
    atol = 1e-15 if op == "Gelu" and dtype == np.float64 else 1e-30
    if dtype == np.float32 and (op in _MLAS32 or attrs.get("approximate") == "tanh"):
        atol = MLAS32_ABS * np.maximum(1.0, np.abs(x.astype(np.float64)))
    bad = ~np.isclose(got, expected, rtol=tol, atol=atol)
    assert not bad.any(), (x[bad], got[bad], expected[bad])


@pytest.mark.parametrize("op,attrs,opset,fn", ACTIVATIONS[:12], ids=[a[0] for a in ACTIVATIONS[:12]])
def test_activation_float16_and_nan(op, attrs, opset, fn):
    x = np.array([-3, -0.5, 0, 0.5, 3], np.float16)
    opset = 28 if op == "Celu" else opset
    got = run(op, [x], attrs, opset=opset)
    assert got.dtype == np.float16
    assert np.allclose(got.astype(np.float64), _ref(fn, x), rtol=1e-3, atol=1e-3)
    nan = run(op, [f32(np.nan)], attrs, opset=opset)
    assert np.isnan(nan[0]) or (op == "ThresholdedRelu" and nan[0] == 0)


def test_sigmoid_tail_keeps_relative_accuracy():
    x = np.array([-80, -30, -15], np.float64)
    got = run("Sigmoid", [x], opset=13)
    assert np.allclose(got, _ref(_sig, x), rtol=1e-12, atol=0)


def test_float32_sigmoid_tail_is_onnxruntimes_absolute_accuracy():
    """float32 Sigmoid is onnxruntime's polynomial (``p / q + 0.5``, clamped at -18): in the
    negative tail its error is absolute, at most :data:`MLAS32_ABS`, not relative."""
    x = f32(-80, -30, -18, -17.5, -15, -9)
    got = run("Sigmoid", [x], opset=13).astype(np.float64)
    want = _ref(_sig, x)
    assert np.all(np.abs(got - want) <= MLAS32_ABS) and np.all(got >= 0)
    assert not np.allclose(got, want, rtol=1e-5, atol=0)      # the relative accuracy is gone there


def test_relu_and_shrink_on_integers():
    got = run("Relu", [np.array([-5, 0, 7], np.int8)], opset=14)
    assert got.dtype == np.int8 and got.tolist() == [0, 0, 7]
    got = run("Shrink", [np.array([-3, -1, 1, 3], np.int32)], {"lambd": 1.0, "bias": 1.5}, opset=9)
    assert got.dtype == np.int32 and got.tolist() == [-1, 0, 0, 1]     # -1.5 and 1.5 truncated


def test_prelu_legacy_per_channel_slope():
    x = -np.ones((2, 3, 2, 2), np.float32)
    slope = f32(0.1, 0.2, 0.3)
    for opset in (1, 6):
        got = run("PRelu", [x, slope], opset=opset)
        assert np.allclose(got[1, :, 1, 0], [-0.1, -0.2, -0.3])
    got = run("PRelu", [x, f32(0.5)], opset=6)
    assert np.allclose(got, -0.5)


def test_prelu_unidirectional_broadcast():
    x = np.array([[-2.0, 3.0], [-4.0, -1.0]], np.float32)
    got = run("PRelu", [x, f32(0.5, 0.25)], opset=7)
    assert got.tolist() == [[-1.0, 3.0], [-2.0, -0.25]]
    got = run("PRelu", [np.array([-4, 4], np.int32), np.array([3], np.int32)], opset=9)
    assert got.dtype == np.int32 and got.tolist() == [-12, 4]
    with pytest.raises(OnnxkitError, match="unidirectionally"):
        run("PRelu", [x, f32(1, 2, 3)], opset=16, symbolic=True)


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_before_13_coerces_to_2d():
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    flat = _np_softmax(x.reshape(2, 12).astype(np.float64), 1).reshape(2, 3, 4)
    for opset in (1, 11):
        got = run("Softmax", [x], {"axis": 1}, opset=opset)
        assert np.allclose(got, flat, rtol=1e-6)
        assert np.allclose(got.sum(axis=(1, 2)), 1)
    got = run("Softmax", [x], {"axis": 1}, opset=13)             # one axis only
    assert np.allclose(got, _np_softmax(x.astype(np.float64), 1), rtol=1e-6)
    assert np.allclose(got.sum(axis=1), 1)
    got = run("Softmax", [x], opset=1)                            # default axis 1, coerced
    assert np.allclose(got, flat, rtol=1e-6)
    got = run("LogSoftmax", [x], {"axis": 0}, opset=11)          # the whole tensor is one row
    assert np.allclose(got, np.log(_np_softmax(x.reshape(1, 24).astype(np.float64), 1)).reshape(2, 3, 4), atol=1e-6)
    assert np.allclose(run("Softmax", [x], {"axis": 3}, opset=11), 1)   # axis == rank: rows of one


def test_hardmax_coercion_and_first_maximum():
    x = np.zeros((2, 2, 3), np.float32)
    x[0, 1, 2] = 5
    x[1, 0, 1] = x[1, 1, 0] = 7                    # a tie: the first in row-major order wins
    got = run("Hardmax", [x], {"axis": 1}, opset=11)
    assert got.sum() == 2 and got[0, 1, 2] == 1 and got[1, 0, 1] == 1 and got[1, 1, 0] == 0
    got = run("Hardmax", [x], {"axis": 1}, opset=13)
    assert got.sum() == 6 and got[1, 0, 1] == 1 and got[1, 1, 0] == 1 and got[0, 0, 0] == 1


def test_softmax_axis_out_of_range():
    with pytest.raises(OnnxkitError, match="axis 2 is out of range"):
        run("Softmax", [np.ones((2, 3), np.float32)], {"axis": 2}, opset=13)


# ============================================================================ Cast
def test_cast_float_to_int_truncates_and_ints_wrap():
    assert run("Cast", [f32(2.7, -2.7, 0.5)], {"to": TP.INT32}, opset=13, out_type=TP.INT32).tolist() == [2, -2, 0]
    got = run("Cast", [np.array([200, -129, 300], np.int16)], {"to": TP.INT8}, opset=13, out_type=TP.INT8)
    assert got.tolist() == [-56, 127, 44]
    got = run("Cast", [np.array([300, -1], np.int32)], {"to": TP.UINT8}, opset=6, out_type=TP.UINT8)
    assert got.tolist() == [44, 255]


def test_cast_to_bool_and_back():
    got = run("Cast", [f32(0, -0.0, np.nan, 0.1)], {"to": TP.BOOL}, opset=13, out_type=TP.BOOL)
    assert got.tolist() == [False, False, True, True]
    got = run("Cast", [np.array([True, False])], {"to": TP.FLOAT}, opset=13, out_type=TP.FLOAT)
    assert got.dtype == np.float32 and got.tolist() == [1, 0]


def test_cast1_names_the_type():
    got = run("Cast", [np.array([1.9, -1.9])], {"to": "INT64"}, opset=1, out_type=TP.INT64)
    assert got.dtype == np.int64 and got.tolist() == [1, -1]


def test_cast_from_strings():
    s = np.array(["1.5", "inf", "-INF", "NaN", "+INF", "1e-5", " 2 "], dtype=object)
    got = run("Cast", [s], {"to": TP.FLOAT}, opset=9, out_type=TP.FLOAT)
    assert got.dtype == np.float32
    assert got[0] == 1.5 and got[1] == np.inf and got[2] == -np.inf and np.isnan(got[3])
    assert got[4] == np.inf and got[5] == np.float32(1e-5) and got[6] == 2
    big = np.array([b"9007199254740993", b"-5"], dtype=object)
    got = run("Cast", [big], {"to": TP.INT64}, opset=13, out_type=TP.INT64)
    assert got.tolist() == [9007199254740993, -5]                    # exact, not through double
    got = run("Cast", [np.array(["1", "0", "true", "FALSE"], dtype=object)], {"to": TP.BOOL}, opset=13,
              out_type=TP.BOOL)
    assert got.tolist() == [True, False, True, False]


def test_cast_to_strings():
    def texts(a):
        return [v.decode() if isinstance(v, bytes) else v for v in a.tolist()]

    got = run("Cast", [f32(0.1, 3, np.nan, np.inf, -np.inf, 1e-7)], {"to": TP.STRING}, opset=9, out_type=TP.STRING)
    assert texts(got) == ["0.1", "3", "NaN", "INF", "-INF", "1e-07"]
    got = run("Cast", [np.array([-5, 2 ** 40], np.int64)], {"to": TP.STRING}, opset=13, out_type=TP.STRING)
    assert texts(got) == ["-5", "1099511627776"]
    got = run("Cast", [np.array([True, False])], {"to": TP.STRING}, opset=13, out_type=TP.STRING)
    assert texts(got) == ["1", "0"]
    back = run("Cast", [np.array(texts(run("Cast", [f32(0.1, 1 / 3)], {"to": TP.STRING}, opset=13, out_type=TP.STRING)),
                                 dtype=object)], {"to": TP.FLOAT}, opset=13, out_type=TP.FLOAT)
    assert back.tolist() == f32(0.1, 1 / 3).tolist()                 # the text round-trips


def test_cast_float8_saturate():
    x = f32(1000, -1000, np.inf, 1e6, 1.0)
    e4 = run("Cast", [x], {"to": TP.FLOAT8E4M3FN}, opset=19, out_type=TP.FLOAT8E4M3FN)
    assert e4.dtype == ml_dtypes.float8_e4m3fn and e4.astype(np.float32).tolist() == [448, -448, 448, 448, 1]
    e4 = run("Cast", [x], {"to": TP.FLOAT8E4M3FN, "saturate": 0}, opset=19, out_type=TP.FLOAT8E4M3FN)
    assert np.isnan(e4.astype(np.float32)[:4]).all() and e4.astype(np.float32)[4] == 1
    e5 = run("Cast", [x], {"to": TP.FLOAT8E5M2, "saturate": 0}, opset=21, out_type=TP.FLOAT8E5M2)
    assert e5.astype(np.float32).tolist() == [1024, -1024, np.inf, np.inf, 1]
    e5 = run("Cast", [x], {"to": TP.FLOAT8E5M2}, opset=21, out_type=TP.FLOAT8E5M2)
    assert e5.astype(np.float32).tolist() == [1024, -1024, 57344, 57344, 1]


def test_cast_e8m0_round_modes():
    x = f32(1.1, 1.5, 3.0, 0.75, 8)

    def cast(**attrs):
        got = run("Cast", [x], {"to": TP.FLOAT8E8M0, **attrs}, opset=24, out_type=TP.FLOAT8E8M0)
        assert got.dtype == ml_dtypes.float8_e8m0fnu
        return got.astype(np.float32).tolist()

    assert cast() == [2, 2, 4, 1, 8]                                   # 'up' by default
    assert cast(round_mode="down") == [1, 1, 2, 0.5, 8]
    assert cast(round_mode="nearest") == [1, 2, 4, 1, 8]                # ties up
    z = f32(0, 3e38, np.inf, np.nan)
    got = run("Cast", [z], {"to": TP.FLOAT8E8M0}, opset=24, out_type=TP.FLOAT8E8M0).astype(np.float64)
    assert got[0] == 2.0 ** -127 and got[1] == 2.0 ** 127 and got[2] == 2.0 ** 127 and np.isnan(got[3])
    got = run("Cast", [z], {"to": TP.FLOAT8E8M0, "saturate": 0, "round_mode": "nearest"}, opset=25,
              out_type=TP.FLOAT8E8M0).astype(np.float64)
    assert np.isnan(got[0]) and np.isnan(got[1]) and np.isnan(got[2])


def test_cast_narrow_integers_round_floats_and_wrap():
    # floats: round half to even (6.3.3), then the low bits, as integers: 8 -> -8, -9 -> 7, 7.9 -> 8 -> -8
    got = run("Cast", [f32(8, -9, 7.9, -8.5)], {"to": TP.INT4}, opset=21, out_type=TP.INT4)
    assert got.dtype == ml_dtypes.int4 and got.astype(np.int8).tolist() == [-8, 7, -8, -8]
    got = run("Cast", [np.array([5, -1], np.int32)], {"to": TP.UINT2}, opset=25, out_type=TP.UINT2)
    assert got.astype(np.int8).tolist() == [1, 3]
    got = run("Cast", [np.array([-8, 7], ml_dtypes.int4)], {"to": TP.INT8}, opset=21, out_type=TP.INT8)
    assert got.tolist() == [-8, 7]


def test_cast_bfloat16_from_double_rounds_once():
    x = np.array([1 + 2 ** -8 + 2 ** -30, 1 + 2 ** -8], np.float64)
    got = run("Cast", [x], {"to": TP.BFLOAT16}, opset=13, out_type=TP.BFLOAT16)
    assert got.astype(np.float64).tolist() == [1 + 2 ** -7, 1.0]     # above the tie / tie to even


def test_cast_like():
    got = run("CastLike", [f32(1.9, -3.5), np.array([0], np.int8)], opset=15, out_type=TP.INT8)
    assert got.dtype == np.int8 and got.tolist() == [1, -3]
    got = run("CastLike", [f32(1000), np.zeros(1, ml_dtypes.float8_e4m3fn)], {"saturate": 0}, opset=19,
              out_type=TP.FLOAT8E4M3FN)
    assert np.isnan(got.astype(np.float32)[0])
    got = run("CastLike", [f32(1000), np.zeros(1, ml_dtypes.float8_e4m3fn)], opset=19, out_type=TP.FLOAT8E4M3FN)
    assert got.astype(np.float32)[0] == 448
