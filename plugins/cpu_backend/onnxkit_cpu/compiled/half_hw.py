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
def _h2f(typingctx, bits):
    """float32 of the float16 pattern ``bits`` (uint16): LLVM ``fpext half -> float``."""
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return types.float32(types.uint16), codegen


@intrinsic
def _f2h(typingctx, value):
    """float16 pattern (uint16) of float32 ``value``: LLVM ``fptrunc float -> half``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return types.uint16(types.float32), codegen


@intrinsic
def _f32_of_bits(typingctx, bits):
    """The float32 whose pattern is ``bits`` (uint32)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


def _widen16(h, table, out):
    """``out[i]`` (float32) = float16 ``h[i]`` (uint16 patterns); ``table`` unused (the table
    loop's signature).  An exponent of all ones (inf, NaN) is rebuilt from the bits."""
    for i in range(h.shape[0]):
        x = h[i]
        b = np.uint32(x)
        special = _f32_of_bits(((b & np.uint32(0x8000)) << np.uint32(16)) | np.uint32(0x7f800000)
                               | ((b & np.uint32(0x3ff)) << np.uint32(13)))
        out[i] = special if (b & np.uint32(0x7c00)) == np.uint32(0x7c00) else _h2f(x)


def _narrow16(f, fv, out):
    """``out[i]`` (uint16 patterns of float16) = float32 ``fv[i]`` (``f`` its uint32 patterns)
    rounded to nearest even; a NaN as numpy (module docstring)."""
    for i in range(f.shape[0]):
        x = f[i]
        a = x & np.uint32(0x7fffffff)
        m = (a >> np.uint32(13)) & np.uint32(0x3ff)
        nan = ((x >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7c00) | m | np.uint32(m == np.uint32(0))
        out[i] = np.uint16(nan) if a > np.uint32(0x7f800000) else _f2h(fv[i])


widen16 = kernel(_widen16)
narrow16 = kernel(_narrow16)
