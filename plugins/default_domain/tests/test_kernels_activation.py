"""The activation family (onnxkit_default_domain/kernels/activation.py) on both backends.

Every test runs on ``cpu`` (numpy, with its overrides) and ``gpu`` (torch; torch's CPU device
without CUDA).  Expected values are float64 formulas written here (``math.erfc`` for Gelu);
:func:`kernel_harness.portable` also runs the portable bodies a backend overrides, so the
portable definition is checked on numpy and torch alike.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from kernel_harness import BACKENDS, portable, run, session
from onnxkit.errors import OnnxkitError, ValidationError

torch = pytest.importorskip("torch")

_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_SELU = (1.67326319217681884765625, 1.05070102214813232421875)


def _softplus(x):
    return np.logaddexp(0.0, x)


def F(v):
    """A FLOAT attribute as the model stores it (float32), as a Python float."""
    return float(np.float32(v))


#: (operator, since_version, attributes, float64 reference; FLOAT attributes are float32)
CASES = [
    ("Relu", 14, {}, lambda x: np.maximum(x, 0)),
    ("LeakyRelu", 16, {"alpha": 0.1}, lambda x: np.where(x < 0, F(0.1) * x, x)),
    ("LeakyRelu", 16, {"alpha": -1.5}, lambda x: np.where(x < 0, -1.5 * x, x)),
    ("Elu", 22, {"alpha": 0.7}, lambda x: np.where(x > 0, x, F(0.7) * np.expm1(x))),
    ("Selu", 22, {"alpha": _SELU[0], "gamma": _SELU[1]},
     lambda x: _SELU[1] * np.where(x > 0, x, _SELU[0] * np.expm1(x))),
    ("Celu", 12, {"alpha": 0.6}, lambda x: np.maximum(x, 0) + np.minimum(0, F(0.6) * np.expm1(x / F(0.6)))),
    ("ThresholdedRelu", 22, {"alpha": 0.5}, lambda x: np.where(x > 0.5, x, 0)),
    ("Shrink", 9, {"bias": 0.3, "lambd": 1.0}, lambda x: np.where(x < -1, x + F(0.3), np.where(x > 1, x - F(0.3), 0))),
    ("Sigmoid", 13, {}, lambda x: 1 / (1 + np.exp(-x))),
    ("HardSigmoid", 22, {"alpha": 0.3, "beta": 0.4}, lambda x: np.clip(F(0.3) * x + F(0.4), 0, 1)),
    ("HardSwish", 22, {}, lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    ("Softplus", 22, {}, _softplus),
    ("Softsign", 22, {}, lambda x: x / (1 + np.abs(x))),
    ("Tanh", 13, {}, np.tanh),
    ("Gelu", 20, {}, lambda x: 0.5 * x * _erfc(-x / math.sqrt(2))),
    ("Gelu", 20, {"approximate": "tanh"},
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    ("Mish", 22, {}, lambda x: x * np.tanh(_softplus(x))),
    ("Swish", 24, {"alpha": 0.7}, lambda x: x / (1 + np.exp(-F(0.7) * x))),
]
_IDS = [f"{op}-{'-'.join(map(str, a.values()))}" for op, _, a, _ in CASES]
_MLAS_OPS = ("Sigmoid", "Tanh", "Swish", "Mish")
_TOL = {np.float32: 3e-6, np.float64: 1e-12, np.float16: 2e-3, ml_dtypes.bfloat16: 1.6e-2}


def _x(dtype, n=97):
    return np.linspace(-7, 7, n).astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("op,version,attrs,ref", CASES, ids=_IDS)
def test_values_against_float64_formulas(backend, dtype, op, version, attrs, ref):
    x = _x(dtype)
    want = ref(x.astype(np.float64))
    tol = _TOL[dtype]
    stored = {k: F(v) if isinstance(v, float) else v for k, v in attrs.items()}
    gots = [portable(backend, op, version, stored)(x)]
    try:
        gots.append(run(backend, op, [x], attrs, opset=version))
    except ValidationError as exc:                  # a type the definition does not admit
        assert {d.code for d in exc.diagnostics} == {"type-constraint-violation"}
    # the cpu backend's float32 logistic and tanh are onnxruntime's (MLAS's approximations,
    # docs/decisions.md): absolute error at most 1.78e-7 (3.3e-7 for tanh), times |x| in Swish / Mish
    atol = 2.4e-6 if (dtype is np.float32 and backend == "cpu" and op in _MLAS_OPS) else tol * 1e-2
    for got in gots:
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=atol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_dimensional_inputs_give_arrays(backend):
    x = np.array(-2.0, np.float32)
    for op, version, attrs, ref in CASES:
        got = portable(backend, op, version, {k: F(v) if isinstance(v, float) else v for k, v in attrs.items()})(x)
        assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.float32, op
        np.testing.assert_allclose(got, ref(np.float64(-2.0)), rtol=3e-6, err_msg=op)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gelu_keeps_the_negative_tail(backend):
    x64 = np.array([-30.0, -10.0, -1e-300, 0.0, 40.0], np.float64)
    want = 0.5 * x64 * _erfc(-x64 / math.sqrt(2))
    for got in (run(backend, "Gelu", [x64], opset=20), portable(backend, "Gelu", 20)(x64)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
        assert -1e-190 < got[0] < 0                     # 1 + erf(x/sqrt 2) would give 0 here
    x32 = np.array([-16.0, -9.0, 3.0, -np.inf, np.inf, np.nan], np.float32)
    for got in (run(backend, "Gelu", [x32], opset=20), portable(backend, "Gelu", 20)(x32)):
        assert got[0] == 0 and -1e-17 < got[1] < 0 and got[4] == np.inf
        assert np.isnan(got[3]) and np.isnan(got[5])    # -inf * erfc(inf) = -inf * 0, as the definition


@pytest.mark.parametrize("backend", BACKENDS)
def test_extreme_inputs(backend):
    x = np.array([-1000.0, -100.0, -1e-8, 0.0, 1e-8, 100.0, 1000.0, np.inf, -np.inf], np.float32)
    assert run(backend, "Sigmoid", [x])[[0, 6, 7, 8]].tolist() == [0.0, 1.0, 1.0, 0.0]
    assert run(backend, "Softplus", [x], opset=22)[[0, 6, 7]].tolist() == [0.0, 1000.0, np.inf]
    assert run(backend, "Mish", [x], opset=22)[6] == 1000.0
    nan = np.array([np.nan, 2.0], np.float32)
    assert run(backend, "ThresholdedRelu", [nan], {"alpha": 1.0}, opset=22).tolist() == [0.0, 2.0]
    assert np.isnan(run(backend, "Relu", [nan])[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_inputs_keep_their_type(backend):
    x = np.arange(-5, 6, dtype=np.int32)
    got = run(backend, "Shrink", [x], {"bias": 1.5, "lambd": 1.5}, opset=9)
    assert got.dtype == np.int32 and got.tolist() == [-3, -2, -1, 0, 0, 0, 0, 0, 1, 2, 3]
    i8 = np.array([-128, -1, 0, 5, 127], np.int8)
    assert run(backend, "Relu", [i8], opset=14).tolist() == [0, 0, 0, 5, 127]
    got = run(backend, "PRelu", [np.array([[-4, 3]], np.int64), np.array([2], np.int64)], opset=16)
    assert got.dtype == np.int64 and got.tolist() == [[-8, 3]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_prelu_slope_forms(backend):
    x = np.linspace(-3, 3, 2 * 3 * 4).astype(np.float32).reshape(2, 3, 4)
    per_channel = np.array([0.1, 0.2, 0.3], np.float32)
    want = np.where(x < 0, x * per_channel.reshape(3, 1), x)
    assert np.allclose(run(backend, "PRelu", [x, per_channel], opset=6), want)        # before 7: dimension 1
    assert np.allclose(run(backend, "PRelu", [x, per_channel.reshape(3, 1)], opset=9), want)
    assert np.allclose(run(backend, "PRelu", [x, np.array([0.5], np.float32)], opset=1), np.where(x < 0, x / 2, x))
    with pytest.raises(OnnxkitError, match="unidirectionally"):
        portable(backend, "PRelu", 16)(x, np.ones((5,), np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_family_versions(backend, op):
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)

    def ref(v, axis):
        if op == "Hardmax":
            y = np.zeros_like(v)
            np.put_along_axis(y, np.expand_dims(v.argmax(axis=axis), axis), 1, axis=axis)
            return y
        e = np.exp(v.astype(np.float64) - v.max(axis=axis, keepdims=True))
        s = e / e.sum(axis=axis, keepdims=True)
        return np.log(s) if op == "LogSoftmax" else s

    for opset, axis in ((13, -1), (13, 1), (13, 0), (11, 1), (11, 0), (1, 2), (11, 3)):
        got = run(backend, op, [x], {"axis": axis}, opset=opset)
        if opset < 13:                      # coerced to 2-D at axis, normalised over dimension 1
            n = math.prod(x.shape[:axis])
            want = ref(x.reshape(n, -1), 1).reshape(x.shape)
        else:
            want = ref(x, axis % 3)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=f"{op}-{opset} axis {axis}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_float16_is_computed_in_float16(backend):
    x = np.random.default_rng(2).uniform(-4, 4, (4, 9)).astype(np.float16)
    e = np.exp(x - x.max(axis=1, keepdims=True))                     # float16 steps
    s = e.astype(np.float32).sum(axis=1, keepdims=True).astype(np.float16)
    for got in (run(backend, "Softmax", [x]), portable(backend, "Softmax", 13)(x)):
        assert got.dtype == np.float16 and np.array_equal(got, e / s)
    h = run(backend, "Hardmax", [np.array([[3.0, 1.0, 3.0]], np.float16)])
    assert h.tolist() == [[1.0, 0.0, 0.0]]                           # the first maximum
    assert run(backend, "Softmax", [np.zeros((0, 3), np.float32)]).shape == (0, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_attributes_name_the_node(backend):
    x = np.ones((2,), np.float32)
    for op, attrs, opset, match in (("Celu", {"alpha": 0.0}, 12, "alpha must not be 0"),
                                    ("Gelu", {"approximate": "erf"}, 20, "approximate"),
                                    ("Softmax", {"axis": 3}, 13, "out of range")):
        with pytest.raises(OnnxkitError, match=match) as info:
            sess, feed = session(backend, op, [x], attrs, opset=opset)
            sess.run(None, feed)
        assert "the_node" in str(info.value)


def test_the_gpu_backend_runs_the_family_itself():
    x = np.ones((2, 3), np.float32)
    for op, attrs, opset in (("Gelu", {}, 20), ("Softmax", {}, 13), ("Relu", {}, 14), ("HardSwish", {}, 22),
                             ("PRelu", {}, 16)):
        inputs = [x, np.ones((3,), np.float32)] if op == "PRelu" else [x]
        sess, feed = session("gpu", op, inputs, attrs, opset=opset)
        assert sess.fallbacks == [] or all(fb.node != "the_node" for fb in sess.fallbacks), op
        assert sess.run(None, feed)[0].shape == (2, 3)
