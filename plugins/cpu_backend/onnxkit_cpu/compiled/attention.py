"""Compiled loop of scaled dot-product attention (overrides/attention.py: ai.onnxkit Attention-2).

:func:`attention_loop` gives one loop over (batch, head, query row) computing
``softmax(scale * q k^T + mask) v`` with the row's scores in a small float64 scratch the
override passes (no allocation) and the output row summed in place, for the small sequences of the corpus'
transformers (9-17 tokens, head size 32-64) where numpy's per-call cost of the 6-8 nodes the
pattern takes dominates.

Precision: the products accumulate in the inputs' type as the unfused MatMuls do (BLAS sums
float32 in float32): ``s_j = scale * (q . k_j) + mask_j`` (the dot product rounded in the type,
then scaled, biased and exponentiated in float64; the exporters' scaling of q and k by
sqrt(scale) each, rounded there, is one float64 product here), ``e_j = exp(s_j - max s)`` by
compiled/activation.py's vectorizable exponential (relative error below 3e-16), ``p_j = e_j /
sum e`` in float64, rounded once to the type, and ``y = sum_j p_j v_j`` accumulated in the
type.  The results are within Clause 11's tolerances of the definition evaluated in float64
(plugins/cpu_backend/tests/test_compiled_attention.py), as the unfused float32 nodes are.
Compile options add ``fastmath={"contract", "reassoc"}`` only: a product and a sum may fuse
into one multiply-add, and the dot products and the softmax sum may be summed in another order
(so that they vectorize; the order of a sum of D or Skv terms moves it by a few ulp at most,
as BLAS's blocking does); no flag assumes away NaN or inf.

Softmax rows as the definitions say: ``guard`` (nan_to_zero = 1) takes a NaN probability as 0
(a row holding NaN or +inf, or all -inf, gives zeros: ``Where(IsNaN(p), 0, p)`` after a plain
softmax); without it (ai.onnx Attention-23 as onnxkit computes it) a row whose maximum is -inf
gives zeros and a NaN propagates.  A NaN or inf in v propagates through the product (0 * inf
is NaN, as in the matmul).
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import activation, kernel

#: the vectorizable exp of compiled/activation.py, bound by :func:`attention_loop`
_exp = None


def _attention(q, k, v, mask, ms, has_mask, scale, guard, y, scratch):
    """``y[b, i, h] = softmax_j(scale q[b, i, h] . k[b, j, h] + mask) v[b, :, h]`` for C-contiguous
    4-D ``q`` (B, Sq, H, D), ``k`` (B, Skv, H, D), ``v`` (B, Skv, H, Dv), ``y`` (B, Sq, H, Dv) — the
    sequence-major layout the exporters' head transposes are views of (the override passes the
    (B, H, S, D) operands transposed back, and returns ``y`` transposed);
    ``mask`` a 1-D array read at ``b ms[0] + h ms[1] + i ms[2] + j ms[3]`` (element strides,
    0 on broadcast axes) where ``has_mask``; ``scratch`` float64 of at least Sq * Skv (one
    (batch, head) block of scores, then of exponentials: one long exp loop vectorizes, a row's
    does not)."""
    nb, nq, nh, nd = q.shape
    nk, nv = k.shape[1], v.shape[3]
    zero = y.dtype.type(0)
    block = scratch[:nq * nk]
    # inner loops index a row from 0 (known non-negative: no wraparound test, so they vectorize)
    for b in range(nb):
        for h in range(nh):
            for i in range(nq):
                qi, si = q[b, i, h], block[i * nk:i * nk + nk]
                base = b * ms[0] + h * ms[1] + i * ms[2]
                for j in range(nk):
                    kj = k[b, j, h]
                    acc = zero
                    for d in range(nd):
                        acc += qi[d] * kj[d]
                    s = np.float64(acc) * scale
                    if has_mask:
                        s += np.float64(mask[base + j * ms[3]])
                    si[j] = s
                m = si[0]
                for j in range(1, nk):
                    if si[j] > m:           # NaN skipped unless first: exp(NaN - m) makes the sum NaN
                        m = si[j]
                if not guard and m == -np.inf:
                    m = 0.0
                for j in range(nk):
                    si[j] = si[j] - m
            for t in range(nq * nk):
                block[t] = _exp(block[t])
            for i in range(nq):
                si, yi = block[i * nk:i * nk + nk], y[b, i, h]
                tot = 0.0
                for j in range(nk):
                    tot += si[j]
                if not guard and tot == 0.0:
                    tot = 1.0
                inv = 1.0 / tot
                for c in range(nv):
                    yi[c] = zero
                for j in range(nk):
                    p = si[j] * inv
                    if guard and p != p:
                        p = 0.0
                    pt = y.dtype.type(p)
                    vj = v[b, j, h]
                    for c in range(nv):
                        yi[c] += pt * vj[c]


_ATTENTION = kernel(_attention, fastmath={"contract", "reassoc"})


def attention_loop():
    """The compiled loop (:func:`_attention`), or None where compiled loops are off."""
    global _exp
    if not activation.bind_helpers():
        return None
    _exp = activation._exp
    return _ATTENTION.get()
