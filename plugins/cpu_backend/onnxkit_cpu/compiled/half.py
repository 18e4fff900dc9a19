"""Compiled float16 <-> float32 conversions (overrides/half.py): numpy 2's ``astype`` between the
two converts element by element through a generic loop; widening here reads a table of the 65,536
float16 patterns' float32 values, narrowing works on the bit patterns (IEEE 754 binary16 /
binary32) with unsigned integer arithmetic, one pass each.

Precision: exactly numpy's conversion, bit for bit (plugins/cpu_backend/tests/test_half_precision.py
compares every float16 pattern, and float32 patterns at every rounding boundary):

* widening is exact: normal and subnormal float16 values, +/-0, +/-inf, NaN with its payload
  shifted into the float32 significand's high bits;
* narrowing rounds to nearest, ties to even, into the float16 normal and subnormal range;
  a magnitude that rounds beyond 65504 is +/-inf; NaN keeps its sign and its significand's 10 high
  bits (a NaN whose high bits are all zero becomes the pattern 0x7c01 with its sign), as numpy's
  ``npy_floatbits_to_halfbits``.
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import kernel


def _widen16(h, table, out):
    """``out[i]`` (float32) = float16 ``h[i]`` (uint16 patterns) by ``table`` (the 65,536 float32
    values of the float16 patterns, numpy's own conversion: :func:`widening_table`)."""
    for i in range(h.shape[0]):
        out[i] = table[h[i]]


def _narrow16(f, out):
    """``out[i]`` (uint16 patterns of float16) = float32 ``f[i]`` (uint32 patterns) rounded to
    nearest even (module docstring); unsigned 32-bit arithmetic throughout."""
    for i in range(f.shape[0]):
        x = f[i]
        sign = (x >> np.uint32(16)) & np.uint32(0x8000)
        a = x & np.uint32(0x7fffffff)
        if a >= np.uint32(0x47800000):          # at least 2**16, inf, NaN
            o = np.uint32(0x7c00)
            if a > np.uint32(0x7f800000):       # NaN: its 10 high significand bits, never 0
                hm = (a >> np.uint32(13)) & np.uint32(0x3ff)
                o |= hm if hm != np.uint32(0) else np.uint32(1)
        elif a >= np.uint32(0x38800000):        # a float16 normal (a carry may reach the next binade or inf)
            o = (a - np.uint32(0x38000000) + np.uint32(0xfff) + ((a >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)
        else:
            e = a >> np.uint32(23)
            if e < np.uint32(102):              # below half the smallest subnormal: +/-0
                o = np.uint32(0)
            else:                               # a float16 subnormal (or the smallest normal, by rounding)
                full = (a & np.uint32(0x7fffff)) | np.uint32(0x800000)
                shift = np.uint32(126) - e
                o = full >> shift
                rem = full & ((np.uint32(1) << shift) - np.uint32(1))
                half = np.uint32(1) << (shift - np.uint32(1))
                if rem > half or (rem == half and (o & np.uint32(1)) == np.uint32(1)):
                    o += np.uint32(1)
        out[i] = o | sign


def widening_table():
    """float32 values of the 65,536 float16 bit patterns (numpy's conversion, once)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


widen16 = kernel(_widen16)
narrow16 = kernel(_narrow16)
