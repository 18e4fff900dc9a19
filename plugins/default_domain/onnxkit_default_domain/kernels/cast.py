"""Type conversion of ai.onnx: Cast and CastLike (every backend).

Rules (the Cast definition, Clause 6.3):

* float -> integer truncates toward zero; integer -> integer keeps the low bits (two's
  complement wrap, e.g. 200 int16 -> -56 int8); a float out of the integer range is undefined:
  onnxkit gives the low bits of the truncated value, NaN and the infinities 0 (both backends).
* float -> INT4/UINT4/INT2/UINT2: round half to even (Clause 6.3.3), then keep the low bits of
  the rounded value (what 6.3.3 leaves unstated: onnxkit wraps as onnxruntime and the ONNX
  vectors do), so ``[2.5, 2.7, -2.7, 9.0] -> INT4`` is ``[2, 3, -3, -7]``; NaN and the
  infinities -> 0.
* -> BOOL: non-zero (NaN included) is True.  BOOL -> number: 1 / 0.
* -> FLOAT16/BFLOAT16/FLOAT/DOUBLE: one round to nearest even of the exact value (a DOUBLE or
  a wide integer is first rounded to float32 *to odd*, which keeps the second rounding exact).
  -> FLOAT8*, FLOAT4E2M1, FLOAT6*: :func:`onnxkit.narrow.convert` (one rounding of the exact
  value).  ``saturate`` (from 19) applies to the four FLOAT8 types: out of range (Inf
  included) becomes +/-max, else NaN (Inf for E5M2); FLOAT4/FLOAT6 always saturate.
* -> FLOAT8E8M0 (from 24): ``round_mode`` 'up' (default, toward +Inf), 'down' or 'nearest'
  (ties up) on the power of two; the sign is ignored.  Saturating: Inf and values above 2**127
  give 2**127, zero and values below 2**-127 give 2**-127; without ``saturate`` those give NaN,
  NaN gives NaN.
* STRING -> number: decimal or scientific notation, 'INF'/'+INF'/'-INF'/'NaN' in any case
  (BOOL also takes 'true'/'false'); integers parse exactly.  Number -> STRING: integers in
  decimal, BOOL '1'/'0', floats by their shortest round-trip text ('3', '0.1', '1e-07'), NaN
  'NaN', infinities 'INF'/'-INF'.  Strings are produced as ``str`` objects.

Cast 1 names the target type by name (a STRING attribute, 'FLOAT', 'INT64', ...); later
definitions give ``to`` as the DataType tag.  CastLike takes the element type of its second
input.  Conversions between the types of the backend's namespace (bool, the integers,
float16/bfloat16/float32/float64) are computed by the namespace (:func:`cast_values`); the
others (STRING, the 8/6/4/2-bit types) are host arithmetic on numpy and ml_dtypes
(:func:`cast_host`): nodes reading or producing those types run on the cpu backend.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import DataType, KernelTable, OnnxkitError, OnnxkitTypeError, arrays, element_type, from_numpy_dtype
from onnxkit.plugin.dtypes import by_name
from onnxkit.plugin.narrow import convert, from_codes

from .elementwise import as_array

KERNELS = KernelTable()

#: Element types the namespace path converts (every backend's namespace has some of them).
XP_TYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                      "float16", "bfloat16", "float32", "float64"})
_FLOAT8 = (DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2, DataType.FLOAT8E5M2FNUZ)
_ROUND_MODES = ("up", "down", "nearest")
_WIDE_SOURCES = frozenset({"float64", "int32", "int64", "uint32", "uint64"})


# -- attributes --------------------------------------------------------------------------------
def cast_target(ctx) -> int:
    """The element-type tag Cast's ``to`` attribute names (a type name in version 1)."""
    to = ctx.attr("to")
    try:
        if ctx.since_version == 1 or isinstance(to, (bytes, str)):
            return int(by_name(ctx.attr_str("to")).tag)
        return int(element_type(int(to)).tag)
    except (OnnxkitError, AttributeError, ValueError, TypeError) as exc:
        ctx.fail(f"invalid 'to' attribute {to!r}: {exc}")


def cast_options(ctx) -> tuple:
    """``(saturate, round_mode)``: ``saturate`` from 19 (else True), ``round_mode`` from 24."""
    saturate = bool(ctx.attr("saturate", 1)) if ctx.since_version >= 19 else True
    mode = ctx.attr_str("round_mode", "up") if ctx.since_version >= 24 else "up"
    if mode not in _ROUND_MODES:
        ctx.fail(f"round_mode must be one of {_ROUND_MODES}, got {mode!r}")
    return saturate, mode


def tag_of(dtype) -> int:
    """The ONNX element-type tag of a dtype of any namespace (numpy, ml_dtypes, torch)."""
    if isinstance(dtype, np.dtype):
        return int(from_numpy_dtype(dtype).tag)
    name = arrays.dtype_name(dtype)
    np_dtype = name
    if name == "bfloat16" or name.startswith("float8"):  # torch's narrow floats: numpy's twin is ml_dtypes'
        import ml_dtypes

        np_dtype = getattr(ml_dtypes, name, None)
    return int(from_numpy_dtype(np.dtype(np_dtype)).tag)


# -- between the namespace's types -------------------------------------------------------------
def f32_round_to_odd(xp, x64):
    """float64 -> float32 rounded to odd: exact values stay, inexact ones get the float32
    truncated toward zero with its last significand bit set.  A second rounding of that to a
    format of at most 22 significand bits (float16, bfloat16) is one correct rounding of x64."""
    f = xp.astype(x64, xp.float32)
    back = xp.astype(f, xp.float64)
    inexact = back != x64                                   # NaN too: it stays NaN below
    t = xp.where(xp.abs(back) > xp.abs(x64), xp.nextafter(f, xp.zeros_like(f)), f)   # toward zero
    a = xp.abs(t)
    ulp = xp.nextafter(a, xp.full_like(a, float("inf"))) - a
    odd = xp.remainder(a / ulp, 2.0) == 1.0                 # a / ulp: the significand, exactly
    away = xp.where(x64 < 0, xp.full_like(t, float("-inf")), xp.full_like(t, float("inf")))
    return xp.where(inexact & ~odd, xp.nextafter(t, away), t)


def truncated_int64(xp, x):
    """Floats truncated toward zero as int64: beyond +/-2**63 the low 64 bits of the integer,
    NaN and the infinities 0."""
    t = xp.trunc(xp.astype(x, xp.float64))
    w = t - 2.0 ** 64 * xp.floor(t * 2.0 ** -64)            # t mod 2**64, exactly (t is an integer)
    w = xp.where(w >= 2.0 ** 63, w - 2.0 ** 64, w)
    w = xp.where(xp.isfinite(w), w, xp.zeros_like(w))
    return xp.astype(xp.where(xp.abs(t) < 2.0 ** 63, t, w), xp.int64)


def cast_values(xp, x, dtype):
    """``x`` converted to ``dtype`` (both types of :data:`XP_TYPES` in namespace ``xp``) by the
    rules of Cast."""
    src, dst = arrays.dtype_name(x.dtype), arrays.dtype_name(dtype)
    if src == dst:
        return x
    if dst == "bool":
        return x != 0
    if src == "bool":
        return xp.astype(x, dtype)
    # numpy's floating-point flags (an overflow to inf, NaN in the wrap arithmetic) are the
    # rule's expected cases, not the caller's business: no RuntimeWarning leaks out of Cast
    with np.errstate(all="ignore"):
        if arrays.is_float(dtype):
            if dst in ("float16", "bfloat16") and src in _WIDE_SOURCES:
                return xp.astype(f32_round_to_odd(xp, xp.astype(x, xp.float64)), dtype)
            return xp.astype(x, dtype)
        if arrays.is_float(x.dtype):
            return xp.astype(truncated_int64(xp, x), dtype)
    return xp.astype(x, dtype)                              # integer -> integer: the low bits


# -- the other types (host arithmetic on numpy) ------------------------------------------------
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


def _standard(x: np.ndarray) -> np.ndarray:
    """A numeric host array with its values in a type of :data:`XP_TYPES` (exactly: the narrow
    floats in float32, the 4/2-bit integers in int64)."""
    if arrays.dtype_name(x.dtype) in XP_TYPES:
        return x
    return x.astype(np.float32 if from_numpy_dtype(x.dtype).is_float else np.int64)


def cast_numeric(x: np.ndarray, tag: int, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """``x`` (a numeric host array) converted to element type ``tag`` by the rules of Cast."""
    et = element_type(int(tag))
    if x.dtype == et.dtype:
        return x
    src_float = from_numpy_dtype(x.dtype).is_float
    x = _standard(x)
    with np.errstate(all="ignore"):
        if arrays.dtype_name(et.dtype) in XP_TYPES:
            import array_api_compat.numpy as np_xp

            return np.asarray(cast_values(np_xp, x, et.dtype))
        if et.is_complex:
            return x.astype(et.dtype)
        if et.tag == DataType.FLOAT8E8M0:
            return _to_e8m0(x, saturate, round_mode)
        if et.is_float:                           # FLOAT8*, FLOAT4E2M1, FLOAT6*
            if arrays.is_integer(x.dtype) and x.dtype.itemsize == 8:
                x = x.astype(np.float64)          # exact enough: one more rounding below 2**53
            return convert(x, et.tag, saturate=bool(saturate) or et.tag not in _FLOAT8)
        # INT4/UINT4/INT2/UINT2: fixed -> fixed keeps the low bits; float rounds half to even first
        v = _rounded_ints(x) if src_float else x.astype(np.int64)
        return from_codes((v & ((1 << et.bits) - 1)).astype(np.uint8), et.tag)


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
    name = arrays.dtype_name(x.dtype)
    if name == "bool":
        flat = ["1" if v else "0" for v in x.reshape(-1).tolist()]
    elif arrays.is_integer(x.dtype) and name in XP_TYPES:
        flat = [str(v) for v in x.reshape(-1).tolist()]
    elif name in ("float16", "float32", "float64"):
        flat = [_float_text(s) for s in x.reshape(-1).astype(str).tolist()]
    elif from_numpy_dtype(x.dtype).is_float:      # ml_dtypes floats: their values in float32
        flat = [_float_text(s) for s in x.astype(np.float32).reshape(-1).astype(str).tolist()]
    else:                                         # the 4/2-bit integers
        flat = [str(v) for v in x.astype(np.int64).reshape(-1).tolist()]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(x.shape)


def cast_host(ctx, x: np.ndarray, tag: int, saturate: bool, round_mode: str) -> np.ndarray:
    """``x`` (a host array of any element type) converted to element type ``tag``."""
    string_in = x.dtype == object or x.dtype.kind in "SU"
    if tag == DataType.STRING:
        if string_in:
            out = np.empty(x.shape, dtype=object)
            out.reshape(-1)[:] = [s if isinstance(s, str) else _text(s) for s in x.reshape(-1)]
            return out
        return to_strings(x)
    if string_in:
        return _from_strings(ctx, x, tag, saturate, round_mode)
    if arrays.is_complex(x.dtype):
        ctx.fail("complex input cannot be cast")
    try:
        return cast_numeric(x, tag, saturate, round_mode)
    except OnnxkitTypeError as exc:
        ctx.fail(str(exc))


# -- kernels -----------------------------------------------------------------------------------
def _namespace_dtype(ctx, tag: int):
    """The namespace's dtype of element type ``tag`` where the namespace path converts to it, else None."""
    et = element_type(tag)
    if arrays.dtype_name(et.dtype) not in XP_TYPES:
        return None
    return ctx.backend.dtype_of(et.dtype) if hasattr(ctx.backend, "dtype_of") else et.dtype


def _caster(ctx, saturate: bool, mode: str, values):
    """``cast(x, tag, dtype)``: by ``values`` (:func:`cast_values` or a backend's faster
    equivalent) where ``dtype`` (the namespace's dtype of tag, or None) and x's type allow,
    else on the host."""
    xp = ctx.xp

    def cast(x, tag, dtype):
        if dtype is not None and arrays.dtype_name(x.dtype) in XP_TYPES:
            return as_array(xp, values(xp, x, dtype))
        return ctx.from_host(cast_host(ctx, ctx.to_host(x), tag, saturate, mode))
    return cast


@KERNELS.register("Cast", 1, 6, 9, 13, 19, 21, 23, 24, 25, 28)
def cast(ctx, values=cast_values):
    """Cast; ``values``: how values are converted between the namespace's types."""
    tag = cast_target(ctx)
    run = _caster(ctx, *cast_options(ctx), values)
    dtype = _namespace_dtype(ctx, tag)
    return lambda x: run(x, tag, dtype)


@KERNELS.register("CastLike", 15, 19, 21, 23, 24, 25)
def cast_like(ctx, values=cast_values):
    """CastLike; ``values`` as for :func:`cast`."""
    run = _caster(ctx, *cast_options(ctx), values)

    def fn(x, like):
        name = arrays.dtype_name(like.dtype)
        return run(x, tag_of(like.dtype), like.dtype if name in XP_TYPES else None)
    return fn
