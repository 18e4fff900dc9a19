"""The 4-bit product on AVX-512 VNNI (imported by :mod:`.nbits_vnni` only, once numba may be
imported and the host has the instruction; this module imports numba).

:data:`block_dots` is a numba intrinsic emitting LLVM's ``llvm.x86.avx512.vpdpbusd.512``: for
one tile of :data:`~.nbits_vnni.TILE` columns, one block of ``groups`` groups of eight k and
:data:`MR` rows of A it writes the int32 dot products of the block (:mod:`.nbits_vnni`'s
layout: per group one 64-byte load per 16 columns, its low nibbles and its high nibbles shifted
down as two u8 operands, each row's eight int8 values of the group as two broadcast int32: one
weight load serves MR rows).  :func:`int4_product` is
:mod:`.nbits`'s ``int4_product`` over that layout, with the same arguments and results.  The
loops read and write only inside the arrays the caller allocated with these shapes.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .nbits_vnni import TILE

NV = TILE // 16
_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")


def _block_dots(mr: int):
    """The intrinsic of :data:`MR`-row blocks (``mr`` rows): see :func:`block_dots`."""

    @intrinsic
    def block_dots(typingctx, w_addr, a_addr, a_stride, groups, out_addr, out_stride):
        sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            wa, aa, astr, gn, oa, ostr = args
            i32, i64 = ir.IntType(32), ir.IntType(64)
            v16 = ir.VectorType(i32, 16)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v16, [v16, v16, v16]),
                                                "llvm.x86.avx512.vpdpbusd.512")
            pv16, pi32 = v16.as_pointer(), i32.as_pointer()
            accs = [[cgutils.alloca_once(builder, v16) for _ in range(NV)] for _ in range(mr)]
            for r in range(mr):
                for v in range(NV):
                    builder.store(ir.Constant(v16, [0] * 16), accs[r][v])
            mask = ir.Constant(v16, [0x0F0F0F0F] * 16)
            four = ir.Constant(v16, [4] * 16)
            undef = ir.Constant(v16, None)
            splat = ir.Constant(v16, [0] * 16)
            with cgutils.for_range(builder, gn) as loop:
                g = loop.index
                ap = builder.add(aa, builder.mul(g, ir.Constant(i64, 8)))
                bl, bh = [], []
                for r in range(mr):
                    rp = builder.add(ap, builder.mul(ir.Constant(i64, r), astr))
                    lo32 = builder.load(builder.inttoptr(rp, pi32), align=1)
                    hi32 = builder.load(builder.inttoptr(builder.add(rp, ir.Constant(i64, 4)), pi32), align=1)
                    bl.append(builder.shuffle_vector(builder.insert_element(undef, lo32, ir.Constant(i32, 0)), undef,
                                                     splat))
                    bh.append(builder.shuffle_vector(builder.insert_element(undef, hi32, ir.Constant(i32, 0)), undef,
                                                     splat))
                wb = builder.add(wa, builder.mul(g, ir.Constant(i64, NV * 64)))
                for v in range(NV):
                    x = builder.load(builder.inttoptr(builder.add(wb, ir.Constant(i64, v * 64)), pv16), align=1)
                    lo = builder.and_(x, mask)
                    hi = builder.and_(builder.lshr(x, four), mask)
                    for r in range(mr):
                        acc = builder.call(fn, [builder.load(accs[r][v]), lo, bl[r]])
                        builder.store(builder.call(fn, [acc, hi, bh[r]]), accs[r][v])
            for r in range(mr):
                ro = builder.add(oa, builder.mul(ir.Constant(i64, r), ostr))
                for v in range(NV):
                    builder.store(builder.load(accs[r][v]),
                                  builder.inttoptr(builder.add(ro, ir.Constant(i64, v * 64)), pv16), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return block_dots


#: rows of A a weight load serves at once (the rest of a row count one at a time)
MR = 4
#: ``block_dots(w_addr, a_addr, a_stride, groups, out_addr, out_stride)``: for ``MR`` rows of A
#: (int8, ``a_stride`` bytes apart) and one tile and block of the weight (``groups`` groups of
#: eight k at ``w_addr``), the block's int32 dot products, ``TILE`` per row, written at
#: ``out_addr`` (rows ``out_stride`` bytes apart); ``block_dot`` the same for one row
block_dots, block_dot = _block_dots(MR), _block_dots(1)


@numba.njit(**_OPTIONS)
def int4_product(a, block, w, scales, zp, out, t0, t1):
    """:mod:`.nbits`'s ``int4_product`` (same arguments; ``w`` in :mod:`.nbits_vnni`'s layout)."""
    m_rows, k = a.shape
    k_blocks = scales.shape[1]
    kpad = k_blocks * block
    qa = np.zeros((m_rows, kpad), np.int8)
    sa = np.empty((m_rows, k_blocks), np.float32)
    qsum = np.empty((m_rows, k_blocks), np.float32)
    for m in range(m_rows):
        for kb in range(k_blocks):
            lo = kb * block
            hi = min(lo + block, k)
            amax = np.float32(0.0)
            for j in range(lo, hi):
                v = abs(a[m, j])
                if v > amax:
                    amax = v
            inv = np.float32(127.0) / amax if amax > 0 else np.float32(0.0)
            sa[m, kb] = amax / np.float32(127.0)
            total = 0
            for j in range(lo, hi):
                q = np.int32(np.round(a[m, j] * inv))
                qa[m, j] = q
                total += q
            qsum[m, kb] = total
    groups = block // 8
    n = out.shape[1]
    dots = np.empty((MR, TILE), np.int32)
    acc = np.empty((MR, TILE), np.float32)
    tile_bytes = w.shape[1] * NV * 64
    wa, qp, dp = w.ctypes.data, qa.ctypes.data, dots.ctypes.data
    for t in range(t0, t1):
        base = t * TILE
        for m0 in range(0, m_rows, MR):
            mr = min(MR, m_rows - m0)
            for r in range(mr):
                for i in range(TILE):
                    acc[r, i] = 0.0
            for kb in range(k_blocks):
                wp = wa + t * tile_bytes + kb * groups * NV * 64
                if mr == MR:
                    block_dots(wp, qp + m0 * kpad + kb * block, kpad, groups, dp, TILE * 4)
                else:
                    for r in range(mr):
                        block_dot(wp, qp + (m0 + r) * kpad + kb * block, kpad, groups, dp + r * TILE * 4, 0)
                for r in range(mr):
                    s = sa[m0 + r, kb]
                    qs = qsum[m0 + r, kb]
                    for i in range(TILE):
                        acc[r, i] += (np.float32(dots[r, i]) - zp[t, kb, i] * qs) * (s * scales[t, kb, i])
            for r in range(mr):
                for i in range(min(TILE, n - base)):
                    out[m0 + r, base + i] = acc[r, i]
