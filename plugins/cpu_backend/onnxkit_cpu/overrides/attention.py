"""ai.onnxkit Attention-2 (the optimizer's attention fusion) on numpy.

Where compiled loops are on (decided at planning, :mod:`onnxkit_cpu.compiled`), the fused
pattern's case — float32 or float64 4-D Q, K, V of one batch and head count, no past, an
optional additive mask of Q's type broadcastable to the scores (B, H, Sq, Skv) whose last axis
is Skv, and Attention-23's attributes at their defaults but ``scale`` — runs, on float32 of at
most :data:`BATCHED_SCORES` scores in all, as :func:`_batched` (two batched BLAS products around
the compiled float32 softmax rows of :mod:`onnxkit_cpu.compiled.activation`, which states their
precision; Y a fresh (B, H, Sq, Dv) array), and otherwise (float64, or more scores) as one compiled
loop (:mod:`onnxkit_cpu.compiled.attention`, whose docstring states the precision) over the
sequence-major (B, S, H, D) layout: the exporters' head transposes are views of it, so Q, K and
V reach the loop without a copy (other layouts are copied once), and Y is returned as the
(B, H, Sq, Dv) view of a (B, Sq, H, Dv) array, which the exporters' Transpose back and Reshape
then read without a copy.

Long sequences (at least :data:`BLOCKED_MIN_SCORES` scores per head: Whisper's encoder over
1,500 frames has 2.25 million) take :func:`_blocked` instead, compiled loops on or off: per
(batch, head) and per block of at most :data:`BLOCK_SCORES` // Skv query rows, ``s = q_blk k^T``
and ``p v`` are BLAS products in the inputs' type (as the unfused MatMuls), the softmax in place
on the block in that type, so the score matrix is never whole: the scratch is one block (at most
``BLOCK_SCORES`` elements, reused), whatever the sequence length.  The softmax is numpy's passes
(exp included), or on float32 where compiled loops are on the rows' maximum by numpy and the rest
by one compiled pass per row (:func:`onnxkit_cpu.compiled.attention.softmax_rows32`: its own
float32 exp, within 1 ulp; one pass where numpy makes four); results agree with the numpy
passes to float rounding.  Its softmax rows follow the compiled loop's rules (module docstring
of :mod:`onnxkit_cpu.compiled.attention`).
float16 and bfloat16 Q, K, V (and an additive mask of their type, or a boolean one) take all of
the above on their values widened to float32, Y rounded once to their type (:mod:`.half`:
Clause 11.4 lets the scores and probabilities be held in float32; onnxruntime does too).
Everything else is the portable kernel (kernels/fused.py), which also decides every error.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit.plugin import parallel_for, splits_across_threads
from onnxkit_cpu.compiled import activation as act_loops
from onnxkit_cpu.compiled.attention import attention_loop, softmax_rows32
from onnxkit_cpu.overrides._plans import remember
from onnxkit_cpu.overrides.half import Halves, is_half, narrow, widen
from onnxkit_default_domain.api import ATTENTION_GUARDED_DEFAULTS as _GUARDED_DEFAULTS
from onnxkit_default_domain.api import FUSED_DOMAIN, attention_fused

KERNELS = KernelTable()
splits_across_threads((FUSED_DOMAIN, "Attention"))
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
#: scores per (batch, head) from which the blocked BLAS body is taken (64 x 64 and more)
BLOCKED_MIN_SCORES = 4096
#: scores in one block of query rows (float32: 1 MB; the block size that ran fastest on 1,500 keys)
BLOCK_SCORES = 262144
#: multiply-adds of the compiled loop worth a block of (batch, head) pairs on a thread of its own
#: (:func:`onnxkit.runtime.threads.parallel_for`; a block below costs more to hand over than it saves)
PAIR_WORK = 65536
#: scores of :func:`_batched`'s softmax worth a block of rows on a thread of its own
ROW_WORK = 8192
#: the most scores (all heads together: its scratch) for which float32 takes :func:`_batched`
BATCHED_SCORES = 524288


def _blocked(q, k, v, mask, scale, guard, rows32=None):
    """Y (B, H, Sq, Dv) of ``softmax(scale q k^T + mask) v`` block by block of query rows (module
    docstring); ``mask`` None or a read-only view broadcast to the scores' shape (B, H, Sq, Skv).
    ``scale`` multiplies the block of q (Dv products a row instead of Skv; the exporters scale q
    and k so too).  Rows as the compiled loop's: with ``guard`` a NaN probability is 0 (it occurs
    exactly in a row whose sum is NaN: a finite maximum makes the sum at least 1); without, NaN
    propagates (a row whose maximum is -inf is NaN, as the unfused Softmax).  ``rows32``: the compiled float32
    softmax (:func:`~onnxkit_cpu.compiled.attention.softmax_rows32`) or None (numpy's passes)."""
    nb, nh, nq = q.shape[:3]
    nk = k.shape[2]
    rows = max(1, min(nq, BLOCK_SCORES // nk))
    y = np.empty((nb, nq, nh, v.shape[3]), dtype=q.dtype)
    factor = q.dtype.type(scale)
    compiled = rows32 is not None and q.dtype == np.float32

    def pairs(lo, hi):
        """The (batch, head) pairs ``b H + h`` in ``[lo, hi)``, with work arrays of their own."""
        work = np.empty((rows, nk), dtype=q.dtype)
        qs = np.empty((rows, q.shape[3]), dtype=q.dtype)
        top = np.empty((rows, 1), dtype=q.dtype)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            for bh in range(lo, hi):
                b, h = divmod(bh, nh)
                kt, vh = k[b, h].T, v[b, h]
                for r0 in range(0, nq, rows):
                    r1 = min(nq, r0 + rows)
                    s, m, qb = work[:r1 - r0], top[:r1 - r0], qs[:r1 - r0]
                    np.multiply(q[b, h, r0:r1], factor, out=qb)
                    np.matmul(qb, kt, out=s)
                    if mask is not None:
                        s += mask[b, h, r0:r1]
                    np.maximum.reduce(s, axis=1, keepdims=True, out=m)
                    if compiled:
                        rows32(s, m.reshape(-1), guard)
                        y[b, r0:r1, h] = s @ vh
                        continue
                    s -= m
                    np.exp(s, out=s)
                    np.add.reduce(s, axis=1, keepdims=True, out=m)
                    s /= m
                    if guard:
                        bad = np.isnan(m[:, 0])
                        if bad.any():
                            s[bad] = 0
                    y[b, r0:r1, h] = s @ vh

    parallel_for(pairs, nb * nh, name="attention.blocked")
    return y.transpose(0, 2, 1, 3)


def _batched(q, k, v, mask, scale, guard, rows):
    """Y (B, H, Sq, Dv) of float32 ``softmax(scale q k^T + mask) v`` in three steps over every
    (batch, head) pair at once (module docstring): ``s = (q scale) k^T`` and ``p v`` one batched
    BLAS product each, in float32 as the unfused MatMuls, the mask added as numpy broadcasts it,
    and the softmax of the score rows by the compiled float32 rows loop ``rows``
    (:mod:`onnxkit_cpu.compiled.activation`'s 'softmax32': a row holding NaN, whose maximum is +inf, or of -inf only,
    gives NaN), split across the run's intra-op threads; with ``guard`` such rows are zeros."""
    nk = k.shape[2]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        nb, nh, nq = q.shape[:3]
        s = np.empty((nb, nh, nq, nk), q.dtype)     # C-contiguous whatever the inputs' layout: rows below
        np.matmul(np.multiply(q, q.dtype.type(scale)), k.transpose(0, 1, 3, 2), out=s)
        if mask is not None:
            s += mask
        p = np.empty(s.shape, s.dtype)  # not in place: the loop's vector path needs distinct arrays
        xs, ps = s.reshape(-1, nk), p.reshape(-1, nk)

        def block(lo, hi):      # score rows split across the run's intra-op threads (each alike)
            rows(xs[lo:hi], ps[lo:hi], False)

        parallel_for(block, xs.shape[0], grain=max(1, ROW_WORK // nk), name="attention.batched")
        if guard:
            bad = np.isnan(ps[:, 0])
            if bad.any():
                ps[bad] = 0
        return np.matmul(p, v)


def _mask_strides(mask, scores: tuple):
    """Element strides (4 ints, 0 on broadcast axes) reading ``mask`` (C-contiguous) as the
    ``scores`` shape, or None unless it broadcasts to it with its last axis whole."""
    if mask.ndim > 4 or mask.ndim == 0 or mask.shape[-1] != scores[3]:
        return None
    shape = (1,) * (4 - mask.ndim) + tuple(mask.shape)
    strides, step = [0, 0, 0, 0], 1
    for ax in range(3, -1, -1):
        if shape[ax] == scores[ax]:
            strides[ax] = step if shape[ax] > 1 else 0
        elif shape[ax] != 1:
            return None
        step *= shape[ax]
    return tuple(strides)


def _seq_major(x):
    """(B, H, S, D) ``x`` as a C-contiguous (B, S, H, D) array: a view where ``x`` is the head
    transpose of one (the exporters' Transpose(Reshape(...), [0, 2, 1, 3])), else a copy."""
    t = x.transpose(0, 2, 1, 3)
    return t if t.flags.c_contiguous else np.ascontiguousarray(t)


@KERNELS.register("Attention", 2, domain=FUSED_DOMAIN)
def attention(ctx):
    portable = attention_fused(ctx)
    rows = act_loops.loop("softmax32")
    fn = attention_loop()
    rows32 = softmax_rows32()
    if any(ctx.attr(n, d) != d for n, d in _GUARDED_DEFAULTS.items()) or \
            any(ctx.output_requested(i) for i in (1, 2, 3)):
        return portable
    guard = bool(int(ctx.attr("nan_to_zero", 0)))
    scale_attr = ctx.attr("scale")
    plans: dict = {}
    no_mask = {t: np.zeros(1, dtype=t) for t in _FLOATS}   # the mask argument where there is none
    halves = Halves.of(ctx)

    def plan(q, k, v, mask):
        """``(mask strides, scale)`` of this signature, or False for the portable kernel."""
        if q.dtype not in _FLOATS or not (q.dtype == k.dtype == v.dtype) or q.ndim != 4 or k.ndim != 4 \
                or v.ndim != 4 or q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3] \
                or q.shape[3] != k.shape[3] or 0 in q.shape or 0 in k.shape or 0 in v.shape:
            return False
        ms = (0, 0, 0, 0)
        if mask is not None:
            ms = mask.dtype == q.dtype and _mask_strides(mask, q.shape[:3] + k.shape[2:3])
            if not ms:
                return False
        scale = float(1.0 / np.sqrt(q.shape[3]) if scale_attr is None else scale_attr)
        return ms, scale

    def run(q, k, v, attn_mask=None, past_key=None, past_value=None):
        if past_key is not None or past_value is not None:
            return portable(q, k, v, attn_mask, past_key, past_value)
        if is_half(q.dtype) and q.dtype == k.dtype == v.dtype and (attn_mask is None or attn_mask.dtype in (
                q.dtype, np.bool_)):     # float16 / bfloat16: the float32 body, Y rounded once (half.py)
            wide = run(widen(q, halves), widen(k, halves), widen(v, halves),
                       attn_mask if attn_mask is None or attn_mask.dtype == np.bool_ else widen(attn_mask, halves))
            return narrow(wide, q.dtype, halves)
        key = (q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype,
               None if attn_mask is None else (attn_mask.shape, attn_mask.dtype))
        p = plans.get(key)
        if p is None:
            p = remember(plans, key, plan(q, k, v, attn_mask))
        if p is False:
            return portable(q, k, v, attn_mask)
        ms, scale = p
        b, h, sq = q.shape[:3]
        if rows is not None and q.dtype == np.float32 and b * h * sq * k.shape[2] <= BATCHED_SCORES:
            return _batched(q, k, v, attn_mask, scale, guard, rows)
        if sq * k.shape[2] >= BLOCKED_MIN_SCORES:
            full = None if attn_mask is None else np.broadcast_to(attn_mask, q.shape[:3] + k.shape[2:3])
            return _blocked(q, k, v, full, scale, guard, rows32)
        if fn is None:
            return portable(q, k, v, attn_mask)
        y = np.empty((b, sq, h, v.shape[3]), dtype=q.dtype)
        mask = no_mask[q.dtype] if attn_mask is None else np.ascontiguousarray(attn_mask).reshape(-1)
        args = (_seq_major(q), _seq_major(k), _seq_major(v), mask, ms, attn_mask is not None, scale, guard, y)

        def pairs(lo, hi):     # (batch, head) pairs split across the run's intra-op threads
            fn(*args, np.empty(sq * k.shape[2], dtype=np.float64), lo, hi)

        parallel_for(pairs, b * h, grain=max(1, PAIR_WORK // (sq * k.shape[2] * (q.shape[3] + v.shape[3]))),
                     name="attention.compiled")
        return y.transpose(0, 2, 1, 3)

    return run
