"""Compiled loop of MaxPool (no ``Indices``) and AveragePool, float32 / float64, one or two
spatial axes, for :mod:`onnxkit_cpu.overrides.pool`: :func:`windows`, its tables from
:func:`layout` (plain Python, at planning, from the portable ``geometry_cache``'s geometry).

**Separable, in the numpy body's order.**  The numpy body (and the portable kernel) pads X
(-inf for max, +0 for sums, the ``ceil_mode`` tail included), folds the kernel rows (axis H),
tap by tap in order, ``acc = op(acc, tap)``, then the kernel columns (axis W) the same way,
then divides an average by its divisor.  The loop does the same per output row ``oh`` of each
``(n, c)`` plane (one spatial axis is ``H = KH = 1``):

* *vertical*: the row buffer ``buf`` (padded width ``WP = (OW-1)*sw + (KW-1)*dw + 1``) gets,
  per padded column, the fold of the kernel rows that lie in X (:func:`layout`'s ``rows``, in
  tap order, up to three rows a vectorised pass); X's columns land at ``bw ..`` (the begin
  pad), the columns outside X hold the pad value, written once per call;
* *horizontal*: output ``ow`` is the fold of ``buf[ow*sw + kw*dw]`` over ``kw`` in order,
  written straight into Y (three taps a pass; strides 1 and 2 have loops of their own, with
  constant strides, that LLVM vectorises);
* an average is then ``(y + z[oh]) / divisor``.

**Bit-identical to the numpy body.**  The max is numpy's ``np.maximum`` rule written out,
``a if (a > b or a != a) else b``: the first NaN in fold order wins (a NaN anywhere in a window
gives a NaN, the numpy body's own NaN bits), and of equal values (-0 / +0) the later tap
wins.  Rows of pads are left out of the max: ``max(acc, -inf)`` is ``acc`` and ``max(-inf, v)``
is ``v`` bit for bit, so the fold is unchanged (a window of pads only is -inf).  Sums leave
them out too; adding a +0 pad term changes a sum only where the sum is -0 (it becomes +0:
every partial sum that is not zero is the same, and a zero sum is -0 only when every term is
-0), so ``z[oh]`` is +0 where the window rows of ``oh`` include a pad and -0 (adding which
changes nothing) where not; column pads are +0 cells of ``buf``, folded as the numpy body
does.  A kernel of fewer than three columns is padded to three taps: a max repeats its last
tap (``max(a, a)`` is ``a``), a sum adds -0 from the second half of ``buf`` (all -0).  So the
terms and their order are the numpy body's: the results are bit-identical to it (and to the
portable kernel, a NaN's sign aside, as the numpy body): a max bit for bit, NaN bits included;
an average bit for bit but for which of two NaNs meeting in a sum it keeps (LLVM treats ``+``
as commutative and may swap its operands: NaN either way, its sign or payload may differ).

Rows are computed ``RUN`` elements at a time (the vertical pass past ``c1`` where X has the
elements to read, the pads after ``c1`` then rewritten; the horizontal pass past ``OW`` into
the next row's outputs or Y's slack), so LLVM's vector loops leave no scalar remainder.

Offsets are unsigned (``np.uint64``): no negative-index wrap-around in the inner loops.  The
loop never allocates, never raises for data values (NaN and inf propagate as above; a divisor
of NaN, a window of pads only with ``count_include_pad`` 0, gives NaN).
"""

from __future__ import annotations

import numpy as np

from . import kernel

#: row lengths are rounded up to a multiple of this many elements (junk computed in slack),
#: so that LLVM's vector loops leave no scalar remainder; 16 (one AVX-512 vector of float32)
#: rather than 32: a 14- or 7-wide plane then computes 16 per row, not 32 (faster on such
#: planes, no slower on wide ones); not 8, which is slower on both
RUN = 16


def layout(in_hw, out_hw, kernel_hw, strides, dilations, begin, avg_pads):
    """Tables of :func:`windows` for one two-axis geometry (one spatial axis: ``H = OH = KH =
    1``, stride and dilation 1, begin 0 there): ``(rows, counts, zpad, geo, size)``.

    ``rows`` (``uint64``, ``(OH, KH)``): per output row the X rows of its window in tap order,
    those in X only (``counts`` of them, ``int64``); ``zpad`` (bool, ``(OH,)``): whether the
    window rows of ``oh`` include a pad row (``avg_pads``: the sum's +0 term, see the module
    docstring); ``geo`` (``int64``): ``c0, c1, j0, kw, sw, dw, zb, OW, WP`` (``buf``'s columns
    ``c0 .. c1`` are X's columns ``j0 ..``; ``WP``: the padded width; ``buf[zb:]``: -0 for a
    sum's missing taps); ``size``: ``buf``'s (``2 * zb``: room for the ``RUN`` slack)."""
    (h, w), (oh_n, ow_n), (kh, kw), (sh, sw), (dh, dw), (bh, bw) = in_hw, out_hw, kernel_hw, strides, dilations, begin
    rows = np.zeros((oh_n, kh), dtype=np.uint64)
    counts = np.zeros(oh_n, dtype=np.int64)
    zpad = np.zeros(oh_n, dtype=bool)
    for oh in range(oh_n):
        for t in range(kh):
            r = oh * sh + t * dh - bh
            if 0 <= r < h:
                rows[oh, counts[oh]] = r
                counts[oh] += 1
            else:
                zpad[oh] = avg_pads
    wp = (ow_n - 1) * sw + (kw - 1) * dw + 1
    c0, c1 = max(0, bw), max(max(0, bw), min(wp, bw + w))
    zb = wp + (sw + 1) * RUN
    geo = np.array([c0, c1, c0 - bw, kw, sw, dw, zb, ow_n, wp], dtype=np.int64)
    return rows, counts, zpad, geo, 2 * zb


@kernel
def windows(x, y, buf, rows, counts, z, divisor, geo, is_max):
    """The pool of ``x`` ``(R, H, W)`` (``R = N * C``) into ``y``, ``R * OH * OW`` elements of
    ``y.size - RUN`` (the last ``RUN``: junk slack), C-contiguous, one float dtype with ``buf``
    (``2 * geo[6]`` scratch, any content), ``z`` ``(OH,)`` and ``divisor`` (``OH * OW + RUN``),
    read for an average only (``is_max`` False); ``rows``, ``counts``, ``geo``: :func:`layout`'s
    (``z``: +0 where its ``zpad``, else -0)."""
    u = np.uint64
    r_n, h_n, w_n = x.shape
    oh_n, ow_n = rows.shape[0], geo[7]
    c0, c1, j0, kw_n, sw, dw, zb, wp = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], u(geo[6]), u(geo[8])
    run = u(RUN)
    xf, yf = x.reshape(x.size), y
    fill = -np.inf if is_max else 0.0
    for i in range(zb, u(2) * zb):
        buf[i] = -0.0
    n_in = u(c1 - c0)
    n_run = (n_in + run - u(1)) // run * run          # rounded up: junk written past c1 ..
    bo, pads = u(c0), wp - u(c1)                      # .. then the pads after c1 rewritten
    for i in range(u(c0)):
        buf[i] = fill
    for i in range(u(c1), wp):
        buf[i] = fill
    # the horizontal taps, padded to three (a max repeats its last, a sum reads -0 at zb ..)
    t0 = u(0)
    t1 = u(dw) if kw_n > 1 else (t0 if is_max else zb)
    t2 = u(2 * dw) if kw_n > 2 else (t1 if is_max else zb)
    ow_u, s_u, d_u = (u(ow_n) + run - u(1)) // run * run, u(sw), u(dw)
    fixed = sw == 2 and dw == 1 and kw_n >= 3       # constant offsets: LLVM's interleaved loads
    x_end = u(x.size)
    for r in range(r_n):
        xb = u(r * h_n * w_n + j0)
        for oh in range(oh_n):
            m = counts[oh]
            # -- vertical: buf[c0:c1] = fold over the window's X rows, three a pass
            last = xb + rows[oh, m - 1] * u(w_n) if m > 0 else xb
            n = n_run if last + n_run <= x_end else n_in
            if m == 0:
                for i in range(n):
                    buf[bo + i] = fill
            k = 0
            while k < m:
                a = xb + rows[oh, k] * u(w_n)
                if k == 0 and m - k >= 3:
                    b, c = xb + rows[oh, 1] * u(w_n), xb + rows[oh, 2] * u(w_n)
                    if is_max:
                        for i in range(n):
                            va, vb, vc = xf[a + i], xf[b + i], xf[c + i]
                            v = va if (va > vb or va != va) else vb
                            buf[bo + i] = v if (v > vc or v != v) else vc
                    else:
                        for i in range(n):
                            buf[bo + i] = (xf[a + i] + xf[b + i]) + xf[c + i]
                    k = 3
                elif k == 0 and m == 2:
                    b = xb + rows[oh, 1] * u(w_n)
                    if is_max:
                        for i in range(n):
                            va, vb = xf[a + i], xf[b + i]
                            buf[bo + i] = va if (va > vb or va != va) else vb
                    else:
                        for i in range(n):
                            buf[bo + i] = xf[a + i] + xf[b + i]
                    k = 2
                elif k == 0:
                    for i in range(n):
                        buf[bo + i] = xf[a + i]
                    k = 1
                else:
                    if is_max:
                        for i in range(n):
                            va, vb = buf[bo + i], xf[a + i]
                            buf[bo + i] = va if (va > vb or va != va) else vb
                    else:
                        for i in range(n):
                            buf[bo + i] = buf[bo + i] + xf[a + i]
                    k += 1
            for i in range(min(pads, n - n_in)):
                buf[u(c1) + i] = fill
            # -- horizontal: y row = fold over kw of buf[ow*sw + kw*dw], three taps a pass
            yo = u((r * oh_n + oh) * ow_n)
            if is_max:
                if sw == 1:
                    for i in range(ow_u):
                        va, vb, vc = buf[i + t0], buf[i + t1], buf[i + t2]
                        v = va if (va > vb or va != va) else vb
                        yf[yo + i] = v if (v > vc or v != v) else vc
                elif fixed:
                    for i in range(ow_u):
                        va, vb, vc = buf[u(2) * i], buf[u(2) * i + u(1)], buf[u(2) * i + u(2)]
                        v = va if (va > vb or va != va) else vb
                        yf[yo + i] = v if (v > vc or v != v) else vc
                else:
                    for i in range(ow_u):
                        va, vb, vc = buf[s_u * i + t0], buf[s_u * i + t1], buf[s_u * i + t2]
                        v = va if (va > vb or va != va) else vb
                        yf[yo + i] = v if (v > vc or v != v) else vc
                for t in range(3, kw_n):
                    tt = u(t) * d_u
                    for i in range(ow_u):
                        va, vb = yf[yo + i], buf[s_u * i + tt]
                        yf[yo + i] = va if (va > vb or va != va) else vb
                continue
            zo, do = z[oh], u(oh * ow_n)
            if kw_n <= 3:          # one pass, the division included
                if sw == 1:
                    for i in range(ow_u):
                        yf[yo + i] = (((buf[i + t0] + buf[i + t1]) + buf[i + t2]) + zo) / divisor[do + i]
                elif fixed:
                    for i in range(ow_u):
                        v = (buf[u(2) * i] + buf[u(2) * i + u(1)]) + buf[u(2) * i + u(2)]
                        yf[yo + i] = (v + zo) / divisor[do + i]
                else:
                    for i in range(ow_u):
                        v = (buf[s_u * i + t0] + buf[s_u * i + t1]) + buf[s_u * i + t2]
                        yf[yo + i] = (v + zo) / divisor[do + i]
                continue
            for i in range(ow_u):
                yf[yo + i] = (buf[s_u * i + t0] + buf[s_u * i + t1]) + buf[s_u * i + t2]
            for t in range(3, kw_n):
                tt = u(t) * d_u
                for i in range(ow_u):
                    yf[yo + i] = yf[yo + i] + buf[s_u * i + tt]
            for i in range(ow_u):
                yf[yo + i] = (yf[yo + i] + zo) / divisor[do + i]
