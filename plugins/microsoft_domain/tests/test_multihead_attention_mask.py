"""MultiHeadAttention's key_padding_mask (issue 43) against onnxruntime's CPU kernel.

Every mask format that onnxruntime's CPU MultiHeadAttention accepts: ``(B)`` key lengths,
``(3B+2)`` (key lengths, then query and key starts that the CPU kernel leaves unused),
``(B, T)`` and ``(B, S, T)`` 1/0 masks; with and without the input bias, an attention bias,
past keys and a causal mask, at the default ``mask_filter_value`` (-10000) and at -inf (what
onnxruntime's own MultiHeadAttention parity test uses, and what made every masked output NaN:
``0 * -inf``).  Fully masked rows are included: at -10000 they are finite in onnxruntime (a
softmax of the unmasked scores) and must be here; at -inf onnxruntime's are NaN, and so must
these be, while every other value must be finite and close.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from ms_harness import BACKENDS, build, run_onnxkit, run_ort

B, S, L, N, H = 3, 4, 6, 2, 8
D = N * H
NEG_INF = float("-inf")


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _mask(rng, kind: str, t: int, s: int = S) -> np.ndarray:
    """A key_padding_mask of ``kind`` for total length ``t``; batch 1 is fully masked in
    every kind but ``lengths_full`` (all lengths >= 1, as in onnxruntime's parity test)."""
    if kind == "lengths":
        return np.array([t, 0, t - 2], np.int32)
    if kind == "lengths_full":
        return rng.integers(1, t + 1, size=B).astype(np.int32)
    if kind == "3b_plus_2":
        lengths = np.array([t - 1, 0, t], np.int32)
        return np.concatenate([lengths, rng.integers(0, 2 * t, size=2 * B + 2).astype(np.int32)])
    if kind == "2d":
        m = (rng.random((B, t)) < 0.7).astype(np.int32)
        m[0, 0] = 1
        m[1] = 0
        m[2, :] = 1
        m[2, -2:] = 0
        return m
    if kind == "3d":
        m = (rng.random((B, s, t)) < 0.6).astype(np.int32)
        m[1] = 0
        m[0, 1, :] = 0
        m[2, :, 0] = 1
        return m
    raise AssertionError(kind)


def _reference(q, k, v, bias, keep, filter_value, attn_bias=None, past=None, causal=False, scale=None):
    """A float64 numpy MultiHeadAttention for (B, L, D) keys: ``keep`` (B, S|1, T) booleans."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    if bias is not None:
        bias = bias.astype(np.float64)
        q, k, v = q + bias[:D], k + bias[D:2 * D], v + bias[2 * D:]

    def heads(x):
        return x.reshape(x.shape[0], x.shape[1], N, H).transpose(0, 2, 1, 3)

    qh, kh, vh = heads(q), heads(k), heads(v)
    if past is not None:
        kh = np.concatenate([past[0].astype(np.float64), kh], axis=2)
        vh = np.concatenate([past[1].astype(np.float64), vh], axis=2)
    s, t = qh.shape[2], kh.shape[2]
    scores = qh @ kh.transpose(0, 1, 3, 2) * (scale or 1.0 / np.sqrt(H))
    if attn_bias is not None:
        scores = scores + attn_bias
    scores = scores + np.where(keep[:, None], 0.0, filter_value)
    if causal:
        p = t - s
        scores = np.where(np.arange(t)[None, :] <= np.arange(s)[:, None] + p, scores, np.finfo(np.float32).min)
    m = scores.max(-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - m)
        probs = e / e.sum(-1, keepdims=True)
    y = probs @ vh
    return y.transpose(0, 2, 1, 3).reshape(y.shape[0], s, N * H)


def _keep(mask: np.ndarray, t: int) -> np.ndarray:
    """(B, S|1, T) booleans of a key_padding_mask."""
    if mask.ndim == 1:
        lengths = mask[:B]
        return (np.arange(t)[None, :] < lengths[:, None])[:, None, :]
    if mask.ndim == 2:
        return (mask != 0)[:, None, :]
    return mask != 0


def _compare(inputs, attrs, n_out=1, atol=1e-5):
    """onnxruntime's outputs, after asserting each onnxkit backend's are the same: NaN exactly
    where onnxruntime has NaN (and nowhere else), the rest within ``atol``."""
    model, feed = build("MultiHeadAttention", inputs, attrs, n_out)
    want = run_ort(model, feed)
    for backend in BACKENDS:
        got = run_onnxkit(model, feed, backend)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, (backend, g.dtype, g.shape, w.shape)
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"NaN positions on {backend}")
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol, err_msg=f"values on {backend}")
    return want


def _inputs(rng, has_bias, kind, t=L):
    q = rng.standard_normal((B, S, D)).astype(np.float32)
    k = rng.standard_normal((B, t, D)).astype(np.float32)
    v = rng.standard_normal((B, t, D)).astype(np.float32)
    bias = rng.standard_normal(3 * D).astype(np.float32) if has_bias else None
    return q, k, v, bias, _mask(rng, kind, t)


KINDS = ["lengths", "lengths_full", "3b_plus_2", "2d", "3d"]


@pytest.mark.parametrize("filter_value", [None, NEG_INF, -1e9])
@pytest.mark.parametrize("has_bias", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_key_padding_mask(kind, has_bias, filter_value):
    rng = _rng("mask", kind, has_bias, filter_value)
    q, k, v, bias, mask = _inputs(rng, has_bias, kind)
    attrs = {"num_heads": N}
    if filter_value is not None:
        attrs["mask_filter_value"] = filter_value
    want = _compare([q, k, v, bias, mask], attrs)[0]

    keep = _keep(mask, L)
    fully_masked = ~keep.any(-1)  # (B, S|1)
    rows = np.broadcast_to(fully_masked[:, :, None], (B, S, 1)) if fully_masked.shape[1] == 1 else fully_masked[:, :, None]
    if filter_value == NEG_INF:
        # onnxruntime's NaN is exactly the fully masked rows; everything else is a number.
        np.testing.assert_array_equal(np.isnan(want).any(-1, keepdims=True), rows)
    else:
        assert not np.isnan(want).any()
    # the numpy reference agrees wherever a row has a key to see (a fully masked row at a
    # finite filter value depends on float32 rounding of score + filter; onnxruntime is its oracle).
    ref = _reference(q, k, v, bias, keep, -10000.0 if filter_value is None else filter_value)
    seen = ~np.broadcast_to(rows, want.shape)
    np.testing.assert_allclose(want[seen], ref[seen], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("filter_value", [None, NEG_INF])
@pytest.mark.parametrize("kind", ["lengths_full", "2d", "3d"])
def test_mask_with_attention_bias_and_causal(kind, filter_value):
    rng = _rng("bias_causal", kind, filter_value)
    q, k, v, bias, mask = _inputs(rng, True, kind, t=S)
    attn_bias = rng.standard_normal((1, N, S, S)).astype(np.float32)
    attrs = {"num_heads": N, "unidirectional": 1, "scale": 0.3}
    if filter_value is not None:
        attrs["mask_filter_value"] = filter_value
    _compare([q, k, v, bias, mask, attn_bias], attrs)


@pytest.mark.parametrize("kind", ["lengths_full", "2d"])
def test_onnxruntime_parity_style_past(kind):
    """onnxruntime's parity test: -inf filter, causal, past keys, a (B, P+L) mask."""
    rng = _rng("past", kind)
    p = 3
    q = rng.normal(0, 0.1, (B, S, D)).astype(np.float32)
    k = rng.normal(0, 0.1, (B, S, D)).astype(np.float32)
    v = rng.normal(0, 0.1, (B, S, D)).astype(np.float32)
    bias = rng.normal(0, 0.1, 3 * D).astype(np.float32)
    past_k = rng.normal(0, 0.1, (B, N, p, H)).astype(np.float32)
    past_v = rng.normal(0, 0.1, (B, N, p, H)).astype(np.float32)
    t = p + S
    if kind == "2d":
        lengths = rng.integers(1, t + 1, size=B)
        mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.int32)
    else:
        mask = _mask(rng, kind, t)
    attrs = {"num_heads": N, "unidirectional": 1, "mask_filter_value": NEG_INF}
    y, pk, pv = _compare([q, k, v, bias, mask, None, past_k, past_v], attrs, n_out=3)
    assert not np.isnan(y).any()
    ref = _reference(q, k, v, bias, _keep(mask, t), NEG_INF, past=(past_k, past_v), causal=True)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("filter_value", [None, NEG_INF])
def test_bnsh_key_value_with_mask(filter_value):
    rng = _rng("bnsh", filter_value)
    q = rng.standard_normal((B, S, D)).astype(np.float32)
    k = rng.standard_normal((B, N, L, H)).astype(np.float32)
    v = rng.standard_normal((B, N, L, H)).astype(np.float32)
    attrs = {"num_heads": N}
    if filter_value is not None:
        attrs["mask_filter_value"] = filter_value
    for mask in (_mask(rng, "2d", L), _mask(rng, "lengths_full", L)):
        _compare([q, k, v, None, mask], attrs)


def test_attention_mask_index_at_minus_inf():
    """Attention shares the mask code: a -inf mask_filter_value is no NaN where keys are seen."""
    rng = _rng("attention")
    x = rng.standard_normal((B, S, D)).astype(np.float32)
    w = (rng.standard_normal((D, 3 * D)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(3 * D).astype(np.float32)
    mask = np.array([S, S - 1, 2], np.int32)
    model, feed = build("Attention", [x, w, bias, mask], {"num_heads": N, "mask_filter_value": NEG_INF})
    want = run_ort(model, feed)[0]
    assert not np.isnan(want).any()
    for backend in BACKENDS:
        got = run_onnxkit(model, feed, backend)[0]
        assert not np.isnan(got).any(), backend
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
