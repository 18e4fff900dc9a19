"""Compiled depthwise Conv on small maps in blocks of channels, for
:mod:`onnxkit_cpu.overrides.conv_channels`: :func:`loop`, its scratch sizes from :func:`layout`.

On a small map (a 7 x 7 output row is shorter than one vector register) the planes loop of
:mod:`.conv` spends its vectors on short rows and junk border columns.  Here the vector runs
along :data:`CB` channels instead: per (image, block of ``CB`` channels) the block's planes are
copied, zero-bordered, into one *channels-last* padded plane ``xcl`` (element ``[r, q, k]`` at
``(r * PWX + q) * CB + k``: padded row ``r``, column ``q``, channel ``c0 + k``; the border is
never written, so it stays the zeros it was made with), then the outputs are computed
:data:`PX` neighbouring pixels of a row at a time into ``acc`` (channels-last too, ``OWR =
ceil(OW / PX) * PX`` pixels a row, those past ``OW`` junk): one pass sums all ``K * K`` taps of
the ``PX`` pixels in registers, each ``CB``-channel vector of weights or inputs loaded once for
the pixels that share it.  The loop over ``jj`` (``CB`` lanes) is what LLVM vectorises; the
passes are written out per kernel side and column stride (3x3 and 5x5 at strides 1 and 2, 7x7
at stride 1), so every offset in them is a constant, one compiled loop per pair (:func:`loop`:
a model loads only those its convolutions use; the two copies are shared functions).  Last, ``acc`` (``+ B`` where given) is
copied into Y's planes.

Each output is the sum over ``(kh, kw)`` in that order from zero, in the compute dtype, then
``+ B`` (nothing added where B is absent): the same operations in the same order as the planes
loop of :mod:`.conv` (no fastmath, no FMA contraction), so the same bits.  The padded border's
zeros are terms as there (a NaN or infinite weight gives NaN at the border).  Junk pixels and
the lanes of a last block's missing channels (``W`` zero there, ``xcl`` holding an earlier
block's values) are computed and never stored.

Geometry (two spatial axes; :func:`layout`): a square kernel, column dilation 1, any row stride
and row dilation, pads before ``lo_h`` / ``lo_w`` (negative pads: X read from row ``h0``, column
``w0``, ``hi_n`` x ``wi_n`` of it).  W comes as ``(blocks, K * K, CB)`` (zero past the
channels).  The loop never allocates or raises; NaN and inf in X propagate as in the planes
loop.
"""

from __future__ import annotations

import numpy as np

from . import kernel

#: channels per block: one 512-bit vector of float32
CB = 16

#: output pixels per pass
PX = 4


def layout(padded, kernel_shape, strides, dil, out_shape) -> tuple:
    """``(PWX, OWR, xcl size, acc size)`` of :func:`loop` for a two-axis geometry (``padded``:
    the padded extents; the others the plan's; column dilation 1)."""
    (ph, pw), (kh, kw), (sh, sw), (dh, _) = padded, kernel_shape, strides, dil
    oh, ow = out_shape
    owr = -(-ow // PX) * PX
    last_row = (oh - 1) * sh + (kh - 1) * dh
    last_col = sw * (owr - 1) + kw - 1          # the last junk pixel's last tap
    size = max(ph * pw, last_row * pw + last_col + 1) * CB
    return pw, owr, size, oh * owr * CB

def _pack_py(x, xcl, n, c0, kn, pwx, lo_h, lo_w, h0, w0, hi_n, wi_n):
    """Channels ``c0 .. c0 + kn`` of image ``n`` of ``x`` into the interior of ``xcl`` (the
    channels-last padded plane; channel ``c0 + k`` in lane ``k``)."""
    u = np.uint64
    c_all, h_n, wd_n = x.shape[1], x.shape[2], x.shape[3]
    xf, cb, hw_in = x.reshape(x.size), u(CB), u(h_n * wd_n)
    src = u(((n * c_all + c0) * h_n + h0) * wd_n + w0)
    for r in range(hi_n):
        for q in range(wi_n):
            d, s = u(((lo_h + r) * pwx + lo_w + q) * CB), src + u(r * wd_n + q)
            if kn == CB:        # a constant count: LLVM's gather-free copy of one pixel
                for k in range(cb):
                    xcl[d + k] = xf[s + k * hw_in]
            else:
                for k in range(u(kn)):
                    xcl[d + k] = xf[s + k * hw_in]


def _unpack_py(acc, out, b, n, c0, kn, owr, has_bias):
    """Lanes ``0 .. kn`` of ``acc`` (``OWR`` pixels a row) ``+ b`` (where ``has_bias``) into
    channels ``c0 ..`` of image ``n`` of ``out``."""
    u = np.uint64
    c_all, oh_n, ow_n = out.shape[1], out.shape[2], out.shape[3]
    of, cb, hw_out = out.reshape(out.size), u(CB), u(oh_n * ow_n)
    o = u((n * c_all + c0) * oh_n * ow_n)
    for oh in range(oh_n):
        for ow in range(ow_n):
            a, d = u((oh * owr + ow) * CB), o + u(oh * ow_n + ow)
            if kn == CB and has_bias:
                for k in range(cb):
                    of[d + k * hw_out] = acc[a + k] + b[u(c0) + k]
            elif kn == CB:
                for k in range(cb):
                    of[d + k * hw_out] = acc[a + k]
            else:
                for k in range(u(kn)):
                    of[d + k * hw_out] = acc[a + k] + b[u(c0) + k] if has_bias else acc[a + k]


_PACK, _UNPACK = kernel(_pack_py), kernel(_unpack_py)

#: the compiled copies the loops call, bound by :func:`loop` before a loop compiles
_pack = _unpack = None


def _blocks_3x3_s1(x, w, b, out, xcl, acc, pwx, sh, dh, lo_h, lo_w, h0, w0, hi_n, wi_n, lo, hi, has_bias):
    """The 3x3 kernel at column stride 1: see :func:`loop`."""
    u = np.uint64
    cb = u(CB)
    c_all, oh_n, ow_n = x.shape[1], out.shape[2], out.shape[3]
    wf, nblk = w.reshape(w.size), w.shape[0]
    owr = -(-ow_n // PX) * PX
    zero = xcl.dtype.type(0)
    row = u(pwx) * cb
    rstep = u(dh) * row
    for item in range(lo, hi):
        n, bi = item // nblk, item % nblk
        c0, wb = bi * CB, u(bi * 9 * CB)
        kn = min(CB, c_all - c0)
        _pack(x, xcl, n, c0, kn, pwx, lo_h, lo_w, h0, w0, hi_n, wi_n)
        for oh in range(oh_n):      # per group of PX output pixels: the taps from zero in (kh, kw) order
            for g in range(owr // PX):
                t0, ob = u(oh * sh) * row + u(g * PX * 1) * cb, u(oh * owr + g * PX) * cb
                for jj in range(u(16)):
                    q = wb + jj
                    a = t0 + jj
                    w_0, w_1, w_2 = wf[q], wf[q + u(16)], wf[q + u(32)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5 = xcl[a + u(64)], xcl[a + u(80)]
                    v_0 = ((zero + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                    v_1 = ((zero + w_0 * x_1) + w_1 * x_2) + w_2 * x_3
                    v_2 = ((zero + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                    v_3 = ((zero + w_0 * x_3) + w_1 * x_4) + w_2 * x_5
                    a = t0 + u(1) * rstep + jj
                    w_0, w_1, w_2 = wf[q + u(48)], wf[q + u(64)], wf[q + u(80)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5 = xcl[a + u(64)], xcl[a + u(80)]
                    v_0 = ((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                    v_1 = ((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3
                    v_2 = ((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                    v_3 = ((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5
                    a = t0 + u(2) * rstep + jj
                    w_0, w_1, w_2 = wf[q + u(96)], wf[q + u(112)], wf[q + u(128)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5 = xcl[a + u(64)], xcl[a + u(80)]
                    v_0 = ((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                    v_1 = ((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3
                    v_2 = ((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                    v_3 = ((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5
                    o = ob + jj
                    acc[o], acc[o + u(16)], acc[o + u(32)], acc[o + u(48)] = v_0, v_1, v_2, v_3
        _unpack(acc, out, b, n, c0, kn, owr, has_bias)


def _blocks_3x3_s2(x, w, b, out, xcl, acc, pwx, sh, dh, lo_h, lo_w, h0, w0, hi_n, wi_n, lo, hi, has_bias):
    """The 3x3 kernel at column stride 2: see :func:`loop`."""
    u = np.uint64
    cb = u(CB)
    c_all, oh_n, ow_n = x.shape[1], out.shape[2], out.shape[3]
    wf, nblk = w.reshape(w.size), w.shape[0]
    owr = -(-ow_n // PX) * PX
    zero = xcl.dtype.type(0)
    row = u(pwx) * cb
    rstep = u(dh) * row
    for item in range(lo, hi):
        n, bi = item // nblk, item % nblk
        c0, wb = bi * CB, u(bi * 9 * CB)
        kn = min(CB, c_all - c0)
        _pack(x, xcl, n, c0, kn, pwx, lo_h, lo_w, h0, w0, hi_n, wi_n)
        for oh in range(oh_n):      # per group of PX output pixels: the taps from zero in (kh, kw) order
            for g in range(owr // PX):
                t0, ob = u(oh * sh) * row + u(g * PX * 2) * cb, u(oh * owr + g * PX) * cb
                for jj in range(u(16)):
                    q = wb + jj
                    a = t0 + jj
                    w_0, w_1, w_2 = wf[q], wf[q + u(16)], wf[q + u(32)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8 = xcl[a + u(128)]
                    v_0 = ((zero + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                    v_1 = ((zero + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                    v_2 = ((zero + w_0 * x_4) + w_1 * x_5) + w_2 * x_6
                    v_3 = ((zero + w_0 * x_6) + w_1 * x_7) + w_2 * x_8
                    a = t0 + u(1) * rstep + jj
                    w_0, w_1, w_2 = wf[q + u(48)], wf[q + u(64)], wf[q + u(80)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8 = xcl[a + u(128)]
                    v_0 = ((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                    v_1 = ((v_1 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                    v_2 = ((v_2 + w_0 * x_4) + w_1 * x_5) + w_2 * x_6
                    v_3 = ((v_3 + w_0 * x_6) + w_1 * x_7) + w_2 * x_8
                    a = t0 + u(2) * rstep + jj
                    w_0, w_1, w_2 = wf[q + u(96)], wf[q + u(112)], wf[q + u(128)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8 = xcl[a + u(128)]
                    v_0 = ((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                    v_1 = ((v_1 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                    v_2 = ((v_2 + w_0 * x_4) + w_1 * x_5) + w_2 * x_6
                    v_3 = ((v_3 + w_0 * x_6) + w_1 * x_7) + w_2 * x_8
                    o = ob + jj
                    acc[o], acc[o + u(16)], acc[o + u(32)], acc[o + u(48)] = v_0, v_1, v_2, v_3
        _unpack(acc, out, b, n, c0, kn, owr, has_bias)


def _blocks_5x5_s1(x, w, b, out, xcl, acc, pwx, sh, dh, lo_h, lo_w, h0, w0, hi_n, wi_n, lo, hi, has_bias):
    """The 5x5 kernel at column stride 1: see :func:`loop`."""
    u = np.uint64
    cb = u(CB)
    c_all, oh_n, ow_n = x.shape[1], out.shape[2], out.shape[3]
    wf, nblk = w.reshape(w.size), w.shape[0]
    owr = -(-ow_n // PX) * PX
    zero = xcl.dtype.type(0)
    row = u(pwx) * cb
    rstep = u(dh) * row
    for item in range(lo, hi):
        n, bi = item // nblk, item % nblk
        c0, wb = bi * CB, u(bi * 25 * CB)
        kn = min(CB, c_all - c0)
        _pack(x, xcl, n, c0, kn, pwx, lo_h, lo_w, h0, w0, hi_n, wi_n)
        for oh in range(oh_n):      # per group of PX output pixels: the taps from zero in (kh, kw) order
            for g in range(owr // PX):
                t0, ob = u(oh * sh) * row + u(g * PX * 1) * cb, u(oh * owr + g * PX) * cb
                for jj in range(u(16)):
                    q = wb + jj
                    a = t0 + jj
                    w_0, w_1, w_2, w_3 = wf[q], wf[q + u(16)], wf[q + u(32)], wf[q + u(48)]
                    w_4 = wf[q + u(64)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    v_0 = (((zero + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((zero + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = v_1 + w_4 * x_5
                    v_2 = (((zero + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = v_2 + w_4 * x_6
                    v_3 = (((zero + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = v_3 + w_4 * x_7
                    a = t0 + u(1) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(80)], wf[q + u(96)], wf[q + u(112)], wf[q + u(128)]
                    w_4 = wf[q + u(144)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = v_1 + w_4 * x_5
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = v_2 + w_4 * x_6
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = v_3 + w_4 * x_7
                    a = t0 + u(2) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(160)], wf[q + u(176)], wf[q + u(192)], wf[q + u(208)]
                    w_4 = wf[q + u(224)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = v_1 + w_4 * x_5
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = v_2 + w_4 * x_6
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = v_3 + w_4 * x_7
                    a = t0 + u(3) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(240)], wf[q + u(256)], wf[q + u(272)], wf[q + u(288)]
                    w_4 = wf[q + u(304)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = v_1 + w_4 * x_5
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = v_2 + w_4 * x_6
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = v_3 + w_4 * x_7
                    a = t0 + u(4) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(320)], wf[q + u(336)], wf[q + u(352)], wf[q + u(368)]
                    w_4 = wf[q + u(384)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = v_1 + w_4 * x_5
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = v_2 + w_4 * x_6
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = v_3 + w_4 * x_7
                    o = ob + jj
                    acc[o], acc[o + u(16)], acc[o + u(32)], acc[o + u(48)] = v_0, v_1, v_2, v_3
        _unpack(acc, out, b, n, c0, kn, owr, has_bias)


def _blocks_5x5_s2(x, w, b, out, xcl, acc, pwx, sh, dh, lo_h, lo_w, h0, w0, hi_n, wi_n, lo, hi, has_bias):
    """The 5x5 kernel at column stride 2: see :func:`loop`."""
    u = np.uint64
    cb = u(CB)
    c_all, oh_n, ow_n = x.shape[1], out.shape[2], out.shape[3]
    wf, nblk = w.reshape(w.size), w.shape[0]
    owr = -(-ow_n // PX) * PX
    zero = xcl.dtype.type(0)
    row = u(pwx) * cb
    rstep = u(dh) * row
    for item in range(lo, hi):
        n, bi = item // nblk, item % nblk
        c0, wb = bi * CB, u(bi * 25 * CB)
        kn = min(CB, c_all - c0)
        _pack(x, xcl, n, c0, kn, pwx, lo_h, lo_w, h0, w0, hi_n, wi_n)
        for oh in range(oh_n):      # per group of PX output pixels: the taps from zero in (kh, kw) order
            for g in range(owr // PX):
                t0, ob = u(oh * sh) * row + u(g * PX * 2) * cb, u(oh * owr + g * PX) * cb
                for jj in range(u(16)):
                    q = wb + jj
                    a = t0 + jj
                    w_0, w_1, w_2, w_3 = wf[q], wf[q + u(16)], wf[q + u(32)], wf[q + u(48)]
                    w_4 = wf[q + u(64)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9, x_10 = xcl[a + u(128)], xcl[a + u(144)], xcl[a + u(160)]
                    v_0 = (((zero + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((zero + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_1 = v_1 + w_4 * x_6
                    v_2 = (((zero + w_0 * x_4) + w_1 * x_5) + w_2 * x_6) + w_3 * x_7
                    v_2 = v_2 + w_4 * x_8
                    v_3 = (((zero + w_0 * x_6) + w_1 * x_7) + w_2 * x_8) + w_3 * x_9
                    v_3 = v_3 + w_4 * x_10
                    a = t0 + u(1) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(80)], wf[q + u(96)], wf[q + u(112)], wf[q + u(128)]
                    w_4 = wf[q + u(144)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9, x_10 = xcl[a + u(128)], xcl[a + u(144)], xcl[a + u(160)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((v_1 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_1 = v_1 + w_4 * x_6
                    v_2 = (((v_2 + w_0 * x_4) + w_1 * x_5) + w_2 * x_6) + w_3 * x_7
                    v_2 = v_2 + w_4 * x_8
                    v_3 = (((v_3 + w_0 * x_6) + w_1 * x_7) + w_2 * x_8) + w_3 * x_9
                    v_3 = v_3 + w_4 * x_10
                    a = t0 + u(2) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(160)], wf[q + u(176)], wf[q + u(192)], wf[q + u(208)]
                    w_4 = wf[q + u(224)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9, x_10 = xcl[a + u(128)], xcl[a + u(144)], xcl[a + u(160)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((v_1 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_1 = v_1 + w_4 * x_6
                    v_2 = (((v_2 + w_0 * x_4) + w_1 * x_5) + w_2 * x_6) + w_3 * x_7
                    v_2 = v_2 + w_4 * x_8
                    v_3 = (((v_3 + w_0 * x_6) + w_1 * x_7) + w_2 * x_8) + w_3 * x_9
                    v_3 = v_3 + w_4 * x_10
                    a = t0 + u(3) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(240)], wf[q + u(256)], wf[q + u(272)], wf[q + u(288)]
                    w_4 = wf[q + u(304)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9, x_10 = xcl[a + u(128)], xcl[a + u(144)], xcl[a + u(160)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((v_1 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_1 = v_1 + w_4 * x_6
                    v_2 = (((v_2 + w_0 * x_4) + w_1 * x_5) + w_2 * x_6) + w_3 * x_7
                    v_2 = v_2 + w_4 * x_8
                    v_3 = (((v_3 + w_0 * x_6) + w_1 * x_7) + w_2 * x_8) + w_3 * x_9
                    v_3 = v_3 + w_4 * x_10
                    a = t0 + u(4) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(320)], wf[q + u(336)], wf[q + u(352)], wf[q + u(368)]
                    w_4 = wf[q + u(384)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9, x_10 = xcl[a + u(128)], xcl[a + u(144)], xcl[a + u(160)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = v_0 + w_4 * x_4
                    v_1 = (((v_1 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_1 = v_1 + w_4 * x_6
                    v_2 = (((v_2 + w_0 * x_4) + w_1 * x_5) + w_2 * x_6) + w_3 * x_7
                    v_2 = v_2 + w_4 * x_8
                    v_3 = (((v_3 + w_0 * x_6) + w_1 * x_7) + w_2 * x_8) + w_3 * x_9
                    v_3 = v_3 + w_4 * x_10
                    o = ob + jj
                    acc[o], acc[o + u(16)], acc[o + u(32)], acc[o + u(48)] = v_0, v_1, v_2, v_3
        _unpack(acc, out, b, n, c0, kn, owr, has_bias)


def _blocks_7x7_s1(x, w, b, out, xcl, acc, pwx, sh, dh, lo_h, lo_w, h0, w0, hi_n, wi_n, lo, hi, has_bias):
    """The 7x7 kernel at column stride 1: see :func:`loop`."""
    u = np.uint64
    cb = u(CB)
    c_all, oh_n, ow_n = x.shape[1], out.shape[2], out.shape[3]
    wf, nblk = w.reshape(w.size), w.shape[0]
    owr = -(-ow_n // PX) * PX
    zero = xcl.dtype.type(0)
    row = u(pwx) * cb
    rstep = u(dh) * row
    for item in range(lo, hi):
        n, bi = item // nblk, item % nblk
        c0, wb = bi * CB, u(bi * 49 * CB)
        kn = min(CB, c_all - c0)
        _pack(x, xcl, n, c0, kn, pwx, lo_h, lo_w, h0, w0, hi_n, wi_n)
        for oh in range(oh_n):      # per group of PX output pixels: the taps from zero in (kh, kw) order
            for g in range(owr // PX):
                t0, ob = u(oh * sh) * row + u(g * PX * 1) * cb, u(oh * owr + g * PX) * cb
                for jj in range(u(16)):
                    q = wb + jj
                    a = t0 + jj
                    w_0, w_1, w_2, w_3 = wf[q], wf[q + u(16)], wf[q + u(32)], wf[q + u(48)]
                    w_4, w_5, w_6 = wf[q + u(64)], wf[q + u(80)], wf[q + u(96)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9 = xcl[a + u(128)], xcl[a + u(144)]
                    v_0 = (((zero + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = ((v_0 + w_4 * x_4) + w_5 * x_5) + w_6 * x_6
                    v_1 = (((zero + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = ((v_1 + w_4 * x_5) + w_5 * x_6) + w_6 * x_7
                    v_2 = (((zero + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = ((v_2 + w_4 * x_6) + w_5 * x_7) + w_6 * x_8
                    v_3 = (((zero + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = ((v_3 + w_4 * x_7) + w_5 * x_8) + w_6 * x_9
                    a = t0 + u(1) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(112)], wf[q + u(128)], wf[q + u(144)], wf[q + u(160)]
                    w_4, w_5, w_6 = wf[q + u(176)], wf[q + u(192)], wf[q + u(208)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9 = xcl[a + u(128)], xcl[a + u(144)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = ((v_0 + w_4 * x_4) + w_5 * x_5) + w_6 * x_6
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = ((v_1 + w_4 * x_5) + w_5 * x_6) + w_6 * x_7
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = ((v_2 + w_4 * x_6) + w_5 * x_7) + w_6 * x_8
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = ((v_3 + w_4 * x_7) + w_5 * x_8) + w_6 * x_9
                    a = t0 + u(2) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(224)], wf[q + u(240)], wf[q + u(256)], wf[q + u(272)]
                    w_4, w_5, w_6 = wf[q + u(288)], wf[q + u(304)], wf[q + u(320)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9 = xcl[a + u(128)], xcl[a + u(144)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = ((v_0 + w_4 * x_4) + w_5 * x_5) + w_6 * x_6
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = ((v_1 + w_4 * x_5) + w_5 * x_6) + w_6 * x_7
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = ((v_2 + w_4 * x_6) + w_5 * x_7) + w_6 * x_8
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = ((v_3 + w_4 * x_7) + w_5 * x_8) + w_6 * x_9
                    a = t0 + u(3) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(336)], wf[q + u(352)], wf[q + u(368)], wf[q + u(384)]
                    w_4, w_5, w_6 = wf[q + u(400)], wf[q + u(416)], wf[q + u(432)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9 = xcl[a + u(128)], xcl[a + u(144)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = ((v_0 + w_4 * x_4) + w_5 * x_5) + w_6 * x_6
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = ((v_1 + w_4 * x_5) + w_5 * x_6) + w_6 * x_7
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = ((v_2 + w_4 * x_6) + w_5 * x_7) + w_6 * x_8
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = ((v_3 + w_4 * x_7) + w_5 * x_8) + w_6 * x_9
                    a = t0 + u(4) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(448)], wf[q + u(464)], wf[q + u(480)], wf[q + u(496)]
                    w_4, w_5, w_6 = wf[q + u(512)], wf[q + u(528)], wf[q + u(544)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9 = xcl[a + u(128)], xcl[a + u(144)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = ((v_0 + w_4 * x_4) + w_5 * x_5) + w_6 * x_6
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = ((v_1 + w_4 * x_5) + w_5 * x_6) + w_6 * x_7
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = ((v_2 + w_4 * x_6) + w_5 * x_7) + w_6 * x_8
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = ((v_3 + w_4 * x_7) + w_5 * x_8) + w_6 * x_9
                    a = t0 + u(5) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(560)], wf[q + u(576)], wf[q + u(592)], wf[q + u(608)]
                    w_4, w_5, w_6 = wf[q + u(624)], wf[q + u(640)], wf[q + u(656)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9 = xcl[a + u(128)], xcl[a + u(144)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = ((v_0 + w_4 * x_4) + w_5 * x_5) + w_6 * x_6
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = ((v_1 + w_4 * x_5) + w_5 * x_6) + w_6 * x_7
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = ((v_2 + w_4 * x_6) + w_5 * x_7) + w_6 * x_8
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = ((v_3 + w_4 * x_7) + w_5 * x_8) + w_6 * x_9
                    a = t0 + u(6) * rstep + jj
                    w_0, w_1, w_2, w_3 = wf[q + u(672)], wf[q + u(688)], wf[q + u(704)], wf[q + u(720)]
                    w_4, w_5, w_6 = wf[q + u(736)], wf[q + u(752)], wf[q + u(768)]
                    x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                    x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                    x_8, x_9 = xcl[a + u(128)], xcl[a + u(144)]
                    v_0 = (((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2) + w_3 * x_3
                    v_0 = ((v_0 + w_4 * x_4) + w_5 * x_5) + w_6 * x_6
                    v_1 = (((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3) + w_3 * x_4
                    v_1 = ((v_1 + w_4 * x_5) + w_5 * x_6) + w_6 * x_7
                    v_2 = (((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4) + w_3 * x_5
                    v_2 = ((v_2 + w_4 * x_6) + w_5 * x_7) + w_6 * x_8
                    v_3 = (((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5) + w_3 * x_6
                    v_3 = ((v_3 + w_4 * x_7) + w_5 * x_8) + w_6 * x_9
                    o = ob + jj
                    acc[o], acc[o + u(16)], acc[o + u(32)], acc[o + u(48)] = v_0, v_1, v_2, v_3
        _unpack(acc, out, b, n, c0, kn, owr, has_bias)


blocks_3x3_s1, blocks_3x3_s2 = kernel(_blocks_3x3_s1), kernel(_blocks_3x3_s2)
blocks_5x5_s1, blocks_5x5_s2, blocks_7x7_s1 = kernel(_blocks_5x5_s1), kernel(_blocks_5x5_s2), kernel(_blocks_7x7_s1)

#: the name of the loop of each (kernel side, column stride), compiled on demand
LOOPS = {(3, 1): "blocks_3x3_s1", (3, 2): "blocks_3x3_s2", (5, 1): "blocks_5x5_s1", (5, 2): "blocks_5x5_s2",
         (7, 1): "blocks_7x7_s1"}


def loop(k: int, sw: int):
    """The compiled loop of a ``k`` x ``k`` kernel at column stride ``sw`` (a key of
    :data:`LOOPS`), or None where compiled loops are off (or deferred: :meth:`Lazy.get`).
    ``loop(k, sw)(x, w, b, out, xcl, acc, PWX, sh, dh, lo_h, lo_w, h0, w0, hi_n, wi_n, lo, hi,
    has_bias)``: depthwise Conv (channel multiplier 1) of ``x`` ``(N, C, H, W)`` by ``w``
    ``(blocks, K*K, CB)`` into ``out`` ``(N, C, OH, OW)`` ``+ b`` (``(C,)``, read where
    ``has_bias``), for the items ``lo .. hi`` of ``(image, channel block)`` (``n * blocks +
    block``); ``xcl`` / ``acc``: :func:`layout`'s sizes, ``xcl`` zero but where the loop wrote
    interiors.  All arrays C-contiguous, the floats in one dtype; see the module docstring.
    One kernel per pair, so that a model loads (and a fresh cache compiles) only those it uses."""
    global _pack, _unpack
    pack, unpack = _PACK.get(), _UNPACK.get()
    if pack is None or unpack is None:
        return None
    _pack, _unpack = pack, unpack
    return globals()[LOOPS[(k, sw)]].get()
