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
* MultiHeadAttention — separate ``query (B, S, D)``, ``key``/``value`` ``(B, L, D)`` (with
  ``bias`` added) or already split into heads ``(B, N, L, H)``; ``past_key``/``past_value``
  ``(B, N, P, H)`` before them, the concatenations returned as ``present_key``/``present_value``;
  ``key_padding_mask`` ``(B)`` lengths, ``(3B+2)`` (its first ``B`` entries the lengths, as
  onnxruntime's CPU kernel reads it), ``(B, T)`` or ``(B, S, T)`` 1/0; as Attention otherwise.
  The packed layouts (``(B, L, N, 2, H)`` keys, ``(B, S, N, 3, H)`` queries), buffer sharing
  and ``cache_indirection`` are refused by name.
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
    elif dims == [2 * b]:
        j = np.arange(t)[None, :]
        keep = (j < host[:b].reshape(b, 1)) & (j >= host[b:].reshape(b, 1))
        keep = keep[:, None, None, :]
    elif dims == [b, t]:
        keep = (host != 0)[:, None, None, :]
    elif dims == [b, s, t]:
        keep = (host != 0)[:, None, :, :]
    else:
        ctx.fail(f"the mask has shape {dims}; for batch {b}, sequence {s} and total length {t} it must be "
                 f"{[b]}, {[2 * b]}, {[b, t]} or {[b, s, t]} (the 4-D and 3B+2 forms are not supported)")
    work = np.float32 if like.dtype == xp.float32 else np.float64
    additive = np.where(keep, work(0.0), work(filter_value)).astype(work)
    return xp.asarray(additive, device=device_of(like))


def sdpa(ctx, xp, q, k, v, scale, mask=None, causal_past=None, bias=None):
    """(B, N, S, H) attention of q over k, v (B, N, T, H) in q's (work) dtype; ``mask`` the
    additive key mask of :func:`_key_mask` (0 or ``mask_filter_value``); ``causal_past``: the
    past length P of a causal mask."""
    scores = xp.matmul(q, xp.matrix_transpose(k)) * scale
    s, t = int(q.shape[2]), int(k.shape[2])
    if bias is not None:
        bd = shape_of(bias)
        if len(bd) != 4 or bd[0] not in (1, int(q.shape[0])) or bd[1] not in (1, int(q.shape[1])) or bd[2:] != [s, t]:
            ctx.fail(f"attention_bias has shape {bd}; it must be (B or 1, N or 1, {s}, {t})")
        scores = scores + widen(xp, bias)
    if mask is not None:
        scores = scores + mask
    if causal_past is not None:
        import numpy as np

        allowed = np.arange(t)[None, :] <= (np.arange(s)[:, None] + causal_past)
        lowest = float(np.finfo(np.float32 if scores.dtype == xp.float32 else np.float64).min)
        scores = xp.where(xp.asarray(allowed, device=device_of(scores)), scores, const(xp, lowest, scores))
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
        if query.ndim != 3 or key is None or value is None or key.ndim == 5:
            ctx.fail("packed QKV / KV layouts are not supported: query (B, S, D) with key and value expected")
        if past_sequence_length is not None or cache_indirection is not None:
            ctx.fail("buffer sharing (past_sequence_length) and cache_indirection are not supported")
        b, s, d = shape_of(query)
        if d % n:
            ctx.fail(f"the query's hidden size {d} is not a multiple of num_heads {n}")
        qw = widen(xp, query)
        if bias is not None:
            dv = int(bias.shape[0]) - 2 * d
            bw = widen(xp, bias)
            qw = qw + bw[:d]
        q = _heads(xp, qw, n)
        if key.ndim == 3:
            kw, vw = widen(xp, key), widen(xp, value)
            if bias is not None:
                kw, vw = kw + bw[d:2 * d], vw + bw[2 * d:2 * d + dv]
            k, v = _heads(xp, kw, n), _heads(xp, vw, n)
        elif key.ndim == 4:
            k, v = widen(xp, key), widen(xp, value)
        else:
            ctx.fail(f"key has shape {shape_of(key)}: (B, L, D) or (B, N, L, H) expected")
        p = 0
        if past_key is not None and past_value is not None and key.ndim == 3:
            p = int(past_key.shape[2])
            k = xp.concat([widen(xp, past_key), k], axis=2)
            v = xp.concat([widen(xp, past_value), v], axis=2)
        t = int(k.shape[2])
        mask = None if key_padding_mask is None else _key_mask(ctx, xp, key_padding_mask, b, s, t, p, q,
                                                               filter_value, key_starts=True)
        y = sdpa(ctx, xp, q, k, v, _scale(ctx, d // n), mask, p if causal else None, attention_bias)
        return cast(xp, _merge(xp, y), query.dtype), cast(xp, k, query.dtype), cast(xp, v, query.dtype)

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
