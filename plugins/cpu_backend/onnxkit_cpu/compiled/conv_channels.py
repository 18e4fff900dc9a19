"""Compiled depthwise Conv on small maps in blocks of channels, for
:mod:`onnxkit_cpu.overrides.conv_channels`: :func:`blocks`, its scratch sizes from :func:`layout`.

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
at stride 1), so every offset in them is a constant.  Last, ``acc`` (``+ B`` where given) is
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
    """``(PWX, OWR, xcl size, acc size)`` of :func:`blocks` for a two-axis geometry (``padded``:
    the padded extents; the others the plan's; column dilation 1)."""
    (ph, pw), (kh, kw), (sh, sw), (dh, _) = padded, kernel_shape, strides, dil
    oh, ow = out_shape
    owr = -(-ow // PX) * PX
    last_row = (oh - 1) * sh + (kh - 1) * dh
    last_col = sw * (owr - 1) + kw - 1          # the last junk pixel's last tap
    size = max(ph * pw, last_row * pw + last_col + 1) * CB
    return pw, owr, size, oh * owr * CB


@kernel
def blocks(x, w, b, out, xcl, acc, k_n, pwx, sh, sw, dh, lo_h, lo_w, h0, w0, hi_n, wi_n, lo, hi, has_bias):
    """Depthwise Conv (channel multiplier 1) of ``x`` ``(N, C, H, W)`` by ``w`` ``(blocks, KH*KW,
    CB)`` into ``out`` ``(N, C, OH, OW)`` ``+ b`` (``(C,)``, read where ``has_bias``), for the items
    ``lo .. hi`` of ``(image, channel block)`` (``n * blocks + block``); ``xcl`` / ``acc``:
    :func:`layout`'s sizes, ``xcl`` zero but where this loop wrote interiors.  All arrays
    C-contiguous, the floats in one dtype; see the module docstring."""
    u = np.uint64
    cb = u(CB)
    n_img, c_all, h_n, wd_n = x.shape
    oh_n, ow_n = out.shape[2], out.shape[3]
    xf, of, wf = x.reshape(x.size), out.reshape(out.size), w.reshape(w.size)
    nblk = w.shape[0]
    owr = -(-ow_n // PX) * PX
    groups = owr // PX
    zero = xcl.dtype.type(0)
    row = u(pwx) * cb
    rstep, wb0 = u(dh) * row, u(k_n * k_n * CB)
    hw_in, hw_out = u(h_n * wd_n), u(oh_n * ow_n)
    for item in range(lo, hi):
        n, bi = item // nblk, item % nblk
        c0, wb = bi * CB, u(bi) * wb0
        kn = min(CB, c_all - c0)
        src = u(((n * c_all + c0) * h_n + h0) * wd_n + w0)
        for r in range(hi_n):       # the block's planes into the channels-last padded plane
            for q in range(wi_n):
                d, s = u(((lo_h + r) * pwx + lo_w + q) * CB), src + u(r * wd_n + q)
                if kn == CB:        # a constant count: LLVM's gather-free copy of one pixel
                    for k in range(cb):
                        xcl[d + k] = xf[s + k * hw_in]
                else:
                    for k in range(u(kn)):
                        xcl[d + k] = xf[s + k * hw_in]
        for oh in range(oh_n):      # per group of PX output pixels: the taps from zero in (kh, kw) order
            for g in range(groups):
                t0, ob = u(oh * sh) * row + u(g * PX * sw) * cb, u(oh * owr + g * PX) * cb
                if k_n == 3 and sw == 1:
                    for jj in range(u(16)):
                        wq = wb + jj
                        a = t0 + jj
                        w_0, w_1, w_2 = wf[wq], wf[wq + u(16)], wf[wq + u(32)]
                        x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                        x_4, x_5 = xcl[a + u(64)], xcl[a + u(80)]
                        v_0 = ((zero + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                        v_1 = ((zero + w_0 * x_1) + w_1 * x_2) + w_2 * x_3
                        v_2 = ((zero + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                        v_3 = ((zero + w_0 * x_3) + w_1 * x_4) + w_2 * x_5
                        a = t0 + u(1) * rstep + jj
                        w_0, w_1, w_2 = wf[wq + u(48)], wf[wq + u(64)], wf[wq + u(80)]
                        x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                        x_4, x_5 = xcl[a + u(64)], xcl[a + u(80)]
                        v_0 = ((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                        v_1 = ((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3
                        v_2 = ((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                        v_3 = ((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5
                        a = t0 + u(2) * rstep + jj
                        w_0, w_1, w_2 = wf[wq + u(96)], wf[wq + u(112)], wf[wq + u(128)]
                        x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                        x_4, x_5 = xcl[a + u(64)], xcl[a + u(80)]
                        v_0 = ((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                        v_1 = ((v_1 + w_0 * x_1) + w_1 * x_2) + w_2 * x_3
                        v_2 = ((v_2 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                        v_3 = ((v_3 + w_0 * x_3) + w_1 * x_4) + w_2 * x_5
                        o = ob + jj
                        acc[o], acc[o + u(16)], acc[o + u(32)], acc[o + u(48)] = v_0, v_1, v_2, v_3
                elif k_n == 3 and sw == 2:
                    for jj in range(u(16)):
                        wq = wb + jj
                        a = t0 + jj
                        w_0, w_1, w_2 = wf[wq], wf[wq + u(16)], wf[wq + u(32)]
                        x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                        x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                        x_8 = xcl[a + u(128)]
                        v_0 = ((zero + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                        v_1 = ((zero + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                        v_2 = ((zero + w_0 * x_4) + w_1 * x_5) + w_2 * x_6
                        v_3 = ((zero + w_0 * x_6) + w_1 * x_7) + w_2 * x_8
                        a = t0 + u(1) * rstep + jj
                        w_0, w_1, w_2 = wf[wq + u(48)], wf[wq + u(64)], wf[wq + u(80)]
                        x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                        x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                        x_8 = xcl[a + u(128)]
                        v_0 = ((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                        v_1 = ((v_1 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                        v_2 = ((v_2 + w_0 * x_4) + w_1 * x_5) + w_2 * x_6
                        v_3 = ((v_3 + w_0 * x_6) + w_1 * x_7) + w_2 * x_8
                        a = t0 + u(2) * rstep + jj
                        w_0, w_1, w_2 = wf[wq + u(96)], wf[wq + u(112)], wf[wq + u(128)]
                        x_0, x_1, x_2, x_3 = xcl[a], xcl[a + u(16)], xcl[a + u(32)], xcl[a + u(48)]
                        x_4, x_5, x_6, x_7 = xcl[a + u(64)], xcl[a + u(80)], xcl[a + u(96)], xcl[a + u(112)]
                        x_8 = xcl[a + u(128)]
                        v_0 = ((v_0 + w_0 * x_0) + w_1 * x_1) + w_2 * x_2
                        v_1 = ((v_1 + w_0 * x_2) + w_1 * x_3) + w_2 * x_4
                        v_2 = ((v_2 + w_0 * x_4) + w_1 * x_5) + w_2 * x_6
                        v_3 = ((v_3 + w_0 * x_6) + w_1 * x_7) + w_2 * x_8
                        o = ob + jj
                        acc[o], acc[o + u(16)], acc[o + u(32)], acc[o + u(48)] = v_0, v_1, v_2, v_3
                elif k_n == 5 and sw == 1:
                    for jj in range(u(16)):
                        wq = wb + jj
                        a = t0 + jj
                        w_0, w_1, w_2, w_3 = wf[wq], wf[wq + u(16)], wf[wq + u(32)], wf[wq + u(48)]
                        w_4 = wf[wq + u(64)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(80)], wf[wq + u(96)], wf[wq + u(112)], wf[wq + u(128)]
                        w_4 = wf[wq + u(144)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(160)], wf[wq + u(176)], wf[wq + u(192)], wf[wq + u(208)]
                        w_4 = wf[wq + u(224)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(240)], wf[wq + u(256)], wf[wq + u(272)], wf[wq + u(288)]
                        w_4 = wf[wq + u(304)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(320)], wf[wq + u(336)], wf[wq + u(352)], wf[wq + u(368)]
                        w_4 = wf[wq + u(384)]
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
                elif k_n == 5 and sw == 2:
                    for jj in range(u(16)):
                        wq = wb + jj
                        a = t0 + jj
                        w_0, w_1, w_2, w_3 = wf[wq], wf[wq + u(16)], wf[wq + u(32)], wf[wq + u(48)]
                        w_4 = wf[wq + u(64)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(80)], wf[wq + u(96)], wf[wq + u(112)], wf[wq + u(128)]
                        w_4 = wf[wq + u(144)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(160)], wf[wq + u(176)], wf[wq + u(192)], wf[wq + u(208)]
                        w_4 = wf[wq + u(224)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(240)], wf[wq + u(256)], wf[wq + u(272)], wf[wq + u(288)]
                        w_4 = wf[wq + u(304)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(320)], wf[wq + u(336)], wf[wq + u(352)], wf[wq + u(368)]
                        w_4 = wf[wq + u(384)]
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
                else:     # k_n == 7 and sw == 1
                    for jj in range(u(16)):
                        wq = wb + jj
                        a = t0 + jj
                        w_0, w_1, w_2, w_3 = wf[wq], wf[wq + u(16)], wf[wq + u(32)], wf[wq + u(48)]
                        w_4, w_5, w_6 = wf[wq + u(64)], wf[wq + u(80)], wf[wq + u(96)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(112)], wf[wq + u(128)], wf[wq + u(144)], wf[wq + u(160)]
                        w_4, w_5, w_6 = wf[wq + u(176)], wf[wq + u(192)], wf[wq + u(208)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(224)], wf[wq + u(240)], wf[wq + u(256)], wf[wq + u(272)]
                        w_4, w_5, w_6 = wf[wq + u(288)], wf[wq + u(304)], wf[wq + u(320)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(336)], wf[wq + u(352)], wf[wq + u(368)], wf[wq + u(384)]
                        w_4, w_5, w_6 = wf[wq + u(400)], wf[wq + u(416)], wf[wq + u(432)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(448)], wf[wq + u(464)], wf[wq + u(480)], wf[wq + u(496)]
                        w_4, w_5, w_6 = wf[wq + u(512)], wf[wq + u(528)], wf[wq + u(544)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(560)], wf[wq + u(576)], wf[wq + u(592)], wf[wq + u(608)]
                        w_4, w_5, w_6 = wf[wq + u(624)], wf[wq + u(640)], wf[wq + u(656)]
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
                        w_0, w_1, w_2, w_3 = wf[wq + u(672)], wf[wq + u(688)], wf[wq + u(704)], wf[wq + u(720)]
                        w_4, w_5, w_6 = wf[wq + u(736)], wf[wq + u(752)], wf[wq + u(768)]
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
        o = u((n * c_all + c0) * oh_n * ow_n)
        for oh in range(oh_n):      # acc (+ B) into Y's planes
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
