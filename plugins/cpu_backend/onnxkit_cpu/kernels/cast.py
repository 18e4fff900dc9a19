"""Type conversion of ai.onnx: Cast 1 6 9 13 19 21 23 24 25 28 and CastLike 15 19 21 23 24 25.

Rules (the Cast definition, Clause 6.3):

* float -> integer (8 bits and wider) truncates toward zero; integer -> integer keeps the low
  bits (two's complement wrap, e.g. 200 int16 -> -56 int8), the 2- and 4-bit integer types
  included; a float out of the integer range (or NaN) is undefined: the low bits of the
  truncated value.
* float -> INT4/UINT4/INT2/UINT2: round half to even (Clause 6.3.3), then keep the low bits of
  the rounded value (what 6.3.3 leaves unstated: onnxkit wraps as onnxruntime and the ONNX 1-3
  vectors do), so ``[2.5, 2.7, -2.7, 9.0] -> INT4`` is ``[2, 3, -3, -7]``; NaN and the
  infinities -> 0.
* -> BOOL: non-zero (NaN included) is True.  BOOL -> number: 1 / 0.
* -> FLOAT16/FLOAT/DOUBLE: one round to nearest even (IEEE overflow to +/-Inf).
  -> BFLOAT16, FLOAT8*, FLOAT4E2M1, FLOAT6*: :func:`onnxkit.narrow.convert` (one rounding of
  the exact value).  ``saturate`` (19+) applies to the four FLOAT8 types: out of range (Inf
  included) becomes +/-max, else NaN (Inf for E5M2); FLOAT4/FLOAT6 always saturate.
* -> FLOAT8E8M0 (24+): ``round_mode`` 'up' (default, toward +Inf), 'down' or 'nearest' (ties
  up) on the power of two; the sign is ignored (negative input is undefined).  Saturating:
  Inf and values above 2**127 give 2**127, zero and values below 2**-127 give 2**-127;
  without ``saturate`` those give NaN (the definition's table), NaN gives NaN.
* STRING -> number: decimal or scientific notation, 'INF'/'+INF'/'-INF'/'NaN' in any case
  (BOOL also takes 'true'/'false'); integers parse exactly.  Number -> STRING: integers in
  decimal, BOOL '1'/'0', floats by their shortest round-trip text ('3', '0.1', '1e-07'),
  NaN 'NaN', infinities 'INF'/'-INF'.  Strings are produced as ``str`` objects.

Cast 1 names the target type by name (a STRING attribute, 'FLOAT', 'INT64', ...); from 6 on
``to`` is the DataType tag.  CastLike takes the element type of its second input.
"""

from __future__ import annotations

import numpy as np

from onnxkit.dtypes import DataType, by_name, element_type, from_numpy_dtype
from onnxkit.errors import OnnxkitTypeError
from onnxkit.narrow import convert, from_codes
from onnxkit.runtime import KernelTable

KERNELS = KernelTable()

_NUMPY_FLOATS = (DataType.FLOAT16, DataType.FLOAT, DataType.DOUBLE)
_FLOAT8 = (DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2, DataType.FLOAT8E5M2FNUZ)
_ROUND_MODES = ("up", "down", "nearest")


# ----------------------------------------------------------------------------- numbers
def _to_e8m0(x: np.ndarray, saturate: bool, mode: str) -> np.ndarray:
    """FLOAT8E8M0 codes (value 2**(code-127), 255 = NaN) rounded per ``mode``."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    code = np.full(a.shape, 255, dtype=np.int64)
    fin = np.isfinite(a) & (a > 0)
    m, e = np.frexp(a[fin])                       # a = m * 2**e, 0.5 <= m < 1
    c = e.astype(np.int64) + 126                  # the code of 2**floor(log2 a)
    if mode == "up":
        c += m > 0.5
    elif mode == "nearest":
        c += m >= 0.75
    lo, hi = (0, 254) if saturate else (255, 255)
    code[fin] = np.where(c < 0, lo, np.where(c > 254, hi, c))
    code[a == 0] = lo
    code[np.isposinf(a)] = hi
    return code.astype(np.uint8).view(element_type(DataType.FLOAT8E8M0).dtype)


def _rounded_ints(x: np.ndarray) -> np.ndarray:
    """The integer values of float ``x``, rounded half to even, as int64 (NaN and +/-inf -> 0;
    beyond int64: the low 64 bits of the value, which is all a narrow target keeps)."""
    t = np.rint(x.astype(np.float64))
    t[~np.isfinite(t)] = 0
    big = np.abs(t) >= 2.0 ** 63
    if big.any():
        t[big] = np.fmod(t[big], 2.0 ** 64)
        t[t >= 2.0 ** 63] -= 2.0 ** 64
        t[t < -2.0 ** 63] += 2.0 ** 64
    return t.astype(np.int64)


def cast_numeric(x: np.ndarray, tag: int, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """``x`` (a numeric array) converted to element type ``tag`` by the rules of Cast."""
    et = element_type(int(tag))
    src = x.dtype
    if src == et.dtype:
        return x
    with np.errstate(all="ignore"):
        if et.tag == DataType.BOOL:
            return np.asarray((x.astype(np.float32) if src.kind == "V" else x) != 0)
        if et.tag in _NUMPY_FLOATS:
            return x.astype(et.dtype)
        if et.tag == DataType.FLOAT8E8M0:
            return _to_e8m0(x, saturate, round_mode)
        if et.is_float:                           # BFLOAT16, FLOAT8*, FLOAT4E2M1, FLOAT6*
            if src.kind in "ui" and src.itemsize == 8:
                x = x.astype(np.float64)          # exact enough: one more rounding below 2**53
            return convert(x, et.tag, saturate=bool(saturate) or et.tag not in _FLOAT8)
        if et.is_narrow:
            if src.kind in "iub" or not from_numpy_dtype(src).is_float:  # fixed -> fixed: the low bits
                return from_codes((x.astype(np.int64) & ((1 << et.bits) - 1)).astype(np.uint8), et.tag)
            # float -> INT4/UINT4/INT2/UINT2: round half to even (6.3.3), then the low bits
            v = _rounded_ints(x.astype(np.float32) if src.kind == "V" else x)
            return from_codes((v & ((1 << et.bits) - 1)).astype(np.uint8), et.tag)
        # wider integer target: numpy truncates floats and wraps integers
        if src.kind == "V" and from_numpy_dtype(src).is_float:
            x = x.astype(np.float32)
        return x.astype(et.dtype)                 # numpy truncates floats and wraps integers


# ----------------------------------------------------------------------------- strings
def _text(s) -> str:
    return (s.decode("utf-8", "surrogateescape") if isinstance(s, (bytes, bytearray)) else str(s)).strip()


def _parse_float(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        return float(int(s, 0))                   # 0x.., 0o.., 0b.. (ValueError otherwise)


def _parse_int(s: str) -> int:
    try:
        return int(s)
    except ValueError:
        f = _parse_float(s)                       # '2.7' -> 2 (undefined by the definition)
        return int(f) if np.isfinite(f) else 0


def _from_strings(ctx, x: np.ndarray, tag: int, saturate: bool, round_mode: str) -> np.ndarray:
    et = element_type(int(tag))
    texts = [_text(s) for s in x.reshape(-1)]
    try:
        if et.tag == DataType.BOOL:
            vals = [t.lower() == "true" or (t.lower() != "false" and _parse_float(t) != 0) for t in texts]
            return np.array(vals, dtype=np.bool_).reshape(x.shape)
        if et.is_float:
            f = np.array([_parse_float(t) for t in texts], dtype=np.float64).reshape(x.shape)
            return cast_numeric(f, tag, saturate, round_mode)
        mask = (1 << et.bits) - 1
        half = 1 << (et.bits - 1)
        ints = [_parse_int(t) & mask for t in texts]
        if et.is_signed:
            ints = [v - (mask + 1) if v >= half else v for v in ints]
        if et.is_narrow:
            return from_codes(np.array([v & mask for v in ints], dtype=np.uint8).reshape(x.shape), et.tag)
        return np.array(ints, dtype=et.dtype).reshape(x.shape)
    except ValueError as exc:
        ctx.fail(f"cannot convert a string to {et.name}: {exc}")


_SPECIAL = {"nan": "NaN", "-nan": "NaN", "inf": "INF", "-inf": "-INF"}


def _float_text(s: str) -> str:
    s = _SPECIAL.get(s, s)
    return s[:-2] if s.endswith(".0") else s


def to_strings(x: np.ndarray) -> np.ndarray:
    """Number -> STRING (object array of ``str``)."""
    k = x.dtype.kind
    if k == "b":
        flat = ["1" if v else "0" for v in x.reshape(-1).tolist()]
    elif k in "iu":
        flat = [str(v) for v in x.reshape(-1).tolist()]
    elif k == "f":
        flat = [_float_text(s) for s in x.reshape(-1).astype(str).tolist()]
    else:                                          # ml_dtypes: narrow integers or floats
        if from_numpy_dtype(x.dtype).is_float:
            flat = [_float_text(s) for s in x.astype(np.float32).reshape(-1).astype(str).tolist()]
        else:
            flat = [str(v) for v in x.astype(np.int64).reshape(-1).tolist()]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(x.shape)


# ----------------------------------------------------------------------------- kernels
def _cast(ctx, x, tag, saturate, round_mode):
    string_in = x.dtype == object or x.dtype.kind in "SU"
    if tag == DataType.STRING:
        if string_in:
            out = np.empty(x.shape, dtype=object)
            out.reshape(-1)[:] = [_text(s) if not isinstance(s, str) else s for s in x.reshape(-1)]
            return out
        return to_strings(x)
    if string_in:
        return _from_strings(ctx, x, tag, saturate, round_mode)
    if x.dtype.kind == "c":
        ctx.fail("complex input cannot be cast")
    return cast_numeric(x, tag, saturate, round_mode)


def _options(ctx):
    saturate = bool(ctx.attr("saturate", 1)) if ctx.since_version >= 19 else True
    mode = ctx.attr_str("round_mode", "up") if ctx.since_version >= 24 else "up"
    if mode not in _ROUND_MODES:
        ctx.fail(f"round_mode must be one of {_ROUND_MODES}, got {mode!r}")
    return saturate, mode


def cast_target(ctx):
    """The element-type tag Cast's ``to`` attribute names (a type name in version 1)."""
    to = ctx.attr("to")
    try:
        if ctx.since_version == 1 or isinstance(to, (bytes, str)):
            name = to.decode() if isinstance(to, bytes) else str(to)
            tag = by_name(name).tag
        else:
            tag = element_type(int(to)).tag
    except (OnnxkitTypeError, AttributeError, ValueError, TypeError) as exc:
        ctx.fail(f"invalid 'to' attribute {to!r}: {exc}")
    return tag


@KERNELS.register("Cast", 1, 6, 9, 13, 19, 21, 23, 24, 25, 28)
def _cast_kernel(ctx):
    tag = cast_target(ctx)
    saturate, mode = _options(ctx)
    return lambda x: _cast(ctx, x, tag, saturate, mode)


@KERNELS.register("CastLike", 15, 19, 21, 23, 24, 25)
def _cast_like_kernel(ctx):
    saturate, mode = _options(ctx)

    def run(x, like):
        return _cast(ctx, x, from_numpy_dtype(like.dtype).tag, saturate, mode)
    return run
