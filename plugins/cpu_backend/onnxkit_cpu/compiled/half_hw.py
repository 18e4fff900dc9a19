"""float16 <-> float32 by the processor's own conversion instructions (x86 F16C's ``vcvtph2ps`` /
``vcvtps2ph``: LLVM's ``fpext`` / ``fptrunc`` between ``half`` and ``float``, which the loops
below vectorize), with numpy's bits for NaN: imported by :mod:`.half` only where numba is
imported and its target has F16C (:func:`onnxkit_cpu.compiled.half.hardware`).

Same contract as :mod:`.half`'s table and bit-arithmetic loops, bit for bit (the tests run both
on every float16 pattern and on float32 patterns at every rounding boundary): the hardware
conversion rounds to nearest even, overflows to +/-inf and converts subnormals as IEEE 754
says; it differs from numpy only on NaN (it quiets a signalling NaN: it sets the significand's
high bit), so NaN lanes take numpy's pattern by a select (no branch): widening keeps the
float16 significand shifted into float32's high bits; narrowing keeps the sign and the
significand's 10 high bits, 0x7c01 with its sign where those are all 0.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic

from onnxkit_cpu.compiled import kernel


@intrinsic
def _h2f_bits(typingctx, bits):
    """The float32 pattern (zero-extended to uint64) of the float16 pattern ``bits`` (uint16):
    LLVM ``fpext half -> float``, bitcast."""
    def codegen(context, builder, signature, args):
        wide = builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
        return builder.zext(builder.bitcast(wide, ir.IntType(32)), ir.IntType(64))
    return types.uint64(types.uint16), codegen


@intrinsic
def _f2h(typingctx, value):
    """float16 pattern (uint16) of float32 ``value``: LLVM ``fptrunc float -> half``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return types.uint16(types.float32), codegen


@intrinsic
def _f32_of_bits(typingctx, bits):
    """The float32 whose pattern is the low 32 bits of ``bits`` (uint64)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.trunc(args[0], ir.IntType(32)), ir.FloatType())
    return types.float32(types.uint64), codegen


def _widen16(h, table, out):
    """``out[i]`` (float32) = float16 ``h[i]`` (uint16 patterns); ``table`` unused (the table
    loop's signature).  The hardware conversion of every lane, then the quiet bit the hardware
    sets on a signalling NaN (exponent all ones, significand's high bit clear: the pattern
    masked by 0x7e00 is 0x7c00) cleared, which gives numpy's pattern (the significand shifted);
    an infinity has that bit clear already.  No branch: the loop vectorizes."""
    for i in range(h.shape[0]):
        x = h[i]
        quiet = np.uint64((x & np.uint16(0x7e00)) == np.uint16(0x7c00)) << np.uint64(22)
        out[i] = _f32_of_bits(_h2f_bits(x) & ~quiet)


def _narrow16(f, fv, out):
    """``out[i]`` (uint16 patterns of float16) = float32 ``fv[i]`` (``f`` its uint32 patterns)
    rounded to nearest even; a NaN as numpy (module docstring): the hardware keeps a quiet NaN's
    significand's 10 high bits as numpy does; a signalling NaN (quiet bit 0x400000 clear) gets
    the quiet bit 0x200 set by the hardware, cleared here, and 0x7c01 where the 10 high bits are
    all 0.  Selects only (the loop vectorizes)."""
    for i in range(f.shape[0]):
        v = fv[i]
        hw = _f2h(v)
        signalling = (v != v) & ((f[i] & np.uint32(0x400000)) == np.uint32(0))
        fixed = (hw & np.uint16(0xfdff)) | np.uint16((hw & np.uint16(0x1ff)) == np.uint16(0))
        out[i] = fixed if signalling else hw


widen16 = kernel(_widen16)
narrow16 = kernel(_narrow16)
