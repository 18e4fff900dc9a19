"""Compiled loops of Resize (overrides/resize.py): one pass per resized axis of a (planes, H, W)
view, the taps and weights the portable family worked out (kernels/resize.py ``axis_taps``).

Precision: the portable kernel's float sequence exactly — per output, ``acc = x[tap 0] * w[0]``,
then ``acc = acc + x[tap t] * w[t]`` for t = 1, 2, ... in the input's type (float32 or float64),
each product and sum rounded as numpy rounds ``take * weight`` and ``res += term``; compiled
without fast-math (no fused multiply-add), so the result is bit-identical to the portable
kernel's (plugins/cpu_backend/tests/test_resize_fast.py).  A nearest tap has weight 1: the
product is the value (NaN, inf and -0 kept).
"""

from __future__ import annotations

from onnxkit_cpu.compiled import kernel


def _rows(x, idx, w, y):
    """``y[p, i, c] = sum_t x[p, idx[t, i], c] w[t, i]`` (in tap order): x (P, H, W), idx and w
    (T, OH), y (P, OH, W); the inner loop runs along contiguous columns."""
    taps, nh = idx.shape
    for p in range(x.shape[0]):
        for i in range(nh):
            out = y[p, i]
            src, wt = x[p, idx[0, i]], w[0, i]
            for c in range(out.shape[0]):
                out[c] = src[c] * wt
            for t in range(1, taps):
                src, wt = x[p, idx[t, i]], w[t, i]
                for c in range(out.shape[0]):
                    out[c] = out[c] + src[c] * wt


def _cols(x, idx, w, y):
    """``y[p, r, j] = sum_t x[p, r, idx[t, j]] w[t, j]`` (in tap order): x (P, H, W), idx and w
    (T, OW), y (P, H, OW)."""
    taps, nw = idx.shape
    if taps == 2:               # linear: the tap loop unrolled (faster, the same sums)
        i0, i1, w0, w1 = idx[0], idx[1], w[0], w[1]
        for p in range(x.shape[0]):
            for r in range(x.shape[1]):
                src, out = x[p, r], y[p, r]
                for j in range(nw):
                    out[j] = src[i0[j]] * w0[j] + src[i1[j]] * w1[j]
        return
    for p in range(x.shape[0]):
        for r in range(x.shape[1]):
            src, out = x[p, r], y[p, r]
            for j in range(nw):
                acc = src[idx[0, j]] * w[0, j]
                for t in range(1, taps):
                    acc = acc + src[idx[t, j]] * w[t, j]
                out[j] = acc


def _pick_cols(x, idx, y):
    """``y[p, r, j] = x[p, r, idx[j]]`` (a nearest column pass: faster than numpy's ``take`` there)."""
    for p in range(x.shape[0]):
        for r in range(x.shape[1]):
            src, out = x[p, r], y[p, r]
            for j in range(idx.shape[0]):
                out[j] = src[idx[j]]


_ROWS = kernel(_rows)
_COLS = kernel(_cols)
_PICK_COLS = kernel(_pick_cols)


def resize_loops():
    """``(rows, cols, pick_cols)`` compiled loops, or None where compiled loops are off."""
    rows = _ROWS.get()
    return None if rows is None else (rows, _COLS.get(), _PICK_COLS.get())
