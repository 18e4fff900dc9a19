"""Compiled loop of NonMaxSuppression (overrides/image.py): the whole (batch, class) loop in one
call, the rules of the portable kernel (kernels/image.py) exactly.

Per batch the box planes are formed once, in float32 as the portable ``box_planes`` forms them;
per class the candidates (score strictly above the threshold, or every box) are made a binary
heap and popped one at a time, each popped candidate tested against the boxes kept so far
(``_suppressed``: the portable ``suppressed`` for one pair, the same float32 operations and
comparison order, so NaN and the threshold's edge are decided alike), until the class has
``limit`` boxes or no candidate is left.  The heap is libstdc++'s ``make_heap`` / ``pop_heap``
under onnxruntime's order (a greater score first, ties by the lower index): the sorted order for
comparable scores, and the portable ``heap_order`` for NaN scores.  Compiled without fast-math
(no contraction into fused multiply-adds): the results equal the portable kernel's.
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import kernel

_TWO = np.float32(2.0)
#: The compiled helpers ``_nms`` calls, bound by :func:`nms_loop` before it compiles (a compiled
#: function calls compiled functions only).
_planes_c = _suppressed_c = _sift_c = None


def _planes(box, center, ymin, xmin, ymax, xmax, area):
    for i in range(box.shape[0]):
        if center:
            hw, hh = box[i, 2] / _TWO, box[i, 3] / _TWO
            xmin[i], xmax[i] = box[i, 0] - hw, box[i, 0] + hw
            ymin[i], ymax[i] = box[i, 1] - hh, box[i, 1] + hh
        else:
            y0, x0, y1, x1 = box[i, 0], box[i, 1], box[i, 2], box[i, 3]
            if y0 >= y1:
                ymin[i], ymax[i] = y1, y0
            else:
                ymin[i], ymax[i] = y0, y1
            if x0 >= x1:
                xmin[i], xmax[i] = x1, x0
            else:
                xmin[i], xmax[i] = x0, x1
        area[i] = (ymax[i] - ymin[i]) * (xmax[i] - xmin[i])


def _suppressed(c, k, ymin, xmin, ymax, xmax, area, thr):
    ix0 = xmin[k] if xmin[c] < xmin[k] else xmin[c]
    ix1 = xmax[k] if xmax[k] < xmax[c] else xmax[c]
    if not ix1 > ix0:
        return False
    iy0 = ymin[k] if ymin[c] < ymin[k] else ymin[c]
    iy1 = ymax[k] if ymax[k] < ymax[c] else ymax[c]
    if not iy1 > iy0:
        return False
    inter = (ix1 - ix0) * (iy1 - iy0)
    if not inter > 0:
        return False
    return inter / (area[c] + area[k] - inter) > thr


def _sift(s, ix, hole, length, vs, vi):
    """libstdc++'s ``__adjust_heap`` under onnxruntime's "less than" (a lower score, or an equal
    score and a higher index): the hole at ``hole`` down to a leaf, then ``(vs, vi)`` up."""
    top, child = hole, hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if s[child] < s[child - 1] or (s[child] == s[child - 1] and ix[child] > ix[child - 1]):
            child -= 1
        s[hole], ix[hole] = s[child], ix[child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        s[hole], ix[hole] = s[child - 1], ix[child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and (s[parent] < vs or (s[parent] == vs and ix[parent] > vi)):
        s[hole], ix[hole] = s[parent], ix[parent]
        hole = parent
        parent = (hole - 1) // 2
    s[hole], ix[hole] = vs, vi


def _nms(boxes, scores, center, limit, iou_thr, has_thr, score_thr, out):
    """Kept ``(batch, class, box)`` rows into ``out`` (rows >= B * C * min(limit, N)); returns their
    count.  boxes (B, N, 4) and scores (B, C, N) float32, C-contiguous; ``limit`` > 0."""
    nbox = boxes.shape[1]
    ymin, xmin = np.empty(nbox, np.float32), np.empty(nbox, np.float32)
    ymax, xmax = np.empty(nbox, np.float32), np.empty(nbox, np.float32)
    area = np.empty(nbox, np.float32)
    s, ix = np.empty(nbox, np.float32), np.empty(nbox, np.int64)
    kept = np.empty(min(limit, nbox), np.int64)
    count = 0
    for b in range(boxes.shape[0]):
        _planes_c(boxes[b], center, ymin, xmin, ymax, xmax, area)
        for c in range(scores.shape[1]):
            row = scores[b, c]
            n = 0
            for i in range(nbox):
                if not has_thr or row[i] > score_thr:
                    s[n], ix[n] = row[i], i
                    n += 1
            if n >= 2:
                for parent in range((n - 2) // 2, -1, -1):
                    _sift_c(s, ix, parent, n, s[parent], ix[parent])
            nk = 0
            while n > 0 and nk < limit:
                cand = ix[0]
                keep = True
                for j in range(nk):
                    if _suppressed_c(cand, kept[j], ymin, xmin, ymax, xmax, area, iou_thr):
                        keep = False
                        break
                if keep:
                    kept[nk] = cand
                    nk += 1
                    out[count, 0], out[count, 1], out[count, 2] = b, c, cand
                    count += 1
                n -= 1
                if n > 0:
                    vs, vi = s[n], ix[n]
                    s[n], ix[n] = s[0], ix[0]
                    _sift_c(s, ix, 0, n, vs, vi)
    return count


_PLANES, _SUPPRESSED, _SIFT, _NMS = kernel(_planes), kernel(_suppressed), kernel(_sift), kernel(_nms)


def nms_loop():
    """The compiled ``_nms`` (its helpers bound first), or None where compiled loops are off."""
    global _planes_c, _suppressed_c, _sift_c
    planes = _PLANES.get()
    if planes is None:
        return None
    _planes_c, _suppressed_c, _sift_c = planes, _SUPPRESSED.get(), _SIFT.get()
    return _NMS.get()
