"""The 4-bit product on AVX-512 VNNI (imported by :mod:`.nbits_vnni` only, once numba may be
imported and the host has the instruction; this module imports numba).

:func:`block_dots` is a numba intrinsic emitting LLVM's ``llvm.x86.avx512.vpdpbusd.512``: for
one tile of :data:`~.nbits_vnni.TILE` columns and one block of ``groups`` groups of eight k it
writes the int32 dot products of the block (:mod:`.nbits_vnni`'s layout: per group one 64-byte
load per 16 columns, its low nibbles and its high nibbles shifted down as two u8 operands, A's
eight int8 values of the group as two broadcast int32).  :func:`int4_product` is
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


@intrinsic
def block_dots(typingctx, w_addr, a_addr, groups, out_addr):
    """``out[0:TILE]`` (int32) = the block's dot products: ``groups`` groups of eight k of the
    tile's weights at ``w_addr`` against the int8 values of A at ``a_addr`` (byte addresses)."""
    sig = types.void(types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        wa, aa, gn, oa = args
        i32, i64 = ir.IntType(32), ir.IntType(64)
        v16 = ir.VectorType(i32, 16)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v16, [v16, v16, v16]),
                                            "llvm.x86.avx512.vpdpbusd.512")
        pv16, pi32 = v16.as_pointer(), i32.as_pointer()
        accs = [cgutils.alloca_once(builder, v16) for _ in range(NV)]
        for v in range(NV):
            builder.store(ir.Constant(v16, [0] * 16), accs[v])
        mask = ir.Constant(v16, [0x0F0F0F0F] * 16)
        four = ir.Constant(v16, [4] * 16)
        undef = ir.Constant(v16, None)
        splat = ir.Constant(v16, [0] * 16)
        with cgutils.for_range(builder, gn) as loop:
            g = loop.index
            ap = builder.add(aa, builder.mul(g, ir.Constant(i64, 8)))
            alo = builder.load(builder.inttoptr(ap, pi32), align=1)
            ahi = builder.load(builder.inttoptr(builder.add(ap, ir.Constant(i64, 4)), pi32), align=1)
            blo = builder.shuffle_vector(builder.insert_element(undef, alo, ir.Constant(i32, 0)), undef, splat)
            bhi = builder.shuffle_vector(builder.insert_element(undef, ahi, ir.Constant(i32, 0)), undef, splat)
            wb = builder.add(wa, builder.mul(g, ir.Constant(i64, NV * 64)))
            for v in range(NV):
                x = builder.load(builder.inttoptr(builder.add(wb, ir.Constant(i64, v * 64)), pv16), align=1)
                lo = builder.and_(x, mask)
                hi = builder.and_(builder.lshr(x, four), mask)
                acc = builder.call(fn, [builder.load(accs[v]), lo, blo])
                builder.store(builder.call(fn, [acc, hi, bhi]), accs[v])
        for v in range(NV):
            builder.store(builder.load(accs[v]), builder.inttoptr(builder.add(oa, ir.Constant(i64, v * 64)), pv16),
                          align=4)
        return context.get_dummy_value()

    return sig, codegen


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
    dots = np.empty(TILE, np.int32)
    acc = np.empty(TILE, np.float32)
    tile_bytes = w.shape[1] * NV * 64
    wa, qp, dp = w.ctypes.data, qa.ctypes.data, dots.ctypes.data
    for t in range(t0, t1):
        for m in range(m_rows):
            for i in range(TILE):
                acc[i] = 0.0
            for kb in range(k_blocks):
                block_dots(wa + t * tile_bytes + kb * groups * NV * 64, qp + m * kpad + kb * block, groups, dp)
                s = sa[m, kb]
                qs = qsum[m, kb]
                for i in range(TILE):
                    acc[i] += (np.float32(dots[i]) - zp[t, kb, i] * qs) * (s * scales[t, kb, i])
            base = t * TILE
            for i in range(min(TILE, n - base)):
                out[m, base + i] = acc[i]
