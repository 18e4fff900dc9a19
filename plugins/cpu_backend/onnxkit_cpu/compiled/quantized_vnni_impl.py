"""The 8-bit integer product on AVX-512 VNNI (imported by :mod:`.quantized_vnni` only, once numba
may be imported and the host has the instruction; this module imports numba).

:func:`tile` is a numba intrinsic emitting LLVM's ``llvm.x86.avx512.vpdpbusd.512``: for a tile of
:data:`MR` rows of a packed u8 matrix and :data:`NR` columns of a packed s8 matrix it adds, for
every ``(r, n)``, ``sum_t x[r, 4k + t] * w[4k + t, n]`` over ``k4`` groups of four ``k`` to the
int32 accumulators (``vpdpbusd``: four u8 x s8 products summed exactly, added to an int32 lane;
no saturation).  Every product is at most ``255 * 128`` in magnitude, so the accumulated sums
are the exact integer sums while ``K * 255 * 128 < 2^31`` (the caller's bound,
:data:`.quantized_vnni.K_LIMIT`).

Layouts (made by the ``pack_*`` loops): the u8 operand ``xp`` (P', K4 * 4) uint8, P' a multiple
of MR, K4 = ceil(K / 4), zero past K and past P; the s8 operand ``wp`` (panels, K4, NR) int32,
each int32 the four s8 values ``w[4k .. 4k + 3, panel * NR + j]``, zero past K and N; the
result ``c`` (P', panels * NR) int32.  The loops read and write only inside these arrays
(addresses taken from the arrays the caller allocated with these shapes).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: rows of the u8 operand per tile, and 16-lane vectors of the s8 operand per tile
MR, NV = 6, 2
#: columns of the s8 operand per tile (one panel)
NR = 16 * NV
#: groups of four K per block: a block of a panel (KC4 * NR * 4 bytes) stays in the L1 cache
KC4 = 128

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")


@intrinsic
def tile(typingctx, x_addr, x_stride, w_addr, c_addr, c_stride, k4, accumulate):
    """``c[r, 0:NR] (+)= x[r, 0:4*k4] @ w[0:4*k4, 0:NR]`` for ``r < MR`` (module docstring);
    addresses and strides in bytes; ``accumulate`` 0: the sums start at 0, else at ``c``."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        xa, xs, wa, ca, cs, k4v, acc_flag = args
        i32, i64 = ir.IntType(32), ir.IntType(64)
        v16 = ir.VectorType(i32, 16)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v16, [v16, v16, v16]),
                                            "llvm.x86.avx512.vpdpbusd.512")
        pv16, pi32 = v16.as_pointer(), i32.as_pointer()
        accs = [[cgutils.alloca_once(builder, v16) for _ in range(NV)] for _ in range(MR)]
        c_ptrs = [[builder.inttoptr(builder.add(builder.add(ca, builder.mul(ir.Constant(i64, r), cs)),
                                                ir.Constant(i64, v * 64)), pv16) for v in range(NV)]
                  for r in range(MR)]
        start = builder.icmp_signed("!=", acc_flag, ir.Constant(i64, 0))
        zero = ir.Constant(v16, [0] * 16)
        for r in range(MR):
            for v in range(NV):
                builder.store(builder.select(start, builder.load(c_ptrs[r][v], align=4), zero), accs[r][v])
        undef = ir.Constant(v16, None)
        splat = ir.Constant(v16, [0] * 16)
        with cgutils.for_range(builder, k4v) as loop:
            kk = loop.index
            wbase = builder.add(wa, builder.mul(kk, ir.Constant(i64, NR * 4)))
            ws = [builder.load(builder.inttoptr(builder.add(wbase, ir.Constant(i64, v * 64)), pv16), align=4)
                  for v in range(NV)]
            xoff = builder.add(xa, builder.mul(kk, ir.Constant(i64, 4)))
            for r in range(MR):
                p = builder.inttoptr(builder.add(xoff, builder.mul(ir.Constant(i64, r), xs)), pi32)
                b = builder.insert_element(undef, builder.load(p, align=1), ir.Constant(i32, 0))
                b = builder.shuffle_vector(b, undef, splat)
                for v in range(NV):
                    builder.store(builder.call(fn, [builder.load(accs[r][v]), b, ws[v]]), accs[r][v])
        for r in range(MR):
            for v in range(NV):
                builder.store(builder.load(accs[r][v]), c_ptrs[r][v], align=4)
        return context.get_dummy_value()

    return sig, codegen


#: the largest u8 operand (bytes) for which :func:`gemm` runs the panels outermost
ROWS_IN_CACHE = 256 << 10


@numba.njit(**_OPTIONS)
def gemm(xp, wp, c):
    """``c = xp @ wp`` in the packed layouts (module docstring), K blocked by :data:`KC4`.
    Where ``xp`` is at most :data:`ROWS_IN_CACHE` bytes (it stays in the cache) the panels are
    outermost, each panel's K blocks in order: the s8 operand is read once, front to back (a
    product of few rows and a large weight is bound by that read); else the K blocks are, each
    block of ``xp`` read by every panel while it is in the cache.  The same tiles either way, each
    a sum over its K blocks in order: the same int32 sums."""
    p_count = xp.shape[0]
    k4 = xp.shape[1] // 4
    panels = wp.shape[0]
    xs, cs = xp.shape[1], c.shape[1] * 4
    xa, wa, ca = xp.ctypes.data, wp.ctypes.data, c.ctypes.data
    if p_count * xs <= ROWS_IN_CACHE:
        for pn in range(panels):
            for kb in range(0, k4, KC4):
                kn = min(KC4, k4 - kb)
                w0 = wa + (pn * k4 + kb) * NR * 4
                for r in range(0, p_count, MR):
                    tile(xa + r * xs + kb * 4, xs, w0, ca + r * cs + pn * NR * 4, cs, kn, kb)
        return
    for k0 in range(0, k4, KC4):
        kn = min(KC4, k4 - k0)
        for pn in range(panels):
            w0 = wa + (pn * k4 + k0) * NR * 4
            for r in range(0, p_count, MR):
                tile(xa + r * xs + k0 * 4, xs, w0, ca + r * cs + pn * NR * 4, cs, kn, k0)


@numba.njit(**_OPTIONS)
def pack_rows(x, flip, xp, sums):
    """``xp[p, k] = x[p, k]`` (``flip``: ``x ^ 0x80`` as u8, an int8 made u8 by adding 128), zero
    past K; ``sums[p]`` the row sums of the u8 values (rows past ``x``'s stay zero)."""
    p_count, k = x.shape
    f = np.uint8(flip)
    for p in range(p_count):
        row = xp[p]
        src = x[p]
        s = np.uint64(0)
        for j in range(k):
            v = np.uint8(src[j]) ^ f
            row[j] = v
            s += np.uint64(v)
        row[k:] = 0
        sums[p] = s
    for p in range(p_count, xp.shape[0]):
        xp[p] = 0
        sums[p] = 0


@numba.njit(**_OPTIONS)
def channels_last(x, flip, xt):
    """``xt[n, y, x', c] = x[n, c, y, x']`` as u8 (``flip`` as :func:`pack_rows`)."""
    n_count, c_count, h, w = x.shape
    f = np.uint8(flip)
    for n in range(n_count):
        for y in range(h):
            for c in range(c_count):
                for xx in range(w):
                    xt[n, y, xx, c] = np.uint8(x[n, c, y, xx]) ^ f


@numba.njit(inline="always", **_OPTIONS)
def copy(dst, d0, src, s0, count):
    """``dst[d0:d0 + count] = src[s0:s0 + count]`` (1-D, in range), indexed unsigned: no
    negative-index wrap to check, so the loop is a plain copy."""
    d = np.uint64(d0)
    s = np.uint64(s0)
    for t in range(np.uint64(count)):
        dst[d + t] = src[s + t]


@numba.njit(**_OPTIONS)
def conv_rows(xt, zp, kh, kw, sh, sw, dh, dw, top, left, oh, ow, c0, cg, xp, sums):
    """The im2col rows of channels ``c0 .. c0 + cg`` of ``xt`` (N, H, W, C) u8
    (:func:`channels_last`): ``xp[(n*oh + a)*ow + b, (i*kw + j)*cg + c]`` the value at
    ``(n, a*sh + i*dh - top, b*sw + j*dw - left, c0 + c)``, ``zp`` (the u8 zero point) where that
    is padding; zero past K and past the rows; ``sums`` the row sums."""
    n_count, h, w, c_all = xt.shape
    z = np.uint8(zp)
    kk = cg * kh * kw
    width = xp.shape[1]
    pad_sum = np.int64(cg) * np.int64(z)
    whole = cg == c_all and dw == 1      # every channel, adjacent kernel columns: one run per kernel row
    src = xt.reshape(-1)
    dst = xp.reshape(-1)
    at = np.empty((h, w), np.int64)         # each position's sum over the group's channels
    for n in range(n_count):
        for y in range(h):
            for xx in range(w):
                base = ((n * h + y) * w + xx) * c_all + c0
                t = np.uint64(0)
                for c in range(cg):
                    t += np.uint64(src[base + c])
                at[y, xx] = t
        for a in range(oh):
            for b in range(ow):
                p = (n * oh + a) * ow + b
                out = p * width
                col = 0
                s = np.int64(0)
                for i in range(kh):
                    y = a * sh + i * dh - top
                    x0 = b * sw - left
                    if whole and 0 <= y < h and x0 >= 0 and x0 + kw <= w:
                        copy(dst, out + col, src, ((n * h + y) * w + x0) * c_all, kw * cg)
                        for j in range(kw):
                            s += at[y, x0 + j]
                        col += kw * cg
                        continue
                    for j in range(kw):
                        xx = x0 + j * dw
                        if y < 0 or y >= h or xx < 0 or xx >= w:
                            for c in range(cg):
                                dst[out + col + c] = z
                            s += pad_sum
                        else:
                            copy(dst, out + col, src, ((n * h + y) * w + xx) * c_all + c0, cg)
                            s += at[y, xx]
                        col += cg
                for t in range(kk, width):
                    dst[out + t] = 0
                sums[p] = s
    for p in range(n_count * oh * ow, xp.shape[0]):
        xp[p] = 0
        sums[p] = 0


@numba.njit(**_OPTIONS)
def finish_rows(c, sums, wzp, colterm, out):
    """``out[p, n] = c[p, n] - wzp[n] * sums[p] + colterm[n]`` (int64 arithmetic) for the
    ``out`` (P, N) float64 / int32 rows: the exact centered sums (:mod:`.quantized_vnni`)."""
    p_count, n_count = out.shape
    for p in range(p_count):
        s = sums[p]
        for n in range(n_count):
            out[p, n] = np.int64(c[p, n]) - wzp[n] * s + colterm[n]


@numba.njit(**_OPTIONS)
def finish_conv(c, sums, wzp, colterm, n_images, length, m0, out):
    """:func:`finish_rows` written channel-first: ``out[i, m0 + m, l]`` from row ``i*length + l``
    of ``c`` (``out`` (N, M, L) float64 / int32), for the ``colterm.shape[0]`` channels of one
    group (blocks of 64 rows computed along the channels, then written channel-first)."""
    mg = colterm.shape[0]
    block = np.empty((64, mg), out.dtype)
    for i in range(n_images):
        for l0 in range(0, length, 64):
            l1 = min(length, l0 + 64)
            for l in range(l0, l1):
                p = i * length + l
                s = sums[p]
                src = c[p]
                dst = block[l - l0]
                for m in range(mg):
                    dst[m] = np.int64(src[m]) - wzp[m] * s + colterm[m]
            for m in range(mg):
                o = out[i, m0 + m]
                for l in range(l0, l1):
                    o[l] = block[l - l0, m]


@numba.njit(**_OPTIONS)
def finish_conv_requantized(c, sums, wzp, colterm, n_images, length, m0, bias, mult, zp, lo, hi, y):
    """:func:`finish_conv`'s exact sums requantized as QLinearConv's portable kernel does
    (:data:`onnxkit_cpu.compiled.quantized.requantize`'s float64 operations in its order):
    ``y[i, m0 + m, l] = clip(rint((float64(S) + bias[m0 + m]) * mult[m0 + m] + zp), lo, hi)``
    (the clip as ``min(max(r, lo), hi)``: ``r`` is never NaN).  Blocks of 64 rows are computed
    along the channels (contiguous in ``c``) and written channel-first."""
    mg = colterm.shape[0]
    bm = bias[m0:m0 + mg]
    km = mult[m0:m0 + mg]
    block = np.empty((64, mg), y.dtype)
    for i in range(n_images):
        for l0 in range(0, length, 64):
            l1 = min(length, l0 + 64)
            for l in range(l0, l1):
                p = i * length + l
                s = sums[p]
                src = c[p]
                dst = block[l - l0]
                for m in range(mg):
                    r = np.rint((np.float64(np.int64(src[m]) - wzp[m] * s + colterm[m]) + bm[m]) * km[m] + zp)
                    dst[m] = min(max(r, lo), hi)
            for m in range(mg):
                out = y[i, m0 + m]
                for l in range(l0, l1):
                    out[l] = block[l - l0, m]


@numba.njit(**_OPTIONS)
def finish_rows_requantized(c, sums, wzp, colterm, bias, mult, zp, lo, hi, y):
    """:func:`finish_rows` requantized as :func:`finish_conv_requantized`, rows first: ``y`` (P, N)."""
    p_count, n_count = y.shape
    for p in range(p_count):
        s = sums[p]
        src = c[p]
        dst = y[p]
        for n in range(n_count):
            r = np.rint((np.float64(np.int64(src[n]) - wzp[n] * s + colterm[n]) + bias[n]) * mult[n] + zp)
            dst[n] = min(max(r, lo), hi)


@numba.njit(**_OPTIONS)
def pack_columns(x, flip, zp, kh, kw, sh, sw, dh, dw, top, left, oh, ow, c0, cg, cols, xq, sums):
    """The im2col columns of channels ``c0 .. c0 + cg`` of one image ``x`` (C, H, W) 8-bit as the
    s8 operand of :func:`gemm` (the planar convolution, :func:`.quantized_vnni.conv_planar`):
    first ``cols`` (K4 * 4, L) int8, row ``k = (i*kw + j)*cg + c`` at position ``l = a*ow + b``
    the value ``x ^ flip`` at ``(c0 + c, a*sh + i*dh - top, b*sw + j*dw - left)``, ``zp`` (the
    shifted zero point) where that is padding, rows past K zero; then ``xq`` (panels, K4, NR)
    int32, lane ``l % NR`` of ``xq[l // NR, k4]`` the four bytes of rows ``4*k4 .. 4*k4 + 3`` at
    ``l`` (zero past the positions); ``sums[l]`` the column sums of the signed values (int32:
    at most K * 128 in magnitude)."""
    h, w = x.shape[1], x.shape[2]
    f = np.uint8(flip)
    z = np.int8(zp)
    length = oh * ow
    kk = kh * kw * cg
    k4 = xq.shape[1]
    for i in range(kh):
        for j in range(kw):
            # the output columns b whose input column is inside: b_lo <= b < b_hi
            off = j * dw - left
            b_lo = min(ow, max(0, (-off + sw - 1) // sw))
            b_hi = max(b_lo, min(ow, (w - 1 - off) // sw + 1)) if w - 1 - off >= 0 else b_lo
            for c in range(cg):
                row = cols[(i * kw + j) * cg + c]
                plane = x[c0 + c]
                for a in range(oh):
                    y = a * sh + i * dh - top
                    dst = row[a * ow:(a + 1) * ow]
                    if y < 0 or y >= h:
                        for b in range(np.uint64(ow)):
                            dst[b] = z
                        continue
                    src = plane[y]
                    for b in range(b_lo):
                        dst[b] = z
                    if sw == 1:
                        s = src[b_lo + off:b_hi + off]
                        d = dst[b_lo:b_hi]
                        for b in range(np.uint64(b_hi - b_lo)):
                            d[b] = np.int8(np.uint8(s[b]) ^ f)
                    else:
                        for b in range(b_lo, b_hi):
                            dst[b] = np.int8(np.uint8(src[b * sw + off]) ^ f)
                    for b in range(b_hi, ow):
                        dst[b] = z
    for k in range(kk, k4 * 4):
        cols[k, :length] = 0
    for l in range(length):
        sums[l] = 0
    panels = xq.shape[0]
    for q in range(k4):
        r0 = cols[4 * q]
        r1 = cols[4 * q + 1]
        r2 = cols[4 * q + 2]
        r3 = cols[4 * q + 3]
        for p in range(panels):
            l0 = p * NR
            n = min(NR, length - l0)
            lanes = xq[p, q]
            for t in range(n):
                l = l0 + t
                v0, v1, v2, v3 = r0[l], r1[l], r2[l], r3[l]
                lanes[t] = (np.int32(np.uint8(v0)) | (np.int32(np.uint8(v1)) << 8) | (np.int32(np.uint8(v2)) << 16)
                            | (np.int32(np.uint8(v3)) << 24))
                sums[l] += np.int32(v0) + np.int32(v1) + np.int32(v2) + np.int32(v3)
            for t in range(n, NR):
                lanes[t] = 0


@numba.njit(**_OPTIONS)
def pack_planes(x, flip, zp, kh, kw, dh, dw, top, left, oh, pitch, c0, cg, buf, xq, sums):
    """:func:`pack_columns` for a convolution of stride 1, without the rows: the channels'
    padded planes (``Hp`` rows of ``pitch`` columns, ``x ^ flip`` inside, ``zp`` around) laid
    one after the other in ``buf``, a zero run after them; position ``l = a*pitch + b`` (``b``
    from ``ow`` to ``pitch`` unused) of row ``k = (i*kw + j)*cg + c`` is then byte
    ``c*Hp*pitch + i*dh*pitch + j*dw + l`` of ``buf``: each row one contiguous run, interleaved
    by fours into ``xq`` (panels, K4, NR) int32 (rows past K from the zero run); ``sums[l]`` the
    column sums (unused positions included)."""
    h, w = x.shape[1], x.shape[2]
    f = np.uint8(flip)
    z = np.int8(zp)
    hp = max(h + top, oh + (kh - 1) * dh)
    plane = hp * pitch
    zero = cg * plane
    for t in range(np.uint64(buf.shape[0] - zero)):
        buf[zero + t] = 0
    for c in range(cg):
        src = x[c0 + c]
        base = c * plane
        for r in range(hp):
            dst = buf[base + r * pitch:base + (r + 1) * pitch]
            y = r - top
            if y < 0 or y >= h:
                for q in range(np.uint64(pitch)):
                    dst[q] = z
                continue
            for q in range(left):
                dst[q] = z
            row = src[y]
            d = dst[left:left + w]
            for q in range(np.uint64(w)):
                d[q] = np.int8(np.uint8(row[q]) ^ f)
            for q in range(left + w, pitch):
                dst[q] = z
    kk = kh * kw * cg
    panels, k4 = xq.shape[0], xq.shape[1]
    span = panels * NR
    for l in range(span):
        sums[l] = 0
    for q in range(k4):
        offs = np.empty(4, np.int64)
        for t in range(4):
            k = 4 * q + t
            if k < kk:
                c = k % cg
                ij = k // cg
                offs[t] = c * plane + (ij // kw) * dh * pitch + (ij % kw) * dw
            else:
                offs[t] = zero
        r0 = buf[offs[0]:offs[0] + span]
        r1 = buf[offs[1]:offs[1] + span]
        r2 = buf[offs[2]:offs[2] + span]
        r3 = buf[offs[3]:offs[3] + span]
        for p in range(panels):
            lanes = xq[p, q]
            l0 = p * NR
            for t in range(NR):
                l = l0 + t
                v0, v1, v2, v3 = r0[l], r1[l], r2[l], r3[l]
                lanes[t] = (np.int32(np.uint8(v0)) | (np.int32(np.uint8(v1)) << 8) | (np.int32(np.uint8(v2)) << 16)
                            | (np.int32(np.uint8(v3)) << 24))
                sums[l] += np.int32(v0) + np.int32(v1) + np.int32(v2) + np.int32(v3)


@numba.njit(**_OPTIONS)
def pack_weight_rows(w, flip, wr, rsums):
    """The u8 operand of the planar convolution: ``wr[m, k] = w[m, k] ^ flip`` (an int8 weight
    made u8 by adding 128), zero past K and past M; ``rsums[m]`` the row sums."""
    m_count, k = w.shape
    f = np.uint8(flip)
    wr[:] = 0
    for m in range(m_count):
        s = np.int64(0)
        for t in range(k):
            v = np.uint8(w[m, t]) ^ f
            wr[m, t] = v
            s += np.int64(v)
        rsums[m] = s


@numba.njit(**_OPTIONS)
def finish_planar(c, sums, pitch, ow, base, factor, bias, mult, zp, lo, hi, requant, y):
    """The planar convolution's exact sums of one group of one image into ``y`` (mg, L), ``L``
    output rows of ``ow``, from ``c`` and ``sums`` laid out ``pitch`` positions a row:
    ``S[m, a*ow + b] = c[m, l] + base[m] - factor[m] * sums[l]`` at ``l = a*pitch + b`` (float64
    arithmetic on integers below 2^53: exact), and with ``requant`` QLinearConv's requantization
    (the float64 operations of :func:`finish_conv_requantized`: ``clip(rint((S + bias[m]) *
    mult[m] + zp), lo, hi)``), else ``S`` itself (``bias``, ``mult`` unused).  Where ``pitch ==
    ow`` (no padded columns: a 1x1 convolution) each channel's positions are one run, taken as one
    loop (the same operations per element)."""
    mg, length = y.shape
    rows = length // ow
    colsum = np.empty(rows * pitch)
    for l in range(rows * pitch):
        colsum[l] = np.float64(sums[l])
    if pitch == ow:
        for m in range(mg):
            bm = np.float64(base[m])
            fm = np.float64(factor[m])
            b_m = bias[m]
            k_m = mult[m]
            src = c[m, :length]
            dst = y[m]
            if requant:
                for b in range(np.uint64(length)):
                    s = (np.float64(src[b]) + bm) - fm * colsum[b]
                    dst[b] = min(max(np.rint((s + b_m) * k_m + zp), lo), hi)
            else:
                for b in range(np.uint64(length)):
                    dst[b] = (np.float64(src[b]) + bm) - fm * colsum[b]
        return
    for m in range(mg):
        bm = np.float64(base[m])
        fm = np.float64(factor[m])
        b_m = bias[m]
        k_m = mult[m]
        for a in range(rows):
            src = c[m, a * pitch:a * pitch + ow]
            cs = colsum[a * pitch:a * pitch + ow]
            dst = y[m, a * ow:(a + 1) * ow]
            if requant:
                for b in range(np.uint64(ow)):
                    s = (np.float64(src[b]) + bm) - fm * cs[b]
                    dst[b] = min(max(np.rint((s + b_m) * k_m + zp), lo), hi)
            else:
                for b in range(np.uint64(ow)):
                    dst[b] = (np.float64(src[b]) + bm) - fm * cs[b]
