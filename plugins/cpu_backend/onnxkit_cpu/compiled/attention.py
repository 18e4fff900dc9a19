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
softmax); without it the plain softmax of the unfused pattern: a row whose maximum is -inf gives
NaN (``-inf - -inf``) and a NaN propagates.  A NaN or inf in v propagates through the product (0 * inf
is NaN, as in the matmul).

:func:`softmax_rows32` gives the float32 softmax of the blocked body (overrides/attention.py
``_blocked``, long sequences) over a block of scores in place, given each row's maximum (numpy's,
NaN-propagating): ``e_j = exp(s_j - m)`` by :func:`_exp32_py` (float32 arithmetic, vectorizable:
Cody-Waite reduction with a float32 split of ln 2, the degree-7 Taylor polynomial, ``2^k`` as two
exact powers of two; within 1 ulp of the exact exp over [-104, 0], measured 0.92 ulp, where numpy's
float32 exp is within 2.4; 0 below -104 and for -inf, NaN for NaN), their float64 sum ``t`` (its
order reassociated: vectorized), then ``p_j = e_j * float32(1 / t)`` (the numpy body divides by
the float32 sum: both within about 1.5 ulp of ``e_j / t``).  Rows follow the blocked body's rules:
with ``guard`` a row whose sum is NaN is zeros; without, NaN propagates (a row of -inf, whose
maximum the caller passes as -inf, is NaN).  One loop where the numpy body makes
four passes over the block (subtract, exp, sum, divide); exponentials of subnormal result
(arguments below -87.3) are slower (the CPU's subnormal arithmetic), still correct.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit_cpu.compiled import activation, kernel

#: the vectorizable exp of compiled/activation.py, bound by :func:`attention_loop`
_exp = None
#: float32 <-> int32 bit casts and the float32 exp, bound by :func:`softmax_rows32`
_f32_bits = _f32_from_bits = _exp32 = None

_F = np.float32
_LOG2E32 = _F(1.4426950408889634)
_LN2_HI32, _LN2_LO32 = _F(0.693359375), _F(-2.12194440e-4)    # Cephes' split: k * _LN2_HI32 exact
_ROUND32 = _F(12582912.0)                   # 1.5 * 2^23: v + _ROUND32 rounds v to an integer
_ROUND32_BITS = int(np.array(_ROUND32).view(np.int32))
_E7, _E6, _E5, _E4, _E3, _E2, _E1, _E0 = (_F(1.0 / math.factorial(n)) for n in range(7, -1, -1))


def _bit_casts():
    """Intrinsics reinterpreting a float32's bits as an int32 and back (numba has no scalar view)."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def bits(typingctx, x):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir.IntType(32))
        return types.int32(types.float32), codegen

    @intrinsic
    def from_bits(typingctx, b):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir.FloatType())
        return types.float32(types.int32), codegen
    return bits, from_bits


def _exp32_py(v):
    """exp of float32 ``v`` at most 88 (the softmax's ``s - max`` is at most 0) in float32 arithmetic
    (module docstring): ``v = k ln2 + r``, ``k`` rounded to nearest by adding 1.5 * 2^23 (its bits
    hold ``k``), ``exp(r)`` by Horner's rule, times ``2^h 2^(k - h)`` (``h = k >> 1``, both normal)."""
    if v < _F(-104.0):              # exp is 0 in float32 (NaN compares false: kept)
        v = _F(-104.0)
    t = v * _LOG2E32 + _ROUND32
    k = t - _ROUND32
    r = (v - k * _LN2_HI32) - k * _LN2_LO32
    p = _E7
    p = p * r + _E6
    p = p * r + _E5
    p = p * r + _E4
    p = p * r + _E3
    p = p * r + _E2
    p = p * r + _E1
    p = p * r + _E0
    ki = _f32_bits(t) - np.int32(_ROUND32_BITS)
    h = ki >> np.int32(1)
    return (p * _f32_from_bits((h + np.int32(127)) << np.int32(23))
            * _f32_from_bits((ki - h + np.int32(127)) << np.int32(23)))


def _softmax_rows32_py(s, top, guard):
    """Each row of the float32 2-D ``s`` (C-contiguous) replaced by its softmax, ``top`` (float32,
    one per row) its maximum as the caller computed it (module docstring)."""
    rows, n = s.shape
    zero = _F(0.0)
    for r in range(rows):
        m = top[r]
        tot = 0.0
        for j in range(n):
            e = _exp32(s[r, j] - m)
            s[r, j] = e
            tot += np.float64(e)
        if guard and tot != tot:
            for j in range(n):
                s[r, j] = zero
            continue
        inv = _F(1.0 / tot)
        for j in range(n):
            s[r, j] = s[r, j] * inv


def _exp32_loop(x, y):
    """``y = exp(x)`` by :func:`_exp32_py` (float32 1-D; the tests' handle on it)."""
    for i in range(x.shape[0]):
        y[i] = _exp32(x[i])


_EXP32 = kernel(_exp32_py, fastmath={"contract"})
_SOFTMAX32 = kernel(_softmax_rows32_py, fastmath={"contract", "reassoc"})
_EXP32_LOOP = kernel(_exp32_loop, fastmath={"contract"})


def _bind32() -> bool:
    global _f32_bits, _f32_from_bits, _exp32
    exp = _EXP32.get()
    if exp is None:
        return False
    if _f32_bits is None:
        _f32_bits, _f32_from_bits = _bit_casts()
    _exp32 = exp
    return True


def softmax_rows32():
    """The compiled float32 block softmax (:func:`_softmax_rows32_py`), or None where compiled
    loops are off."""
    return _SOFTMAX32.get() if _bind32() else None


def exp32_loop():
    """The compiled float32 exp over a 1-D array (:func:`_exp32_loop`), or None (tests)."""
    return _EXP32_LOOP.get() if _bind32() else None


def _attention(q, k, v, mask, ms, has_mask, scale, guard, y, scratch, lo, hi):
    """``y[b, i, h] = softmax_j(scale q[b, i, h] . k[b, j, h] + mask) v[b, :, h]``, for the
    (batch, head) pairs ``b H + h`` in ``[lo, hi)`` (the override's split across intra-op threads:
    each pair computed alike whatever the split, ``scratch`` one per concurrent call), for C-contiguous
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
    for bh in range(lo, hi):
        b = bh // nh
        h = bh - b * nh
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
            for j in range(nk):
                si[j] = si[j] - m
        for t in range(nq * nk):
            block[t] = _exp(block[t])
        for i in range(nq):
            si, yi = block[i * nk:i * nk + nk], y[b, i, h]
            tot = 0.0
            for j in range(nk):
                tot += si[j]
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
