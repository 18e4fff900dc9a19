"""MultiHeadAttention's input forms (issue 43) against onnxruntime 1.32's CPU kernel.

The masks themselves are in test_multihead_attention_mask.py; here the other forms its CPU
kernel computes: a value head size other than the query's, cross attention (fewer queries than
keys) with and without ``unidirectional`` -- onnxruntime's causal mask leaves the last query row
unmasked (PrepareMask), so one query sees every key --, keys and values already split into
heads ``(B, N, L, H)`` (the bias then on the query only, past keys before them), the
attention_bias broadcasts, the ``qk`` output (the scores as the softmax takes them), and the
forms onnxruntime's CPU kernel refuses (packed QKV / KV, the ``(2B)`` mask) refused with an
onnxkit error naming them.  Every case also against a float64 numpy reference of the rule.
"""

from __future__ import annotations

import zlib

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ms_harness import BACKENDS, build, run_onnxkit, run_ort
from onnxkit.errors import EvaluationError
from onnxkit.runtime import InferenceSession

B, N, H = 2, 2, 4
D = N * H
LOWEST = float(np.finfo(np.float32).min)


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _r(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _reference(q, kh, vh, *, qbias=None, attn_bias=None, lengths=None, causal_past=None, scale=None):
    """float64 MultiHeadAttention of q (B, S, D) over heads kh (B, N, T, H), vh (B, N, T, Hv):
    ``lengths`` (B) key lengths (masked keys get -10000); ``causal_past`` P: onnxruntime's causal
    rule, row i sees keys j <= P + i, the last row every key.  Returns (Y, scores)."""
    q = q.astype(np.float64) + (0 if qbias is None else qbias.astype(np.float64))
    b, s, _ = q.shape
    qh = q.reshape(b, s, N, -1).transpose(0, 2, 1, 3)
    kh, vh = kh.astype(np.float64), vh.astype(np.float64)
    t = kh.shape[2]
    scores = qh @ kh.transpose(0, 1, 3, 2) * (scale or 1.0 / np.sqrt(qh.shape[-1]))
    if attn_bias is not None:
        scores = scores + attn_bias
    if lengths is not None:
        scores = scores + np.where(np.arange(t)[None, :] < lengths[:, None], 0.0, -10000.0)[:, None, None, :]
    if causal_past is not None and s > 1:
        rows = np.arange(s)[:, None]
        allowed = (np.arange(t)[None, :] <= rows + causal_past) | (rows == s - 1)
        scores = np.where(allowed, scores, LOWEST)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    y = (e / e.sum(-1, keepdims=True)) @ vh
    return y.transpose(0, 2, 1, 3).reshape(b, s, -1), scores


def _heads(x):
    return x.reshape(x.shape[0], x.shape[1], N, -1).transpose(0, 2, 1, 3)


def _compare(model, feed, atol=1e-5):
    """onnxruntime's outputs, after asserting each onnxkit backend's equal them."""
    want = run_ort(model, feed)
    for backend in BACKENDS:
        got = run_onnxkit(model, feed, backend)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.dtype == w.dtype and g.shape == w.shape, (backend, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol, err_msg=f"on {backend}")
    return want


@pytest.mark.parametrize("has_bias", [False, True])
@pytest.mark.parametrize("hv", [2, 6])
def test_value_head_size_other_than_the_query(hv, has_bias):
    rng = _rng("hv", hv, has_bias)
    s, l_ = 3, 5
    q, k, v = _r(rng, B, s, D), _r(rng, B, l_, D), _r(rng, B, l_, N * hv)
    bias = _r(rng, 2 * D + N * hv) if has_bias else None
    model, feed = build("MultiHeadAttention", [q, k, v, bias], {"num_heads": N}, 3)
    y, pk, pv = _compare(model, feed)
    assert y.shape == (B, s, N * hv) and pv.shape == (B, N, l_, hv)
    kb, vb = (k, v) if bias is None else (k + bias[D:2 * D], v + bias[2 * D:])
    ref, _ = _reference(q, _heads(kb), _heads(vb), qbias=None if bias is None else bias[:D])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("past", [0, 2])
@pytest.mark.parametrize("with_lengths", [False, True])
@pytest.mark.parametrize("s", [1, 3, 5])
def test_cross_and_self_attention_causal(s, with_lengths, past):
    """unidirectional with S queries over P + L keys, L = 5: the last query row is unmasked."""
    rng = _rng("causal", s, with_lengths, past)
    l_ = 5
    q, k, v = _r(rng, B, s, D), _r(rng, B, l_, D), _r(rng, B, l_, D)
    lengths = np.array([past + l_ - 1, past + 2], np.int32) if with_lengths else None
    inputs = [q, k, v, None, lengths]
    if past:
        pk, pv = _r(rng, B, N, past, H), _r(rng, B, N, past, H)
        inputs += [None, pk, pv]
    model, feed = build("MultiHeadAttention", inputs, {"num_heads": N, "unidirectional": 1}, 3)
    y, present_k, present_v = _compare(model, feed)
    kh, vh = _heads(k), _heads(v)
    if past:
        kh, vh = np.concatenate([pk, kh], 2), np.concatenate([pv, vh], 2)
    np.testing.assert_array_equal(present_k, kh)
    ref, _ = _reference(q, kh, vh, lengths=lengths, causal_past=past)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("past", [0, 3])
@pytest.mark.parametrize("has_bias", [False, True])
def test_keys_split_into_heads(has_bias, past):
    """(B, N, L, H) keys and values: the bias adds to the query only; a past goes before them."""
    rng = _rng("bnsh", has_bias, past)
    s, l_ = 3, 4
    q, k, v = _r(rng, B, s, D), _r(rng, B, N, l_, H), _r(rng, B, N, l_, H)
    bias = _r(rng, 3 * D) if has_bias else None
    inputs = [q, k, v, bias, np.array([past + l_, past + 1], np.int32)]
    if past:
        pk, pv = _r(rng, B, N, past, H), _r(rng, B, N, past, H)
        inputs += [None, pk, pv]
    model, feed = build("MultiHeadAttention", inputs, {"num_heads": N}, 3)
    y, present_k, present_v = _compare(model, feed)
    kh, vh = (np.concatenate([pk, k], 2), np.concatenate([pv, v], 2)) if past else (k, v)
    np.testing.assert_array_equal(present_v, vh)
    ref, _ = _reference(q, kh, vh, qbias=None if bias is None else bias[:D], lengths=inputs[4])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bshape", [(1, 1), (B, 1), (1, N), (B, N)])
def test_attention_bias_broadcasts(bshape):
    rng = _rng("abias", bshape)
    s, l_ = 3, 4
    q, k, v = _r(rng, B, s, D), _r(rng, B, l_, D), _r(rng, B, l_, D)
    ab = _r(rng, *bshape, s, l_)
    model, feed = build("MultiHeadAttention", [q, k, v, None, None, ab], {"num_heads": N, "scale": 0.25})
    y = _compare(model, feed)[0]
    ref, _ = _reference(q, _heads(k), _heads(v), attn_bias=ab, scale=0.25)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_qk_output_is_the_scores_the_softmax_takes():
    """Output 3 (built with typed outputs: onnxruntime cannot infer its type): scaled Q Kᵀ with
    the attention_bias, the key lengths' -10000 and the causal mask's lowest value."""
    rng = _rng("qk")
    s, l_ = 3, 5
    q, k, v = _r(rng, B, s, D), _r(rng, B, l_, D), _r(rng, B, l_, D)
    lengths, ab = np.array([3, 5], np.int32), _r(rng, 1, N, s, l_)
    names = ["q", "k", "v", "", "m", "ab"]
    node = helper.make_node("MultiHeadAttention", names, ["y", "pk", "pv", "qk"], domain="com.microsoft",
                            num_heads=N, unidirectional=1)
    ins = [helper.make_tensor_value_info(nm, TensorProto.INT32 if nm == "m" else TensorProto.FLOAT, list(x.shape))
           for nm, x in zip(["q", "k", "v", "m", "ab"], [q, k, v, lengths, ab])]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ["y", "pk", "pv", "qk"]]
    m = helper.make_model(helper.make_graph([node], "g", ins, outs),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    feed = {"q": q, "k": k, "v": v, "m": lengths, "ab": ab}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feed)
    for backend in BACKENDS:
        got = InferenceSession(m.SerializeToString(), backend).run(None, feed)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4, err_msg=backend)
    _, scores = _reference(q, _heads(k), _heads(v), attn_bias=ab, lengths=lengths, causal_past=0)
    np.testing.assert_allclose(want[3], scores, rtol=1e-5, atol=1e-3)


def _refused(inputs, match):
    model, feed = build("MultiHeadAttention", inputs, {"num_heads": N})
    with pytest.raises(Exception):
        run_ort(model, feed)
    for backend in BACKENDS:
        with pytest.raises(EvaluationError, match=match):
            InferenceSession(model, backend).run(None, feed)


def test_forms_the_cpu_kernel_refuses_are_refused_by_name():
    rng = _rng("refused")
    q = _r(rng, B, 3, D)
    _refused([_r(rng, B, 3, N, 3, H)], "packed QKV")
    _refused([q, _r(rng, B, 4, N, 2, H)], "packed KV")
    _refused([q, _r(rng, B, 4, D), _r(rng, B, 4, D), None, np.array([1, 2, 0, 0], np.int32)], r"the mask has shape \[4\]")
    _refused([q, _r(rng, B, 4, D), _r(rng, B, 4, D), _r(rng, 3 * D + 1)], "bias has shape")
    _refused([q, _r(rng, B, 4, D), _r(rng, B, 4, D), None, None, None, _r(rng, B, N, 2, H + 1), _r(rng, B, N, 2, H + 1)],
             "past_key")
