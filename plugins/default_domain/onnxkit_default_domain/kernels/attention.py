"""Transformer operators of ai.onnx (every backend): Attention, RotaryEmbedding, TensorScatter,
CausalConvWithState, LinearAttention and SwiGLU.

Attention takes 3-D (heads from ``q_num_heads`` / ``kv_num_heads``) or 4-D Q, K, V; a boolean
or additive ``attn_mask`` (one shorter than the keys is padded as masked), ``past_key`` /
``past_value`` (``present_*`` are past and new keys joined), ``is_causal`` aligned bottom-right
with the past length, grouped / multi-query heads, ``scale``, ``softcap``,
``softmax_precision`` and the four ``qk_matmul_output_mode`` values; a fully masked row
gives zeros.  From Attention-24, ``nonpad_kv_seqlen`` describes an external cache (per-batch
causal offset and padding mask); from 25, ``left_window_size`` / ``right_window_size`` bound
each query's keys, and the head counts must not be given for 4-D inputs.  Attention computes
in the inputs' element type in the order the operator's diagram gives (Q and K each scaled by
sqrt(scale), matmul, softcap, bias, softmax, matmul), so narrow types round where the
definition rounds.  The structural part of the mask (causal, windows, padding) is worked out
on the host from the lengths alone and sent to the backend once per run.

RotaryEmbedding: 3-D and 4-D input, ``position_ids`` or per-token caches, interleaved and
partial rotation.  TensorScatter: linear and circular writes along any axis but the batch.
CausalConvWithState: a depthwise causal 1-D convolution carrying its state (no activation,
silu or swish).  LinearAttention: the linear, gated, delta and gated-delta recurrences with
grouped heads and a float32 state.  SwiGLU: Swish_alpha(A) * B.
"""

from __future__ import annotations

import math

import numpy as np
from ._common import device_of

from onnxkit.plugin import KernelTable, arrays, calls_blas, element_type

from ._common import compute_dtype, shape_of

KERNELS = KernelTable()


def _softmax(xp, x):
    """Softmax over the last axis; a row of -inf gives zeros, not NaN (an empty last axis: empty)."""
    if x.shape[-1] == 0:       # no key/value positions: nothing to normalize (max would have no identity)
        return x
    zero = xp.zeros((), dtype=x.dtype, device=device_of(x))
    m = xp.max(x, axis=-1, keepdims=True)
    m = xp.where(xp.isinf(m) & (m < zero), zero, m)
    e = xp.exp(x - m)
    s = xp.sum(e, axis=-1, keepdims=True)
    return e / xp.where(s == zero, xp.ones_like(zero), s)


def _matmul(xp, a, b):
    """``a @ b`` in ``a``'s element type (numpy's bfloat16 product gives float32)."""
    y = a @ b
    return y if y.dtype == a.dtype else xp.astype(y, a.dtype)


def to_heads(ctx, x, heads, name):
    """(B, S, heads*D) -> (B, heads, S, D); ctx.fail unless ``heads`` divides the hidden size."""
    xp = ctx.xp
    b, s, hidden = shape_of(x)
    if heads is None or heads <= 0 or hidden % heads:
        ctx.fail(f"{name}: hidden size {hidden} is not a multiple of the head count {heads}")
    return xp.permute_dims(xp.reshape(x, (b, s, heads, hidden // heads)), (0, 2, 1, 3))


def allowed_keys(ctx, q_len: int, kv_len: int, batch: int, *, causal: bool, left: int, right: int,
                 past_len: int, nonpad=None):
    """The keys each query may attend by the structure alone, as a host boolean array
    broadcastable to (B, H, q_len, kv_len), or None when every key is allowed.

    A query's position is its index plus the past length, or, with ``nonpad`` (the per-batch
    valid key counts of an external cache), plus ``nonpad[b] - q_len``; ``causal`` allows keys
    at or before it, ``left`` / ``right`` (-1: unbounded) bound its distance, and ``nonpad``
    also masks each batch entry's padding keys."""
    ii = np.arange(q_len).reshape(q_len, 1)
    jj = np.arange(kv_len).reshape(1, kv_len)
    pos = ii + past_len
    lens = None
    if nonpad is not None:
        lens = np.asarray(nonpad).reshape(-1).astype(np.int64)
        if lens.size != batch:
            ctx.fail(f"nonpad_kv_seqlen has {lens.size} values for batch {batch}")
        pos = ii + (lens - q_len).reshape(-1, 1, 1)
    allowed = None
    for on, rule in ((causal, lambda: jj <= pos), (left >= 0, lambda: (pos - jj) <= left),
                     (right >= 0, lambda: (jj - pos) <= right)):
        if on:
            allowed = rule() if allowed is None else allowed & rule()
    if allowed is not None and allowed.ndim == 3:
        allowed = allowed.reshape(-1, 1, q_len, kv_len)
    if lens is not None:
        pad = (np.arange(kv_len) < lens[:, None]).reshape(batch, 1, 1, kv_len)
        allowed = pad if allowed is None else allowed & pad
    return allowed


def _additive_mask(ctx, mask, kv_len: int, t):
    """``attn_mask`` as an additive mask of type ``t`` over ``kv_len`` keys (a shorter mask is
    padded as masked; a boolean one gives 0 where allowed, -inf elsewhere)."""
    xp = ctx.xp
    padw = kv_len - int(mask.shape[-1])
    if padw > 0:
        shape = tuple(shape_of(mask)[:-1]) + (padw,)
        dev = device_of(mask)
        fill = xp.zeros(shape, dtype=xp.bool, device=dev) if arrays.is_bool(mask.dtype) else \
            xp.full(shape, -math.inf, dtype=mask.dtype, device=dev)
        mask = xp.concat((mask, fill), axis=-1)
    if arrays.is_bool(mask.dtype):
        dev = device_of(mask)
        mask = xp.where(mask, xp.zeros((), dtype=t, device=dev), xp.full((), -math.inf, dtype=t, device=dev))
    return xp.astype(mask, t, copy=False)


@KERNELS.register("Attention", 23, 24, 25)
@calls_blas
def attention(ctx):
    xp = ctx.xp
    v = ctx.since_version
    is_causal = bool(ctx.attr("is_causal", 0))
    q_heads_attr = ctx.attr("q_num_heads")
    kv_heads_attr = ctx.attr("kv_num_heads")
    mode = int(ctx.attr("qk_matmul_output_mode", 0))
    scale_attr = ctx.attr("scale")
    softcap = float(ctx.attr("softcap", 0.0))
    sp = ctx.attr("softmax_precision")
    softmax_dtype = None if sp is None else ctx.dtype(element_type(int(sp)).dtype)
    left = int(ctx.attr("left_window_size", -1)) if v >= 25 else -1
    right = int(ctx.attr("right_window_size", -1)) if v >= 25 else -1
    if left < -1 or right < -1:
        ctx.fail("left_window_size and right_window_size must be -1 or nonnegative")
    if mode not in (0, 1, 2, 3):
        ctx.fail(f"qk_matmul_output_mode must be 0, 1, 2 or 3, got {mode}")
    want_qk = ctx.output_requested(3)

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
            q = to_heads(ctx, q, int(q_heads_attr), "Q")
            k = to_heads(ctx, k, int(kv_heads_attr), "K")
            val = to_heads(ctx, val, int(kv_heads_attr), "V")
        batch, hq, q_len = (int(d) for d in q.shape[:3])
        scale = (1 / math.sqrt(int(q.shape[3]))) if scale_attr is None else float(scale_attr)
        dev = device_of(q)
        sq = xp.asarray(math.sqrt(scale), dtype=t, device=dev)
        if past_key is not None:
            k = xp.concat((past_key, k), axis=2)
            val = xp.concat((past_value, val), axis=2)
        present_k, present_v = k, val
        kv_len = int(k.shape[2])
        zero, neg = xp.zeros((), dtype=t, device=dev), xp.full((), -math.inf, dtype=t, device=dev)
        bias = None if attn_mask is None else _additive_mask(ctx, attn_mask, kv_len, t)
        allowed = allowed_keys(ctx, q_len, kv_len, batch, causal=is_causal, left=left, right=right,
                               past_len=0 if past_key is None else int(past_key.shape[2]),
                               nonpad=None if nonpad_kv_seqlen is None else ctx.to_host(nonpad_kv_seqlen))
        if allowed is not None:
            structure = xp.where(ctx.from_host(allowed), zero, neg)
            bias = structure if bias is None else bias + structure
        hk = int(k.shape[1]) if kv_heads_attr is None else int(kv_heads_attr)
        if hq != hk and hk > 0 and hq % hk == 0 and k.shape[1] == val.shape[1]:
            k = xp.repeat(k, hq // hk, axis=1)
            val = xp.repeat(val, hq // hk, axis=1)
        if k.shape[1] != hq or val.shape[1] != hq:
            ctx.fail(f"{hq} query heads cannot attend {int(present_k.shape[1])} key/value heads")
        qk = _matmul(xp, q * sq, xp.permute_dims(k, (0, 1, 3, 2)) * sq)
        raw = qk
        if softcap > 0:
            cap = xp.asarray(softcap, dtype=t, device=dev)
            qk = xp.tanh(qk / cap) * cap
        with_bias = qk if bias is None else qk + bias
        qk_out = (raw, qk, with_bias, None)[mode]
        if softmax_dtype is not None:
            with_bias = xp.astype(with_bias, softmax_dtype)
        probs = _softmax(xp, with_bias)
        if bias is not None:
            row_max = xp.max(bias, axis=-1, keepdims=True)
            probs = xp.where(xp.isinf(row_max) & (row_max < zero), xp.zeros_like(probs), probs)
        if mode == 3:
            qk_out = probs
        y = _matmul(xp, xp.astype(probs, t), val)
        if three_d:
            y = xp.reshape(xp.permute_dims(y, (0, 2, 1, 3)), (batch, q_len, -1))
        if not want_qk:
            return y, present_k, present_v
        return y, present_k, present_v, xp.astype(xp.broadcast_to(qk_out, (batch, hq, q_len, kv_len)), t)

    return run


@KERNELS.register("RotaryEmbedding", 23)
def rotary_embedding(ctx):
    xp = ctx.xp
    interleaved = bool(ctx.attr("interleaved"))
    rot_attr = int(ctx.attr("rotary_embedding_dim") or 0)
    num_heads = ctx.attr("num_heads")

    def run(x, cos_cache, sin_cache, position_ids=None):
        if x.ndim == 4:
            xs = xp.permute_dims(x, (0, 2, 1, 3))                      # (B, S, H, D)
        elif x.ndim == 3:
            if not num_heads or int(x.shape[2]) % int(num_heads):
                ctx.fail("a 3-D input needs num_heads dividing its hidden size")
            xs = xp.reshape(x, (int(x.shape[0]), int(x.shape[1]), int(num_heads), -1))
        else:
            ctx.fail(f"X must be 3-D or 4-D, got rank {x.ndim}")
        head = int(xs.shape[3])
        rot = rot_attr or head
        if rot > head or rot % 2:
            ctx.fail(f"rotary_embedding_dim {rot} must be even and at most the head size {head}")
        if position_ids is not None:
            pid = ctx.to_host(position_ids).astype(np.int64)
            if pid.ndim != 2 or cos_cache.ndim != 2 or sin_cache.ndim != 2:
                ctx.fail("with position_ids (B, S), the caches must be 2-D (max_position, rotary_dim / 2)")
            if pid.size and (pid.min() < 0 or pid.max() >= min(int(cos_cache.shape[0]), int(sin_cache.shape[0]))):
                ctx.fail("a position id is outside the caches")
            index = ctx.from_host(pid.reshape(-1))
            cos, sin = (xp.reshape(xp.take(c, index, axis=0), (*pid.shape, int(c.shape[-1])))
                        for c in (cos_cache, sin_cache))
        elif cos_cache.ndim != 3 or sin_cache.ndim != 3:
            ctx.fail("without position_ids, the caches must be 3-D (B, S, rotary_dim / 2)")
        else:
            cos, sin = cos_cache, sin_cache
        if cos.shape[-1] != rot // 2 or sin.shape[-1] != rot // 2:
            ctx.fail(f"the caches' last dimension must be rotary_embedding_dim / 2 = {rot // 2}")
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]
        if interleaved:
            x1, x2 = xs[..., 0:rot:2], xs[..., 1:rot:2]
        else:
            x1, x2 = xs[..., :rot // 2], xs[..., rot // 2:rot]
        real = cos * x1 - sin * x2
        imag = sin * x1 + cos * x2
        if interleaved:   # real, imag, real, imag, ...
            rotated = xp.reshape(xp.stack((real, imag), axis=-1), (*shape_of(real)[:-1], rot))
        else:
            rotated = xp.concat((real, imag), axis=-1)
        parts = (xp.astype(rotated, x.dtype, copy=False),) + ((xs[..., rot:],) if rot < head else ())
        out = xp.concat(parts, axis=-1) if len(parts) > 1 else parts[0]
        return xp.reshape(out, tuple(shape_of(x))) if x.ndim == 3 else xp.permute_dims(out, (0, 2, 1, 3))

    return run


@KERNELS.register("TensorScatter", 24)
def tensor_scatter(ctx):
    xp = ctx.xp
    mode = ctx.attr_str("mode")
    axis_attr = int(ctx.attr("axis"))
    if mode not in ("linear", "circular"):
        ctx.fail(f"unknown mode {mode!r}")

    def run(past_cache, update, write_indices=None):
        r = past_cache.ndim
        if not -r <= axis_attr < r or axis_attr % r == 0:
            ctx.fail(f"axis {axis_attr} is invalid for rank {r} (it cannot be the batch axis)")
        axis = axis_attr % r
        ps, us = shape_of(past_cache), shape_of(update)
        if update.ndim != r or any(us[i] != ps[i] for i in range(r) if i != axis) or us[axis] > ps[axis]:
            ctx.fail(f"update {us} does not fit past_cache {ps} along axis {axis}")
        b, cap, s = ps[0], ps[axis], us[axis]
        wi = np.zeros(b, dtype=np.int64) if write_indices is None else \
            ctx.to_host(write_indices).reshape(-1).astype(np.int64)
        if wi.size != b:
            ctx.fail(f"write_indices has {wi.size} values for batch {b}")
        idx = wi[:, None] + np.arange(s)[None, :]
        if mode == "circular":
            idx %= cap
        elif idx.size and (idx.min() < 0 or idx.max() >= cap):
            ctx.fail("write_indices + sequence_length exceeds max_sequence_length (linear mode)")
        # each position of the result reads past_cache (index < cap) or update (cap + j); a
        # later write to the same position wins
        source = np.tile(np.arange(cap), (b, 1))
        source[np.repeat(np.arange(b), s), idx.reshape(-1)] = cap + np.tile(np.arange(s), b)
        shape = [1] * r
        shape[0], shape[axis] = b, cap
        joined = xp.concat((past_cache, update), axis=axis)
        return xp.take_along_axis(joined, ctx.from_host(source.reshape(shape)), axis=axis)

    return run


@KERNELS.register("CausalConvWithState", 27)
def causal_conv_with_state(ctx):
    xp = ctx.xp
    activation = ctx.attr_str("activation")
    if activation not in ("none", "silu", "swish"):
        ctx.fail(f"unknown activation {activation!r}")

    def run(x, weight, bias=None, past_state=None):
        if x.ndim != 3 or weight.ndim != 3 or weight.shape[1] != 1 or weight.shape[0] != x.shape[1]:
            ctx.fail(f"input must be (B, C, L) and weight (C, 1, k), got {shape_of(x)} and {shape_of(weight)}")
        b, c, _ = shape_of(x)
        k = int(weight.shape[2])
        if past_state is None:
            pad = xp.zeros((b, c, k - 1), dtype=x.dtype, device=device_of(x))
        else:
            if shape_of(past_state) != [b, c, k - 1]:
                ctx.fail(f"past_state has shape {shape_of(past_state)}, expected {[b, c, k - 1]}")
            pad = xp.astype(past_state, x.dtype, copy=False)
        padded = xp.concat((pad, x), axis=2)
        ct = compute_dtype(xp, x.dtype)
        pf, wf = xp.astype(padded, ct, copy=False), xp.astype(weight, ct, copy=False)
        n = int(padded.shape[2]) - k + 1
        y = pf[:, :, 0:n] * xp.reshape(wf[:, 0, 0], (1, c, 1))
        for j in range(1, k):                # one product per tap of the depthwise kernel
            y = y + pf[:, :, j:j + n] * xp.reshape(wf[:, 0, j], (1, c, 1))
        if bias is not None:
            y = y + xp.reshape(xp.astype(bias, ct), (1, c, 1))
        y = xp.astype(y, x.dtype)
        if activation != "none":
            yf = xp.astype(y, xp.float32)
            y = xp.astype(yf / (1.0 + xp.exp(-yf)), x.dtype)
        return y, padded[:, :, int(padded.shape[2]) - (k - 1):]

    return run


@KERNELS.register("LinearAttention", 27)
def linear_attention(ctx):
    xp = ctx.xp
    rule = ctx.attr_str("update_rule")
    hq, hk = int(ctx.attr("q_num_heads")), int(ctx.attr("kv_num_heads"))
    scale_attr = float(ctx.attr("scale") or 0.0)
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        ctx.fail(f"unknown update_rule {rule!r}")
    if hq <= 0 or hk <= 0 or hq % hk:
        ctx.fail(f"q_num_heads {hq} must be a positive multiple of kv_num_heads {hk}")
    gating = rule in ("gated", "gated_delta")
    delta = rule in ("delta", "gated_delta")

    def heads(x, n, name):
        return xp.astype(to_heads(ctx, x, n, name), xp.float32)

    def run(query, key, value, past_state=None, decay=None, beta=None):
        if gating != (decay is not None):
            ctx.fail(f"update_rule {rule!r} {'needs' if gating else 'forbids'} the decay input")
        if delta != (beta is not None):
            ctx.fail(f"update_rule {rule!r} {'needs' if delta else 'forbids'} the beta input")
        for name, a in (("query", query), ("key", key), ("value", value)):
            if a.ndim != 3:
                ctx.fail(f"{name} must be (B, T, H*D), got shape {shape_of(a)}")
        b, t, _ = shape_of(query)
        q4, k4, v4 = heads(query, hq, "query"), heads(key, hk, "key"), heads(value, hk, "value")
        dk, dv = int(q4.shape[3]), int(v4.shape[3])
        if k4.shape[3] != dk:
            ctx.fail(f"key head size {int(k4.shape[3])} differs from query head size {dk}")
        if gating:
            if decay.ndim != 3 or decay.shape[-1] not in (hk, hk * dk):
                ctx.fail(f"decay must be (B, T, {hk}) or (B, T, {hk * dk}), got {shape_of(decay)}")
            g4 = xp.astype(xp.permute_dims(xp.reshape(decay, (b, t, hk, -1)), (0, 2, 1, 3)), xp.float32)
        if delta:
            if beta.ndim != 3 or beta.shape[-1] not in (hk, 1):
                ctx.fail(f"beta must be (B, T, {hk}) or (B, T, 1), got {shape_of(beta)}")
            b4 = xp.astype(xp.permute_dims(xp.reshape(beta, (b, t, int(beta.shape[-1]), 1)), (0, 2, 1, 3)),
                           xp.float32)
        if past_state is not None:
            if shape_of(past_state) != [b, hk, dk, dv]:
                ctx.fail(f"past_state has shape {shape_of(past_state)}, expected {[b, hk, dk, dv]}")
            state_dtype = past_state.dtype
            state = xp.astype(past_state, xp.float32)
        else:
            state_dtype = query.dtype
            state = xp.zeros((b, hk, dk, dv), dtype=xp.float32, device=device_of(query))
        scale = 1.0 / math.sqrt(dk) if scale_attr == 0.0 else scale_attr
        group = hq // hk
        out = []
        for i in range(t):                   # the recurrence, one token at a time
            kt, vt = k4[:, :, i], v4[:, :, i]
            if gating:
                state = state * xp.exp(g4[:, :, i])[..., None]
            if delta:
                vt = b4[:, :, i] * (vt - (kt[:, :, None, :] @ state)[:, :, 0, :])
            state = state + kt[..., :, None] * vt[..., None, :]
            read = state if group == 1 else xp.repeat(state, group, axis=1)
            out.append(scale * (q4[:, :, i][:, :, None, :] @ read)[:, :, 0, :])
        y = xp.stack(out, axis=2) if out else xp.zeros((b, hq, 0, dv), dtype=xp.float32, device=device_of(query))
        y = xp.reshape(xp.permute_dims(y, (0, 2, 1, 3)), (b, t, hq * dv))
        return xp.astype(y, query.dtype), xp.astype(state, state_dtype)

    return run


@KERNELS.register("SwiGLU", 28)
def swiglu(ctx):
    xp = ctx.xp
    alpha = float(ctx.attr("alpha"))

    def run(a, b):
        if shape_of(a) != shape_of(b) or a.dtype != b.dtype:
            ctx.fail(f"A and B must have the same shape and type, got {shape_of(a)}/{a.dtype} and "
                     f"{shape_of(b)}/{b.dtype}")
        gate = xp.astype(1 / (1 + xp.exp(-alpha * a)), a.dtype)
        return xp.astype(a * gate * b, a.dtype)

    return run
