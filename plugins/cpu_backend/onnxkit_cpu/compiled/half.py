"""Compiled float16 <-> float32 conversions (overrides/half.py): numpy 2's ``astype`` between the
two converts element by element through a generic loop; widening here reads a table of the 65,536
float16 patterns' float32 values, narrowing works on the bit patterns (IEEE 754 binary16 /
binary32) with unsigned integer arithmetic and selects (no branch: the loop vectorizes), one pass each
(``widen16_table``, ``narrow16_table``).  ``widen16`` / ``narrow16`` give the processor's conversion
instructions instead where it has them (:func:`hardware`, :mod:`.half_hw`: the same bits, faster).

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

from onnxkit_cpu.compiled import host, kernel


def _widen16(h, table, out):
    """``out[i]`` (float32) = float16 ``h[i]`` (uint16 patterns) by ``table`` (the 65,536 float32
    values of the float16 patterns, numpy's own conversion: :func:`widening_table`)."""
    for i in range(h.shape[0]):
        out[i] = table[h[i]]


def _narrow16(f, fv, out):
    """``out[i]`` (uint16 patterns of float16) = float32 ``f[i]`` (``f`` its uint32 patterns,
    ``fv`` the same memory as float32) rounded to nearest even (module docstring), one pass
    without branches (it vectorizes): in float16's normal range by unsigned arithmetic on the
    pattern; below it (a subnormal or zero result) as ``rint(|x| * 2**24)``, exact product and
    rint's ties to even (only such values reach the product: no NaN or inf is converted); from
    2**16 on +/-inf, or NaN with its significand's 10 high bits (0x7c01 where those are all 0)."""
    for i in range(f.shape[0]):
        x = f[i]
        a = x & np.uint32(0x7fffffff)
        sign = (x >> np.uint32(16)) & np.uint32(0x8000)
        normal = (a - np.uint32(0x38000000) + np.uint32(0xfff) + ((a >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)
        tiny = a < np.uint32(0x38800000)                # below 2**-14
        v = np.abs(fv[i]) if tiny else np.float32(0.0)
        small = np.uint32(np.rint(v * np.float32(16777216.0)))
        m = (a >> np.uint32(13)) & np.uint32(0x3ff)
        big = (np.uint32(0x7c00) | m | np.uint32(m == np.uint32(0))) if a > np.uint32(0x7f800000) else np.uint32(0x7c00)
        out[i] = sign | (small if tiny else (normal if a < np.uint32(0x47800000) else big))


def widening_table():
    """float32 values of the 65,536 float16 bit patterns (numpy's conversion, once)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


widen16_table = kernel(_widen16)
narrow16_table = kernel(_narrow16)
_HARDWARE: list = []


def hardware():
    """:mod:`.half_hw` where numba's target is this host's processor and it has F16C (x86), else
    None; asked once, after numba is imported (the loops of this module are planned)."""
    if not _HARDWARE:
        if host.has("f16c"):
            from onnxkit_cpu.compiled import half_hw
            _HARDWARE.append(half_hw)
        else:
            _HARDWARE.append(None)
    return _HARDWARE[0]


class Chosen:
    """``get()``: the :mod:`.half_hw` loop ``name`` where :func:`hardware` is there, else the table
    / bit-arithmetic loop ``portable`` (a :class:`~onnxkit_cpu.compiled.Lazy`); None where that is
    (compiled loops off, a cold plan: :meth:`onnxkit_cpu.compiled.Lazy.get`)."""

    __slots__ = ("name", "portable")

    def __init__(self, name: str, portable):
        self.name, self.portable = name, portable

    def get(self):
        c = self.portable.get()
        if c is None:
            return None
        hw = hardware()
        return c if hw is None else getattr(hw, self.name).get()


widen16 = Chosen("widen16", widen16_table)
narrow16 = Chosen("narrow16", narrow16_table)
