"""Transformer operators of ai.onnx (opsets 23-28).

Operators and the definitions (since_versions) implemented:

* Attention 23 (3-D/4-D Q, K, V; attn_mask bool or additive, shorter masks padded; past /
  present key and value; is_causal bottom-right aligned with the past length; GQA/MQA;
  scale; softcap; softmax_precision; qk_matmul_output modes 0-3; fully-masked rows give 0),
  24 (``nonpad_kv_seqlen``: external cache, per-batch causal offset and padding mask),
  25 (``left_window_size`` / ``right_window_size``; q/kv_num_heads refused for 4-D inputs).
* RotaryEmbedding 23 (3-D and 4-D input, position_ids or per-token caches, interleaved,
  partial rotation).
* TensorScatter 24 (linear and circular modes, any axis but 0).
* CausalConvWithState 27 (depthwise causal 1-D conv with carried state; none/silu/swish).
* LinearAttention 27 (linear, gated, delta, gated_delta recurrences; GQA; float32 state).
* SwiGLU 28 (Swish_alpha(A) * B).

Attention computes in the inputs' element type in the order the operator's diagram gives
(Q and K each scaled by sqrt(scale), matmul, softcap, bias, softmax, matmul), so narrow
types round where the definition rounds; float32 products go through BLAS.
"""

from __future__ import annotations

import numpy as np

from onnxkit.dtypes import element_type
from onnxkit.runtime import KernelTable

from .nn_conv import compute_dtype, conv_nd

KERNELS = KernelTable()


def _softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), np.zeros((), x.dtype), m)
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    s = np.where(s == 0, np.ones((), x.dtype), s)
    return e / s


def _matmul(a, b):
    y = np.matmul(a, b)
    return y if y.dtype == a.dtype else y.astype(a.dtype)


def _to_heads(ctx, x, heads, name):
    b, s, hidden = x.shape
    if heads is None or heads <= 0 or hidden % heads:
        ctx.fail(f"{name}: hidden size {hidden} is not a multiple of the head count {heads}")
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


@KERNELS.register("Attention", 23, 24, 25)
def attention(ctx):
    v = ctx.since_version
    is_causal = bool(ctx.attr("is_causal", 0))
    q_heads_attr = ctx.attr("q_num_heads")
    kv_heads_attr = ctx.attr("kv_num_heads")
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    scale_attr = ctx.attr("scale")
    softcap = float(ctx.attr("softcap", 0.0))
    sp = ctx.attr("softmax_precision")
    softmax_dtype = None if sp is None else element_type(int(sp)).dtype
    left = int(ctx.attr("left_window_size", -1)) if v >= 25 else -1
    right = int(ctx.attr("right_window_size", -1)) if v >= 25 else -1
    if left < -1 or right < -1:
        ctx.fail("left_window_size and right_window_size must be -1 or nonnegative")
    if mode not in (0, 1, 2, 3):
        ctx.fail(f"qk_matmul_output_mode must be 0, 1, 2 or 3, got {mode}")

    def run(q, k, val, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None):
        if not (q.ndim == k.ndim == val.ndim) or q.ndim not in (3, 4):
            ctx.fail(f"Q, K, V must all be 3-D or all 4-D, got ranks {q.ndim}, {k.ndim}, {val.ndim}")
        if (past_key is None) != (past_value is None):
            ctx.fail("past_key and past_value must be given together")
        if nonpad_kv_seqlen is not None and past_key is not None:
            ctx.fail("nonpad_kv_seqlen cannot be combined with past_key / past_value")
        three_d = q.ndim == 3
        if v >= 25 and not three_d and (q_heads_attr is not None or kv_heads_attr is not None):
            ctx.fail("q_num_heads and kv_num_heads must not be given for 4-D inputs")
        t = q.dtype
        if three_d:
            if q_heads_attr is None or kv_heads_attr is None:
                ctx.fail("3-D inputs need q_num_heads and kv_num_heads")
            q = _to_heads(ctx, q, int(q_heads_attr), "Q")
            k = _to_heads(ctx, k, int(kv_heads_attr), "K")
            val = _to_heads(ctx, val, int(kv_heads_attr), "V")
        batch = q.shape[0]
        scale = (1 / np.sqrt(q.shape[3])) if scale_attr is None else float(scale_attr)
        sq = t.type(np.sqrt(scale))
        if past_key is not None:
            k = np.concatenate((past_key, k), axis=2)
            val = np.concatenate((past_value, val), axis=2)
        present_k, present_v = k, val
        q_len, kv_len = q.shape[2], k.shape[2]
        neg = t.type(-np.inf)
        zero = t.type(0)
        bias = np.zeros((q_len, kv_len), dtype=t)
        mask = attn_mask
        if mask is not None:
            padw = kv_len - mask.shape[-1]
            if padw > 0:
                fill = False if mask.dtype == np.bool_ else -np.inf
                mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, padw)], constant_values=fill)
            if mask.dtype == np.bool_:
                mask = np.where(mask, zero, neg)
            mask = mask.astype(t, copy=False)
        external = past_key is None and nonpad_kv_seqlen is not None
        if external:
            offset = np.asarray(nonpad_kv_seqlen).reshape(-1).astype(np.int64) - q_len
        else:
            offset = past_key.shape[2] if past_key is not None else 0
        ii = np.arange(q_len).reshape(q_len, 1)
        jj = np.arange(kv_len).reshape(1, kv_len)

        def frontier(base, allowed_fn):
            if np.ndim(offset) > 0:
                allowed = allowed_fn(ii + offset.reshape(-1, 1, 1))
                return base + np.where(allowed, zero, neg).reshape(-1, 1, q_len, kv_len)
            return base + np.where(allowed_fn(ii + int(offset)), zero, neg)

        if is_causal:
            base = np.zeros((q_len, kv_len), dtype=t) if mask is None else mask.copy()
            if left >= 0 or right >= 0:
                base = np.zeros((q_len, kv_len), dtype=t) + base
            bias = frontier(base, lambda p: jj <= p)
        elif mask is not None:
            bias = bias + mask
        if left >= 0 or right >= 0:
            bias = np.zeros((q_len, kv_len), dtype=t) + bias

            def window(p):
                ok = np.ones(np.broadcast_shapes(p.shape, jj.shape), dtype=bool)
                if left >= 0:
                    ok &= (p - jj) <= left
                if right >= 0:
                    ok &= (jj - p) <= right
                return ok

            bias = frontier(bias, window)
        if nonpad_kv_seqlen is not None:
            lens = np.asarray(nonpad_kv_seqlen).reshape(-1)
            pad = np.where(np.arange(kv_len) < lens[:, None], 0, -np.inf).astype(bias.dtype)
            bias = bias + pad.reshape(batch, 1, 1, kv_len)
        hq = q.shape[1]
        hk = k.shape[1] if kv_heads_attr is None else int(kv_heads_attr)
        if hq != hk and hk > 0 and hq % hk == 0 and k.shape[1] == val.shape[1]:
            k = np.repeat(k, hq // hk, axis=1)
            val = np.repeat(val, hq // hk, axis=1)
        if k.shape[1] != hq or val.shape[1] != hq:
            ctx.fail(f"{hq} query heads cannot attend {present_k.shape[1]} key/value heads")
        qk = _matmul(q * sq, np.swapaxes(k, 2, 3) * sq)
        raw = qk
        if softcap > 0:
            qk = np.tanh(qk / t.type(softcap)) * t.type(softcap)
        with_bias = qk + bias
        if mode == 0:
            qk_out = raw
        elif mode == 1:
            qk_out = qk
        else:
            qk_out = with_bias
        if softmax_dtype is not None:
            with_bias = with_bias.astype(softmax_dtype)
        probs = _softmax(with_bias)
        masked_rows = np.isneginf(np.max(bias, axis=-1, keepdims=True))
        probs = np.where(masked_rows, np.zeros((), probs.dtype), probs)
        if mode == 3:
            qk_out = probs
        y = _matmul(probs.astype(t), val)
        if three_d:
            y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
        qk_out = np.broadcast_to(qk_out, (batch, hq, q_len, kv_len)).astype(t)
        return y, present_k, present_v, qk_out

    return run


@KERNELS.register("RotaryEmbedding", 23)
def rotary_embedding(ctx):
    interleaved = bool(ctx.attr("interleaved", 0))
    rot_attr = int(ctx.attr("rotary_embedding_dim", 0) or 0)
    num_heads = ctx.attr("num_heads")

    def run(x, cos_cache, sin_cache, position_ids=None):
        if x.ndim == 4:
            xs = x.transpose(0, 2, 1, 3)                      # (B, S, H, D)
        elif x.ndim == 3:
            if not num_heads or x.shape[2] % int(num_heads):
                ctx.fail("a 3-D input needs num_heads dividing its hidden size")
            xs = x.reshape(x.shape[0], x.shape[1], int(num_heads), -1)
        else:
            ctx.fail(f"X must be 3-D or 4-D, got rank {x.ndim}")
        head = xs.shape[3]
        rot = rot_attr or head
        if rot > head or rot % 2:
            ctx.fail(f"rotary_embedding_dim {rot} must be even and at most the head size {head}")
        if position_ids is not None:
            pid = np.asarray(position_ids).astype(np.int64)
            if pid.size and (pid.min() < 0 or pid.max() >= cos_cache.shape[0]):
                ctx.fail("a position id is outside the caches")
            cos, sin = cos_cache[pid], sin_cache[pid]
        else:
            cos, sin = cos_cache, sin_cache
        if cos.shape[-1] != rot // 2 or sin.shape[-1] != rot // 2:
            ctx.fail(f"the caches' last dimension must be rotary_embedding_dim / 2 = {rot // 2}")
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]
        xr = xs[..., :rot]
        if interleaved:
            x1, x2 = xr[..., 0::2], xr[..., 1::2]
        else:
            x1, x2 = xr[..., :rot // 2], xr[..., rot // 2:]
        real = cos * x1 - sin * x2
        imag = sin * x1 + cos * x2
        out = np.array(xs, dtype=np.result_type(real, xs), copy=True)
        if interleaved:
            out[..., 0:rot:2], out[..., 1:rot:2] = real, imag
        else:
            out[..., :rot // 2], out[..., rot // 2:rot] = real, imag
        out = out.astype(x.dtype, copy=False)
        return out.reshape(x.shape) if x.ndim == 3 else out.transpose(0, 2, 1, 3)

    return run


@KERNELS.register("TensorScatter", 24)
def tensor_scatter(ctx):
    mode = ctx.attr_str("mode", "linear")
    axis_attr = int(ctx.attr("axis", -2))
    if mode not in ("linear", "circular"):
        ctx.fail(f"unknown mode {mode!r}")

    def run(past_cache, update, write_indices=None):
        r = past_cache.ndim
        if not -r <= axis_attr < r or axis_attr % r == 0:
            ctx.fail(f"axis {axis_attr} is invalid for rank {r} (it cannot be the batch axis)")
        axis = axis_attr % r
        if update.ndim != r or any(update.shape[i] != past_cache.shape[i] for i in range(r) if i != axis) \
                or update.shape[axis] > past_cache.shape[axis]:
            ctx.fail(f"update {update.shape} does not fit past_cache {past_cache.shape} along axis {axis}")
        b, cap, s = past_cache.shape[0], past_cache.shape[axis], update.shape[axis]
        if write_indices is None:
            wi = np.zeros(b, dtype=np.int64)
        else:
            wi = np.asarray(write_indices).reshape(-1).astype(np.int64)
        if wi.size != b:
            ctx.fail(f"write_indices has {wi.size} values for batch {b}")
        idx = wi[:, None] + np.arange(s)[None, :]
        if mode == "circular":
            idx %= cap
        elif idx.size and (idx.min() < 0 or idx.max() >= cap):
            ctx.fail("write_indices + sequence_length exceeds max_sequence_length (linear mode)")
        out = past_cache.copy()
        view = np.moveaxis(out, axis, 1)                     # (B, cap, ...) view of out
        upd = np.moveaxis(update, axis, 1)                   # (B, S, ...)
        view[np.arange(b)[:, None], idx] = upd
        return out

    return run


@KERNELS.register("CausalConvWithState", 27)
def causal_conv_with_state(ctx):
    activation = ctx.attr_str("activation", "none")
    if activation not in ("none", "silu", "swish"):
        ctx.fail(f"unknown activation {activation!r}")

    def run(x, weight, bias=None, past_state=None):
        if x.ndim != 3 or weight.ndim != 3 or weight.shape[1] != 1 or weight.shape[0] != x.shape[1]:
            ctx.fail(f"input must be (B, C, L) and weight (C, 1, k), got {x.shape} and {weight.shape}")
        b, c, _ = x.shape
        k = weight.shape[2]
        if past_state is None:
            pad = np.zeros((b, c, k - 1), dtype=x.dtype)
        else:
            if past_state.shape != (b, c, k - 1):
                ctx.fail(f"past_state has shape {past_state.shape}, expected {(b, c, k - 1)}")
            pad = past_state.astype(x.dtype, copy=False)
        padded = np.concatenate([pad, x], axis=2)
        ct = compute_dtype(x.dtype)
        out_len = padded.shape[2] - k + 1
        y = conv_nd(ctx, padded.astype(ct, copy=False), weight.astype(ct, copy=False), [k], [1], [1], [0], [0],
                    [out_len], c)
        if bias is not None:
            y = y + bias.astype(ct).reshape(1, c, 1)
        y = y.astype(x.dtype)
        if activation != "none":
            yf = y.astype(np.float32)
            y = (yf / (1.0 + np.exp(-yf))).astype(x.dtype)
        return y, padded[:, :, padded.shape[2] - (k - 1):]

    return run


@KERNELS.register("LinearAttention", 27)
def linear_attention(ctx):
    rule = ctx.attr_str("update_rule", "gated_delta")
    hq, hk = int(ctx.attr("q_num_heads")), int(ctx.attr("kv_num_heads"))
    scale_attr = float(ctx.attr("scale", 0.0) or 0.0)
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        ctx.fail(f"unknown update_rule {rule!r}")
    if hq <= 0 or hk <= 0 or hq % hk:
        ctx.fail(f"q_num_heads {hq} must be a positive multiple of kv_num_heads {hk}")
    gating = rule in ("gated", "gated_delta")
    delta = rule in ("delta", "gated_delta")

    def run(query, key, value, past_state=None, decay=None, beta=None):
        if gating != (decay is not None):
            ctx.fail(f"update_rule {rule!r} {'needs' if gating else 'forbids'} the decay input")
        if delta != (beta is not None):
            ctx.fail(f"update_rule {rule!r} {'needs' if delta else 'forbids'} the beta input")
        for name, a in (("query", query), ("key", key), ("value", value)):
            if a.ndim != 3:
                ctx.fail(f"{name} must be (B, T, H*D), got shape {a.shape}")
        b, t, _ = query.shape
        q4 = _to_heads(ctx, query, hq, "query").astype(np.float32)
        k4 = _to_heads(ctx, key, hk, "key").astype(np.float32)
        v4 = _to_heads(ctx, value, hk, "value").astype(np.float32)
        dk, dv = q4.shape[3], v4.shape[3]
        if k4.shape[3] != dk:
            ctx.fail(f"key head size {k4.shape[3]} differs from query head size {dk}")
        if gating:
            if decay.ndim != 3 or decay.shape[-1] not in (hk, hk * dk):
                ctx.fail(f"decay must be (B, T, {hk}) or (B, T, {hk * dk}), got {decay.shape}")
            g4 = decay.reshape(b, t, hk, -1).transpose(0, 2, 1, 3).astype(np.float32)
        if delta:
            if beta.ndim != 3 or beta.shape[-1] not in (hk, 1):
                ctx.fail(f"beta must be (B, T, {hk}) or (B, T, 1), got {beta.shape}")
            b4 = beta.reshape(b, t, beta.shape[-1], 1).transpose(0, 2, 1, 3).astype(np.float32)
        if past_state is not None:
            if past_state.shape != (b, hk, dk, dv):
                ctx.fail(f"past_state has shape {past_state.shape}, expected {(b, hk, dk, dv)}")
            state_dtype = past_state.dtype
            state = past_state.astype(np.float32)
        else:
            state_dtype = query.dtype
            state = np.zeros((b, hk, dk, dv), dtype=np.float32)
        scale = np.float32(1.0 / np.sqrt(dk) if scale_attr == 0.0 else scale_attr)
        group = hq // hk
        out = np.zeros((b, hq, t, dv), dtype=np.float32)
        for i in range(t):                                   # the recurrence, one token at a time
            kt, vt = k4[:, :, i], v4[:, :, i]
            if gating:
                state = state * np.exp(g4[:, :, i])[..., None]
            if delta:
                vt = b4[:, :, i] * (vt - np.einsum("bhdm,bhd->bhm", state, kt))
            state = state + kt[..., :, None] * vt[..., None, :]
            read = state if group == 1 else np.repeat(state, group, axis=1)
            out[:, :, i] = scale * np.einsum("bhd,bhdm->bhm", q4[:, :, i], read)
        y = out.transpose(0, 2, 1, 3).reshape(b, t, hq * dv).astype(query.dtype)
        return y, state.astype(state_dtype)

    return run


@KERNELS.register("SwiGLU", 28)
def swiglu(ctx):
    alpha = float(ctx.attr("alpha", 1.0))

    def run(a, b):
        if a.shape != b.shape or a.dtype != b.dtype:
            ctx.fail(f"A and B must have the same shape and type, got {a.shape}/{a.dtype} and {b.shape}/{b.dtype}")
        gate = (1 / (1 + np.exp(-alpha * a))).astype(a.dtype)
        return (a * gate * b).astype(a.dtype)

    return run
