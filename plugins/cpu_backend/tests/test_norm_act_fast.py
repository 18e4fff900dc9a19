"""Unit tests of the cpu fast paths of LayerNormalization, Erf, the activations, the softmax
family and the binary operators (overrides/norm.py, elementwise_math.py, activation.py,
elementwise.py).

What the fast paths must keep: the definition's float32 arithmetic (LayerNormalization's numpy
body is compared bit for bit with the ONNX function body written out here in float32 numpy, and
within 1e-5 with a float64 evaluation), the optional outputs, the types a fast path hands to the
portable kernel (narrow floats, 0-d, mixed types, empty tensors), quiet floating-point
warnings, and the errors of bad input.  Expected values are computed independently: Python's
``math`` in float64, plain numpy formulas, or ``onnx.reference`` (an oracle only).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402

RNG = np.random.default_rng(1414)


def model(op, inputs, attrs=None, opset=17, outputs=("y",), out_types=None):
    """A one-node model over ``inputs`` (arrays, None for an omitted input); the outputs are
    declared with unknown shapes, of ``out_types`` (default: the first input's type)."""
    names = ["" if v is None else f"x{k}" for k, v in enumerate(inputs)]
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for n, v in zip(names, inputs) if v is not None]
    first = helper.np_dtype_to_tensor_dtype(inputs[0].dtype)
    types = out_types or [first] * len(outputs)
    outs = [helper.make_tensor_value_info(o, t, None) for o, t in zip(outputs, types) if o]
    node = helper.make_node(op, names, list(outputs), **(attrs or {}))
    m = helper.make_model(helper.make_graph([node], "g", ins, outs), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    return m, {n: v for n, v in zip(names, inputs) if v is not None}


def run(op, inputs, attrs=None, opset=17, outputs=("y",), out_types=None):
    """onnxkit's outputs (a list when the node names several), no warning allowed."""
    m, feed = model(op, inputs, attrs, opset, outputs, out_types)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = InferenceSession(m.SerializeToString(), validate=False).run(None, feed)
    return got if len([o for o in outputs if o]) > 1 else got[0]


def reference(op, inputs, attrs=None, opset=17, outputs=("y",), out_types=None):
    m, feed = model(op, inputs, attrs, opset, outputs, out_types)
    return ReferenceEvaluator(m).run(None, feed)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ============================================================================ LayerNormalization
def body32(x, scale, b, axis, eps):
    """LayerNormalization's function body in X's type (stash_type 1, float32 X), op by op."""
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    inv = 1 / np.sqrt(var + eps)
    y = d * inv * scale
    return (y if b is None else y + b), mean, inv


def layer_norm64(x, scale, b, axis, eps):
    """The definition in float64."""
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x64 - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    y = (x64 - mean) * inv * scale.astype(np.float64)
    return (y if b is None else y + b.astype(np.float64)), mean, inv


@pytest.mark.parametrize("shape,axis", [((3, 9, 64), -1), ((3, 17, 64), 2), ((2, 3, 4, 5), 1), ((7,), 0)])
@pytest.mark.parametrize("with_b", [True, False])
def test_layer_norm_float32_is_the_function_body_bit_for_bit(shape, axis, with_b):
    """The numpy body (compiled loops off; the compiled float32 loop is within its bound of the
    definition instead: test_compiled_norm_act.py)."""
    x = randn(*shape) * 3 + 1
    scale, b = randn(*shape[axis % len(shape):]), randn(*shape[axis % len(shape):])
    inputs = [x, scale, b if with_b else None]
    with compiled.disabled():
        got = run("LayerNormalization", inputs, {"axis": axis, "epsilon": 1e-3}, outputs=("y", "mean", "inv"))
    want = body32(x, scale, b if with_b else None, axis, np.float32(1e-3))
    for g, w in zip(got, want):
        assert g.dtype == np.float32 and g.shape == w.shape
        assert np.array_equal(g, w)
    y64, m64, inv64 = layer_norm64(x, scale, b if with_b else None, axis, 1e-3)
    np.testing.assert_allclose(got[0], y64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[2], inv64, rtol=1e-5)


def test_layer_norm_outputs_as_requested():
    x, s, b = randn(4, 6), randn(6), randn(6)
    y = run("LayerNormalization", [x, s, b])
    assert isinstance(y, np.ndarray) and y.shape == (4, 6)
    y2, inv = run("LayerNormalization", [x, s, b], outputs=("y", "", "inv"))
    _, _, inv_want = body32(x, s, b, -1, np.float32(1e-5))
    # the compiled float32 loop's statistics are within an ulp of the function body's (numpy: equal)
    assert np.array_equal(y2, y) and np.allclose(inv, inv_want, rtol=2.5e-7, atol=0) and inv.shape == (4, 1)
    y3, mean = run("LayerNormalization", [x, s, b], outputs=("y", "mean"))
    assert np.array_equal(y3, y) and np.allclose(mean, x.mean(axis=1, keepdims=True), rtol=2.5e-7, atol=1e-12)


@pytest.mark.parametrize("stash", [1, 11])
def test_layer_norm_float64_statistics_types(stash):
    x, s, b = randn(5, 8, dtype=np.float64), randn(8, dtype=np.float64), randn(8, dtype=np.float64)
    y, mean, inv = run("LayerNormalization", [x, s, b], {"stash_type": stash}, outputs=("y", "mean", "inv"),
                       out_types=[TP.DOUBLE, TP.FLOAT if stash == 1 else TP.DOUBLE] * 2)
    y64, m64, inv64 = layer_norm64(x, s, b, -1, 1e-5)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, y64, rtol=1e-12, atol=1e-12)
    stat = np.float32 if stash == 1 else np.float64
    assert mean.dtype == stat and inv.dtype == stat
    np.testing.assert_allclose(mean, m64, rtol=1e-6)
    np.testing.assert_allclose(inv, inv64, rtol=1e-6)


def test_layer_norm_float32_stash_double_and_narrow_and_empty():
    x, s, b = randn(3, 16), randn(16), randn(16)
    y64, _, _ = layer_norm64(x, s, b, -1, 1e-5)
    y = run("LayerNormalization", [x, s, b], {"stash_type": 11})
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, y64, rtol=1e-5, atol=1e-5)
    h = run("LayerNormalization", [x.astype(np.float16), s.astype(np.float16), b.astype(np.float16)])
    assert h.dtype == np.float16
    want = reference("LayerNormalization", [x.astype(np.float16), s.astype(np.float16), b.astype(np.float16)])[0]
    np.testing.assert_allclose(h.astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=2e-3)
    empty = run("LayerNormalization", [np.zeros((0, 16), np.float32), s, b])
    assert empty.shape == (0, 16) and empty.dtype == np.float32


def test_layer_norm_constant_row_and_bad_axis():
    x = np.full((2, 8), 3.0, np.float32)
    y = run("LayerNormalization", [x, np.ones(8, np.float32), np.full(8, 0.5, np.float32)])
    assert np.array_equal(y, np.full((2, 8), 0.5, np.float32))    # d = 0: 0 * inv + B exactly
    with pytest.raises(OnnxkitError, match="axis"):
        run("LayerNormalization", [randn(2, 8), randn(8), randn(8)], {"axis": 2})


# ============================================================================ Erf
def test_erf_float32_relative_error_dense():
    xs = np.concatenate([np.linspace(-6, 6, 120001), np.linspace(3.9, 4.1, 20001),
                         np.geomspace(1e-38, 6, 5000), -np.geomspace(1e-38, 6, 5000)]).astype(np.float32)
    want = np.array([math.erf(float(v)) for v in xs])
    got = run("Erf", [xs], opset=13)
    assert got.dtype == np.float32
    rel = np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1e-300)
    assert rel.max() < 5e-7
    assert np.all(np.abs(got) <= 1)


def test_erf_float32_specials_shapes_and_types():
    got = run("Erf", [np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 4.5], np.float32)], opset=13)
    assert np.isnan(got[0]) and got[1:4].tolist() == [1, -1, 0] and np.signbit(got[4])
    assert got[5:].tolist() == [1, -1, 1]
    scalar = run("Erf", [np.array(0.5, np.float32)], opset=13)
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and abs(scalar - math.erf(0.5)) < 1e-7
    block = randn(3, 9, 128)
    got = run("Erf", [block], opset=13)
    assert got.shape == (3, 9, 128)
    assert abs(float(got[2, 8, 127]) - math.erf(float(block[2, 8, 127]))) < 1e-6
    h = run("Erf", [np.array([0.25, -1.5], np.float16)], opset=13)
    assert h.dtype == np.float16 and abs(float(h[1]) - math.erf(-1.5)) < 1e-3


# ============================================================================ activations
def test_relu_tanh_direct_paths():
    x = np.array([-0.0, -2.0, np.nan, np.inf, -np.inf, 3.5], np.float32)
    r = run("Relu", [x], opset=14)
    assert r.dtype == np.float32 and not np.signbit(r[0]) and np.isnan(r[2])
    assert r[[0, 1, 3, 4, 5]].tolist() == [0, 0, np.inf, 0, 3.5]
    assert run("Relu", [np.array([-3, 0, 5], np.int64)], opset=14).tolist() == [0, 0, 5]
    assert run("Relu", [np.array(-1.0, np.float64)], opset=14).shape == ()
    t = run("Tanh", [x.astype(np.float64)], opset=13)
    assert t.dtype == np.float64 and np.isnan(t[2])
    assert t[[1, 3, 4, 5]].tolist() == [math.tanh(-2.0), 1.0, -1.0, math.tanh(3.5)]
    t0 = run("Tanh", [np.array(0.5, np.float32)], opset=13)
    assert t0.shape == () and abs(float(t0) - math.tanh(0.5)) < 1e-7


def test_sigmoid_gelu_quiet_at_overflow():
    x = np.array([-1e4, -88.0, 0.0, 20.0, 1e4], np.float32)
    s = run("Sigmoid", [x], opset=13)                         # exp(1e4) overflows: no warning
    want = [1 / (1 + math.exp(-float(v))) if v > -700 else 0.0 for v in x]
    # float32 Sigmoid is onnxruntime's polynomial: absolute accuracy in the negative tail
    np.testing.assert_allclose(s.astype(np.float64), want, rtol=1e-6, atol=2.5e-7)
    s64 = run("Sigmoid", [x.astype(np.float64)], opset=13)    # float64: exp(1e4) overflows quietly
    np.testing.assert_allclose(s64, want, rtol=1e-12, atol=1e-300)
    g = run("Gelu", [x], opset=20)
    assert g[0] == 0 and g[2] == 0 and g[4] == 1e4 and abs(g[3] - 20) < 1e-5


# ============================================================================ softmax family
def softmax64(x, axis):
    e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((3, 2, 9, 9), -1), ((1, 20, 6625), 2), ((4, 5, 6), 1), ((4, 5, 6), -3)])
def test_softmax_log_softmax_against_float64(shape, axis):
    x = randn(*shape) * 4
    sm = run("Softmax", [x], {"axis": axis}, opset=13)
    lsm = run("LogSoftmax", [x], {"axis": axis}, opset=13)
    want = softmax64(x, axis)
    assert sm.dtype == lsm.dtype == np.float32 and sm.shape == lsm.shape == shape
    np.testing.assert_allclose(sm, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(lsm, np.log(want), rtol=1e-5, atol=1e-5)


def test_softmax_masked_rows_empty_and_bad_axis():
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]], np.float32)
    sm = run("Softmax", [x], opset=13)                         # inf - inf, 0 / 0: no warning
    np.testing.assert_allclose(sm[0], [1 / (1 + math.e), 0, math.e / (1 + math.e)], rtol=1e-6)
    assert np.isnan(sm[1]).all()
    lsm = run("LogSoftmax", [x[:1]], opset=13)
    assert lsm[0, 1] == -np.inf
    empty = run("Softmax", [np.zeros((0, 4), np.float32)], opset=13)
    assert empty.shape == (0, 4)
    h = run("Softmax", [x[:1].astype(np.float16)], opset=13)
    assert h.dtype == np.float16 and abs(float(h[0, 2]) - math.e / (1 + math.e)) < 1e-3
    with pytest.raises(OnnxkitError, match="axis 2 is out of range"):
        run("Softmax", [randn(2, 3)], {"axis": 2}, opset=13)


# ============================================================================ binary operators
def test_binary_float_results_types_and_quiet_overflow():
    big = np.array([3e38, -3e38, np.inf, 1.0], np.float32)
    add = run("Add", [big, big], opset=14)
    assert add.dtype == np.float32 and add.tolist() == [np.inf, -np.inf, np.inf, 2.0]
    sub = run("Sub", [big, big], opset=14)
    assert np.isnan(sub[2]) and sub[[0, 1, 3]].tolist() == [0, 0, 0]
    div = run("Div", [np.array([1.0, 0.0, -1.0], np.float64), np.zeros(3, np.float64)], opset=14)
    assert div[0] == np.inf and np.isnan(div[1]) and div[2] == -np.inf
    s = run("Mul", [np.array(1.5, np.float32), np.array(4.0, np.float32)], opset=14)
    assert isinstance(s, np.ndarray) and s.shape == () and s == 6.0
    eq = run("Equal", [np.array([1.0, np.nan], np.float32), np.array([1.0, np.nan], np.float32)], opset=13,
             out_types=[TP.BOOL])
    assert eq.dtype == np.bool_ and eq.tolist() == [True, False]
    lt = run("Less", [np.array(2, np.int64), np.array(3, np.int64)], opset=13, out_types=[TP.BOOL])
    assert lt.shape == () and lt.dtype == np.bool_ and bool(lt)


def test_binary_integers_wrap_and_division_by_zero_fails():
    i8 = np.array([127, -128], np.int8)
    assert run("Add", [i8, np.array([1, -1], np.int8)], opset=14).tolist() == [-128, 127]
    assert run("Mul", [np.array([2 ** 62], np.int64), np.array([4], np.int64)], opset=14).tolist() == [0]
    assert run("Div", [np.array([-7, 7], np.int32), np.array([2, -2], np.int32)], opset=14).tolist() == [-3, -3]
    with pytest.raises(OnnxkitError, match="division by zero"):
        run("Div", [np.array([1, 2], np.int64), np.array([1, 0], np.int64)], opset=14)
    got = run("And", [np.array([True, False]), np.array([True, True])], opset=7)
    assert got.tolist() == [True, False]


def test_binary_narrow_and_broadcast_paths():
    h = run("Add", [np.array([1.0, 2.0], np.float16), np.array([0.5, 0.25], np.float16)], opset=14)
    assert h.dtype == np.float16 and h.tolist() == [1.5, 2.25]
    a, b = randn(64), randn(3, 17, 64)
    got = run("Add", [a, b], opset=14)
    assert got.shape == (3, 17, 64) and np.array_equal(got, (a.astype(np.float64) + b).astype(np.float32))
    cond = np.array([[True], [False]])
    w = run("Where", [cond, np.array([1.0, 2.0], np.float32), np.array(-1.0, np.float32)], opset=16, out_types=[TP.FLOAT])
    assert w.tolist() == [[1.0, 2.0], [-1.0, -1.0]]


# ============================================================================ unary math
def test_unary_direct_paths_values_types_and_quiet():
    x = np.array([4.0, 0.0, -1.0, np.nan, np.inf], np.float32)
    s = run("Sqrt", [x], opset=13)
    assert s.dtype == np.float32 and s[[0, 1, 4]].tolist() == [2.0, 0.0, np.inf] and np.isnan(s[2:4]).all()
    lg = run("Log", [x], opset=13)                                     # log 0, log -1: no warning
    assert lg[1] == -np.inf and np.isnan(lg[2]) and abs(lg[0] - math.log(4.0)) < 1e-6
    assert run("Exp", [np.array([1000.0, 0.0], np.float64)], opset=13).tolist() == [np.inf, 1.0]
    r = run("Reciprocal", [np.array([4.0, 0.0, -0.0], np.float32)], opset=13)
    assert r.tolist() == [0.25, np.inf, -np.inf]
    assert run("Abs", [np.array([-128, 5], np.int8)], opset=13).tolist() == [-128, 5]   # wraps, as numpy
    assert run("Neg", [np.array([3, -4], np.int64)], opset=13).tolist() == [-3, 4]
    assert run("Floor", [np.array([-1.5, 2.5], np.float32)], opset=13).tolist() == [-2.0, 2.0]
    assert run("Ceil", [np.array([-1.5, 2.5], np.float64)], opset=13).tolist() == [-1.0, 3.0]
    nan = run("IsNaN", [x], opset=20, out_types=[TP.BOOL])
    assert nan.dtype == np.bool_ and nan.tolist() == [False, False, False, True, False]
    zero_d = run("Neg", [np.array(2.0, np.float32)], opset=13)
    assert isinstance(zero_d, np.ndarray) and zero_d.shape == () and zero_d == -2.0
    h = run("Sqrt", [np.array([2.0], np.float16)], opset=13)
    assert h.dtype == np.float16 and abs(float(h[0]) - math.sqrt(2)) < 1e-3


def test_erf_from_several_threads_at_once():
    """Runs of one session from four threads, inputs of several sizes (the kept powers buffer
    changes size between them): each result is its own input's."""
    from concurrent.futures import ThreadPoolExecutor

    m, _ = model("Erf", [randn(3, 9, 128)], opset=13)
    m.graph.input[0].type.tensor_type.shape.ClearField("dim")
    m.graph.input[0].type.tensor_type.shape.dim.add().dim_param = "n"      # one dynamic axis
    sess = InferenceSession(m.SerializeToString(), validate=False)
    blocks = [randn(n) * 2 for n in (5, 777, 9000)] + [randn(3456) * 2 for _ in range(60)]
    want = [np.array([math.erf(float(v)) for v in b]) for b in blocks]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda b: sess.run(None, {"x0": b})[0], blocks))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=5e-7, atol=1e-7)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape, axis", [((1, 1000, 1, 1), 1), ((2, 3, 40, 5), 1), ((2, 300, 1), 0)])
def test_legacy_softmax_long_rows_on_the_flattened_block(op, shape, axis):
    # before opset 13 the input is coerced to 2-D at ``axis`` and normalised along dimension 1;
    # rows longer than the compiled loop's take the numpy body on that matrix
    x = randn(*shape) * 4
    got = run(op, [x], {"axis": axis}, opset=9)
    n = math.prod(shape[:axis])
    x2 = x.reshape(n, -1).astype(np.float64)
    m = x2.max(axis=1, keepdims=True)
    s = np.exp(x2 - m).sum(axis=1, keepdims=True)
    want = (np.exp(x2 - m) / s if op == "Softmax" else (x2 - m) - np.log(s)).reshape(shape)
    assert got.shape == shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6 if op == "LogSoftmax" else 1e-9)
