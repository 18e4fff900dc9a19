"""FusedConv, FusedGemm, FusedMatMul and the Gelu family, one node each, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from ms_harness import check, rand, run_onnxkit, build

RNG = np.random.default_rng(31)


@pytest.mark.parametrize("act,params", [("", []), ("Relu", []), ("Tanh", []), ("Sigmoid", []),
                                        ("LeakyRelu", [0.2]), ("Clip", [-0.5, 0.7]), ("HardSigmoid", [0.3, 0.4])])
def test_fused_conv_activations(act, params):
    x, w, b = rand(RNG, (2, 3, 7, 6)), rand(RNG, (4, 3, 3, 3)), rand(RNG, (4,))
    attrs = {"activation": act, "pads": [1, 1, 1, 1]} if act else {"pads": [1, 1, 1, 1]}
    if params:
        attrs["activation_params"] = params
    check("FusedConv", [x, w, b], attrs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["sum", "group_stride", "no_bias_1d", "asymmetric_pads"])
def test_fused_conv_shapes(case):
    if case == "sum":
        x, w, b = rand(RNG, (1, 4, 5, 5)), rand(RNG, (6, 4, 1, 1)), rand(RNG, (6,))
        check("FusedConv", [x, w, b, rand(RNG, (1, 6, 5, 5))], {"activation": "Relu"}, rtol=1e-4, atol=1e-5)
    elif case == "group_stride":
        x, w = rand(RNG, (2, 4, 9, 8)), rand(RNG, (4, 1, 3, 3))
        check("FusedConv", [x, w], {"activation": "Relu", "group": 4, "strides": [2, 2], "auto_pad": "SAME_UPPER"},
              rtol=1e-4, atol=1e-5)
    elif case == "no_bias_1d":
        check("FusedConv", [rand(RNG, (2, 3, 11)), rand(RNG, (5, 3, 4))], {"activation": "Sigmoid",
                                                                           "dilations": [2]}, rtol=1e-4, atol=1e-5)
    else:
        x, w, b = rand(RNG, (1, 2, 6, 6)), rand(RNG, (3, 2, 3, 3)), rand(RNG, (3,))
        check("FusedConv", [x, w, b], {"activation": "Relu", "pads": [0, 1, 2, 0]}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs,shapes", [
    ({"activation": "Relu"}, ((4, 5), (5, 3), (3,))),
    ({"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0, "activation": "Relu"}, ((5, 4), (3, 5), (4, 3))),
    ({"activation": "LeakyRelu", "activation_alpha": 0.3}, ((4, 5), (5, 3), (1, 3))),
    ({"activation": "Tanh"}, ((2, 5), (5, 6), None)),
    ({"activation": "Sigmoid", "beta": 0.0}, ((2, 5), (5, 6), (6,))),
])
def test_fused_gemm(attrs, shapes):
    a, b, c = (None if s is None else rand(RNG, s) for s in shapes)
    check("FusedGemm", [a, b, c], attrs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs,sa,sb", [
    ({}, (3, 4), (4, 5)),
    ({"alpha": 0.125}, (2, 3, 4, 5), (2, 3, 5, 6)),
    ({"transB": 1, "alpha": 2.0}, (2, 2, 3, 4), (1, 5, 4)),
    ({"transA": 1}, (2, 5, 3), (5, 4)),
    ({"transBatchA": 1}, (3, 2, 5), (2, 5, 6)),
    ({"transBatchB": 1, "transB": 1}, (2, 3, 5), (4, 2, 5)),
    ({"transBatchA": 1, "transA": 1}, (5, 2, 3), (2, 5, 4)),
    ({}, (4,), (2, 4, 3)),
])
def test_fused_matmul(attrs, sa, sb):
    check("FusedMatMul", [rand(RNG, sa), rand(RNG, sb)], attrs, rtol=1e-5, atol=1e-5)


def test_fused_matmul_float16():
    check("FusedMatMul", [rand(RNG, (2, 3, 4), np.float16), rand(RNG, (4, 5), np.float16)], {"alpha": 0.5},
          rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gelu_family(dtype):
    tol = 1e-5 if dtype == np.float32 else 2e-3
    x, b = rand(RNG, (2, 3, 8), dtype, 3.0), rand(RNG, (8,), dtype)
    check("Gelu", [x], rtol=tol, atol=tol)
    check("BiasGelu", [x, b], rtol=tol, atol=tol)
    check("FastGelu", [x], rtol=tol, atol=tol)
    check("FastGelu", [x, b], rtol=tol, atol=tol)
    check("QuickGelu", [x], rtol=tol, atol=tol)
    check("QuickGelu", [x], {"alpha": 1.1}, rtol=tol, atol=tol)


def test_gelu_tails():
    """Far in the negative tail onnxruntime flushes to -0 what onnxkit computes (-5e-15 at -8), and its
    FastGelu loses digits to cancellation at ``1 + tanh u`` (-0.00363752 at -3, where float64 says
    -0.00363739 and onnxkit -0.00363739)."""
    x = np.array([-30, -8, -3, -1e-3, 0, 1e-3, 3, 8, 30], np.float32)
    check("Gelu", [x], rtol=1e-5, atol=1e-12)
    check("FastGelu", [x], rtol=5e-5, atol=1e-12)


def _softmax_reference(z, axis):
    flat = z.reshape(int(np.prod(z.shape[:axis])), -1).astype(np.float64)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(z.shape)


@pytest.mark.parametrize("axis,bias_shape", [(3, (2, 1, 1, 5)), (2, (1, 3, 4, 5)), (-1, (5,)), (1, (2, 3, 4, 5))])
def test_bias_softmax_and_bias_add(axis, bias_shape):
    """onnxruntime has no CPU kernel of these two (CUDA only): compared with their documented formula."""
    data, bias = rand(RNG, (2, 3, 4, 5)), rand(RNG, bias_shape)
    model, feed = build("BiasSoftmax", [data, bias], {"axis": axis, "is_inner_broadcast": 0})
    want = _softmax_reference(data + bias, axis % 4)
    for backend in ("cpu", "gpu"):
        [got] = run_onnxkit(model, feed, backend)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    x, b, s = rand(RNG, (2, 3, 4)), rand(RNG, (4,)), rand(RNG, (2, 3, 4))
    model, feed = build("BiasAdd", [x, b, s])
    for backend in ("cpu", "gpu"):
        [got] = run_onnxkit(model, feed, backend)
        np.testing.assert_allclose(got, x + b + s, rtol=1e-6)
