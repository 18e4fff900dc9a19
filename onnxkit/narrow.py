"""Reduced-precision element types (Clause 6.3): bit patterns, packing and conversion.

Three layers, all vectorised with numpy (no per-element Python loop):

* **codes** -- an element of a type of width ``w <= 8`` bits is identified with its ``w``-bit
  pattern, held in a ``uint8`` (``to_codes`` / ``from_codes``).  For the narrow integer
  types the code is the two's-complement pattern (INT4 -1 is ``0b1111``).
* **raw storage** (Clause 6.3.4, 2nd paragraph) -- ``pack_bits`` / ``unpack_bits``: the codes
  as a little-endian bit stream, each element in the next free bits of the current octet
  counting from its least significant bit; ``ceil(N * w / 8)`` octets, padding bits zero on
  write and ignored on read.
* **typed storage** (Clause 6.3.4, Table 7) -- ``pack_typed`` / ``unpack_typed``: 32-bit
  integers carrying 4 (2-bit), 2 (4-bit) or 1 (6-bit) elements in their low octet.

``convert`` converts values to any element type with the rounding Clauses 6.3.2 and 6.3.3
require (round to nearest, ties to even) and onnxkit's documented choices where the
clauses leave the result open.
"""

from __future__ import annotations

import math
from typing import Union

import numpy as np

from .dtypes import DataType, ElementType, element_type, from_numpy_dtype
from .errors import OnnxkitTypeError

__all__ = [
    "pack_bits", "unpack_bits", "packed_size", "to_codes", "from_codes",
    "pack_typed", "unpack_typed", "typed_count", "TYPED_PER_INT32", "convert",
]

#: Table 7: element width in bits -> elements carried by one 32-bit integer of typed storage.
TYPED_PER_INT32 = {2: 4, 4: 2, 6: 1}


def _row(elem_type: Union[int, ElementType]) -> ElementType:
    return elem_type if isinstance(elem_type, ElementType) else element_type(int(elem_type))


def _check_bits(bits: int) -> int:
    if not isinstance(bits, (int, np.integer)) or not 1 <= int(bits) <= 8:
        raise OnnxkitTypeError(f"bit width must be an integer from 1 to 8, got {bits!r}")
    return int(bits)


# ----------------------------------------------------------------------------- raw storage

def packed_size(count: int, bits: int) -> int:
    """Octets of raw storage for ``count`` elements of ``bits`` bits: ceil(count*bits/8) (6.3.4)."""
    return (int(count) * _check_bits(bits) + 7) // 8


def _layout(bits: int):
    """One period of the bit stream: ``g`` elements filling ``nb`` whole octets, and for each
    element its (octet, shift) -- the element starts at bit ``shift`` of octet ``octet``."""
    nb = bits // math.gcd(bits, 8)          # octets per period (lcm(bits, 8) / 8)
    g = nb * 8 // bits                      # elements per period
    return nb, g, [divmod(i * bits, 8) for i in range(g)]


def pack_bits(codes, bits: int) -> bytes:
    """Raw storage (Clause 6.3.4) of ``codes``: the ``bits``-bit patterns, in order.

    ``codes`` is any integer array (flattened in C order) whose values fit in ``bits`` bits;
    a larger value raises :class:`OnnxkitTypeError`.  Returns ``ceil(N*bits/8)`` octets, each
    element occupying the next free bits of the current octet counting from its least
    significant bit; the padding bits of the final octet are zero.
    """
    bits = _check_bits(bits)
    c = np.asarray(codes).reshape(-1)
    if c.size and (c.dtype.kind not in "uib" or int(c.min()) < 0 or int(c.max()) >> bits):
        raise OnnxkitTypeError(f"codes do not fit in {bits} bits (values must be 0..{(1 << bits) - 1})")
    n = c.size
    nb, g, where = _layout(bits)
    groups = -(-n // g)
    padded = np.zeros(groups * g, dtype=np.uint8)   # zero padding -> zero padding bits
    padded[:n] = c
    padded = padded.reshape(groups, g)
    out = np.zeros((groups, nb), dtype=np.uint8)
    for i, (octet, shift) in enumerate(where):
        col = padded[:, i]
        out[:, octet] |= col << np.uint8(shift)     # uint8 arithmetic drops the bits above 7
        if shift + bits > 8:                        # the element straddles two octets
            out[:, octet + 1] |= col >> np.uint8(8 - shift)
    return out.reshape(-1)[: packed_size(n, bits)].tobytes()


def unpack_bits(buf, bits: int, count: int) -> np.ndarray:
    """The ``count`` codes (``uint8``) in the raw storage ``buf`` (bytes-like), per Clause 6.3.4.

    Padding bits and octets past ``ceil(count*bits/8)`` are ignored.  A ``buf`` shorter than
    that raises :class:`OnnxkitTypeError` stating both sizes.
    """
    bits = _check_bits(bits)
    count = int(count)
    need = packed_size(count, bits)
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.format not in ("B", "b", "c"):
        mv = mv.cast("B")
    if mv.nbytes < need:
        raise OnnxkitTypeError(
            f"packed {bits}-bit data too short: {count} elements need {need} octets, got {mv.nbytes}")
    nb, g, where = _layout(bits)
    groups = -(-count // g)
    raw = np.zeros(groups * nb, dtype=np.uint8)
    raw[:need] = np.frombuffer(mv, dtype=np.uint8, count=need)
    raw = raw.reshape(groups, nb)
    mask = np.uint8((1 << bits) - 1)
    out = np.empty((groups, g), dtype=np.uint8)
    for i, (octet, shift) in enumerate(where):
        col = raw[:, octet] >> np.uint8(shift)
        if shift + bits > 8:
            col = col | (raw[:, octet + 1] << np.uint8(8 - shift))
        out[:, i] = col & mask
    return out.reshape(-1)[:count]


# ----------------------------------------------------------------------------- typed storage

def typed_count(count: int, bits: int) -> int:
    """Number of 32-bit integers typed storage uses for ``count`` elements of width ``bits`` (Table 7)."""
    per = TYPED_PER_INT32.get(bits)
    if per is None:
        raise OnnxkitTypeError(f"Table 7 defines typed storage for 2-, 4- and 6-bit types only, not {bits}-bit")
    return -(-int(count) // per)


def pack_typed(codes, bits: int) -> np.ndarray:
    """Typed storage (Table 7) of ``codes``: an ``int32`` array, element ``k*per + i`` in bits
    ``i*bits .. i*bits+bits-1`` of integer ``k``; every other bit zero (6.3.4)."""
    typed_count(0, bits)  # validates bits
    per = TYPED_PER_INT32[bits]
    c = np.asarray(codes).reshape(-1)
    if c.size and (c.dtype.kind not in "uib" or int(c.min()) < 0 or int(c.max()) >> bits):
        raise OnnxkitTypeError(f"codes do not fit in {bits} bits (values must be 0..{(1 << bits) - 1})")
    n = c.size
    padded = np.zeros(typed_count(n, bits) * per, dtype=np.int32)
    padded[:n] = c
    padded = padded.reshape(-1, per)
    out = padded[:, 0].copy()
    for i in range(1, per):
        out |= padded[:, i] << (i * bits)
    return out


def unpack_typed(ints, bits: int, count: int) -> np.ndarray:
    """The ``count`` codes (``uint8``) carried by the 32-bit integers ``ints`` (Table 7).

    The number of integers must be exactly ``ceil(count / per)``; otherwise
    :class:`OnnxkitTypeError`.  Bits outside those Table 7 assigns to elements SHALL be zero
    (6.3.4); onnxkit does not reject a tensor that sets them, it ignores them.
    """
    need = typed_count(count, bits)
    a = np.asarray(ints).reshape(-1)
    if a.size != need:
        raise OnnxkitTypeError(
            f"typed storage of {count} {bits}-bit elements needs {need} 32-bit integers, got {a.size}")
    per = TYPED_PER_INT32[bits]
    a = a.astype(np.int64)
    out = np.empty((need, per), dtype=np.uint8)
    for i in range(per):
        out[:, i] = (a >> (i * bits)) & ((1 << bits) - 1)
    return out.reshape(-1)[: int(count)]


# ----------------------------------------------------------------------------- codes

def to_codes(arr) -> np.ndarray:
    """The ``w``-bit patterns (``uint8``, same shape) of an array of a type at most 8 bits wide.

    Works for the narrow ml_dtypes types (int2/uint2/int4/uint4/float4_e2m1fn/float6_*), the
    FP8 types, float8_e8m0fnu, int8/uint8 and bool.  Narrow integers give their
    two's-complement pattern (INT4 -1 -> 0b1111).
    """
    a = np.asarray(arr)
    et = from_numpy_dtype(a.dtype)
    if not 0 < et.bits <= 8:
        raise OnnxkitTypeError(f"to_codes needs a type of at most 8 bits, got {et.name} ({et.bits} bits)")
    u = np.ascontiguousarray(a).view(np.uint8)
    return u & np.uint8((1 << et.bits) - 1) if et.bits < 8 else u.copy()


def from_codes(codes, elem_type) -> np.ndarray:
    """The array of element type ``elem_type`` (at most 8 bits wide) whose bit patterns are ``codes``.

    ``codes`` values must fit in the type's width (BOOL: 0 or 1); otherwise
    :class:`OnnxkitTypeError`.
    """
    et = _row(elem_type)
    if not 0 < et.bits <= 8:
        raise OnnxkitTypeError(f"from_codes needs a type of at most 8 bits, got {et.name}")
    c = np.asarray(codes)
    limit = 1 if et.tag == DataType.BOOL else (1 << et.bits) - 1
    if c.size and (c.dtype.kind not in "uib" or int(c.min()) < 0 or int(c.max()) > limit):
        raise OnnxkitTypeError(f"codes out of range for {et.name}: values must be 0..{limit}")
    return np.ascontiguousarray(c.astype(np.uint8, copy=False)).view(et.dtype)


# ----------------------------------------------------------------------------- conversion

_SATURABLE = {DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2,
              DataType.FLOAT8E5M2FNUZ, DataType.FLOAT4E2M1, DataType.FLOAT6E2M3, DataType.FLOAT6E3M2}


def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd, so that a further round-to-nearest-even to a format
    of at most 22 significand bits equals one correct rounding of ``x`` (no double rounding).
    ml_dtypes converts float64 through float32 with RNE twice, which is wrong at ties."""
    f = x.astype(np.float32)
    inexact = np.isfinite(x) & (f.astype(np.float64) != x)
    if inexact.any():
        t = f[inexact]
        xs = x[inexact]
        over = np.abs(t.astype(np.float64)) > np.abs(xs)      # RNE rounded away from zero
        t[over] = np.nextafter(t[over], np.float32(0))        # -> truncated toward zero
        f[inexact] = (t.view(np.uint32) | np.uint32(1)).view(np.float32)
    return f


def _to_e8m0(x: np.ndarray, saturate: bool) -> np.ndarray:
    """FLOAT8E8M0 (value 2**(code-127), code 255 = NaN) by round to nearest, ties to even code.

    Choices (6.3.2 leaves them open): NaN and negative values -> NaN (the type has no sign);
    zero and values below 2**-127 -> code 0 (2**-127, the nearest representable value);
    above 2**127 -> 2**127 if ``saturate`` else NaN; +inf likewise.
    """
    x = np.asarray(x, dtype=np.float64)
    code = np.full(x.shape, 255, dtype=np.int64)
    pos = np.isfinite(x) & (x > 0)
    m, e = np.frexp(x[pos])                   # x = m * 2**e, 0.5 <= m < 1
    s, k = 2.0 * m, e - 1                     # x = s * 2**k, 1 <= s < 2
    c = k + 127
    up = (s > 1.5) | ((s == 1.5) & (c % 2 == 1))   # halfway: the even code wins
    c = c + up
    top = 254 if saturate else 255
    code[pos] = np.where(c > 254, top, np.maximum(c, 0))
    code[x == 0] = 0
    code[np.isposinf(x)] = top
    return code.astype(np.uint8).view(element_type(DataType.FLOAT8E8M0).dtype)


def integer_range(et: ElementType):
    """``(lowest, highest)`` of an integer element type (INT4 and the 2-bit types included), None
    for the others."""
    if not et.is_integral:
        return None
    return (-(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1) if et.is_signed else (0, (1 << et.bits) - 1)


def _to_int(x: np.ndarray, et: ElementType) -> np.ndarray:
    """Round to nearest, ties to even, then clamp to the range of ``et``; NaN -> 0."""
    lo, hi = integer_range(et)
    src = x.dtype
    if src.kind in "ub":
        if src.kind == "b" or np.iinfo(src).max <= hi:
            return x.astype(et.dtype)
        return np.minimum(x, np.asarray(hi, dtype=src)).astype(et.dtype)
    if src.kind == "i":
        info = np.iinfo(src)
        if info.min >= lo and info.max <= hi:
            return x.astype(et.dtype)
        return np.clip(x, max(lo, int(info.min)), min(hi, int(info.max))).astype(et.dtype)
    r = np.rint(x if src in (np.float32, np.float64) else x.astype(np.float64))  # exact widening
    out = np.zeros(r.shape, dtype=et.dtype)
    ok = ~np.isnan(r)
    inside = ok & (r >= float(lo)) & (r < float(hi) + 1.0)   # both bounds exact in float64
    out[inside] = r[inside].astype(et.dtype)
    out[ok & (r < float(lo))] = lo
    out[ok & (r >= float(hi) + 1.0)] = hi
    return out


def convert(arr, elem_type, saturate: bool = True) -> np.ndarray:
    """``arr`` converted to the element type ``elem_type``.  Contract:

    * Conversion to a floating-point type rounds to nearest, ties to even (Clause 6.3.2), with
      one rounding of the exact input (no double rounding through float32).
    * Out of range, narrow floats (Clause 6.3.2 leaves saturation to the operator): with
      ``saturate=True`` a magnitude above the largest finite value (infinities included)
      becomes that value with the operand's sign; with ``saturate=False`` the result is the
      IEEE-style RNE result: NaN for FLOAT8E4M3FN/FNUZ and FLOAT8E5M2FNUZ, Inf for FLOAT8E5M2.
      FLOAT4E2M1 and FLOAT6* have neither Inf nor NaN and always saturate; NaN converts to them
      as -0 (what ml_dtypes and the ONNX reference Cast give -- the clause is silent).
    * FLOAT8E8M0: see :func:`_to_e8m0` (NaN/negative -> NaN, 0 -> 2**-127).
    * FLOAT16/BFLOAT16/FLOAT/DOUBLE follow IEEE overflow to Inf; ``saturate`` does not apply.
    * Integer targets, narrow or not: round to nearest, ties to even (Clause 6.3.3), then
      **clamp** to the target range -- onnxkit's answer to the open question in 6.3.3: an
      out-of-range value becomes the range bound of the same sign (never wraps); NaN -> 0.
    * BOOL: non-zero -> True.  Complex -> real raises (imaginary part would be lost).
    """
    et = _row(elem_type)
    x = np.asarray(arr)
    if et.tag == DataType.STRING or x.dtype.kind in "USO":
        if et.tag == DataType.STRING and x.dtype.kind in "USO":
            return x.astype(object)
        raise OnnxkitTypeError(f"cannot convert {x.dtype} to {et.name}: only strings convert to/from STRING")
    if x.dtype == et.dtype:
        return x.copy()
    if x.dtype.kind == "c" and not et.is_complex:
        raise OnnxkitTypeError(f"cannot convert complex values to {et.name}: the imaginary part would be lost")
    if et.is_complex:
        return x.astype(et.dtype)
    if et.tag == DataType.BOOL:
        return x != 0
    if not et.is_float:
        return _to_int(x, et)
    # Floating-point target.  Bring the source to float32/float64 exactly where possible.
    if x.dtype not in (np.float16, np.float32, np.float64):
        x = x.astype(np.float64)       # exact for ml_dtypes floats, bool and |int| <= 2**53
    if et.tag == DataType.FLOAT8E8M0:
        return _to_e8m0(x, saturate)
    if et.tag in (DataType.FLOAT16, DataType.FLOAT, DataType.DOUBLE):
        return x.astype(et.dtype)      # numpy converts with a single RNE
    if x.dtype == np.float64:
        x = _round_to_odd_f32(x)
    if saturate or et.tag in (DataType.FLOAT4E2M1, DataType.FLOAT6E2M3, DataType.FLOAT6E3M2):
        if et.tag in _SATURABLE:
            import ml_dtypes  # (a narrow float: et.dtype has imported it already)

            big = float(ml_dtypes.finfo(et.dtype).max)
            x = np.clip(x, -big, big)  # NaN stays NaN
    return x.astype(et.dtype)
