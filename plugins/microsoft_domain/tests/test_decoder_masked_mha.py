"""DecoderMaskedMultiHeadAttention (com.microsoft, what onnxruntime's T5 / Whisper decoders use)
against onnxruntime 1.32's CPU kernel and a float64 numpy reference: one query token over a
shared cache (the new key and value written at ``past_sequence_length``, the rest of the
buffers passed through), with the QKV bias, an attention_bias and a (B, P+1) key padding mask;
cross attention over (B, N, L, H) keys with a (B, L) mask; beams refused by name."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from ms_harness import BACKENDS, build, check, run_ort
from onnxkit.errors import EvaluationError
from onnxkit.runtime import InferenceSession

B, N, H = 2, 3, 4
D = N * H


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _r(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _attend(q, kh, vh, scale, add):
    """float64 softmax(q kᵀ scale + add) v of q (B, 1, D) over heads (B, N, T, H)."""
    qh = q.astype(np.float64).reshape(B, 1, N, H).transpose(0, 2, 1, 3)
    s = qh @ kh.astype(np.float64).transpose(0, 1, 3, 2) * scale + add
    e = np.exp(s - s.max(-1, keepdims=True))
    return ((e / e.sum(-1, keepdims=True)) @ vh).transpose(0, 2, 1, 3).reshape(B, 1, D)


@pytest.mark.parametrize("past,cache", [(0, 3), (2, 3), (4, 7)])
@pytest.mark.parametrize("extras", [(), ("bias",), ("bias", "attn_bias", "mask")])
def test_self_attention_over_a_shared_cache(past, cache, extras):
    rng = _rng("self", past, cache, extras)
    q, k, v = _r(rng, B, 1, D), _r(rng, B, 1, D), _r(rng, B, 1, D)
    pk, pv = _r(rng, B, N, cache, H), _r(rng, B, N, cache, H)
    t = past + 1
    bias = _r(rng, 3 * D) if "bias" in extras else None
    ab = _r(rng, 1, N, 1, t) if "attn_bias" in extras else None
    mask = np.ones((B, t), np.int32) if "mask" in extras else None
    if mask is not None:
        mask[1, 0] = 0
    inputs = [q, k, v, mask, ab, pk, pv, np.array([past], np.int32), None, None, bias]
    attrs = {"num_heads": N, "past_present_share_buffer": 1, "scale": 0.5}
    y, present_k, present_v = check("DecoderMaskedMultiHeadAttention", inputs, attrs, 3, rtol=1e-5, atol=1e-5)
    if bias is not None:
        q, k, v = q + bias[:D], k + bias[D:2 * D], v + bias[2 * D:]
    want_k = pk.copy()
    want_k[:, :, past] = k.reshape(B, N, H)
    np.testing.assert_array_equal(present_k, want_k)
    want_v = pv.copy()
    want_v[:, :, past] = v.reshape(B, N, H)
    add = 0.0 if ab is None else ab.astype(np.float64)
    if mask is not None:
        add = add + np.where(mask == 0, -10000.0, 0.0)[:, None, None, :]
    ref = _attend(q, want_k[:, :, :t], want_v[:, :, :t], 0.5, add)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("with_mask", [False, True])
def test_cross_attention(with_mask):
    rng = _rng("cross", with_mask)
    l_ = 5
    q, k, v = _r(rng, B, 1, D), _r(rng, B, N, l_, H), _r(rng, B, N, l_, H)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32) if with_mask else None
    y = check("DecoderMaskedMultiHeadAttention", [q, k, v, mask], {"num_heads": N}, rtol=1e-5, atol=1e-5)[0]
    add = np.where(mask == 0, -10000.0, 0.0)[:, None, None, :] if with_mask else 0.0
    np.testing.assert_allclose(y, _attend(q, k, v, 1 / np.sqrt(H), add), rtol=1e-4, atol=1e-5)


def test_beams_are_refused_by_name():
    rng = _rng("beams")
    q, k, v = _r(rng, B, 1, D), _r(rng, B, 1, D), _r(rng, B, 1, D)
    pk, pv = _r(rng, B, N, 3, H), _r(rng, B, N, 3, H)
    ci = np.zeros((B // 2, 2, 3), np.int32)  # (batch, beams, M): B = batch * beams
    model, feed = build("DecoderMaskedMultiHeadAttention",
                        [q, k, v, None, None, pk, pv, np.array([1], np.int32), np.array([2], np.int32), ci],
                        {"num_heads": N, "past_present_share_buffer": 1}, 3)
    run_ort(model, feed)  # onnxruntime runs beams; onnxkit refuses them
    for backend in BACKENDS:
        with pytest.raises(EvaluationError, match="beam search"):
            InferenceSession(model, backend).run(None, feed)
