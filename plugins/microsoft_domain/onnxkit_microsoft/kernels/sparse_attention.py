"""SparseAttention (com.microsoft 1): causal block-sparse grouped-query attention with a key/value
cache, as onnxruntime 1.32's CPU kernel computes it.

``query`` is ``(B, S, N*H)`` with ``key`` / ``value`` ``(B, S, Nkv*H)``, or packed QKV ``(B, S,
(N + 2 Nkv) * H)`` when key and value are absent.  ``past_key`` / ``past_value`` ``(B, Nkv, M,
H)`` are the cache buffers, which onnxruntime updates in place and returns as ``present_key`` /
``present_value`` (same shape; onnxkit returns updated copies).  ``total_sequence_length`` (a
scalar) equal to S marks the prompt: every row's past is then empty; otherwise row b's past is
``key_total_sequence_lengths[b] - S`` long.  The new keys and values are written at the rows
following the past; row b attends to the first ``key_total_sequence_lengths[b]`` keys, each query
at absolute position p to keys ``0..p`` (causal).

Sparsity: ``block_row_indices`` ``(L, M / sparse_block_size + 1)`` and ``block_col_indices`` ``(L,
nnz)`` hold L block layouts in CSR form (block row r's key blocks ``cols[rows[r]:rows[r+1]]``);
head h uses layout ``h mod L``.  A layout with as many blocks as the full lower triangle, and any
block row holding all r+1 blocks, is causal only; elsewhere a key outside the row's blocks has its
score replaced by float32's lowest value before the softmax (so a row whose causal keys are all
outside gives them equal weights, as onnxruntime does).  Scores are ``scale * q·k`` (``scale`` 0 or
absent: ``1 / sqrt(H)``), softmax over the causal keys, then the weighted sum of values.

``do_rotary``: rotary embedding of Q and K before they are cached, with ``cos_cache`` /
``sin_cache`` ``(max, rot / 2)``, rot / 2 a multiple of 8 (the first ``rot`` features; ``rotary_interleaved`` pairs
adjacent features) at positions ``0..S-1`` in the prompt, else ``key_total_sequence_lengths[b] -
S + s``.  float16 is computed in float32 with the scores and probabilities rounded to float16, as
onnxruntime keeps them.  A row whose key length is below ``total_sequence_length`` (a batch of
rows of different lengths, a padded prompt) gets from onnxruntime 1.32's CPU kernel probabilities
read at another offset than they were written (unspecified memory); onnxkit computes each such row
as onnxruntime computes it in a batch of its own (tests/test_sparse_attention.py), and a padded
prompt's queries past their row's length attend over the row's keys.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, arrays

from ._common import DOMAIN

KERNELS = KernelTable()

LOWEST = np.finfo(np.float32).min


def _rotate(x, cos, sin, interleaved: bool):
    """``x`` (…, S, H) with its first ``2 * cos.shape[-1]`` features rotated by cos / sin (…, S, rot/2)."""
    rot = 2 * int(cos.shape[-1])
    head = x[..., :rot]
    if interleaved:
        a, b = head[..., 0::2], head[..., 1::2]
        out = np.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(head.shape)
    else:
        half = rot // 2
        a, b = head[..., :half], head[..., half:]
        out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    return np.concatenate([out, x[..., rot:]], axis=-1) if rot < x.shape[-1] else out


def _block_masks(ctx, rows, cols, blocks: int):
    """``(L, blocks, blocks)`` booleans: key block c is seen from query block row r under layout l
    (a block row holding all r + 1 blocks, and a layout with the full lower triangle, see every
    block); column indices outside ``[0, blocks)`` are refused."""
    layouts = rows.shape[0]
    seen = np.zeros((layouts, blocks, blocks), bool)
    for lay in range(layouts):
        if rows[lay, -1] >= blocks * (blocks + 1) // 2:
            seen[lay] = True
            continue
        for r in range(blocks):
            start, end = int(rows[lay, r]), int(rows[lay, r + 1])
            picked = cols[lay, start:end]
            if end - start == r + 1:
                seen[lay, r] = True
            elif picked.size:
                if picked.min() < 0 or picked.max() >= blocks:
                    ctx.fail(f"block_col_indices of layout {lay}, block row {r} fall outside [0, {blocks})")
                seen[lay, r, picked] = True
    return seen


@KERNELS.register("SparseAttention", 1, domain=DOMAIN)
def sparse_attention(ctx):
    n, nkv = int(ctx.attr("num_heads")), int(ctx.attr("kv_num_heads"))
    block = int(ctx.attr("sparse_block_size"))
    scale_attr = ctx.attr("scale")
    rotary = bool(ctx.attr("do_rotary") or 0)
    interleaved = bool(ctx.attr("rotary_interleaved") or 0)
    if n <= 0 or nkv <= 0 or n % nkv:
        ctx.fail(f"num_heads ({n}) must be a positive multiple of kv_num_heads ({nkv})")
    if block <= 0:
        ctx.fail(f"sparse_block_size must be positive, got {block}")

    def run(query, key, value, past_key, past_value, block_row_indices, block_col_indices, total_sequence_length,
            key_total_sequence_lengths, cos_cache=None, sin_cache=None):
        name = arrays.dtype_name(query.dtype)
        if name not in ("float32", "float16"):
            ctx.fail(f"query has element type {name}; SparseAttention takes float32 or float16")
        q_in = ctx.to_host(query)
        dtype = q_in.dtype
        if q_in.ndim != 3:
            ctx.fail(f"query must be (batch, sequence, hidden), got shape {list(q_in.shape)}")
        b, s, width = (int(d) for d in q_in.shape)
        packed = key is None
        if packed != (value is None):
            ctx.fail("key and value are given together, or neither (packed QKV)")
        pk, pv = ctx.to_host(past_key), ctx.to_host(past_value)
        if pk.ndim != 4 or pk.shape[:2] != (b, nkv) or pv.shape != pk.shape:
            ctx.fail(f"past_key / past_value must be ({b}, {nkv}, max, head_size) alike, got {list(pk.shape)} / "
                     f"{list(pv.shape)}")
        cache_len, h = int(pk.shape[2]), int(pk.shape[3])
        f = np.float32
        if packed:
            if width != (n + 2 * nkv) * h:
                ctx.fail(f"packed QKV has hidden {width}, expected (num_heads + 2 kv_num_heads) * {h}")
            qkv = q_in.reshape(b, s, n + 2 * nkv, h).transpose(0, 2, 1, 3).astype(f)
            q, k, v = qkv[:, :n], qkv[:, n:n + nkv], qkv[:, n + nkv:]
        else:
            k_in, v_in = ctx.to_host(key), ctx.to_host(value)
            if width != n * h or k_in.shape != (b, s, nkv * h) or v_in.shape != k_in.shape:
                ctx.fail(f"query {list(q_in.shape)}, key {list(k_in.shape)}, value {list(v_in.shape)} do not fit "
                         f"num_heads {n}, kv_num_heads {nkv} and head_size {h}")
            q = q_in.reshape(b, s, n, h).transpose(0, 2, 1, 3).astype(f)
            k = k_in.reshape(b, s, nkv, h).transpose(0, 2, 1, 3).astype(f)
            v = v_in.reshape(b, s, nkv, h).transpose(0, 2, 1, 3).astype(f)
        rows, cols = ctx.to_host(block_row_indices).astype(np.int64), ctx.to_host(block_col_indices).astype(np.int64)
        if rows.ndim != 2 or cols.ndim != 2 or rows.shape[0] != cols.shape[0] or n % rows.shape[0]:
            ctx.fail(f"block_row_indices {list(rows.shape)} / block_col_indices {list(cols.shape)} must be "
                     f"(layouts, ...) alike, num_heads {n} a multiple of the layouts")
        total = int(ctx.to_host(total_sequence_length).reshape(-1)[0])
        lengths = ctx.to_host(key_total_sequence_lengths).astype(np.int64).reshape(-1)
        if lengths.size != b:
            ctx.fail(f"key_total_sequence_lengths has {lengths.size} values for batch {b}")
        prompt = total == s
        past = np.zeros(b, np.int64) if prompt else lengths - s
        if (past < 0).any() or (past + s > cache_len).any() or (lengths > cache_len).any():
            ctx.fail(f"key_total_sequence_lengths {lengths.tolist()} do not fit the cache of {cache_len} rows "
                     f"and {s} new tokens")
        if rotary:
            if cos_cache is None or sin_cache is None:
                ctx.fail("do_rotary needs cos_cache and sin_cache")
            cos, sin = ctx.to_host(cos_cache).astype(f), ctx.to_host(sin_cache).astype(f)
            pos = past[:, None] + np.arange(s)[None, :]
            if cos.shape != sin.shape or cos.ndim != 2 or 2 * cos.shape[1] > h or cos.shape[1] % 8:
                ctx.fail(f"cos_cache / sin_cache {list(cos.shape)} / {list(sin.shape)}: (max, rot / 2) alike with "
                         f"rot / 2 a multiple of 8 at most head_size / 2 = {h // 2}")
            if pos.max(initial=0) >= cos.shape[0]:
                ctx.fail(f"cos_cache / sin_cache have {cos.shape[0]} rows; position {int(pos.max())} is beyond")
            c, si = cos[pos][:, None], sin[pos][:, None]
            q = _rotate(q, c, si, interleaved).astype(dtype).astype(f)
            k = _rotate(k, c, si, interleaved).astype(dtype).astype(f)
        present_k, present_v = pk.copy(), pv.copy()
        for i in range(b):
            present_k[i, :, past[i]:past[i] + s] = k[i].astype(dtype)
            present_v[i, :, past[i]:past[i] + s] = v[i].astype(dtype)
        alpha = f(scale_attr) if scale_attr not in (None, 0.0) else f(1.0) / np.sqrt(f(h))
        layouts, blocks = rows.shape[0], rows.shape[1] - 1
        masks = _block_masks(ctx, rows, cols, blocks)
        group = n // nkv
        out = np.zeros((b, n, s, h), f)
        for i in range(b):
            t = int(lengths[i])
            keys, vals = present_k[i, :, :t].astype(f), present_v[i, :, :t].astype(f)
            pos = int(past[i]) + np.arange(s)
            if (pos // block).max(initial=0) >= blocks:
                ctx.fail(f"position {int(pos.max())} lies beyond the sparse layout's {blocks} block rows")
            causal = np.arange(t)[None, :] <= pos[:, None]  # (S, t)
            key_blocks = np.minimum(np.arange(t) // block, blocks - 1)
            # per layout: the scores outside the layout's blocks, among the causal keys
            hidden_by = [causal & ~masks[lay][pos // block][:, key_blocks] for lay in range(layouts)]
            for head in range(n):
                scores = (alpha * (q[i, head] @ keys[head // group].T)).astype(dtype).astype(f)  # (S, t)
                scores = np.where(causal, np.where(hidden_by[head % layouts], LOWEST, scores), -np.inf)
                e = np.exp(scores - scores.max(axis=1, keepdims=True))
                probs = (e / e.sum(axis=1, keepdims=True)).astype(dtype).astype(f)
                out[i, head] = probs @ vals[head // group]
        y = out.transpose(0, 2, 1, 3).reshape(b, s, n * h).astype(dtype)
        return ctx.from_host(y), ctx.from_host(present_k), ctx.from_host(present_v)

    return run
