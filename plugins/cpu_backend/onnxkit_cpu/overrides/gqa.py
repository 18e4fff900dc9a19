"""cpu fast path of GroupQueryAttention (com.microsoft 1) over the rows of one sequence (a
prompt, a decoding step): one compiled loop (:data:`onnxkit_cpu.compiled.gqa.chunk_step`) for
what the portable kernel does in many numpy calls: rotary, the presents written, the scores,
softmax and the value product of every head and row.

The case is decided by the portable package's ``gqa_token.chunk_case`` (batch 1, a prompt with
no padding or S new rows after the cached ones, float32 query, past and caches as numpy arrays),
or, for a packed query (key and value absent: a decoder's fused QKV product), by
:func:`packed_case`, which decides the same conditions in one pass (no views but the three the
step reads, no geometry object), and here: no position_ids / attention_bias / head_sink / query_seqlens / Q-K norm weights, and
none of the forms ``gqa_token.applies`` excludes (interleaved rotary, window cache, quantized
cache, softcap, smooth softmax, qk output); everything else, and a cold first run (the compiled
loop deferred, :mod:`onnxkit_cpu.compiled`), takes the portable kernel.  Results agree with it to float32
rounding (the compiled loop sums its dot products in another order than BLAS).

Where onnxkit-microsoft is not installed this module registers nothing.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable, calls_blas, declares_output_bytes, traits_of

from ..compiled import gqa as loops

KERNELS = KernelTable()

try:
    from onnxkit_microsoft.api import gqa as portable, gqa_token
except ImportError:  # onnxkit-microsoft absent: no com.microsoft operators to serve
    portable = gqa_token = None

DOMAIN = "com.microsoft"
_NONE = np.zeros((1, 1), np.float32)
_F32 = np.dtype(np.float32)


def packed_case(a: dict, query, past_key, past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache):
    """``(q, k, v, p, t, length, half, scale)`` of a run with a packed query (key and value absent)
    that ``gqa_token.chunk_case`` serves, with the values it gives (``q`` (S, N, H), ``k`` and
    ``v`` (S, Nkv, H) views of the query; ``p`` the cached rows, ``t`` the keys after the step,
    ``length`` the presents', ``half`` the rotated half-width, ``scale``); None exactly where it
    gives None.  The same conditions in the same terms, decided in one function."""
    if type(query) is not np.ndarray or type(past_key) is not np.ndarray or type(past_value) is not np.ndarray \
            or query.dtype != _F32 or past_key.dtype != _F32 or past_value.dtype != _F32:
        return None
    qs = query.shape
    if len(qs) != 3 or qs[0] != 1 or not qs[1]:
        return None
    n, nkv = a["n"], a["nkv"]
    s, d, heads = int(qs[1]), int(qs[2]), n + 2 * nkv
    if d % heads:
        return None
    h = d // heads
    ks = past_key.shape
    if len(ks) != 4 or ks != past_value.shape or ks[0] != 1 or ks[1] != nkv or ks[3] != h:
        return None
    if type(seqlens_k) is not np.ndarray or seqlens_k.shape != (1,) or seqlens_k.dtype.kind not in "iu" \
            or type(total_sequence_length) is not np.ndarray or total_sequence_length.size != 1:
        return None
    t, total, buf = int(seqlens_k[0]) + 1, int(total_sequence_length.reshape(-1)[0]), int(ks[2])
    if not 1 <= t <= total or s > total or (s == total and t != s):
        return None  # lengths the general kernel refuses, or a padded prompt
    p = 0 if s == total else t - s
    length = max(total, buf)
    if p < 0 or p > buf or p + s > length:
        return None
    half = 0
    if a["rotary"]:
        if type(cos_cache) is not np.ndarray or type(sin_cache) is not np.ndarray or cos_cache.dtype != _F32 \
                or sin_cache.dtype != _F32 or cos_cache.ndim != 2 or sin_cache.shape != cos_cache.shape:
            return None
        half = int(cos_cache.shape[1])
        if 2 * half > h or p + s > int(cos_cache.shape[0]) or not half:
            return None
    qkv = query.reshape(s, heads, h)
    return (qkv[:, :n], qkv[:, n:n + nkv], qkv[:, n + nkv:], p, t, length, half,
            a["scale"] or 1.0 / math.sqrt(h))


if portable is not None:

    @KERNELS.register("GroupQueryAttention", 1, domain=DOMAIN)
    @calls_blas
    def group_query_attention(ctx):
        base = portable.group_query_attention(ctx)
        a = portable.attributes(ctx)
        if not gqa_token.applies(a, ctx.num_outputs):
            return base
        step = loops.chunk_step.get()
        if step is None:
            return base
        n, nkv = a["n"], a["nkv"]
        causal, window = bool(a["causal"]), a["window"]

        def run(query, key=None, value=None, past_key=None, past_value=None, seqlens_k=None,
                total_sequence_length=None, cos_cache=None, sin_cache=None, position_ids=None, attention_bias=None,
                head_sink=None, k_scale=None, v_scale=None, *rest):
            if gqa_token.ENABLED and past_key is not None and position_ids is None and attention_bias is None \
                    and head_sink is None and (not rest or all(r is None for r in rest)):
                if key is None and value is None:
                    g = packed_case(a, query, past_key, past_value, seqlens_k, total_sequence_length, cos_cache,
                                    sin_cache)
                else:
                    c = gqa_token.chunk_case(a, query, key, value, past_key, past_value, seqlens_k,
                                             total_sequence_length, cos_cache, sin_cache)
                    g = None if c is None else (c.q, c.k, c.v, c.p, c.t, c.length, c.half, c.scale)
                if g is not None:
                    q, k, v, p, t, length, half, scale = g
                    rows, h = q.shape[0], q.shape[2]
                    pk = np.empty((1, nkv, length, h), np.float32)
                    pv = np.empty((1, nkv, length, h), np.float32)
                    y = np.empty((1, rows, n * h), np.float32)
                    step(q, k, v, past_key, past_value, p, t, causal, window, scale, half,
                         _NONE if cos_cache is None else cos_cache, _NONE if sin_cache is None else sin_cache,
                         pk, pv, y[0])
                    return y, pk, pv
            return base(query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache,
                        sin_cache, position_ids, attention_bias, head_sink, k_scale, v_scale, *rest)

        return declares_output_bytes(run, traits_of(base).output_bytes)
