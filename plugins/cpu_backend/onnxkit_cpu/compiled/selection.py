"""Compiled loops of the selection and indexing families (overrides/selection.py, overrides/indexing.py).

* :func:`top_k_loop` - TopK along the last axis of (rows, n) as a bounded heap: the first ``k``
  elements of a row are heapified with the worst on top (a lower value, for the smallest a
  higher one; an equal value with the higher index is worse), every later element that is
  strictly better than the top replaces it (a later equal value has the higher index: worse),
  and a heap sort leaves the ``k`` best in order.  The order is total, so the result is the
  portable kernel's stable sort (ties by the lower index) exactly; O(n log k) per row, and
  O(n) for the usual data where few elements enter the heap.  The keys are the portable
  ``sort_key``'s; NaN keys are never given (the override checks).
* :func:`non_zero_loop` - NonZero of a C-contiguous array seen flat: the coordinates of each
  nonzero element (``v != 0``: NaN is nonzero, -0.0 zero) in row-major order, written into the
  (rank, count) output the override allocated after counting.
* :func:`gather_elements_loop` - GatherElements as ``out[o, k, i] = x[o, idx[o, k, i], i]`` over
  (outer, axis, inner) views, a negative index counted from the end, False at the first index
  out of range (the override then lets the portable kernel name it); the override views the
  elements as unsigned integers of their width (a copy of bits).
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import kernel


#: The compiled ``_sift``, bound by :func:`top_k_loop` before ``_top_k`` compiles (a compiled
#: function calls compiled functions only).
_sift_c = None


def _sift(hv, hi, hole, size, v, i, largest):
    """Put key ``v`` (position ``i``) into the heap ``hv[:size]`` / ``hi[:size]`` at ``hole``, moved
    down past every child worse than it: the worst on top (worse = a lower value for the largest,
    a higher one for the smallest; an equal value with the higher position)."""
    while True:
        c = 2 * hole + 1
        if c >= size:
            break
        if c + 1 < size:
            a, b = hv[c + 1], hv[c]
            if (a < b if largest else a > b) or (a == b and hi[c + 1] > hi[c]):
                c += 1
        w = hv[c]
        if (w < v if largest else w > v) or (w == v and hi[c] > i):
            hv[hole], hi[hole] = w, hi[c]
            hole = c
        else:
            break
    hv[hole], hi[hole] = v, i


def _top_k(x, k, largest, idx):
    """``idx[r]``: the positions of the ``k`` best keys of ``x[r]`` (best first); ``1 <= k <= n``."""
    n = x.shape[1]
    hv = np.empty(k, x.dtype)
    hi = np.empty(k, np.int64)
    for r in range(x.shape[0]):
        row = x[r]
        for j in range(k):
            hv[j], hi[j] = row[j], j
        for start in range(k // 2 - 1, -1, -1):      # heapify: the worst on top
            _sift_c(hv, hi, start, k, hv[start], hi[start], largest)
        for j in range(k, n):
            v = row[j]
            if not (v > hv[0] if largest else v < hv[0]):
                continue
            _sift_c(hv, hi, 0, k, v, j, largest)
        for end in range(k - 1, 0, -1):              # heap sort: the worst to the end, one at a time
            v, i = hv[end], hi[end]
            hv[end], hi[end] = hv[0], hi[0]
            _sift_c(hv, hi, 0, end, v, i, largest)
        for j in range(k):
            idx[r, j] = hi[j]


def _non_zero(flat, shape, out):
    """``out[:, m]``: the coordinates of the m-th nonzero element of ``flat`` (C order of ``shape``)."""
    rank = shape.shape[0]
    coord = np.zeros(rank, np.int64)
    m = 0
    for p in range(flat.shape[0]):
        if flat[p] != 0:
            for d in range(rank):
                out[d, m] = coord[d]
            m += 1
        d = rank - 1
        while d >= 0:
            coord[d] += 1
            if coord[d] < shape[d]:
                break
            coord[d] = 0
            d -= 1


def _gather_elements(x, idx, out):
    """``out[o, k, i] = x[o, idx[o, k, i] (+ n if negative), i]``; returns False after the first
    output row holding an index outside [-n, n) (``out`` partly written; nothing read out of
    range).  Row by row along the inner axis: idx and out read and written in order."""
    n = x.shape[1]
    for o in range(out.shape[0]):
        xo = x[o]
        for k in range(out.shape[1]):
            jr, orow = idx[o, k], out[o, k]
            bad = False
            for i in range(orow.shape[0]):
                j = jr[i]
                if j < 0:
                    j += n
                bad |= (j < 0) | (j >= n)
                if not bad:
                    orow[i] = xo[j, i]
            if bad:
                return False
    return True


_SIFT, _TOP_K, _NON_ZERO, _GATHER_ELEMENTS = kernel(_sift), kernel(_top_k), kernel(_non_zero), kernel(_gather_elements)


def top_k_loop():
    """The compiled ``_top_k`` (its ``_sift`` bound first), or None where compiled loops are off."""
    global _sift_c
    sift = _SIFT.get()
    if sift is None:
        return None
    _sift_c = sift
    return _TOP_K.get()


def non_zero_loop():
    """The compiled ``_non_zero``, or None where compiled loops are off."""
    return _NON_ZERO.get()


def gather_elements_loop():
    """The compiled ``_gather_elements``, or None where compiled loops are off."""
    return _GATHER_ELEMENTS.get()
