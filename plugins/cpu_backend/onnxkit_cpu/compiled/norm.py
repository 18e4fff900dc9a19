"""Compiled loops of the normalizations (overrides/norm.py): LayerNormalization's rows (float64 and
float32: :func:`layer_norm_loop`, :func:`layer_norm_rows32`) and inference BatchNormalization's
per-channel affine pass (:data:`channel_affine`).

:data:`channel_affine` ``(x, inv, shift, y, relu)``: ``x`` and ``y`` ``(N, C, L)``, ``inv`` and
``shift`` ``(C,)``, all C-contiguous and of one float type; ``y[n, c, i] = x[n, c, i] * inv[c]
+ shift[c]``, the product rounded to the type, then the sum rounded (two IEEE operations, as
numpy's ``np.multiply(x, inv)`` then ``y += shift``: no fastmath, so LLVM never contracts them
into a fused multiply-add), then where ``relu`` ``max(v, 0)`` as ``np.maximum(v, 0)`` gives it
(``v`` unless ``v <= 0``: a NaN keeps its bits, ``-0`` and negatives give ``+0``).  Bit-identical
to the numpy body and the separate cpu Relu where ``inv`` and ``shift`` hold no NaN (the
override's rule): an operation then meets at most one NaN, whose payload it keeps whatever
order LLVM gives the operands (two NaNs give the first operand's on x86).

:func:`layer_norm_loop` (the float64 X's loop) gives ``rows(x, scale, b, has_b, eps, y, stats)``: for each row ``r``
of the C-contiguous 2-D ``x`` (rows, n), with ``scale`` and ``b`` of n elements (``b`` read
only where ``has_b``) and ``eps`` a scalar of x's type, it writes ``y[r]`` (``y`` like ``x``)
and the row's mean and 1 / standard deviation into ``stats[0, r]`` and ``stats[1, r]``
(``stats`` of shape (2, rows), x's type).  It computes the
numpy body's arithmetic in its order and precision, so the results are bit-identical to it
(and to the ONNX function body evaluated op by op in X's type):

* each sum is numpy's pairwise summation (:func:`_pairwise_sum_py`, the loop ``np.add.reduce``
  runs over a contiguous row, and over the trailing axes of a block, which numpy coalesces),
  in x's type, added to numpy's initial +0;
* each other step is one correctly rounded operation in x's type: ``mean = s / n``,
  ``d = x - mean``, ``d * d``, ``var = s2 / n``, ``var + eps``, ``sqrt``, ``1 / sqrt``,
  ``d * inv``, ``* scale``, ``+ b``.  Where numba's typing widens a step to float64 (a Python
  int or float operand: ``s / n``, ``1.0 / v``), the result is stored into an array of x's
  type before it is used; one +, -, *, / or sqrt evaluated in float64 and rounded once to
  float32 equals the float32 operation (53 >= 2 * 24 + 2 bits).  No fastmath: no contraction
  into fused multiply-adds, no reassociation.

NaN and inf propagate as in the numpy body (the same operations).  Allocations: none for rows
of up to 128 elements; one fixed 128-entry work stack per call for longer rows.

**The float32 rows loop** of LayerNormalization, vectorized: its sums in float64 with their order
reassociated (LLVM's vector accumulators), every other step in float32.
:func:`layer_norm_rows32` gives ``rows(x, scale, b, has_b, eps, y, stats)`` with the signature
and layout of :func:`layer_norm_loop`'s (C-contiguous float32 2-D ``x`` (rows, n), ``scale`` and
``b`` of n elements, ``b`` read only where ``has_b``, ``eps`` a float32, ``y`` like ``x``,
``stats`` (2, rows) float32 receiving each row's mean and 1 / standard deviation).  Per row:

* ``mean``: the float64 sum of the row over n, rounded once to float32;
* ``var``: the float64 sum of ``(x_j - mean)^2`` (deviations from the float32 mean, in float64)
  over n; ``inv = float32(1 / sqrt(var + eps))`` rounded once;
* ``y_j = (x_j - mean) inv scale_j + b_j`` in float32 (``x_j - mean`` rounded, the rest by
  fused multiply-adds where the compiler forms them: ``fastmath={"contract"}``).

So the statistics are within an ulp of the exact ones (a float64 sum of n float32 values, in any
order, is within ``n 2^-53`` relative of its terms' magnitudes), where the numpy body sums in
float32 (pairwise: ``log2(n)`` ulp); Y is within a few ulp of ``|d inv scale| + |b|``, plus
``|mean| 2^-24 inv |scale|`` from the mean's rounding (as any float32 evaluation that rounds
the mean).  The sums use ``fastmath={"reassoc"}`` only; NaN and inf propagate as in the numpy
body (a row holding NaN gives NaN; an infinite entry makes the mean infinite and the row NaN).
No allocation.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit_cpu.compiled import kernel

#: The compiled helpers the loops call, bound by :func:`layer_norm_loop` before they compile
#: (a compiled function calls compiled functions only).
_leaf = _pairwise = None


def _leaf_sum(a, lo, n):
    """numpy's pairwise-sum leaf over the 1-D ``a[lo:lo + n]``, ``1 <= n <= 128``: a plain sum
    below 8 elements, else eight interleaved partial sums combined ((0+1)+(2+3))+((4+5)+(6+7)),
    then the remainder after the last multiple of 8 added in order.  Unsigned indices: no
    negative-index wraparound, so the eight partial sums become one vector register."""
    b = a[lo:lo + n]
    if n < 8:
        res = b[0]
        for i in range(1, n):
            res += b[i]
        return res
    one = np.uint64(1)
    r0, r1, r2, r3 = b[0], b[1], b[2], b[3]
    r4, r5, r6, r7 = b[4], b[5], b[6], b[7]
    end = np.uint64(n - n % 8)
    i = np.uint64(8)
    while i < end:
        r0 += b[i]
        r1 += b[i + one]
        r2 += b[i + np.uint64(2)]
        r3 += b[i + np.uint64(3)]
        r4 += b[i + np.uint64(4)]
        r5 += b[i + np.uint64(5)]
        r6 += b[i + np.uint64(6)]
        r7 += b[i + np.uint64(7)]
        i += np.uint64(8)
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < np.uint64(n):
        res += b[i]
        i += one
    return res


def _pairwise_sum_py(a, n, stack, sums):
    """numpy's pairwise sum of the 1-D ``a[:n]``, ``n >= 1`` (np.add.reduce's order over a
    contiguous row): the leaf up to 128 elements, else the first half's sum plus the second's,
    split at ``n // 2`` rounded down to a multiple of 8.  Evaluated without recursion over the
    caller's work arrays, made once per call of its rows loop, not per row: ``stack`` (64, 2)
    int64 of pending ``(start, count)`` tasks (a count of -1: add the two latest sums) and
    ``sums`` (64,) of a's type (a depth of log2(n / 128) + 1 of each suffices)."""
    if n <= 128:
        return _leaf(a, 0, n)
    stack[0, 0], stack[0, 1] = 0, n
    top, v = 1, 0
    while top:
        top -= 1
        lo, k = stack[top, 0], stack[top, 1]
        if k < 0:
            v -= 1
            sums[v - 1] = sums[v - 1] + sums[v]
        elif k <= 128:
            sums[v] = _leaf(a, lo, k)
            v += 1
        else:
            h = k // 2
            h -= h % 8
            stack[top, 1] = -1
            stack[top + 1, 0], stack[top + 1, 1] = lo + h, k - h      # popped second
            stack[top + 2, 0], stack[top + 2, 1] = lo, h              # popped first
            top += 3
    return sums[0]


def _layer_norm_rows(x, scale, b, has_b, eps, y, stats):
    rows, n = x.shape
    mean, inv = stats[0], stats[1]
    stack = np.empty((64, 2), np.int64)    # the pairwise sums' work arrays, shared by every row
    sums = np.empty(64, x.dtype)
    for r in range(rows):
        s = _pairwise(x[r], n, stack, sums)
        mean[r] = (s + 0.0) / n                 # numpy's sum starts at +0: -0 + 0 = +0
        mu = mean[r]
        for j in range(n):
            d = x[r, j] - mu
            y[r, j] = d * d
        inv[r] = _pairwise(y[r], n, stack, sums) / n
        inv[r] = inv[r] + eps
        inv[r] = math.sqrt(inv[r])
        inv[r] = 1.0 / inv[r]
        iv = inv[r]
        if has_b:
            for j in range(n):
                y[r, j] = (x[r, j] - mu) * iv * scale[j] + b[j]
        else:
            for j in range(n):
                y[r, j] = (x[r, j] - mu) * iv * scale[j]


@kernel
def channel_affine(x, inv, shift, y, relu):
    """The per-channel affine pass of inference BatchNormalization (module docstring)."""
    n_img, c_all, n = x.shape
    zero = y.dtype.type(0)
    if n == 1:                          # rank 2 (N, C): the channels are the inner run
        for m in range(n_img):
            for c in range(c_all):
                v = x[m, c, 0] * inv[c]
                v = v + shift[c]
                y[m, c, 0] = zero if relu and v <= zero else v
        return
    for m in range(n_img):
        for c in range(c_all):
            a, s = inv[c], shift[c]
            if relu:
                for i in range(n):
                    v = x[m, c, i] * a
                    v = v + s
                    y[m, c, i] = zero if v <= zero else v
            else:
                for i in range(n):
                    v = x[m, c, i] * a
                    y[m, c, i] = v + s


_LEAF = kernel(_leaf_sum)
_PAIRWISE = kernel(_pairwise_sum_py)
_ROWS = kernel(_layer_norm_rows)


def pairwise_sum():
    """The compiled :func:`_pairwise_sum_py` (numpy's pairwise sum of a 1-D row; the
    normalization loops of this module and :mod:`onnxkit_cpu.compiled.group_norm` call it), its
    leaf bound before it compiles; None where compiled loops are off."""
    global _leaf, _pairwise
    leaf = _LEAF.get()
    if leaf is None:
        return None
    _leaf = leaf
    _pairwise = _PAIRWISE.get()
    return _pairwise


def layer_norm_loop():
    """The compiled rows loop (module docstring), or None where compiled loops are off."""
    if pairwise_sum() is None:
        return None
    return _ROWS.get()


#: the float32 loop's compiled sums, bound by :func:`layer_norm_rows32` before the loop compiles
_sum64 = _sqdev64 = None


def _sum64_py(x, r):
    """The float64 sum of row ``r`` (order reassociated: vectorized)."""
    s = 0.0
    for j in range(x.shape[1]):
        s += np.float64(x[r, j])
    return s


def _sqdev64_py(x, r, m):
    """The float64 sum of ``(x[r, j] - m)^2`` (``m`` float64; order reassociated: vectorized)."""
    s = 0.0
    for j in range(x.shape[1]):
        d = np.float64(x[r, j]) - m
        s += d * d
    return s


def _layer_norm_rows32(x, scale, b, has_b, eps, y, stats):
    rows, n = x.shape
    e64 = np.float64(eps)
    for r in range(rows):
        mu = np.float32(_sum64(x, r) / n)
        var = _sqdev64(x, r, np.float64(mu)) / n
        inv = np.float32(1.0 / math.sqrt(var + e64))
        stats[0, r] = mu
        stats[1, r] = inv
        if has_b:
            for j in range(n):
                y[r, j] = (x[r, j] - mu) * inv * scale[j] + b[j]
        else:
            for j in range(n):
                y[r, j] = (x[r, j] - mu) * inv * scale[j]


_SUM64 = kernel(_sum64_py, fastmath={"reassoc"})
_SQDEV64 = kernel(_sqdev64_py, fastmath={"reassoc", "contract"})
_ROWS32 = kernel(_layer_norm_rows32, fastmath={"contract"})


def layer_norm_rows32():
    """The compiled float32 rows loop (module docstring), or None where compiled loops are off."""
    global _sum64, _sqdev64
    s = _SUM64.get()
    if s is None:
        return None
    _sum64, _sqdev64 = s, _SQDEV64.get()
    return _ROWS32.get()
