"""Losses, CumProd, BitCast and FlexAttention, written once (onnxkit_default_domain.kernels.misc),
on both backends.  The losses, CumProd and FlexAttention run on torch on ``gpu``; BitCast is
host_only and runs on its cpu fallback.  Expected values are hand-computed or numpy in double
precision."""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.errors import EvaluationError
from onnxkit.runtime import InferenceSession
from one_node import BACKENDS

pytest.importorskip("torch")
A = ir.Attribute.make
F32, I32, I64, F64 = 1, 6, 7, 11


def vi(name, elem, shape=None):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def run(op, inputs, feeds, outs, backend, opset=26, domain="", extra=(), **attrs):
    n = ir.Node([i[0] for i in inputs], [o[0] for o in outs], name="m", op_type=op, domain=domain,
                attribute=[A(k, v) for k, v in attrs.items()])
    g = ir.Graph(node=[n], name="g", input=[vi(*i) for i in inputs], output=[vi(*o) for o in outs])
    opsets = [ir.OperatorSetId("", opset), *extra]
    sess = InferenceSession(ir.Model(ir_version=11, opset_import=opsets, graph=g), backend)
    return sess, sess.run(None, feeds)


@pytest.mark.parametrize("backend", BACKENDS)
def test_losses(backend):
    logp = np.log(np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], np.float32))
    t = np.array([2, 0], np.int64)
    w = np.array([1.0, 2.0, 3.0], np.float32)
    sess, (y,) = run("NegativeLogLikelihoodLoss", [("x", F32, [2, 3]), ("t", I64, [2]), ("w", F32, [3])],
                     {"x": logp, "t": t, "w": w}, [("y", F32, [])], backend, opset=22)
    assert sess.fallbacks == []
    want = (-np.log(0.5) * 3 - np.log(0.6) * 1) / 4   # weighted mean
    assert y.dtype == np.float32 and abs(float(y) - want) < 1e-6
    with pytest.raises(EvaluationError, match="target value 3 is outside"):
        sess.run(None, {"x": logp, "t": np.array([3, 0]), "w": w})
    scores = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], np.float32)
    sess, (loss, lp) = run("SoftmaxCrossEntropyLoss", [("s", F32, [2, 3]), ("l", I64, [2])],
                           {"s": scores, "l": np.array([2, -1])}, [("loss", F32, []), ("lp", F32, [2, 3])], backend,
                           opset=13, ignore_index=-1, reduction="sum")
    assert sess.fallbacks == []
    s = scores.astype(np.float64)
    want_lp = s - np.log(np.exp(s).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(lp, want_lp, rtol=1e-6)
    assert abs(float(loss) + want_lp[0, 2]) < 1e-6   # the second target is ignored


@pytest.mark.parametrize("backend", BACKENDS)
def test_cum_prod_exclusive_and_reverse(backend):
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    ins = [("x", I32, [2, 3]), ("a", I64, [])]
    sess, (y,) = run("CumProd", ins, {"x": x, "a": np.array(1)}, [("y", I32, [2, 3])], backend)
    assert sess.fallbacks == [] and y.dtype == np.int32 and y.tolist() == [[1, 2, 6], [4, 20, 120]]
    _, (y,) = run("CumProd", ins, {"x": x, "a": np.array(-1)}, [("y", I32, [2, 3])], backend, exclusive=1, reverse=1)
    assert y.tolist() == [[6, 3, 1], [30, 6, 1]]
    _, (y,) = run("CumProd", [("x", F32, [3]), ("a", I64, [])], {"x": np.array([0.5, 4, 3], np.float32), "a": np.array(0)},
                  [("y", F32, [3])], backend, exclusive=1)
    assert y.dtype == np.float32 and y.tolist() == [1.0, 0.5, 2.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bit_cast_runs_on_the_cpu_fallback_on_gpu(backend):
    sess, (y,) = run("BitCast", [("x", F32, [2])], {"x": np.array([1.0, -2.0], np.float32)}, [("y", I32, [2])],
                     backend, to=I32)
    assert [f.op_type for f in sess.fallbacks] == (["BitCast"] if backend == "gpu" else [])
    assert y.dtype == np.int32 and y.tolist() == [0x3F800000, -0x40000000]


@pytest.mark.parametrize("backend", BACKENDS)
def test_flex_attention_with_grouped_heads_and_a_score_mod(backend):
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 4, 3, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    mod = ir.Graph(node=[ir.Node(["sc", "two"], ["out"], op_type="Mul", name="mul")], name="score_mod",
                   input=[vi("sc", F32, None)], output=[vi("out", F32, None)],
                   initializer=[ir.Tensor.from_numpy(np.array(2.0, np.float32), name="two")])
    sess, (y,) = run("FlexAttention", [("q", F32, [1, 4, 3, 8]), ("k", F32, [1, 2, 5, 8]), ("v", F32, [1, 2, 5, 8])],
                     {"q": q, "k": k, "v": v}, [("y", F32, [1, 4, 3, 8])], backend, domain="ai.onnx.preview",
                     extra=[ir.OperatorSetId("ai.onnx.preview", 1)], score_mod=mod)
    assert sess.fallbacks == []
    kk, vv = np.repeat(k, 2, axis=1).astype(np.float64), np.repeat(v, 2, axis=1).astype(np.float64)
    s = 2 * (q.astype(np.float64) @ kk.swapaxes(-1, -2)) / np.sqrt(8)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ vv
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
