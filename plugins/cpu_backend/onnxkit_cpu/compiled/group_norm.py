"""Compiled loop of InstanceNormalization and GroupNormalization (overrides/group_norm.py).

:func:`group_norm_loop` gives ``rows(x, first, cpg, scale, b, eps, y)``: ``x`` and ``y``
C-contiguous 2-D ``(R, n)`` of one float type, each row one group of one image (the call's row
``r`` is row ``first + r`` of the whole: image ``(first + r) // G``, group ``g = (first + r) %
G``, with ``G = scale.shape[0] // cpg``), holding ``cpg`` channels of ``n // cpg`` elements each
(InstanceNormalization: ``cpg`` 1, a group is a channel); ``scale`` and ``b`` hold one value per
channel (``C = G * cpg``) in x's type; ``eps`` a scalar of x's type.
For each row it writes::

    mean = sum(x) / n;   d = x - mean;   var = sum(d * d) / n
    y = (d / sqrt(var + eps)) * scale[g * cpg + j] + b[g * cpg + j]     (j: the element's channel in the group)

with the portable kernels' arithmetic in their order and precision
(onnxkit_default_domain/kernels/norm.py: ``_moments`` then ``d / sqrt(var + eps) * scale +
B``), so the results are bit-identical to them for float32 and float64 X:

* each sum is numpy's pairwise summation (:func:`_pairwise_sum`), in x's type, from numpy's
  initial +0: ``np.add.reduce``'s order over a contiguous row, and over trailing axes numpy
  coalesces into one (as :mod:`onnxkit_cpu.compiled.norm` states for LayerNormalization);
* ``sum / n`` is np.mean's division (by an ``intp`` count in float64, then rounded to x's type;
  for float32 that equals one correctly rounded float32 division); every other step is one
  correctly rounded operation in x's type, never fused or reassociated (no fastmath).

``d * d`` is written into ``y``'s row before its sum (no other scratch).  NaN and inf propagate as in the numpy body where
``scale`` and ``b`` hold no NaN (the override's rule: a product of two NaNs takes either
operand's payload depending on the order LLVM gives them).
"""

from __future__ import annotations

import math

import numpy as np

from numba import uint64

from onnxkit_cpu.compiled import kernel

#: The compiled pairwise sum the loop calls, bound by
#: :func:`group_norm_loop` before it compiles (a compiled function calls compiled functions only).
_sum = None


def _leaf(a, lo, n):
    """numpy's pairwise-sum leaf over ``a[lo:lo + n]``, ``1 <= n <= 128``: a plain sum below 8
    elements, else eight interleaved partial sums combined ((0+1)+(2+3))+((4+5)+(6+7)), then the
    remainder after the last multiple of 8 added in order.  Unsigned indices: no negative-index
    wraparound, so the eight partial sums become one vector register."""
    b = a[lo:lo + n]
    if n < 8:
        res = b[0]
        for i in range(1, n):
            res += b[i]
        return res
    r0, r1, r2, r3 = b[0], b[1], b[2], b[3]
    r4, r5, r6, r7 = b[4], b[5], b[6], b[7]
    end = uint64(n - n % 8)
    i = uint64(8)
    while i < end:
        r0 += b[i]
        r1 += b[i + uint64(1)]
        r2 += b[i + uint64(2)]
        r3 += b[i + uint64(3)]
        r4 += b[i + uint64(4)]
        r5 += b[i + uint64(5)]
        r6 += b[i + uint64(6)]
        r7 += b[i + uint64(7)]
        i += uint64(8)
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < uint64(n):
        res += b[i]
        i += uint64(1)
    return res


def _pairwise_sum(a, n, stack, sums):
    """numpy's pairwise sum of the 1-D ``a[:n]``, ``n >= 1``: the leaf up to 128 elements, else
    the first half's sum plus the second's, split at ``n // 2`` rounded down to a multiple of 8.
    Evaluated without recursion over the caller's work arrays: ``stack`` (64, 2) int64 of pending
    ``(start, count)`` tasks (a count of -1: add the two latest sums) and ``sums`` (64,) of a's
    type (a depth of log2(n / 128) + 1 of each suffices)."""
    if n <= 128:
        return _leaf_c(a, 0, n)
    stack[0, 0], stack[0, 1] = 0, n
    top, v = 1, 0
    while top:
        top -= 1
        lo, k = stack[top, 0], stack[top, 1]
        if k < 0:
            v -= 1
            sums[v - 1] = sums[v - 1] + sums[v]
        elif k <= 128:
            sums[v] = _leaf_c(a, lo, k)
            v += 1
        else:
            h = k // 2
            h -= h % 8
            stack[top, 1] = -1
            stack[top + 1, 0], stack[top + 1, 1] = lo + h, k - h      # popped second
            stack[top + 2, 0], stack[top + 2, 1] = lo, h              # popped first
            top += 3
    return sums[0]


def _group_rows(x, first, cpg, scale, b, eps, y):
    rows, n = x.shape
    groups = scale.shape[0] // cpg
    sp = n // cpg
    stat = np.empty(2, x.dtype)            # mean, then sqrt(var + eps): each rounded to x's type
    stack = np.empty((64, 2), np.int64)    # the pairwise sums' work arrays, shared by every row
    sums = np.empty(64, x.dtype)
    for r in range(rows):
        xr, yr = x[r], y[r]
        stat[0] = (_sum(xr, n, stack, sums) + 0.0) / n      # numpy's sum starts at +0: -0 + 0 = +0
        mu = stat[0]
        for j in range(uint64(n)):
            d = xr[j] - mu
            yr[j] = d * d
        stat[1] = _sum(yr, n, stack, sums) / n
        stat[1] = stat[1] + eps
        stat[1] = math.sqrt(stat[1])
        sd = stat[1]
        base = ((first + r) % groups) * cpg
        for k in range(cpg):
            a, c = scale[base + k], b[base + k]
            lo = uint64(k * sp)
            for j in range(lo, lo + uint64(sp)):
                t = (xr[j] - mu) / sd
                t = t * a
                yr[j] = t + c


_LEAF = kernel(_leaf)
_SUM = kernel(_pairwise_sum)
_ROWS = kernel(_group_rows)
_leaf_c = None


def group_norm_loop():
    """The compiled rows loop (module docstring), or None where compiled loops are off."""
    global _leaf_c, _sum
    leaf = _LEAF.get()
    if leaf is None:
        return None
    _leaf_c = leaf
    _sum = _SUM.get()
    return _ROWS.get()
