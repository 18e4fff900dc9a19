"""GroupQueryAttention (com.microsoft 1) as onnxruntime's CPU kernel computes it.

``num_heads`` query heads over ``kv_num_heads`` key/value heads, query head ``i`` reading K/V head
``i // (num_heads / kv_num_heads)``.  Inputs: ``query (B, S, N*H)`` with ``key``/``value``
``(B, S, Nkv*H)``, or packed ``query (B, S, (N + 2 Nkv) H)`` (Q, K, V in that order; key and
value absent); ``past_key``/``past_value`` ``(B, Nkv, P_buf, H)``; ``seqlens_k (B)`` int32 (each
row's total length minus one), ``total_sequence_length`` (a scalar int32, the batch's largest total
length); ``cos_cache``/``sin_cache`` ``(max_len, rot/2)`` with ``do_rotary``; ``attention_bias``
``(B|1, N|1, S, total)``; ``head_sink (N)``; ``query_seqlens (B)``.

Per batch row ``b``: ``T = seqlens_k[b] + 1`` tokens after the step, ``Q`` valid query rows
(``query_seqlens[b]``, or ``min(S, T)``) and ``P`` tokens cached before it: with
``query_seqlens`` ``P = T - Q``; otherwise ``P = 0`` when ``S == total_sequence_length`` (the prompt:
rows past ``T`` are right padding) and ``P = T - S`` when not (a later step).  Query row ``s`` sits
at position ``P + s``.

* present_key/value ``(B, Nkv, max(total, P_buf), H)``: rows ``[0, P)`` the past buffer's, the new
  keys at ``[P, P + S)`` (only the ``Q`` valid ones with ``query_seqlens``), zeros elsewhere (the
  shared-buffer form: a past buffer of the cache's full length gives a present of that length,
  the new rows written at ``seqlens`` positions into a copy of it, its other rows kept).
* ``do_rotary``: Q and K rotated (halves, or ``rotary_interleaved`` pairs) over the first
  ``2 * cos_cache.shape[1]`` features by the angles of row ``position_ids[b, s]`` where given (in
  the prompt ``position_ids[0, 0] + s`` for every row: only the first element is read), else of
  position ``P + s`` (a padded row of a prompt: position 1).
* scores ``scale * Q Kᵀ`` (``scale`` 0: ``1/sqrt(H)``), capped to ``softcap * tanh(x / softcap)``
  when ``softcap > 0``, then plus ``attention_bias``; key ``j`` seen by row ``s`` when
  ``j <= P + s`` (``causal``; with ``local_window_size`` ``W > 0`` also ``j > P + s - W``: W keys) or
  ``j < T`` (``causal = 0``); softmax over the seen keys, with a sink logit in the denominator when
  ``smooth_softmax`` (0) or ``head_sink`` (per head) is given.  Output rows of padding are
  unspecified (here: attention over the seen keys below ``T``).
* ``qk_output`` 1 / 2: output 3 the scores before / after the softmax, ``(B, N, S, total)``
  (unseen keys 0).

* ``sliding_window_cache`` (``local_window_size`` ``W > 0``): the past/present buffers hold a
  window of capacity ``C = past_key.shape[2] >= W``: after ``T`` tokens rows ``[0, L(T))`` hold
  positions ``[T - L(T), T)``, ``L(T) = T`` while ``T <= C``, else ``T - G ceil((T - C) / G)`` with
  ``G = C - W + 1`` (rows after ``L`` zeros); ``attention_bias`` columns stay absolute positions.

* a quantized KV cache (``k_quant_type`` = ``v_quant_type`` PER_TENSOR or PER_CHANNEL,
  ``kv_cache_bit_width`` 8: int8 past/present; 4: uint8, two values a byte, ``q + 8``, the even
  feature in the low nibble): the new K/V divided by ``k_scale``/``v_scale`` (one, or
  ``(1, Nkv, 1, H)``), rounded half to even and saturated, enter the cache; the attention reads
  every key and value back dequantized.  ``k_scale``/``v_scale`` beside a float cache are unused.

Refused by name: a float8 KV cache, ``qk_output`` with ``sliding_window_cache`` and the per-head
Q/K RMS norm (``q_norm_weight``/``k_norm_weight``; onnxruntime's CPU kernel refuses these two too).

The work is batched over heads (one matmul per score and value product, query heads grouped by
their K/V head); the present buffers are written once, the past copied only up to each row's
``P``.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable, calls_blas, declares_output_bytes

from ._common import DOMAIN, cast, check_float, const, device_of, shape_of, widen
from . import gqa_token
from .attention import rotate

KERNELS = KernelTable()

QUANT_TYPES = ("NONE", "PER_TENSOR", "PER_CHANNEL")


def attributes(ctx) -> dict:
    """The node's attributes as the kernel reads them (checked: ``ctx.fail`` names a bad one)."""
    return _attrs(ctx)


def _attrs(ctx) -> dict:
    n, nkv = int(ctx.attr("num_heads") or 0), int(ctx.attr("kv_num_heads") or 0)
    if n <= 0 or nkv <= 0 or n % nkv:
        ctx.fail(f"num_heads {n} must be a positive multiple of kv_num_heads {nkv}")
    causal, window = ctx.attr("causal"), ctx.attr("local_window_size")
    causal, window = (1 if causal is None else int(causal)), (-1 if window is None else int(window))
    if causal not in (0, 1) or (causal == 0 and window != -1):
        ctx.fail(f"causal must be 0 or 1 (local_window_size -1 when 0), got causal {causal}, "
                 f"local_window_size {window}")
    windowed = int(ctx.attr("sliding_window_cache") or 0) == 1
    if windowed and window <= 0:
        ctx.fail(f"sliding_window_cache = 1 needs local_window_size > 0, got {window}")
    kinds = [(ctx.attr_str(name) or "NONE").upper() for name in ("k_quant_type", "v_quant_type")]
    bits = int(ctx.attr("kv_cache_bit_width") or 0)
    quant = kinds != ["NONE", "NONE"]
    if any(k not in QUANT_TYPES for k in kinds) or (quant and (kinds[0] != kinds[1] or bits not in (4, 8))):
        ctx.fail(f"k_quant_type {kinds[0]}, v_quant_type {kinds[1]}, kv_cache_bit_width {bits}: onnxkit's "
                 f"GroupQueryAttention quantizes the KV cache with one of {QUANT_TYPES[1:]} for both, 4 or 8 bits")
    qk = int(ctx.attr("qk_output") or 0)
    if qk not in (0, 1, 2) or (qk and windowed):
        ctx.fail(f"qk_output must be 0, 1 or 2 (0 with sliding_window_cache), got {qk}")
    return dict(n=n, nkv=nkv, causal=bool(causal), window=window, scale=float(ctx.attr("scale") or 0.0),
                softcap=float(ctx.attr("softcap") or 0.0), rotary=int(ctx.attr("do_rotary") or 0) == 1,
                interleaved=int(ctx.attr("rotary_interleaved") or 0) == 1,
                smooth=int(ctx.attr("smooth_softmax") or 0) == 1, qk=qk, windowed=windowed,
                bits=bits if quant else 0)


def _split(ctx, xp, query, key, value, n: int, nkv: int):
    """Q (B, N, S, H), K and V (B, Nkv, S, H) in the work dtype, and H."""
    if query.ndim != 3:
        ctx.fail(f"query must be 3-D (B, S, D), got shape {shape_of(query)}")
    b, s, d = shape_of(query)
    qw = widen(xp, query)
    if key is None:
        if value is not None:
            ctx.fail("value is given without key: packed QKV takes neither")
        if d % (n + 2 * nkv):
            ctx.fail(f"packed QKV's hidden size {d} is not (num_heads + 2 kv_num_heads) = {n + 2 * nkv} heads")
        h = d // (n + 2 * nkv)
        parts = (qw[..., :n * h], qw[..., n * h:(n + nkv) * h], qw[..., (n + nkv) * h:])
    else:
        if value is None:
            ctx.fail("key is given without value")
        if d % n:
            ctx.fail(f"the query's hidden size {d} is not a multiple of num_heads {n}")
        h = d // n
        for what, x in (("key", key), ("value", value)):
            if shape_of(x) != [b, s, nkv * h]:
                ctx.fail(f"{what} has shape {shape_of(x)}; ({b}, {s}, {nkv * h}) expected (kv_num_heads {nkv}, "
                         f"head size {h}, the query's sequence length)")
        parts = (qw, widen(xp, key), widen(xp, value))
    q, k, v = (xp.permute_dims(xp.reshape(x, (b, s, m, h)), (0, 2, 1, 3)) for x, m in zip(parts, (n, nkv, nkv)))
    return q, k, v, h


def _lengths(ctx, seqlens_k, total_sequence_length, query_seqlens, b: int, s: int):
    """(T (B), Q (B), P (B), total) of the docstring's rule, as numpy int64."""
    sk = ctx.to_host(seqlens_k)
    if sk.shape != (b,) or sk.dtype.kind not in "iu":
        ctx.fail(f"seqlens_k must be an integer tensor of shape ({b},), got {sk.dtype} {list(sk.shape)}")
    tot = ctx.to_host(total_sequence_length)
    if tot.size != 1:
        ctx.fail(f"total_sequence_length must be a scalar, got shape {list(tot.shape)}")
    total = int(tot.reshape(-1)[0])
    t = sk.astype(np.int64) + 1
    if (t < 1).any() or (t > total).any():
        ctx.fail(f"seqlens_k + 1 = {t.tolist()} must lie in [1, total_sequence_length = {total}]")
    if query_seqlens is not None:
        ql = ctx.to_host(query_seqlens).astype(np.int64).reshape(-1)
        if ql.shape != (b,) or (ql < 0).any() or (ql > np.minimum(s, t)).any():
            ctx.fail(f"query_seqlens {ql.tolist()} must have {b} entries in [0, min(S = {s}, seqlens_k + 1)]")
        return t, ql, t - ql, total
    if s == total:
        return t, np.minimum(s, t), np.zeros(b, np.int64), total
    if total < s:
        ctx.fail(f"total_sequence_length {total} is below the sequence length {s}")
    p = t - s
    if (p < 0).any():
        ctx.fail(f"a later step (sequence length {s} != total_sequence_length {total}) needs seqlens_k + 1 >= {s} "
                 f"in every row, got {t.tolist()}")
    return t, np.full(b, s, np.int64), p, total


def _present(ctx, xp, past, new, p, ql, length: int, padded_prompt: bool):
    """The present buffer (B, Nkv, length, H) in the cache dtype: past rows [0, P), new rows at P."""
    b, nkv, s, h = shape_of(new)
    dtype = new.dtype if past is None else past.dtype
    new = cast(xp, new, dtype)
    uniform = (p == p[0]).all() and (ql == s).all()
    # A past buffer of the present's length is onnxruntime's shared buffer: its rows past the new
    # ones stay (onnxruntime writes the new rows into it); otherwise they are zeros.
    shared = past is not None and int(past.shape[2]) == length
    if uniform:  # every row written once: the past's rows, the new ones, zeros (or the buffer's) after
        p0 = int(p[0])
        out = xp.empty((b, nkv, length, h), dtype=dtype, device=device_of(new))
        if p0:
            out[:, :, :p0, :] = past[:, :, :p0, :]
        out[:, :, p0:p0 + s, :] = new
        out[:, :, p0 + s:, :] = past[:, :, p0 + s:, :] if shared else 0
        return out
    out = xp.asarray(past, copy=True) if shared else xp.zeros((b, nkv, length, h), dtype=dtype, device=device_of(new))
    for i in range(b):
        pi, qi = int(p[i]), (s if padded_prompt else int(ql[i]))
        if pi:
            out[i, :, :pi, :] = past[i, :, :pi, :]
        if qi:
            out[i, :, pi:pi + qi, :] = new[i, :, :qi, :]
    return out


def _seen(causal: bool, window: int, t, p, s: int, kpos):
    """(B, S, M) bool: key m (at absolute position ``kpos[b, m]``, -1 for none) seen by query row s of
    batch row b."""
    j = kpos[:, None, :]
    pos = (p[:, None] + np.arange(s)[None, :])[:, :, None]
    keep = (j >= 0) & (j < t[:, None, None])
    if causal:
        keep = keep & (j <= pos)
        if window > 0:
            keep = keep & (j > pos - window)
    return keep


@KERNELS.register("GroupQueryAttention", 1, domain=DOMAIN)
@calls_blas
def group_query_attention(ctx):
    xp = ctx.xp
    a = _attrs(ctx)
    n, nkv = a["n"], a["nkv"]
    group = n // nkv
    token = gqa_token.applies(a, ctx.num_outputs)

    def run(query, key=None, value=None, past_key=None, past_value=None, seqlens_k=None, total_sequence_length=None,
            cos_cache=None, sin_cache=None, position_ids=None, attention_bias=None, head_sink=None, k_scale=None,
            v_scale=None, q_norm_weight=None, k_norm_weight=None, query_seqlens=None):
        check_float(ctx, query, "query")
        if q_norm_weight is not None or k_norm_weight is not None:
            ctx.fail("q_norm_weight / k_norm_weight (the per-head Q/K RMS norm) are not supported by onnxkit's "
                     "GroupQueryAttention (onnxruntime's CPU kernel refuses them too)")
        if seqlens_k is None or total_sequence_length is None:
            ctx.fail("seqlens_k and total_sequence_length are required")
        if (past_key is None) != (past_value is None):
            ctx.fail("past_key and past_value must be given together")
        if token and gqa_token.ENABLED and past_key is not None and position_ids is None and attention_bias is None \
                and head_sink is None and query_seqlens is None:  # one decoding step: gqa_token.py
            out = gqa_token.token_step(a, query, key, value, past_key, past_value, seqlens_k, total_sequence_length,
                                       cos_cache, sin_cache)
            if out is not None:
                return out
        q, k, v, h = _split(ctx, xp, query, key, value, n, nkv)
        b, s = shape_of(query)[:2]
        t, ql, p, total = _lengths(ctx, seqlens_k, total_sequence_length, query_seqlens, b, s)
        buf, bits, scales = 0, a["bits"], (None, None)
        hc = h if bits != 4 else h // 2  # int4: two values a byte
        if past_key is not None:
            for what, x in (("past_key", past_key), ("past_value", past_value)):
                d = shape_of(x)
                if len(d) != 4 or d[0] != b or d[1] != nkv or d[3] != hc:
                    ctx.fail(f"{what} has shape {d}; ({b}, {nkv}, past length, {hc}) expected")
            if shape_of(past_value) != shape_of(past_key):
                ctx.fail(f"past_key {shape_of(past_key)} and past_value {shape_of(past_value)} differ in shape")
            buf = int(past_key.shape[2])
        if bits:
            scales = _quant_checks(ctx, xp, past_key, past_value, k_scale, v_scale, bits, nkv, h)
        elif past_key is not None:
            check_float(ctx, past_key, "past_key (a float8 KV cache is not supported; an integer one needs "
                        "k_quant_type / v_quant_type and kv_cache_bit_width)")
        if a["rotary"]:
            q, k = _rotary(ctx, xp, q, k, cos_cache, sin_cache, position_ids, p, t, a["interleaved"],
                           query_seqlens is None and s == total)
        if bits:  # the new keys and values enter the cache quantized, and are read back from it
            k, v = _quantize(xp, k, scales[0], bits), _quantize(xp, v, scales[1], bits)
        if a["windowed"]:
            if past_key is None or buf < a["window"]:
                ctx.fail(f"sliding_window_cache = 1 needs past_key / past_value of at least local_window_size "
                         f"{a['window']} positions (the window cache), got {buf}")
            if query_seqlens is None and (t < s).any():
                ctx.fail(f"seqlens_k + 1 = {t.tolist()} is below the sequence length {s}: a right-padded chunk "
                         "over a window cache needs query_seqlens")
            kw, vw, kpos, pk, pv = _window_cache(xp, past_key, past_value, k, v, p, ql, t, a["window"], buf)
            kw, vw = (widen(xp, x) if not bits else _dequantize(xp, x, sc, bits) for x, sc in ((kw, scales[0]),
                                                                                                 (vw, scales[1])))
        else:
            length = max(total, buf)
            if (p > buf).any():
                ctx.fail(f"the past buffers hold {buf} positions; rows need {p.tolist()} cached tokens")
            padded_prompt = query_seqlens is None and s == total
            if (p + (s if query_seqlens is None else ql) > length).any():
                ctx.fail(f"the new tokens do not fit the present buffer of {length} positions (cached "
                         f"{p.tolist()}, sequence length {s})")
            pk = _present(ctx, xp, past_key, k, p, ql, length, padded_prompt)
            pv = _present(ctx, xp, past_value, v, p, ql, length, padded_prompt)
            width = int(t.max())
            kw, vw = (widen(xp, x[:, :, :width, :]) if not bits else _dequantize(xp, x[:, :, :width, :], sc, bits)
                      for x, sc in ((pk, scales[0]), (pv, scales[1])))
            kpos = np.broadcast_to(np.arange(width), (b, width))
        width = int(kw.shape[2])
        scale = a["scale"] or 1.0 / math.sqrt(h)
        qg = xp.reshape(q, (b, nkv, group * s, h))
        scores = xp.reshape(xp.matmul(qg, xp.matrix_transpose(kw)), (b, n, s, width)) * scale
        if a["softcap"] > 0:
            scores = xp.tanh(scores / a["softcap"]) * a["softcap"]
        if attention_bias is not None:
            bd = shape_of(attention_bias)
            if len(bd) != 4 or bd[0] not in (1, b) or bd[1] not in (1, n) or bd[2] != s or bd[3] < int(t.max()):
                ctx.fail(f"attention_bias has shape {bd}; (B or 1, N or 1, {s}, total_sequence_length) expected")
            scores = scores + widen(xp, _bias_columns(xp, attention_bias, kpos, a["windowed"]))
        seen = xp.asarray(_seen(a["causal"], a["window"], t, p, s, kpos)[:, None], device=device_of(scores))
        lowest = float(np.finfo(np.float32 if scores.dtype == xp.float32 else np.float64).min)
        masked = xp.where(seen, scores, const(xp, lowest, scores))
        m = xp.max(masked, axis=-1, keepdims=True)
        sink = None
        if head_sink is not None:
            if shape_of(head_sink) != [n]:
                ctx.fail(f"head_sink has shape {shape_of(head_sink)}; ({n},) expected")
            sink = xp.reshape(widen(xp, head_sink), (1, n, 1, 1))
        elif a["smooth"]:
            sink = const(xp, 0.0, scores)
        if sink is not None:
            m = xp.maximum(m, sink)
        e = xp.where(seen, xp.exp(masked - m), const(xp, 0, scores))
        denom = xp.sum(e, axis=-1, keepdims=True)
        if sink is not None:
            denom = denom + xp.exp(sink - m)
        probs = e / xp.where(denom == 0, const(xp, 1, denom), denom)
        y = xp.matmul(xp.reshape(probs, (b, nkv, group * s, width)), vw)
        y = xp.reshape(xp.permute_dims(xp.reshape(y, (b, n, s, h)), (0, 2, 1, 3)), (b, s, n * h))
        outs = [cast(xp, y, query.dtype), pk, pv]
        if ctx.num_outputs > 3:
            qk = xp.where(seen, scores, const(xp, 0, scores)) if a["qk"] == 1 else probs
            full = xp.zeros((b, n, s, total), dtype=qk.dtype, device=device_of(qk))
            full[..., :width] = qk
            outs.append(cast(xp, full, query.dtype))
        return tuple(outs)

    heads, int4, windowed, qk_out = n + 2 * nkv, a["bits"] == 4, a["windowed"], ctx.num_outputs > 3

    def size(query, key=None, value=None, past_key=None, past_value=None, seqlens_k=None, total_sequence_length=None,
             *_):
        """The declared output bytes (no inference per token): output, presents, qk output."""
        b, s, d = query.shape if type(query) is np.ndarray else (int(x) for x in query.shape)
        h = d // heads if key is None else d // n
        if total_sequence_length is None:
            total = s
        elif type(total_sequence_length) is np.ndarray and total_sequence_length.size == 1:
            total = int(total_sequence_length.item())
        else:
            total = int(total_sequence_length.reshape(-1)[0])
        buf = int(past_key.shape[2]) if past_key is not None else 0
        item = query.dtype.itemsize
        cache = past_key.dtype.itemsize if past_key is not None else item
        hc = h // 2 if int4 else h
        length = buf if windowed else max(total, buf)
        need = b * s * n * h * item + 2 * b * nkv * length * hc * cache
        return need + (b * n * s * total * item if qk_out else 0)

    return declares_output_bytes(run, size)


def _quant_checks(ctx, xp, past_key, past_value, k_scale, v_scale, bits: int, nkv: int, h: int):
    """The (key, value) scales of a quantized KV cache, (1|1, 1|Nkv, 1, 1|H) float32, after checking
    the past's type and the scales' shapes."""
    from onnxkit.plugin import arrays

    want = "int8" if bits == 8 else "uint8"
    if past_key is None or arrays.dtype_name(past_key.dtype) != want or arrays.dtype_name(past_value.dtype) != want:
        ctx.fail(f"a {bits}-bit quantized KV cache needs past_key and past_value of type {want}")
    out = []
    for what, sc in (("k_scale", k_scale), ("v_scale", v_scale)):
        if sc is None:
            ctx.fail(f"a quantized KV cache needs {what}")
        size = math.prod(shape_of(sc))
        if size not in (1, nkv * h):
            ctx.fail(f"{what} has shape {shape_of(sc)}; one scale or {nkv} x {h} (1, {nkv}, 1, {h}) expected")
        out.append(xp.reshape(xp.astype(sc, xp.float32), (1, 1, 1, 1) if size == 1 else (1, nkv, 1, h)))
    return out


def _quantize(xp, x, scale, bits: int):
    """x / scale rounded half to even and saturated: int8, or int4 in [-8, 7] stored + 8, two a byte
    (the even feature in the low nibble)."""
    lo, hi = (-128, 127) if bits == 8 else (-8, 7)
    r = xp.clip(xp.round(xp.astype(x, xp.float32) / scale), lo, hi)
    if bits == 8:
        return xp.astype(r, xp.int8)
    r = xp.astype(r, xp.int32) + 8
    return xp.astype(xp.bitwise_or(r[..., 0::2], xp.bitwise_left_shift(r[..., 1::2], 4)), xp.uint8)


def _dequantize(xp, a, scale, bits: int):
    if bits == 4:
        ai = xp.astype(a, xp.int32)
        pair = xp.stack([xp.bitwise_and(ai, 15) - 8, xp.bitwise_right_shift(ai, 4) - 8], axis=-1)
        a = xp.reshape(pair, tuple(shape_of(a)[:-1]) + (2 * int(a.shape[-1]),))
    return xp.astype(a, xp.float32) * scale


def _resident(tt, cap: int, window: int):
    """The positions a window cache of capacity ``cap`` holds after ``tt`` tokens: all while
    ``tt <= cap``, then ``cap - window + 1`` evicted at a time."""
    g = cap - window + 1
    return np.where(tt <= cap, tt, tt - g * (-(-(tt - cap) // g)))


def _window_cache(xp, past_key, past_value, k, v, p, ql, t, window: int, cap: int):
    """sliding_window_cache: (keys, values (B, Nkv, M, H) in the cache dtype, their absolute
    positions (B, M; -1 for none), present key, present value (B, Nkv, cap, H)).  Row b's past
    holds positions ``[P - L(P), P)`` at rows ``[0, L(P))``; its present ``[T - L(T), T)`` at
    ``[0, L(T))`` (:func:`_resident` ``L``), zeros after."""
    b, nkv, _, h = shape_of(k)
    lp, lt = _resident(p, cap, window), _resident(t, cap, window)
    m = int((lp + ql).max())
    dev, dtype = device_of(k), past_key.dtype
    keys, vals = (xp.zeros((b, nkv, m, h), dtype=dtype, device=dev) for _ in range(2))
    pk, pv = (xp.zeros((b, nkv, cap, h), dtype=dtype, device=dev) for _ in range(2))
    kpos = np.full((b, m), -1, np.int64)
    kc, vc = cast(xp, k, dtype), cast(xp, v, dtype)
    for i in range(b):
        old, new, keep = int(lp[i]), int(ql[i]), int(lt[i])
        keys[i, :, :old, :], vals[i, :, :old, :] = past_key[i, :, :old, :], past_value[i, :, :old, :]
        keys[i, :, old:old + new, :], vals[i, :, old:old + new, :] = kc[i, :, :new, :], vc[i, :, :new, :]
        kpos[i, :old + new] = np.arange(int(p[i]) - old, int(p[i]) + new)
        start = old + new - keep
        pk[i, :, :keep, :], pv[i, :, :keep, :] = keys[i, :, start:old + new, :], vals[i, :, start:old + new, :]
    return keys, vals, kpos, pk, pv


def _bias_columns(xp, bias, kpos, windowed: bool):
    """attention_bias's columns of the keys' absolute positions (B|1, N|1, S, M)."""
    if not windowed:
        return bias[..., :int(kpos.shape[1])]
    rows = []
    for i in range(int(kpos.shape[0])):
        idx = xp.asarray(np.clip(kpos[i], 0, None), device=device_of(bias))
        rows.append(xp.take(bias[min(i, int(bias.shape[0]) - 1)], idx, axis=-1))
    return xp.stack(rows, axis=0)


def _rotary(ctx, xp, q, k, cos_cache, sin_cache, position_ids, p, t, interleaved: bool, prompt: bool):
    """Q and K rotated at their positions (do_rotary)."""
    if cos_cache is None or sin_cache is None:
        ctx.fail("do_rotary = 1 needs cos_cache and sin_cache")
    if cos_cache.ndim != 2 or shape_of(sin_cache) != shape_of(cos_cache):
        ctx.fail(f"cos_cache and sin_cache must be 2-D of one shape, got {shape_of(cos_cache)}, {shape_of(sin_cache)}")
    b, _, s, h = shape_of(q)
    half = int(cos_cache.shape[1])
    if 2 * half > h:
        ctx.fail(f"cos_cache's width {half} is more than half the head size {h}")
    if position_ids is not None:
        pos = ctx.to_host(position_ids).astype(np.int64)
        if pos.shape != (b, s):
            ctx.fail(f"position_ids has shape {list(pos.shape)}; ({b}, {s}) expected")
        if prompt:  # the prompt reads the first element only, for every row (as onnxruntime)
            pos = np.broadcast_to(pos[0, 0] + np.arange(s)[None, :], (b, s))
    else:
        pos = p[:, None] + np.arange(s)[None, :]
        pos = np.where(pos < t[:, None], pos, 1)
    rows = int(cos_cache.shape[0])
    if pos.size and (pos.min() < 0 or pos.max() >= rows):
        ctx.fail(f"a rotary position lies outside [0, {rows - 1}] (the rows of cos_cache / sin_cache)")
    idx = xp.asarray(np.ascontiguousarray(pos.reshape(-1)), device=device_of(q))
    cos = xp.reshape(xp.take(cast(xp, widen(xp, cos_cache), q.dtype), idx, axis=0), (b, 1, s, half))
    sin = xp.reshape(xp.take(cast(xp, widen(xp, sin_cache), q.dtype), idx, axis=0), (b, 1, s, half))
    return (rotate(ctx, xp, q, cos, sin, interleaved, 2 * half), rotate(ctx, xp, k, cos, sin, interleaved, 2 * half))
