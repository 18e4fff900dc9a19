"""Compiled loop of Conv (float32 / float64, one or two spatial axes), for
:mod:`onnxkit_cpu.overrides.conv`: :func:`planes`, its geometry and scratch sizes from
:func:`layout` (plain Python, at planning).

**Padded planes in phases.**  The loop takes X as it comes (``(N, C, H, W)``, C-contiguous;
one spatial axis is the two-axis case with ``H = KH = 1``, reshaped views) and copies each
channel plane, in turn, into one zero-bordered padded plane (scratch ``xp`` the override
keeps per thread: its border zeroed once and never written, the interior overwritten
whole each time).  The plane is stored split by the strides into ``sh * sw`` *phases*:
padded row ``r``, column ``q`` lies in phase ``(r % sh, q % sw)`` at row ``r // sh``, column
``q // sw`` of a ``PHs x PWs`` grid (``PHs = ceil(PH / sh)``, ``PWs = ceil(PW / sw)``), so the
input of tap ``(kh, kw)`` for output ``(oh, ow)`` is row ``oh + kh*dh // sh``, column
``ow + kw*dw // sw`` of one phase: contiguous in ``ow`` and, a row being ``PWs`` long, in
``oh * PWs + ow`` too, whatever the strides.  The interior is X's rows ``h0 .. h0 + hi_n``
and columns ``w0 .. w0 + wi_n`` (negative pads crop).  Offsets are unsigned (``np.uint64``,
precomputed by :func:`layout`): numba then adds no negative-index wrap-around, which would
keep LLVM from vectorising the inner loops, and the loop does no integer division.  A
column stride of 2 is written as the constant (each row's even and odd columns to their two
phases in one loop): LLVM then reads the row as interleaved vectors, where a stride known
only at run time leaves one scalar load per element.

**Two consumers of a plane** (``cols`` empty or not):

* *depthwise* (``group = C``, ``M = C * mg``): per output channel, the accumulators ``acc``
  (``OH`` rows of ``PWs``, the last ``PWs - OW`` of each junk, rounded up to :data:`RUN`)
  are zeroed, then per kernel row vectorised passes over them add the row's taps, seven,
  five, three or one a pass, in the order ``kw`` (fewer passes, fewer loads and stores of
  ``acc``); a 3x3 kernel (any strides, dilations, pads) takes one pass instead that sums its
  nine taps from zero in a register and stores ``acc`` once (no zeroing pass, no reloads:
  the same operations in the same order, so the same bits as the row passes); then
  ``acc + bias`` is copied into Y.  Each
  output is the sum over ``(kh, kw)`` in that order, in the compute dtype (as the numpy
  body's product), then ``+ bias``: the numpy body's terms (the border's zeros included, so
  a NaN or infinite weight gives NaN there as the padded product does) in another order
  than BLAS's dot product, so results agree with it to float rounding (Clause 11), not bit
  for bit (``a * b + c`` is not contracted to an FMA: no fastmath).
* *im2col* (the general, grouped product): ``cols[n, g, (ci, kh, kw), oh * OW + ow]`` =
  padded ``[g * Cg + ci, oh*sh + kh*dh, ow*sw + kw*dw]`` (a copy, exact), and where
  ``has_bias`` a last row of ones per group, so that the override's one product with W
  extended by a bias column adds the bias inside the product (one more dot-product term:
  float rounding of BLAS's order, Clause 11).

The loop never allocates or raises; NaN and inf in X propagate as in a product.
"""

from __future__ import annotations

import numpy as np

from . import kernel

#: depthwise accumulator runs are rounded up to a multiple of this many elements (junk
#: computed on zero slack), so that LLVM's vector loop leaves no scalar remainder
RUN = 32


def layout(padded, lo, inner, kernel, strides, dil, out_shape, depthwise: bool) -> tuple:
    """``(offs, xp size, acc size, PWs)`` of :func:`planes` for a two-axis geometry
    (``padded``, ``lo``, ``inner``: the padded extents, the pads before and the interior
    extents; the others the plan's).  ``offs`` (``uint64``) holds the offsets in the phases
    of each tap ``(kh, kw)`` (``KH * KW``), of each interior row's column 0 (``inner[0]``)
    and of the interior's first ``min(sw, inner[1])`` columns (one at least) in row 0; ``acc`` is unused
    (size 1) for im2col."""
    (ph, pw), (sh, sw), (dh, dw) = padded, strides, dil
    pws, phs = -(-pw // sw), -(-ph // sh)
    plane = phs * pws

    def at(r, q):
        return ((r % sh) * sw + q % sw) * plane + (r // sh) * pws + q // sw

    offs = [at(kh * dh, kw * dw) for kh in range(kernel[0]) for kw in range(kernel[1])]
    offs += [at(lo[0] + r, 0) for r in range(inner[0])]
    offs += [at(0, lo[1] + j) for j in range(max(1, min(sw, inner[1])))]      # one at least: read, unused
    acc = -(-out_shape[0] * pws // RUN) * RUN if depthwise else 1
    size = sh * sw * plane + (kernel[1] - 1) * dw // sw + 1 + max(0, acc - out_shape[0] * pws)
    return np.array(offs, dtype=np.uint64), size, acc, pws


@kernel
def planes(x, w, b, out, cols, xp, acc, offs, pws, sw, h0, w0, hi_n, wi_n, has_bias):
    """Conv of ``x`` ``(N, C, H, W)`` by ``w`` ``(M, Cg, KH, KW)`` over padded planes (see the
    module docstring; ``offs``, ``pws``: :func:`layout`'s), all arrays C-contiguous, the
    floats in one dtype.  Depthwise where ``cols.size`` is 0: ``out`` ``(N, M, OH, OW)`` =
    the convolution ``+ b`` (``(M,)``, read where ``has_bias``).  Else im2col: ``cols``
    ``(N, G, Cg*KH*KW + has_bias, OH*OW)`` filled (``out`` only gives ``OH``, ``OW``)."""
    u = np.uint64
    n_img, c_all, h_n, wd_n = x.shape
    m_all, cg, kh_n, kw_n = w.shape
    oh_n, ow_n = out.shape[2], out.shape[3]
    im2col = cols.size > 0
    xf, wf, of, cf = x.reshape(x.size), w.reshape(w.size), out.reshape(out.size), cols.reshape(cols.size)
    zero, one = xp.dtype.type(0), xp.dtype.type(1)
    p, length = u(pws), u(acc.size)
    rows, ncol = cols.shape[2], u(cols.shape[3])
    taps = kh_n * kw_n
    for n in range(n_img):
        for c in range(c_all):
            src0 = u(((n * c_all + c) * h_n + h0) * wd_n + w0)
            for r in range(hi_n):
                s, d = src0 + u(r * wd_n), offs[taps + r]
                if sw == 1:
                    d += offs[taps + hi_n]
                    for t in range(u(wi_n)):
                        xp[d + t] = xf[s + t]
                    continue
                if sw == 2:     # a constant stride: the loops read interleaved vectors
                    d0, d1 = d + offs[taps + hi_n], d + offs[taps + hi_n + min(1, wi_n - 1)]
                    for t in range(u(wi_n // 2)):
                        xp[d0 + t] = xf[s + t * u(2)]
                        xp[d1 + t] = xf[s + t * u(2) + u(1)]
                    if wi_n % 2:
                        xp[d0 + u(wi_n // 2)] = xf[s + u(wi_n - 1)]
                    continue
                for j0 in range(min(sw, wi_n)):     # interior columns j0, j0 + sw, ... share a phase
                    dj, sj = d + offs[taps + hi_n + j0], s + u(j0)
                    for t in range(u((wi_n - j0 + sw - 1) // sw)):
                        xp[dj + t] = xf[sj + t * u(sw)]
            if im2col:
                g, ci = c // cg, c % cg
                base = (n * (c_all // cg) + g) * rows
                for tap in range(taps):
                    db, sb = u(base + ci * taps + tap) * ncol, offs[tap]
                    if ncol != u(oh_n * ow_n) or ow_n == pws:     # flat rows: one run
                        for i in range(ncol):
                            cf[db + i] = xp[sb + i]
                        continue
                    for oh in range(u(oh_n)):
                        d, s = db + oh * u(ow_n), sb + oh * p
                        for ow in range(u(ow_n)):
                            cf[d + ow] = xp[s + ow]
                if has_bias and ci == cg - 1:
                    db = u(base + cg * taps) * ncol
                    for i in range(ncol):
                        cf[db + i] = one
                continue
            for j in range(m_all // c_all):
                m = c * (m_all // c_all) + j
                if kh_n == 3 and kw_n == 3:     # one pass: the nine taps from zero in (kh, kw) order
                    t, wk = offs[0], u(m * taps)
                    o1, o2, o3, o4 = offs[1] - t, offs[2] - t, offs[3] - t, offs[4] - t
                    o5, o6, o7, o8 = offs[5] - t, offs[6] - t, offs[7] - t, offs[8] - t
                    w_0, w_1, w_2, w_3, w_4 = wf[wk], wf[wk + u(1)], wf[wk + u(2)], wf[wk + u(3)], wf[wk + u(4)]
                    w_5, w_6, w_7, w_8 = wf[wk + u(5)], wf[wk + u(6)], wf[wk + u(7)], wf[wk + u(8)]
                    for i in range(length):
                        s = t + i
                        v = ((zero + w_0 * xp[s]) + w_1 * xp[s + o1]) + w_2 * xp[s + o2]
                        v = ((v + w_3 * xp[s + o3]) + w_4 * xp[s + o4]) + w_5 * xp[s + o5]
                        acc[i] = ((v + w_6 * xp[s + o6]) + w_7 * xp[s + o7]) + w_8 * xp[s + o8]
                    taps_done = taps
                else:
                    taps_done = 0
                    for i in range(length):
                        acc[i] = zero
                for tap in range(taps_done, taps, kw_n):     # a kernel row: its taps 5, 3 or 1 a pass, in order
                    kw = 0
                    while kw < kw_n:
                        t, wk = offs[tap + kw], u(m * taps + tap + kw)
                        w_0 = wf[wk]
                        if kw_n - kw >= 7:
                            o1, o2, o3 = offs[tap + kw + 1] - t, offs[tap + kw + 2] - t, offs[tap + kw + 3] - t
                            o4, o5, o6 = offs[tap + kw + 4] - t, offs[tap + kw + 5] - t, offs[tap + kw + 6] - t
                            w_1, w_2, w_3 = wf[wk + u(1)], wf[wk + u(2)], wf[wk + u(3)]
                            w_4, w_5, w_6 = wf[wk + u(4)], wf[wk + u(5)], wf[wk + u(6)]
                            for i in range(length):
                                v = ((acc[i] + w_0 * xp[t + i]) + w_1 * xp[t + i + o1]) + w_2 * xp[t + i + o2]
                                v = ((v + w_3 * xp[t + i + o3]) + w_4 * xp[t + i + o4]) + w_5 * xp[t + i + o5]
                                acc[i] = v + w_6 * xp[t + i + o6]
                            kw += 7
                        elif kw_n - kw >= 5:
                            o1, o2, o3, o4 = (offs[tap + kw + 1] - t, offs[tap + kw + 2] - t, offs[tap + kw + 3] - t,
                                              offs[tap + kw + 4] - t)
                            w_1, w_2, w_3, w_4 = wf[wk + u(1)], wf[wk + u(2)], wf[wk + u(3)], wf[wk + u(4)]
                            for i in range(length):
                                v = ((acc[i] + w_0 * xp[t + i]) + w_1 * xp[t + i + o1]) + w_2 * xp[t + i + o2]
                                acc[i] = (v + w_3 * xp[t + i + o3]) + w_4 * xp[t + i + o4]
                            kw += 5
                        elif kw_n - kw >= 3:
                            o1, o2 = offs[tap + kw + 1] - t, offs[tap + kw + 2] - t
                            w_1, w_2 = wf[wk + u(1)], wf[wk + u(2)]
                            for i in range(length):
                                acc[i] = ((acc[i] + w_0 * xp[t + i]) + w_1 * xp[t + i + o1]) + w_2 * xp[t + i + o2]
                            kw += 3
                        else:
                            for i in range(length):
                                acc[i] += w_0 * xp[t + i]
                            kw += 1
                ob = u((n * m_all + m) * oh_n * ow_n)
                bv = b[m] if has_bias else zero
                for oh in range(u(oh_n)):
                    a, o = oh * p, ob + oh * u(ow_n)
                    if has_bias:
                        for ow in range(u(ow_n)):
                            of[o + ow] = acc[a + ow] + bv
                    else:
                        for ow in range(u(ow_n)):
                            of[o + ow] = acc[a + ow]


@kernel
def finish(y, b, r, side, relu):
    """In place on ``y`` (``(R, L)``, C-contiguous; R a multiple of ``b``'s length ``M``), the
    steps a Conv's epilogue would run one pass each, in their order, in one pass: row ``k``,
    element ``i`` becomes ``v = y[k, i] + b[k % M]`` (where ``b`` is not empty: the Conv's
    ``y += B``), then ``v + r[k, i]`` (``side`` 0: Add(Conv, R)) or ``r[k, i] + v`` (``side``
    1: Add(R, Conv)) where ``r`` (``(R, L)``) is not empty, then, where ``relu``, ``max(v, 0)``
    as ``np.maximum(v, 0)`` gives it: ``v`` where ``v > 0`` or ``v`` is NaN (its own bits), else
    ``+0`` (``-0`` gives ``+0``, numpy's tie rule).  The same IEEE operations on the same
    operands as the separate numpy passes (``y += b``, ``np.add``, ``np.maximum``), so the
    result is bit-identical to them, but for which of two NaNs meeting in one addition it
    keeps (LLVM may swap the operands of a commutative ``+``: NaN either way)."""
    rows, n = y.shape
    m = b.size
    add = r.size > 0
    zero = y.dtype.type(0)
    for k in range(rows):
        bv = b[k % m] if m > 0 else zero
        for i in range(n):
            v = y[k, i]
            if m > 0:
                v = v + bv
            if add:
                v = v + r[k, i] if side == 0 else r[k, i] + v
            if relu:
                v = v if (v > zero or v != v) else zero
            y[k, i] = v
