"""cpu fast path of GroupQueryAttention (com.microsoft 1) over the rows of one sequence (a
prompt, a decoding step): one compiled loop (:data:`onnxkit_cpu.compiled.gqa.chunk_step`) for
what the portable kernel does in many numpy calls: rotary, the presents written, the scores,
softmax and the value product of every head and row.

The case is decided by the portable package's ``gqa_token.chunk_case`` (batch 1, a prompt with
no padding or S new rows after the cached ones, float32 query, past and caches as numpy arrays),
and here: no position_ids / attention_bias / head_sink / query_seqlens / Q-K norm weights, and
none of the forms ``gqa_token.applies`` excludes (interleaved rotary, window cache, quantized
cache, softcap, smooth softmax, qk output); everything else, and a cold first run (the compiled
loop deferred, :mod:`onnxkit_cpu.compiled`), takes the portable kernel.  Results agree with it to float32
rounding (the compiled loop sums its dot products in another order than BLAS).

Where onnxkit-microsoft is not installed this module registers nothing.
"""

from __future__ import annotations

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

        def run(query, key=None, value=None, past_key=None, past_value=None, seqlens_k=None,
                total_sequence_length=None, cos_cache=None, sin_cache=None, position_ids=None, attention_bias=None,
                head_sink=None, *rest):
            if gqa_token.ENABLED and past_key is not None and position_ids is None and attention_bias is None \
                    and head_sink is None and not any(r is not None for r in rest[2:]):
                g = gqa_token.chunk_case(a, query, key, value, past_key, past_value, seqlens_k, total_sequence_length,
                                         cos_cache, sin_cache)
                if g is not None:
                    rows, h = g.q.shape[0], g.q.shape[2]
                    pk = np.empty((1, nkv, g.length, h), np.float32)
                    pv = np.empty((1, nkv, g.length, h), np.float32)
                    y = np.empty((1, rows, n * h), np.float32)
                    step(g.q, g.k, g.v, past_key, past_value, g.p, g.t, g.causal, g.window, g.scale, g.half,
                         _NONE if g.cos is None else g.cos, _NONE if g.sin is None else g.sin, pk, pv,
                         y.reshape(rows, n * h))
                    return y, pk, pv
            return base(query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache,
                        sin_cache, position_ids, attention_bias, head_sink, *rest)

        return declares_output_bytes(run, traits_of(base).output_bytes)
