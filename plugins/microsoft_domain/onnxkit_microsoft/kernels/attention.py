"""The attention operators of onnxruntime's transformers optimizer: Attention, MultiHeadAttention,
RotaryEmbedding (com.microsoft 1); GroupQueryAttention is in ``gqa.py``.

Scaled dot-product attention per head: ``softmax(Q Kᵀ * scale + bias) V`` with ``scale``
default ``1/sqrt(head_size)``, computed in float32 (float64 for float64).

* Attention — Q, K, V from one product ``input @ weights + bias`` (split by
  ``qkv_hidden_sizes``, default three equal parts); ``past`` ``(2, B, N, P, H)`` is put before
  the new K and V, ``present`` is the concatenation.  ``mask_index``: ``(B)`` key lengths,
  ``(2B)`` ends then starts, ``(B, T)`` or ``(B, S, T)`` 1/0 masks (the 4-D Megatron mask,
  which onnxruntime's CPU kernel refuses too, is refused by name); a masked position adds
  ``mask_filter_value`` (default -10000; -inf too, a row with every key masked then NaN as in
  onnxruntime).  ``unidirectional``: query ``i`` sees keys ``<= P+i``
  (the others get the lowest finite value).  ``attention_bias`` ``(B|1, N|1, S, T)`` is added.
* MultiHeadAttention — separate ``query (B, S, D)``, ``key (B, L, D)``/``value (B, L, D_v)``
  (``bias`` ``(2D + D_v)`` added) or already split into heads ``(B, N, L, H)`` (then only the
  query takes the bias); ``past_key``/``past_value`` ``(B, N, P, H)`` before them, the
  concatenations returned as ``present_key``/``present_value`` (also when no present is an
  output: onnxruntime's CPU kernel then drops the past from its buffers but not from its lengths,
  and its result is not a defined one); ``key_padding_mask`` ``(B)`` lengths,
  ``(3B+2)`` (its first ``B`` entries the lengths, as onnxruntime's CPU kernel reads it),
  ``(B, T)`` or ``(B, S, T)`` 1/0; output 3 ``qk`` the scores the softmax takes; as Attention
  otherwise (the causal mask onnxruntime's: see :func:`sdpa`).  The packed layouts
  (``(B, L, N, 2, H)`` keys, ``(B, S, N, 3, H)`` queries, which onnxruntime's CPU kernel does
  not implement either), buffer sharing and ``cache_indirection`` are refused by name.
* RotaryEmbedding — rotates the first ``rotary_embedding_dim`` (default ``2 * cos_cache``'s
  width) features of each head by the angles of the caches at ``position_ids`` (``(B, S)``, or
  ``(1)``: an offset added to ``0..S-1``); halves (default) or ``interleaved`` pairs.
* GroupQueryAttention — in ``gqa.py``.
"""

from __future__ import annotations

import math

from onnxkit.plugin import KernelTable, calls_blas, declares_output_bytes

from ._common import DOMAIN, cast, check_float, const, device_of, shape_of, widen

KERNELS = KernelTable()


def _heads(xp, x, n: int):
    """(B, S, n*H) -> (B, n, S, H)."""
    b, s, d = shape_of(x)
    return xp.permute_dims(xp.reshape(x, (b, s, n, d // n)), (0, 2, 1, 3))


def _merge(xp, x):
    """(B, N, S, H) -> (B, S, N*H)."""
    b, n, s, h = shape_of(x)
    return xp.reshape(xp.permute_dims(x, (0, 2, 1, 3)), (b, s, n * h))


def _key_mask(ctx, xp, mask, b: int, s: int, t: int, p: int, like, filter_value: float, key_starts: bool = False):
    """An additive float mask broadcasting to (B, 1|N, S, T) from a mask_index / key_padding_mask:
    0 where a key is seen, ``filter_value`` where it is masked.  The mask is selected, not
    computed as ``masked * filter_value``: a ``filter_value`` of -inf (what onnxruntime's own
    MultiHeadAttention tests use) would make ``0 * -inf`` NaN at every seen key.  ``key_starts``
    (MultiHeadAttention): the ``(3B+2)`` form is accepted, its first ``B`` entries the key
    lengths (the query and key start offsets after them are unused, as in onnxruntime's CPU
    kernel)."""
    host = ctx.to_host(mask)
    import numpy as np

    dims = list(host.shape)
    if dims == [b] or (key_starts and dims == [3 * b + 2]):
        host = host[:b]
        keep = np.arange(t)[None, :] < host.reshape(b, 1)
        keep = keep[:, None, None, :]
    elif dims == [2 * b] and not key_starts:  # (2B): Attention's ends then starts
        j = np.arange(t)[None, :]
        keep = (j < host[:b].reshape(b, 1)) & (j >= host[b:].reshape(b, 1))
        keep = keep[:, None, None, :]
    elif dims == [b, t]:
        keep = (host != 0)[:, None, None, :]
    elif dims == [b, s, t]:
        keep = (host != 0)[:, None, :, :]
    else:
        one_d = f"{[3 * b + 2]}" if key_starts else f"{[2 * b]}"
        ctx.fail(f"the mask has shape {dims}; for batch {b}, sequence {s} and total length {t} it must be "
                 f"{[b]}, {one_d}, {[b, t]} or {[b, s, t]}" + ("" if key_starts else " (the 4-D form is not supported)"))
    work = np.float32 if like.dtype == xp.float32 else np.float64
    additive = np.where(keep, work(0.0), work(filter_value)).astype(work)
    return xp.asarray(additive, device=device_of(like))


def sdpa(ctx, xp, q, k, v, scale, mask=None, causal_past=None, bias=None, scores_out=None):
    """(B, N, S, H) attention of q over k, v (B, N, T, H) in q's (work) dtype; ``mask`` the
    additive key mask of :func:`_key_mask` (0 or ``mask_filter_value``); ``causal_past``: the
    past length P of a causal mask.  The causal mask is onnxruntime's CPU one (PrepareMask):
    query row ``i`` sees keys ``j <= P + i``, except the last row, which sees every key (the two
    agree when T = P + S, as in self-attention; with fewer queries than keys -- cross attention,
    or one query -- the last row is unmasked there, and so it is here).  ``scores_out``: a list
    that receives the scores as the softmax takes them (scaled, bias and masks added: onnxruntime's
    ``output_qk``)."""
    scores = xp.matmul(q, xp.matrix_transpose(k)) * scale
    s, t = int(q.shape[2]), int(k.shape[2])
    if bias is not None:
        bd = shape_of(bias)
        if len(bd) != 4 or bd[0] not in (1, int(q.shape[0])) or bd[1] not in (1, int(q.shape[1])) or bd[2:] != [s, t]:
            ctx.fail(f"attention_bias has shape {bd}; it must be (B or 1, N or 1, {s}, {t})")
        scores = scores + widen(xp, bias)
    if mask is not None:
        scores = scores + mask
    if causal_past is not None and s > 1:
        import numpy as np

        rows = np.arange(s)[:, None]
        allowed = (np.arange(t)[None, :] <= rows + causal_past) | (rows == s - 1)
        lowest = float(np.finfo(np.float32 if scores.dtype == xp.float32 else np.float64).min)
        scores = xp.where(xp.asarray(allowed, device=device_of(scores)), scores, const(xp, lowest, scores))
    if scores_out is not None:
        scores_out.append(scores)
    # onnxruntime's softmax: a row whose every score is -inf (all keys masked with a
    # mask_filter_value of -inf) is NaN there, so it is here too (the finite default -10000
    # keeps such a row finite: a softmax of the unmasked scores).
    # (Computed without a 0/0, which numpy would warn of.)
    m = xp.max(scores, axis=-1, keepdims=True)
    dead = xp.isinf(m)
    e = xp.exp(scores - xp.where(dead, const(xp, 0, scores), m))
    probs = e / xp.where(dead, const(xp, 1, scores), xp.sum(e, axis=-1, keepdims=True))
    return xp.matmul(xp.where(dead, const(xp, math.nan, scores), probs), v)


def _scale(ctx, head_size: int) -> float:
    s = ctx.attr("scale")
    return 1.0 / math.sqrt(head_size) if s is None or float(s) == 0.0 else float(s)


@KERNELS.register("Attention", 1, domain=DOMAIN)
@calls_blas
def attention(ctx):
    xp = ctx.xp
    n = int(ctx.attr("num_heads"))
    sizes = list(ctx.attr("qkv_hidden_sizes") or ())
    causal = bool(ctx.attr("unidirectional"))
    filter_value = float(ctx.attr("mask_filter_value", -10000.0))
    if ctx.attr("do_rotary", 0) or ctx.attr("past_present_share_buffer", 0):
        ctx.fail("do_rotary and past_present_share_buffer are not supported by onnxkit's Attention")

    def run(x, weights, bias=None, mask_index=None, past=None, attention_bias=None, past_sequence_length=None):
        check_float(ctx, x, "input")
        if x.ndim != 3 or weights.ndim != 2 or int(weights.shape[0]) != int(x.shape[2]):
            ctx.fail(f"input (B, S, D) and weights (D, 3H) expected, got {shape_of(x)} and {shape_of(weights)}")
        total = int(weights.shape[1])
        dq, dk, dv = sizes if sizes else (total // 3,) * 3
        if len(sizes) not in (0, 3) or dq + dk + dv != total or dq != dk or dq % n or dv % n or (not sizes and total % 3):
            ctx.fail(f"weights' {total} columns do not split into Q, K, V of {n} heads (qkv_hidden_sizes {sizes})")
        qkv = xp.matmul(widen(xp, x), widen(xp, weights))
        if bias is not None:
            qkv = qkv + widen(xp, bias)
        q, k, v = (_heads(xp, qkv[..., a:a + d], n) for a, d in ((0, dq), (dq, dk), (dq + dk, dv)))
        p = 0
        if past is not None:
            if past.ndim != 5 or int(past.shape[0]) != 2:
                ctx.fail(f"past must have shape (2, B, N, P, H), got {shape_of(past)}")
            p = int(past.shape[3])
            k = xp.concat([widen(xp, past[0, ...]), k], axis=2)
            v = xp.concat([widen(xp, past[1, ...]), v], axis=2)
        b, s = int(x.shape[0]), int(x.shape[1])
        mask = None if mask_index is None else _key_mask(ctx, xp, mask_index, b, s, p + s, p, q, filter_value)
        y = sdpa(ctx, xp, q, k, v, _scale(ctx, dq // n), mask, p if causal else None, attention_bias)
        present = xp.stack([k, v], axis=0) if ctx.output_requested(1) else None
        return cast(xp, _merge(xp, y), x.dtype), None if present is None else cast(xp, present, x.dtype)

    return run


@KERNELS.register("MultiHeadAttention", 1, domain=DOMAIN)
def multi_head_attention(ctx):
    xp = ctx.xp
    n = int(ctx.attr("num_heads"))
    causal = bool(ctx.attr("unidirectional"))
    filter_value = float(ctx.attr("mask_filter_value", -10000.0))

    def run(query, key=None, value=None, bias=None, key_padding_mask=None, attention_bias=None, past_key=None,
            past_value=None, past_sequence_length=None, cache_indirection=None):
        check_float(ctx, query, "query")
        if query.ndim == 5 or (key is not None and key.ndim == 5):
            ctx.fail("packed QKV (B, S, N, 3, H) and packed KV (B, L, N, 2, H) are not supported "
                     "(nor by onnxruntime's CPU kernel): query (B, S, D) with key and value expected")
        if query.ndim != 3 or key is None or value is None:
            ctx.fail(f"query (B, S, D) with key and value expected, got query {shape_of(query)}"
                     + ("" if key is not None and value is not None else " without key or value"))
        if past_sequence_length is not None or cache_indirection is not None:
            ctx.fail("buffer sharing (past_sequence_length) and cache_indirection are not supported")
        if (past_key is None) != (past_value is None):
            ctx.fail("past_key and past_value must be given together")
        b, s, d = shape_of(query)
        if d % n:
            ctx.fail(f"the query's hidden size {d} is not a multiple of num_heads {n}")
        h = d // n
        kd, vd = shape_of(key), shape_of(value)
        if key.ndim == 3 and value.ndim == 3 and kd[0] == vd[0] == b and kd[2] == d and kd[1] == vd[1] \
                and vd[2] % n == 0:
            dv = vd[2]
        elif key.ndim == 4 and kd == vd and kd[0] == b and kd[1] == n and kd[3] == h:
            dv = d
        else:
            ctx.fail(f"key {kd} and value {vd} do not fit query {[b, s, d]} with {n} heads: (B, L, D) and "
                     f"(B, L, D_v), or both (B, N, L, H)")
        qw = widen(xp, query)
        if bias is not None:
            if shape_of(bias) != [2 * d + dv]:
                ctx.fail(f"bias has shape {shape_of(bias)}; [{2 * d + dv}] (2 * D + D_v) expected")
            bw = widen(xp, bias)
            qw = qw + bw[:d]
        q = _heads(xp, qw, n)
        if key.ndim == 3:
            kw, vw = widen(xp, key), widen(xp, value)
            if bias is not None:
                kw, vw = kw + bw[d:2 * d], vw + bw[2 * d:2 * d + dv]
            k, v = _heads(xp, kw, n), _heads(xp, vw, n)
        else:  # (B, N, L, H): used as they are, the bias only on the query (as onnxruntime)
            k, v = widen(xp, key), widen(xp, value)
        p = 0
        if past_key is not None:
            pk, pv = shape_of(past_key), shape_of(past_value)
            if len(pk) != 4 or pk[:2] != [b, n] or pk[3] != h or len(pv) != 4 or pv[:3] != pk[:3] or pv[3] != dv // n:
                ctx.fail(f"past_key {pk} and past_value {pv} must be (B, N, P, H) = ({b}, {n}, P, {h}) and "
                         f"({b}, {n}, P, {dv // n})")
            p = pk[2]
            k = xp.concat([widen(xp, past_key), k], axis=2)
            v = xp.concat([widen(xp, past_value), v], axis=2)
        t = int(k.shape[2])
        mask = None if key_padding_mask is None else _key_mask(ctx, xp, key_padding_mask, b, s, t, p, q,
                                                               filter_value, key_starts=True)
        qk = [] if ctx.output_requested(3) else None
        y = sdpa(ctx, xp, q, k, v, _scale(ctx, h), mask, p if causal else None, attention_bias, qk)
        outs = (cast(xp, _merge(xp, y), query.dtype), cast(xp, k, query.dtype), cast(xp, v, query.dtype),
                None if qk is None else cast(xp, qk[0], query.dtype))
        return outs[:max(1, ctx.num_outputs)]

    return run


@KERNELS.register("DecoderMaskedMultiHeadAttention", 1, domain=DOMAIN)
def decoder_masked_multi_head_attention(ctx):
    """One query token (B, 1, D) -- onnxruntime's CPU kernel, no beams: self attention over a
    shared cache (``past_present_share_buffer``: ``past_key``/``past_value`` (B, N, M, H) hold
    ``past_sequence_length`` P tokens; the new key and value are written at position P of the
    presents, which are the past's buffers otherwise, and the query attends to their first P + 1
    keys), or cross attention over (B, N, L, H) keys and values (no past, no present, no
    attention_bias).  ``bias`` (3D) adds to query, key and value (the query only in cross
    attention); ``mask_index`` (B, T) 1/0; ``attention_bias`` (B|1, N|1, 1, T)."""
    xp = ctx.xp
    n = int(ctx.attr("num_heads"))
    filter_value = float(ctx.attr("mask_filter_value", -10000.0))
    share = bool(ctx.attr("past_present_share_buffer", 0))
    if ctx.attr("output_qk", 0):
        ctx.fail("output_qk is not supported by onnxkit's DecoderMaskedMultiHeadAttention")

    def run(query, key=None, value=None, mask_index=None, attention_bias=None, past_key=None, past_value=None,
            past_sequence_length=None, beam_width=None, cache_indirection=None, bias=None):
        check_float(ctx, query, "query")
        if query.ndim != 3 or int(query.shape[1]) != 1 or key is None or value is None:
            ctx.fail(f"query (B, 1, D) with key and value expected (one token; packed QKV is not supported), "
                     f"got query {shape_of(query)}")
        beams = 1 if beam_width is None else int(ctx.to_host(beam_width).reshape(-1)[0])
        if beams > 1 or (cache_indirection is not None and shape_of(cache_indirection)[1] > 1):
            ctx.fail("beam search (beam_width > 1, cache_indirection) is not supported")
        b, _, d = shape_of(query)
        h = d // n
        if d % n or (bias is not None and shape_of(bias) != [3 * d]):
            ctx.fail(f"hidden size {d} over {n} heads with a bias of {[3 * d]} expected, bias {shape_of(bias) if bias is not None else None}")
        bw = None if bias is None else widen(xp, bias)
        qw = widen(xp, query) if bw is None else widen(xp, query) + bw[:d]
        q = _heads(xp, qw, n)
        present = ctx.output_requested(1) or ctx.output_requested(2)
        if past_key is None and not present:  # cross attention
            if attention_bias is not None:
                ctx.fail("attention_bias is not supported in cross attention (nor by onnxruntime)")
            if key.ndim != 4 or shape_of(key) != shape_of(value) or shape_of(key)[:2] != [b, n] or shape_of(key)[3] != h:
                ctx.fail(f"cross attention takes key and value ({b}, {n}, L, {h}), got {shape_of(key)}, {shape_of(value)}")
            k, v = widen(xp, key), widen(xp, value)
            outs = (None, None)
        else:
            if not share or past_key is None or past_value is None or past_sequence_length is None:
                ctx.fail("self attention needs past_key, past_value, past_sequence_length and past_present_share_buffer=1")
            m = int(past_key.shape[2]) if past_key.ndim == 4 else -1
            if shape_of(past_key) != [b, n, m, h] or shape_of(past_value) != [b, n, m, h] \
                    or shape_of(key) != [b, 1, d] or shape_of(value) != [b, 1, d]:
                ctx.fail(f"key/value ({b}, 1, {d}) and past_key/past_value ({b}, {n}, M, {h}) expected, got "
                         f"{shape_of(key)}, {shape_of(value)}, {shape_of(past_key)}, {shape_of(past_value)}")
            p = int(ctx.to_host(past_sequence_length).reshape(-1)[0])
            if not 0 <= p < m:
                ctx.fail(f"past_sequence_length {p} leaves no room in a cache of {m} positions")
            kw, vw = widen(xp, key), widen(xp, value)
            if bw is not None:
                kw, vw = kw + bw[d:2 * d], vw + bw[2 * d:]
            pk, pv = widen(xp, past_key), widen(xp, past_value)
            pk = xp.concat([pk[:, :, :p], _heads(xp, kw, n), pk[:, :, p + 1:]], axis=2)
            pv = xp.concat([pv[:, :, :p], _heads(xp, vw, n), pv[:, :, p + 1:]], axis=2)
            k, v = pk[:, :, :p + 1], pv[:, :, :p + 1]
            outs = (cast(xp, pk, query.dtype), cast(xp, pv, query.dtype))
        t = int(k.shape[2])
        if mask_index is not None and shape_of(mask_index) != [b, t]:
            ctx.fail(f"mask_index has shape {shape_of(mask_index)}; only the ({b}, {t}) key padding mask is supported")
        mask = None if mask_index is None else _key_mask(ctx, xp, mask_index, b, 1, t, 0, q, filter_value)
        y = sdpa(ctx, xp, q, k, v, _scale(ctx, h), mask, None, attention_bias)
        return ((cast(xp, _merge(xp, y), query.dtype),) + outs)[:max(1, ctx.num_outputs)]

    return run


def rotate(ctx, xp, x, cos, sin, interleaved: bool, rot: int):
    """Rotate the first ``rot`` features of the last axis of ``x`` (…, S, H) by cos / sin (…, S, rot/2)."""
    half = rot // 2
    head = x[..., :rot]
    if interleaved:
        shp = tuple(head.shape[:-1]) + (half, 2)
        pairs = xp.reshape(head, shp)
        a, b = pairs[..., 0], pairs[..., 1]
        out = xp.reshape(xp.stack([a * cos - b * sin, b * cos + a * sin], axis=-1), tuple(head.shape))
    else:
        a, b = head[..., :half], head[..., half:]
        out = xp.concat([a * cos - b * sin, b * cos + a * sin], axis=-1)
    return out if rot == int(x.shape[-1]) else xp.concat([out, x[..., rot:]], axis=-1)


def positions_of(ctx, position_ids, b: int, s: int):
    import numpy as np

    pid = ctx.to_host(position_ids).astype(np.int64)
    if pid.shape == (1,) or pid.shape == ():
        return np.broadcast_to(np.arange(s)[None, :] + int(pid.reshape(-1)[0]), (b, s))
    if pid.shape == (b, s):
        return pid
    ctx.fail(f"position_ids has shape {list(pid.shape)}; (1) or ({b}, {s}) expected")


def cached_angles(ctx, xp, cache, pos, like):
    """cache[pos] as (B, 1, S, rot/2) in like's dtype; an out-of-range position is an error."""
    import numpy as np

    m = int(cache.shape[0])
    if pos.size and (pos.min() < 0 or pos.max() >= m):
        ctx.fail(f"a position lies outside [0, {m - 1}] (the rows of cos_cache / sin_cache)")
    idx = xp.asarray(np.ascontiguousarray(pos.reshape(-1)), device=device_of(like))
    rows = xp.take(cast(xp, widen(xp, cache), like.dtype), idx, axis=0)
    return xp.reshape(rows, (pos.shape[0], 1, pos.shape[1], int(cache.shape[1])))


@KERNELS.register("RotaryEmbedding", 1, domain=DOMAIN)
def rotary_embedding(ctx):
    xp = ctx.xp
    interleaved = bool(ctx.attr("interleaved", 0))
    n_attr, rot_attr = int(ctx.attr("num_heads", 0)), int(ctx.attr("rotary_embedding_dim", 0))
    scale = float(ctx.attr("scale", 1.0))
    if ctx.attr("is_packed_batching", 0):
        ctx.fail("is_packed_batching is not supported")

    def run(x, position_ids, cos_cache, sin_cache):
        check_float(ctx, x, "input")
        if cos_cache.ndim != 2 or shape_of(sin_cache) != shape_of(cos_cache):
            ctx.fail(f"cos_cache and sin_cache must be 2-D of one shape, got {shape_of(cos_cache)}, {shape_of(sin_cache)}")
        rot = rot_attr or 2 * int(cos_cache.shape[1])
        xw = widen(xp, x)
        if x.ndim == 4:
            b, n, s, h = shape_of(x)
            heads = xw
        elif x.ndim == 3:
            b, s, d = shape_of(x)
            h = d // n_attr if n_attr else rot
            if h <= 0 or d % h:
                ctx.fail(f"the hidden size {d} is not a whole number of heads of {h} (set num_heads)")
            heads = _heads(xp, xw, d // h)
        else:
            ctx.fail(f"input must be 3-D or 4-D, got shape {shape_of(x)}")
        if rot > h or rot % 2 or int(cos_cache.shape[1]) * 2 < rot:
            ctx.fail(f"rotary_embedding_dim {rot} does not fit heads of {h} and caches of width {int(cos_cache.shape[1])}")
        pos = positions_of(ctx, position_ids, b, s)
        cos = cached_angles(ctx, xp, cos_cache, pos, heads)[..., :rot // 2]
        sin = cached_angles(ctx, xp, sin_cache, pos, heads)[..., :rot // 2]
        y = rotate(ctx, xp, heads * scale if scale != 1.0 else heads, cos, sin, interleaved, rot)
        return cast(xp, y if x.ndim == 4 else _merge(xp, y), x.dtype)

    def size(x, *_):  # the input's shape and type
        return math.prod(int(d) for d in x.shape) * x.dtype.itemsize

    return declares_output_bytes(run, size)
