"""Compiled transforms of the Winograd F(2x2, 3x3) convolution (Lavin & Gray, "Fast Algorithms
for Convolutional Neural Networks", 2016), for :mod:`onnxkit_cpu.overrides.conv_winograd`.

A 3x3 correlation (ONNX Conv: stride 1, dilation 1, one group) of a 4x4 input tile ``d`` gives a
2x2 output tile ``Y = A^T [(G g G^T) * (B^T d B)] A`` (``*``: elementwise), with

* ``B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]`` (:func:`input_tiles`),
* ``G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]`` (:func:`weight_tiles`, numpy,
  in float64 then rounded once to the compute dtype),
* ``A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]`` (:func:`output_tiles`).

The 16 products of a tile, summed over the input channels, are 16 matrix products ``U[k] (M, C)
@ V[k] (C, T)`` (one per tile position ``k``, all ``T`` tiles at once): 16 * M * C * T
multiply-adds where the im2col product has 9 * M * C * 4T, 2.25x fewer.  Tile ``(tr, tc)``
reads rows ``2tr .. 2tr+3`` and columns ``2tc .. 2tc+3`` of the zero-padded input plane, whose
extents ``(2 * TR + 2, 2 * TC + 2)`` cover every tile; its outputs are rows ``2tr, 2tr+1`` and
columns ``2tc, 2tc+1`` of Y, those past Y's last row or column dropped (an odd extent).

**Rounding.**  The transforms add and subtract inputs (exact but for rounding each sum) and the
weights' transform scales by 1/2: the result is the correlation to float rounding, with a
somewhat larger error than the direct sum (errors of the transformed terms add up in the output
transform): within Clause 11's tolerances, not bit for bit.  inf and NaN would spread inside a
tile (``inf - inf``), so the override computes only finite inputs (and weights) below
:data:`LIMIT` here (no transform can then overflow) and the direct path otherwise.
"""

from __future__ import annotations

import numpy as np

from . import kernel

#: inputs and weights at most this large in magnitude (finite) take the Winograd path: the
#: transforms multiply a magnitude by at most 4 (input) and 9/4 (weights), far below overflow
LIMIT = 2.0 ** 100


def weight_tiles(w, dtype):
    """``U`` ``(16, M, C)`` (tile position ``k = 4i + j`` first) of weights ``w`` ``(M, C, 3, 3)``:
    ``G g G^T`` per ``(m, c)``, computed in float64 and rounded once to ``dtype``."""
    g = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
    u = np.einsum("ia,mcab,jb->ijmc", g, np.asarray(w, dtype=np.float64), g)
    return np.ascontiguousarray(u.reshape(16, w.shape[0], w.shape[1]), dtype=dtype)


@kernel
def input_tiles(xp, v, stride, tiles, tr_n):
    """``V`` of the first ``tr_n`` tile rows into ``v`` (flat: matrix ``k`` of the 16 starts at
    ``k * stride``, its entry ``(c, t)`` at ``c * tiles + t``) from the padded rows ``xp`` ``(C,
    2 * tr_n + 2 or more, 2 * TC + 2)`` (C-contiguous, one float dtype): entry ``k = 4i + j`` of
    ``B^T d B`` for tile ``t = tr * TC + tc`` of channel ``c``.  Offsets are unsigned (no
    negative-index wrap-around in the inner loop, which LLVM then vectorises)."""
    u = np.uint64
    c_n, ph, pw = xp.shape
    tc_n = u((pw - 2) // 2)
    row, plane = u(pw), u(ph * pw)
    xf = xp.reshape(xp.size)
    st = u(stride)
    for c in range(c_n):
        for tr in range(tr_n):
            a = u(c) * plane + u(2 * tr) * row         # the tile row's first padded row
            o = u(c * tiles) + u(tr) * tc_n
            for tc in range(tc_n):
                p0 = a + u(2) * tc
                p1, p2, p3 = p0 + row, p0 + u(2) * row, p0 + u(3) * row
                # t = B^T d, column by column
                t00, t10, t20, t30 = xf[p0] - xf[p2], xf[p1] + xf[p2], xf[p2] - xf[p1], xf[p1] - xf[p3]
                p0, p1, p2, p3 = p0 + u(1), p1 + u(1), p2 + u(1), p3 + u(1)
                t01, t11, t21, t31 = xf[p0] - xf[p2], xf[p1] + xf[p2], xf[p2] - xf[p1], xf[p1] - xf[p3]
                p0, p1, p2, p3 = p0 + u(1), p1 + u(1), p2 + u(1), p3 + u(1)
                t02, t12, t22, t32 = xf[p0] - xf[p2], xf[p1] + xf[p2], xf[p2] - xf[p1], xf[p1] - xf[p3]
                p0, p1, p2, p3 = p0 + u(1), p1 + u(1), p2 + u(1), p3 + u(1)
                t03, t13, t23, t33 = xf[p0] - xf[p2], xf[p1] + xf[p2], xf[p2] - xf[p1], xf[p1] - xf[p3]
                # V = t B, row by row
                t = o + tc
                v[t] = t00 - t02
                v[st + t] = t01 + t02
                v[u(2) * st + t] = t02 - t01
                v[u(3) * st + t] = t01 - t03
                v[u(4) * st + t] = t10 - t12
                v[u(5) * st + t] = t11 + t12
                v[u(6) * st + t] = t12 - t11
                v[u(7) * st + t] = t11 - t13
                v[u(8) * st + t] = t20 - t22
                v[u(9) * st + t] = t21 + t22
                v[u(10) * st + t] = t22 - t21
                v[u(11) * st + t] = t21 - t23
                v[u(12) * st + t] = t30 - t32
                v[u(13) * st + t] = t31 + t32
                v[u(14) * st + t] = t32 - t31
                v[u(15) * st + t] = t31 - t33


@kernel
def output_tiles(mm, stride, tiles, y, b, e, tr0, tr1, has_bias):
    """Y's rows ``2 * tr0 .. 2 * tr1`` (clipped to Y) from the products ``mm`` of those tile rows
    (flat: matrix ``k`` at ``k * stride``, entry ``(m, t)`` at ``m * tiles + t``, ``t = (tr - tr0)
    * TC + tc``): ``A^T m A`` per tile, ``+ b[m]`` where ``has_bias``; ``y`` ``(M, OH, OW)``
    C-contiguous, ``TC = ceil(OW / 2)``.  Per output channel, each of a tile's four outputs is
    made for every tile of the block by a loop of its own into a row of the scratch ``e`` ``(4,
    tiles)`` (one store per loop: LLVM vectorises it; one loop writing all four is not vectorised, and
    is slower), then the rows are interleaved into Y, the outputs past its last row or column left
    out.  Each output is ``((s0 + s1) + s2) + b`` or ``((s1 - s2) - s3) + b`` of the column sums
    ``s_j = (m_j + m_4+j) + m_8+j`` (first row) or ``(m_4+j - m_8+j) - m_12+j`` (second)."""
    u = np.uint64
    m_n, oh_n, ow_n = y.shape
    tc_n = (ow_n + 1) // 2
    half = u(ow_n // 2)
    n = u((tr1 - tr0) * tc_n)
    st = u(stride)
    yf = y.reshape(y.size)
    zero = y.dtype.type(0)
    e0, e1, e2, e3 = e[0], e[1], e[2], e[3]
    for m in range(m_n):
        bv = b[m] if has_bias else zero
        o = u(m * tiles)
        for t in range(n):
            i = o + t
            e0[t] = ((((mm[i] + mm[u(4) * st + i]) + mm[u(8) * st + i])
                      + ((mm[st + i] + mm[u(5) * st + i]) + mm[u(9) * st + i]))
                     + ((mm[u(2) * st + i] + mm[u(6) * st + i]) + mm[u(10) * st + i])) + bv
        for t in range(n):
            i = o + t
            e1[t] = ((((mm[st + i] + mm[u(5) * st + i]) + mm[u(9) * st + i])
                      - ((mm[u(2) * st + i] + mm[u(6) * st + i]) + mm[u(10) * st + i]))
                     - ((mm[u(3) * st + i] + mm[u(7) * st + i]) + mm[u(11) * st + i])) + bv
        for t in range(n):
            i = o + t
            e2[t] = ((((mm[u(4) * st + i] - mm[u(8) * st + i]) - mm[u(12) * st + i])
                      + ((mm[u(5) * st + i] - mm[u(9) * st + i]) - mm[u(13) * st + i]))
                     + ((mm[u(6) * st + i] - mm[u(10) * st + i]) - mm[u(14) * st + i])) + bv
        for t in range(n):
            i = o + t
            e3[t] = ((((mm[u(5) * st + i] - mm[u(9) * st + i]) - mm[u(13) * st + i])
                      - ((mm[u(6) * st + i] - mm[u(10) * st + i]) - mm[u(14) * st + i]))
                     - ((mm[u(7) * st + i] - mm[u(11) * st + i]) - mm[u(15) * st + i])) + bv
        for tr in range(tr0, tr1):
            r = 2 * tr
            base = u((tr - tr0) * tc_n)
            d = u((m * oh_n + r) * ow_n)
            for tc in range(half):
                yf[d + u(2) * tc] = e0[base + tc]
                yf[d + u(2) * tc + u(1)] = e1[base + tc]
            if ow_n % 2:
                yf[d + u(ow_n - 1)] = e0[base + half]
            if r + 1 < oh_n:
                d += u(ow_n)
                for tc in range(half):
                    yf[d + u(2) * tc] = e2[base + tc]
                    yf[d + u(2) * tc + u(1)] = e3[base + tc]
                if ow_n % 2:
                    yf[d + u(ow_n - 1)] = e2[base + half]
