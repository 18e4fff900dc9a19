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

* each sum is numpy's pairwise summation (:func:`onnxkit_cpu.compiled.norm.pairwise_sum`), in x's type, from numpy's
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

from onnxkit_cpu.compiled import kernel, norm

#: The compiled pairwise sum the loop calls (:func:`onnxkit_cpu.compiled.norm.pairwise_sum`), bound
#: by :func:`group_norm_loop` before it compiles (a compiled function calls compiled functions only).
_sum = None


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


_ROWS = kernel(_group_rows)


def group_norm_loop():
    """The compiled rows loop (module docstring), or None where compiled loops are off."""
    global _sum
    _sum = norm.pairwise_sum()
    if _sum is None:
        return None
    return _ROWS.get()
