"""The gpu backend (torch) against the cpu backend (numpy) and onnx.reference for the kernels of
elementwise.py, activation.py, cast.py, shape.py and reduction.py of onnxkit_gpu.

Each test builds one-node models (``onnx.helper``, tests only) and runs them on both backends
and on onnx's ReferenceEvaluator (an independent oracle; gpu_oracle.py names where it is none):
old operator versions (legacy broadcasting, attribute forms, 2-D coercion of the softmax
family before 13), integer and half types, edge values.  Where the two backends may differ
(undefined behaviour) or the cpu backend is not the reference, the expected values are
written out by hand.  On a machine without CUDA the gpu backend runs on torch's CPU device.
"""

from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import gpu_oracle  # noqa: E402
from onnxkit.dtypes import from_numpy_dtype  # noqa: E402
from onnxkit.errors import OnnxkitError, ValidationError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def _tag(a) -> int:
    return int(from_numpy_dtype(np.asarray(a).dtype).tag)


def _ir_version(opset: int) -> int:
    try:
        return helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    except ValueError:               # opsets 2-4 are missing from onnx's table: IR 3 covers them
        return 3


def model(op, inputs, attrs=None, opset=13, n_out=1, outputs=None):
    """A one-node model; ``inputs``: arrays or None (an omitted optional input).  ``outputs``:
    arrays whose element types and ranks the graph outputs declare (None: untyped outputs)."""
    names, graph_inputs = [], []
    for k, v in enumerate(inputs):
        if v is None:
            names.append("")
            continue
        names.append(f"x{k}")
        v = np.asarray(v)
        graph_inputs.append(helper.make_tensor_value_info(f"x{k}", _tag(v), list(v.shape)))
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    if outputs is None:
        graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outs]
    else:
        graph_outputs = [helper.make_tensor_value_info(o, _tag(a), [f"{o}_{j}" for j in range(a.ndim)])
                         for o, a in zip(outs, outputs)]
    opsets = [helper.make_opsetid("", opset)]
    g = helper.make_graph([node], "g", graph_inputs, graph_outputs)
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = _ir_version(opset)
    feed = {f"x{k}": np.asarray(v) for k, v in enumerate(inputs) if v is not None}
    return m.SerializeToString(), feed


def _run(backend, op, inputs, attrs, opset, n_out, outputs=None):
    """Evaluate on ``backend``: first unchecked with untyped outputs (to learn their types),
    then the model declaring them, checked (Clause 15.5) and evaluated."""
    if outputs is None:
        data, feed = model(op, inputs, attrs, opset, n_out)
        outputs = InferenceSession(data, backend, validate=False).run(None, feed)
    data, feed = model(op, inputs, attrs, opset, n_out, outputs)
    return InferenceSession(data, backend).run(None, feed)


def run(backend, op, inputs, attrs=None, opset=13, n_out=1):
    got = _run(backend, op, inputs, attrs, opset, n_out)
    return got[0] if n_out == 1 else got


def _tol(dt):
    return {np.dtype(np.float16): 1e-3, BF16: 8e-3, np.dtype(np.float32): 2e-6}.get(np.dtype(dt), 1e-12)


def same(op, inputs, attrs=None, opset=13, n_out=1, rtol=None, atol=None):
    """Run on both backends; the gpu result must equal the cpu one (dtype, shape, values) and
    agree with onnx.reference (gpu_oracle.py).  A combination the definition does not admit (an
    element type outside its type constraints, e.g. bfloat16 before 13) must be refused by both
    backends alike; None is returned then."""
    try:
        wants = _run("cpu", op, inputs, attrs, opset, n_out)
    except ValidationError as exc:
        codes = sorted({d.code for d in exc.diagnostics})
        if codes != ["type-constraint-violation"]:
            raise
        data, feed = model(op, inputs, attrs, opset, n_out, _untyped_outputs(op, inputs, attrs, opset, n_out))
        with pytest.raises(ValidationError) as refused:
            InferenceSession(data, "gpu").run(None, feed)
        assert sorted({d.code for d in refused.value.diagnostics}) == codes
        return None
    gots = _run("gpu", op, inputs, attrs, opset, n_out, wants)
    for w, g in zip(wants, gots):
        r = _tol(w.dtype) if rtol is None else rtol
        gpu_oracle.assert_close(g, w, r, r * 1e-3 if atol is None else atol)
    data, feed = model(op, inputs, attrs, opset, n_out, wants)
    r = _tol(wants[0].dtype) if rtol is None else rtol
    a = r * 1e-3 if atol is None else atol
    gpu_oracle.check_against_reference(data, feed, gots, op, opset, max(r, 2e-6), max(a, 1e-6))
    return gots[0] if n_out == 1 else gots


def _untyped_outputs(op, inputs, attrs, opset, n_out):
    """What the gpu backend computes unchecked, to declare the outputs of the checked model."""
    data, feed = model(op, inputs, attrs, opset, n_out)
    return InferenceSession(data, "gpu", validate=False).run(None, feed)


RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _seeded():
    """The same random inputs for a test however the suite is selected or ordered."""
    global RNG
    RNG = np.random.default_rng(7)


def rand(shape, dtype=np.float32, lo=-3.0, hi=3.0):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return RNG.integers(max(info.min, int(lo) * 10), min(info.max, int(hi) * 10) + 1, size=shape).astype(dt)
    if dt == np.bool_:
        return RNG.random(shape) < 0.5
    return RNG.uniform(lo, hi, size=shape).astype(dt)


FLOATS = [np.float32, np.float64, np.float16, BF16]
INTS = [np.int8, np.uint8, np.int16, np.int32, np.int64]


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
        same(op, [x], attrs, opset=opset, rtol=3e-6 if np.dtype(dtype) == np.float32 else None)


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


# ============================================================================ Cast
_CASTABLE = [np.float32, np.float64, np.float16, BF16, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("src", _CASTABLE)
@pytest.mark.parametrize("dst", _CASTABLE)
def test_cast_pairs(src, dst):
    x = np.array([0, 1, -1, 2.5, -2.5, 100.7, -100.7, 3e4, 1e-3, 7], np.float64)
    x = x.astype(src) if np.dtype(src).kind != "u" else np.abs(x).astype(src)
    tag = _tag(np.zeros((), dst))
    same("Cast", [x], {"to": tag}, opset=13, rtol=0)
    same("CastLike", [x, np.zeros((1,), dst)], opset=21, rtol=0)


def test_cast_double_to_half_rounds_once():
    # 1 + 2**-11 + 2**-40 is above the float16 tie: rounds up; via float32 it would be a tie -> even (down)
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -40, 65519.99, 65520.0, -1e-8, 2.0 ** -25],
                 np.float64)
    got = run("gpu", "Cast", [x], {"to": TP.FLOAT16}, opset=13)
    with np.errstate(over="ignore"):
        assert got.view(np.uint16).tolist() == x.astype(np.float16).view(np.uint16).tolist()
    got = run("gpu", "Cast", [x[:2]], {"to": TP.BFLOAT16}, opset=13)
    assert got.astype(np.float64).tolist() == [1.0, 1 + 2.0 ** -7]
    big = np.array([2 ** 31 - 1, -(2 ** 24) - 3], np.int32)
    got = run("gpu", "Cast", [big], {"to": TP.BFLOAT16}, opset=13)
    assert got.astype(np.float64).tolist() == [2.0 ** 31, -(2.0 ** 24)]


def test_cast_float_to_int_and_bool_rules():
    x = np.array([2.9, -2.9, np.nan, np.inf, 300.0, -129.0, 0.0, -0.0], np.float32)
    finite = np.isfinite(x)
    same("Cast", [x[finite]], {"to": TP.INT8}, opset=13)
    same("Cast", [x[finite]], {"to": TP.UINT8}, opset=13)
    same("Cast", [x[finite]], {"to": TP.INT64}, opset=13)
    # undefined by ONNX: out of range gives the low bits of the truncated value, NaN and Inf 0
    assert run("gpu", "Cast", [x], {"to": TP.INT8}, opset=13).tolist() == [2, -2, 0, 0, 44, 127, 0, 0]
    assert run("gpu", "Cast", [x], {"to": TP.INT64}, opset=13).tolist() == [2, -2, 0, 0, 300, -129, 0, 0]
    big = np.array([1e19, -1e19, 2.0 ** 70 + 2.0 ** 20], np.float64)     # the low 64 bits of the integer
    assert run("gpu", "Cast", [big], {"to": TP.INT64}, opset=13).tolist() == [10 ** 19 - 2 ** 64, 2 ** 64 - 10 ** 19,
                                                                             2 ** 20]
    got = same("Cast", [x], {"to": TP.BOOL}, opset=13)
    assert got.tolist() == [True, True, True, True, True, True, False, False]
    same("Cast", [np.array([200, -200, 70000], np.int32)], {"to": TP.INT8}, opset=13)


def test_cast1_names_the_type_and_types_torch_does_not_compute_run_on_cpu():
    x = rand((3,))
    same("Cast", [x], {"to": "INT32"}, opset=1)
    same("Cast", [x], {"to": "DOUBLE"}, opset=1)
    x = np.array([1.0, 2.5, 7.0], np.float32)
    for tag, want in ((TP.UINT32, [1, 2, 7]), (TP.FLOAT8E4M3FN, [1.0, 2.5, 7.0]), (TP.STRING, ["1.5", "2.5", "7.25"]),
                      (TP.INT4, [2, 2, 7])):  # a per-node fallback: the cpu backend's Cast, planned
        # (INT4 gets the STRING case's [1.5, 2.5, 7.25]: rounded half to even, 6.3.3)
        if tag == TP.STRING:
            x = np.array([1.5, 2.5, 7.25], np.float32)
        got = run("gpu", "Cast", [x], {"to": tag}, opset=21)
        assert isinstance(got, np.ndarray) and got.dtype == run("cpu", "Cast", [x], {"to": tag}, opset=21).dtype
        values = [v.decode() if isinstance(v, bytes) else v for v in got.tolist()] if tag == TP.STRING \
            else got.astype(np.float64).tolist()
        assert values == want, (tag, values)
    assert run("gpu", "Cast", [np.array([1, 2], np.uint32)], {"to": TP.FLOAT}, opset=13).tolist() == [1.0, 2.0]


# ============================================================================ shape
def test_reshape_versions():
    x = rand((2, 3, 4))
    same("Reshape", [x], {"shape": [4, -1]}, opset=1)
    same("Reshape", [x, np.array([0, -1], np.int64)], opset=5)
    same("Reshape", [x, np.array([3, -1, 2], np.int64)], opset=13)
    same("Reshape", [x, np.array([0, 12], np.int64)], opset=14)
    same("Reshape", [x, np.array([0, 0, -1], np.int64)], opset=19)
    same("Reshape", [np.zeros((0, 3), np.float32), np.array([3, 0], np.int64)], {"allowzero": 1}, opset=14)
    with pytest.raises(OnnxkitError, match="cannot reshape"):
        run("gpu", "Reshape", [x, np.array([5, -1], np.int64)], opset=21)


def test_transpose_concat_flatten():
    x = rand((2, 3, 4))
    same("Transpose", [x], opset=1)
    same("Transpose", [x], {"perm": [1, 2, 0]}, opset=13)
    same("Transpose", [x.astype(np.int8)], {"perm": [2, 0, 1]}, opset=21)
    same("Concat", [x, rand((2, 2, 4))], opset=1)                    # default axis 1
    same("Concat", [x, rand((2, 3, 1)), rand((2, 3, 2))], {"axis": -1}, opset=13)
    same("Concat", [x, rand((1, 3, 4))], {"axis": 0}, opset=4)
    with pytest.raises(OnnxkitError, match="cannot be joined"):
        run("gpu", "Concat", [x, rand((2, 2, 5))], {"axis": 1}, opset=11)
    for axis in (0, 1, 2, 3, -1):
        same("Flatten", [x], {"axis": axis}, opset=13)
    same("Flatten", [x], opset=1)
    same("Flatten", [np.zeros((0, 3, 2), np.float32)], {"axis": 2}, opset=11)


def test_split_versions():
    x = rand((6, 4))
    same("Split", [x], {"axis": 0}, opset=1, n_out=3)
    same("Split", [x, np.array([1, 5], np.float32)], {"axis": 0}, opset=1, n_out=2)  # lengths as an input (T)
    same("Split", [x], {"axis": 0, "split": [2, 4]}, opset=2, n_out=2)
    same("Split", [x], {"axis": -1, "split": [1, 3]}, opset=11, n_out=2)
    same("Split", [x, np.array([3, 0, 3], np.int64)], {"axis": 0}, opset=13, n_out=3)
    same("Split", [rand((7, 2))], {"axis": 0, "num_outputs": 3}, opset=18, n_out=3)
    with pytest.raises(OnnxkitError, match="equal parts"):
        run("gpu", "Split", [rand((7, 2))], {"axis": 0}, opset=13, n_out=2)


def test_squeeze_unsqueeze_versions():
    x = rand((1, 3, 1, 2))
    same("Squeeze", [x], opset=1)
    same("Squeeze", [x], {"axes": [0]}, opset=1)
    same("Squeeze", [x], {"axes": [-2]}, opset=11)
    same("Squeeze", [x, np.array([0, 2], np.int64)], opset=13)
    same("Squeeze", [x], opset=21)
    with pytest.raises(OnnxkitError, match="cannot squeeze"):
        run("gpu", "Squeeze", [x, np.array([1], np.int64)], opset=13)
    y = rand((3, 2))
    same("Unsqueeze", [y], {"axes": [0, 3]}, opset=1)
    same("Unsqueeze", [y], {"axes": [-1]}, opset=11)
    same("Unsqueeze", [y, np.array([1, -1], np.int64)], opset=13)
    same("Unsqueeze", [np.array(5.0, np.float32), np.array([0], np.int64)], opset=25)


def test_expand_and_tile():
    x = rand((3, 1))
    same("Expand", [x, np.array([2, 1, 4], np.int64)], opset=8)
    same("Expand", [x, np.array([1, 1], np.int64)], opset=13)       # the shape may be smaller
    with pytest.raises(OnnxkitError, match="cannot expand"):
        run("gpu", "Expand", [x, np.array([2, 4], np.int64)], opset=13)
    y = rand((2, 3), np.int16)
    same("Tile", [y.astype(np.float32), np.array(3, np.int64), np.array(1, np.int64)], opset=1)
    same("Tile", [y, np.array([2, 3], np.int64)], opset=6)
    same("Tile", [y, np.array([0, 1], np.int64)], opset=13)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_attribute_forms(mode):
    x = rand((3, 4))
    same("Pad", [x], {"paddings": [1, 2, 0, 1], "mode": mode}, opset=1)
    attrs = {"pads": [2, 1, 3, 2], "mode": mode}
    if mode == "constant":
        attrs["value"] = 1.5
    same("Pad", [x], attrs, opset=2)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16])
def test_pad_input_forms(mode, dtype):
    x = rand((3, 4, 2), dtype)
    opset = 19 if mode == "wrap" else 11
    pads = np.array([1, 0, 2, 2, 5, 1], np.int64)                   # 5 > extent: reflect / wrap repeat
    cv = np.array(1, dtype) if mode == "constant" else None
    same("Pad", [x, pads, cv] if cv is not None else [x, pads], {"mode": mode}, opset=opset)
    same("Pad", [x, np.array([-1, 1, 2, 0], np.int64), None, np.array([0, 2], np.int64)], {"mode": mode}, opset=19)
    same("Pad", [x, np.array([1, 0, 0, -1, -2, 0], np.int64)], {"mode": mode}, opset=max(opset, 13))


def test_pad_reflect_by_hand():
    x = np.array([1, 2, 3], np.float32)
    got = run("gpu", "Pad", [x, np.array([5, 4], np.int64)], {"mode": "reflect"}, opset=13)
    assert got.tolist() == [2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3]
    got = run("gpu", "Pad", [x, np.array([2, 4], np.int64)], {"mode": "wrap"}, opset=19)
    assert got.tolist() == [2, 3, 1, 2, 3, 1, 2, 3, 1]


def test_shape_and_size():
    x = rand((2, 3, 4, 5))
    same("Shape", [x], opset=1)
    for start, end in ((1, None), (-3, -1), (0, 10), (3, 1), (-10, 2)):
        attrs = {"start": start} if end is None else {"start": start, "end": end}
        same("Shape", [x], attrs, opset=15)
    same("Size", [x], opset=1)
    same("Size", [np.zeros((0, 3), np.int8)], opset=21)


def test_slice_versions():
    x = rand((5, 6, 7))
    same("Slice", [x], {"starts": [1, -4], "ends": [4, 100], "axes": [0, 2]}, opset=1)
    same("Slice", [x], {"starts": [1], "ends": [-1]}, opset=1)
    i64 = lambda *v: np.array(v, np.int64)   # noqa: E731
    same("Slice", [x, i64(4, 1), i64(0, 5)], opset=10)
    same("Slice", [x, i64(-1), i64(-100), i64(1), i64(-2)], opset=10)              # negative step
    same("Slice", [x, i64(10, 0), i64(-10, 7), i64(2, 0), i64(-3, 2)], opset=11)
    same("Slice", [x, i64(3), i64(3), i64(0), i64(-1)], opset=13)                  # empty
    same("Slice", [x, i64(0, 2**62), i64(2**62, -2**62), i64(0, 1), i64(2, -1)], opset=13)
    with pytest.raises(OnnxkitError, match="step of 0"):
        run("gpu", "Slice", [x, i64(0), i64(2), i64(0), i64(0)], opset=13)


def test_gather_and_gather_elements():
    x = rand((4, 5, 3))
    for axis in (0, 1, -1):
        n = x.shape[axis]
        idx = RNG.integers(-n, n, size=(2, 3)).astype(np.int64)
        same("Gather", [x, idx], {"axis": axis}, opset=13)
        same("Gather", [x, idx.astype(np.int32)], {"axis": axis}, opset=1)
    same("Gather", [x, np.array(-1, np.int64)], {"axis": 1}, opset=11)
    with pytest.raises(OnnxkitError, match="out of range"):
        run("gpu", "Gather", [x, np.array([4], np.int64)], opset=13)
    idx = RNG.integers(-5, 5, size=(3, 2, 3)).astype(np.int64)
    same("GatherElements", [x, idx], {"axis": 1}, opset=11)
    same("GatherElements", [x, idx[:, :, :2].astype(np.int32)], {"axis": 1}, opset=13)
    with pytest.raises(OnnxkitError, match="out of range"):
        run("gpu", "GatherElements", [x, np.full((1, 1, 1), 5, np.int64)], {"axis": 1}, opset=13)


def test_constant_forms_and_constant_of_shape():
    def both(attr, value, opset, et, rank):
        node = helper.make_node("Constant", [], ["y"], **{attr: value})
        g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", et, ["d"] * rank)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = _ir_version(opset)
        data = m.SerializeToString()
        w, gt = InferenceSession(data, "cpu").run(None, {})[0], InferenceSession(data, "gpu").run(None, {})[0]
        assert w.dtype == gt.dtype and np.array_equal(w, gt)
        return gt

    both("value", numpy_helper.from_array(rand((2, 2), np.int16)), 9, TP.INT16, 2)
    both("value", numpy_helper.from_array(rand((2,), np.float16)), 13, TP.FLOAT16, 1)
    both("value_floats", [1.5, 2.5], 12, TP.FLOAT, 1)
    both("value_int", 7, 13, TP.INT64, 0)
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0, 6.0], np.float32)),
                                       numpy_helper.from_array(np.array([1, 4], np.int64)), [2, 3])
    assert both("sparse_value", sparse, 11, TP.FLOAT, 2).tolist() == [[0, 5, 0], [0, 6, 0]]
    node = helper.make_node("Constant", [], ["y"], value_strings=["a"])
    g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TP.STRING, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    strings = InferenceSession(m.SerializeToString(), "gpu")  # a STRING constant: planned on cpu
    assert [(f.op_type, f.runs_on) for f in strings.fallbacks] == [("Constant", "cpu")]
    assert [v.decode() if isinstance(v, bytes) else v for v in strings.run(None, {})[0].tolist()] == ["a"]

    shp = np.array([2, 3], np.int64)
    same("ConstantOfShape", [shp], opset=9)
    for arr in (np.array([7], np.int64), np.array([1.25], np.float16), np.array([True]), np.array([-3], np.int8)):
        same("ConstantOfShape", [shp], {"value": numpy_helper.from_array(arr)}, opset=20)
    same("ConstantOfShape", [np.zeros((0,), np.int64)], {"value": numpy_helper.from_array(np.array([2.0]))}, opset=21)


def test_range():
    s = lambda v, dt: np.array(v, dt)   # noqa: E731
    for dt in (np.int32, np.int64, np.int16):
        same("Range", [s(-7, dt), s(20, dt), s(3, dt)], opset=11)
        same("Range", [s(10, dt), s(-3, dt), s(-4, dt)], opset=11)
        same("Range", [s(1, dt), s(1, dt), s(2, dt)], opset=11)
    for dt in (np.float32, np.float64):
        same("Range", [s(0.1, dt), s(2.35, dt), s(0.3, dt)], opset=11)
        same("Range", [s(1.0, dt), s(-1.0, dt), s(-0.25, dt)], opset=27)
    for dt in (np.float16, BF16):
        for stash in ({}, {"stash_type": TP.DOUBLE}, {"stash_type": int(from_numpy_dtype(dt).tag)}):
            same("Range", [s(0.1, dt), s(30, dt), s(0.7, dt)], stash, opset=27)
        same("Range", [s(0.1, dt), s(30, dt), s(0.7, dt)], opset=11)


# ============================================================================ reductions
_REDUCE_ALL = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
_INPUT_FROM = {"ReduceSum": 13}


@pytest.mark.parametrize("op", _REDUCE_ALL)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_reductions_float(op, dtype):
    x = rand((3, 4, 5), dtype, 0.1 if op == "ReduceLogSum" else -2, 2)
    if op == "ReduceProd":
        x = rand((3, 4, 5), dtype, 0.5, 1.5)
    for opset in (1, 11):
        for attrs in ({}, {"axes": [1]}, {"axes": [0, 2], "keepdims": 0}, {"axes": [-1, 0]}, {"keepdims": 0}):
            same(op, [x], attrs, opset=opset)
    opset = _INPUT_FROM.get(op, 18)
    for axes in (None, [1], [0, -1], [2, 1, 0]):
        for kd in (0, 1):
            same(op, [x] if axes is None else [x, np.array(axes, np.int64)], {"keepdims": kd}, opset=opset)
    same(op, [x, np.zeros((0,), np.int64)], {"noop_with_empty_axes": 1}, opset=opset)
    same(op, [x, np.zeros((0,), np.int64)], {"noop_with_empty_axes": 0}, opset=opset)
    same(op, [x], {"noop_with_empty_axes": 1}, opset=opset)


@pytest.mark.parametrize("op", _REDUCE_ALL)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
def test_reductions_int(op, dtype):
    x = rand((3, 4, 2), dtype, 0 if op == "ReduceLogSum" else -1, 1)
    if op == "ReduceLogSum":
        x = np.abs(x) + 1
    same(op, [x], {"axes": [1]}, opset=11)
    same(op, [x], {"keepdims": 0}, opset=13 if op != "ReduceSum" else 11)
    same(op, [x, np.array([0, 2], np.int64)], opset=_INPUT_FROM.get(op, 18))


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("op", _REDUCE_ALL)
def test_reductions_of_empty_sets(op):
    x = np.zeros((2, 0, 3), np.float32)
    opset = _INPUT_FROM.get(op, 18)
    for axes in ([1], [0, 1], [2]):
        same(op, [x, np.array(axes, np.int64)], {"keepdims": 1}, opset=opset)
        same(op, [x, np.array(axes, np.int64)], {"keepdims": 0}, opset=opset)
    same(op, [np.array(2.5, np.float32)], opset=opset)                      # a 0-d input


def test_reduce_max_min_bool_and_nan():
    b = rand((3, 4), np.bool_)
    same("ReduceMax", [b, np.array([1], np.int64)], opset=20)
    same("ReduceMin", [b], {"keepdims": 0}, opset=20)
    same("ReduceMin", [np.zeros((0, 2), np.bool_), np.array([0], np.int64)], opset=20)
    x = np.array([[1.0, np.nan], [2.0, 3.0]], np.float32)
    same("ReduceMax", [x], {"axes": [1]}, opset=13)
    same("ReduceLogSumExp", [np.array([[np.inf, 1.0], [-np.inf, -np.inf]], np.float32)], {"axes": [1]}, opset=13)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.int64, BF16])
def test_argmax_argmin(op, dtype):
    x = rand((4, 5, 3), dtype, -2, 2)          # small range: repeated values, first vs last index
    for opset in (1, 11, 12, 13):
        for attrs in ({}, {"axis": 1}, {"axis": -1, "keepdims": 0}):
            same(op, [x], attrs, opset=opset)
    same(op, [x], {"axis": 1, "select_last_index": 1}, opset=12)
    same(op, [x], {"axis": 0, "select_last_index": 1, "keepdims": 0}, opset=13)


# ============================================================================ kernel table
