"""Element-wise math and logic of ai.onnx (numpy, multidirectional broadcasting, Clause 6.6).

Operators and the since_versions implemented (every definition of opsets 1..28):

* unary math: Abs 1 6 13, Neg 1 6 13, Ceil 1 6 13, Floor 1 6 13, Sqrt 1 6 13, Exp 1 6 13,
  Log 1 6 13, Reciprocal 1 6 13, Sin/Cos/Tan/Asin/Acos/Atan 7 22, Sinh/Cosh/Asinh/Acosh/Atanh 9 22,
  Round 11 22 (half to even), Sign 9 13, Erf 9 13, IsNaN 9 13 20, IsInf 10 20, Not 1,
  BitwiseNot 18, Identity 1 13 14 16 19 21 23 24 25 (tensors, sequences, optionals);
* binary arithmetic: Add/Sub/Mul/Div 1 6 7 13 14, Pow 1 7 12 13 15, Mod 10 13 28,
  BitShift 11 28, BitwiseAnd/BitwiseOr/BitwiseXor 18;
* comparison and logic: Equal 1 7 11 13 19, Greater 1 7 9 13, Less 1 7 9 13,
  GreaterOrEqual 12 16, LessOrEqual 12 16, And/Or/Xor 1 7;
* variadic: Max 1 6 8 12 13, Min 1 6 8 12 13, Sum 1 6 8 13, Mean 1 6 8 13;
* Clip 1 6 (``min``/``max`` attributes) and 11 12 13 (optional inputs); Where 9 16.

Version notes.  Definitions before 7 of the binary operators carry ``broadcast``/``axis``
(limited broadcasting: B is aligned with A starting at ``axis``, suffix matching when it is
unset; with ``broadcast=0`` the shapes must be equal); ``consumed_inputs`` is ignored.
Max/Min/Sum/Mean before 8 require equal shapes.  Clip 1/6 without ``min``/``max`` on the node
leave that side unbounded (the type's numeric limits).  Integer Div truncates toward zero;
Mod ``fmod=0`` takes the divisor's sign.  BitShift implements the definition of 28 (signed
types; a shift < 0 or >= the width gives the sign-fill: -1 for RIGHT of a negative X, else 0),
which is also what 11 leaves undefined.  Types without native numpy loops (bfloat16, float8)
are computed in float32 and rounded back (Sum and Mean also accumulate float16 in float32);
outputs keep the input element type.  Erf: float64 to < 1e-15 relative, float32 to ~5e-7.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.runtime import KernelTable

KERNELS = KernelTable()
_IGNORE = {"all": "ignore"}


def _arr(r):
    """ufuncs return numpy scalars for 0-d operands; kernels return arrays."""
    return r if type(r) is np.ndarray else np.asarray(r)


def _is_ml(dt) -> bool:
    """A type ml_dtypes provides (bfloat16, float8, ...): computed through float32."""
    return dt.kind == "V"


# ----------------------------------------------------------------------------- erf
# float64: Taylor polynomials of degree 14 centred on 0, 0.25, ..., 6 (relative error < 1e-15):
# erf^(k)(c) = 2/sqrt(pi) * (-1)^(k-1) * H_{k-1}(c) * exp(-c^2), H the Hermite polynomials.
# Centre 0 is the Maclaurin series, so tiny arguments keep their relative accuracy.
_ERF_H, _ERF_TOP, _ERF_K = 0.25, 6.0, 14


def _erf_table() -> np.ndarray:
    n = int(_ERF_TOP / _ERF_H) + 1
    table = np.zeros((_ERF_K + 1, n))
    for i in range(n):
        c = i * _ERF_H
        herm = [1.0, 2.0 * c]
        for m in range(1, _ERF_K):
            herm.append(2.0 * c * herm[m] - 2.0 * m * herm[m - 1])
        g = 2.0 / math.sqrt(math.pi) * math.exp(-c * c)
        table[0, i] = math.erf(c)
        for k in range(1, _ERF_K + 1):
            table[k, i] = (-1) ** (k - 1) * herm[k - 1] * g / math.factorial(k)
    return table


_ERF_C = _erf_table()
# float32 and narrower: erf(x) = x * P(x^2) / Q(x^2) on |x| <= 4 (erf(4) rounds to 1 in
# float32), a least-squares fit of the relative error: below 5e-7 in float32 arithmetic.
_ERF_P = (1.1283791529480973, 0.1898384359539563, 0.05265655425223361, 0.003738176117050386,
          0.00028367133870980043, 2.0452349682248336e-06)
_ERF_Q = (1.0, 0.5015727947221705, 0.11385917628912247, 0.014912733566180584, 0.0011549132302130815,
          3.7981761538901744e-05)


def _erf64(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    idx = np.rint(a * (1.0 / _ERF_H))
    np.minimum(idx, _ERF_C.shape[1] - 1, out=idx)
    d = a - idx * _ERF_H
    idx = idx.astype(np.intp)                       # NaN -> anything: 'clip' keeps it in range
    r = _ERF_C[-1].take(idx, mode="clip")
    for k in range(_ERF_K - 1, -1, -1):
        r *= d
        r += _ERF_C[k].take(idx, mode="clip")
    r[a >= _ERF_TOP] = 1.0
    return np.copysign(r, x, out=r)


def _horner(t: np.ndarray, coefs) -> np.ndarray:
    r = t * coefs[-1]
    for c in coefs[-2:0:-1]:
        r += c
        r *= t
    r += coefs[0]
    return r


def _erf32(x: np.ndarray) -> np.ndarray:
    c = np.clip(x, -4.0, 4.0)
    t = c * c
    r = _horner(t, _ERF_P)
    r *= c
    r /= _horner(t, _ERF_Q)
    return np.clip(r, -1.0, 1.0, out=r)


def erf(x) -> np.ndarray:
    """The error function: float64 for float64 and integer input, else float32."""
    x = np.asarray(x)
    flat = x.reshape(-1)
    with np.errstate(all="ignore"):
        if x.dtype == np.float64 or x.dtype.kind in "iub":
            return _erf64(flat.astype(np.float64, copy=False)).reshape(x.shape)
        return _erf32(flat.astype(np.float32, copy=False)).reshape(x.shape)


# ----------------------------------------------------------------------------- unary
def _unary(fn, versions, names):
    def factory(ctx):
        def run(x):
            with np.errstate(**_IGNORE):
                if _is_ml(x.dtype):
                    return _arr(fn(x.astype(np.float32))).astype(x.dtype)
                return _arr(fn(x))
        return run

    for name in names:
        KERNELS.register(name, *versions)(factory)


_unary(np.abs, (1, 6, 13), ["Abs"])
_unary(np.negative, (1, 6, 13), ["Neg"])
for _name, _fn in (("Ceil", np.ceil), ("Floor", np.floor), ("Sqrt", np.sqrt), ("Exp", np.exp), ("Log", np.log),
                   ("Reciprocal", np.reciprocal)):
    _unary(_fn, (1, 6, 13), [_name])
for _name, _fn in (("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan), ("Asin", np.arcsin), ("Acos", np.arccos),
                   ("Atan", np.arctan)):
    _unary(_fn, (7, 22), [_name])
for _name, _fn in (("Sinh", np.sinh), ("Cosh", np.cosh), ("Asinh", np.arcsinh), ("Acosh", np.arccosh),
                   ("Atanh", np.arctanh)):
    _unary(_fn, (9, 22), [_name])
_unary(np.round, (11, 22), ["Round"])          # numpy rounds half to even, as ONNX requires
_unary(np.sign, (9, 13), ["Sign"])
_unary(np.logical_not, (1,), ["Not"])
_unary(np.invert, (18,), ["BitwiseNot"])


@KERNELS.register("Erf", 9, 13)
def _erf_kernel(ctx):
    def run(x):
        r = _arr(erf(x))
        return r if r.dtype == x.dtype else r.astype(x.dtype)   # Erf-9 takes integers: truncated
    return run


@KERNELS.register("IsNaN", 9, 13, 20)
def _isnan(ctx):
    return lambda x: _arr(np.isnan(x.astype(np.float32) if _is_ml(x.dtype) else x))


@KERNELS.register("IsInf", 10, 20)
def _isinf(ctx):
    neg, pos = bool(ctx.attr("detect_negative", 1)), bool(ctx.attr("detect_positive", 1))

    def run(x):
        if _is_ml(x.dtype):
            x = x.astype(np.float32)
        if neg and pos:
            return _arr(np.isinf(x))
        if neg:
            return _arr(np.isneginf(x))
        if pos:
            return _arr(np.isposinf(x))
        return np.zeros(x.shape, dtype=np.bool_)
    return run


@KERNELS.register("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25)
def _identity(ctx):
    return lambda x: list(x) if isinstance(x, list) else x


# ----------------------------------------------------------------------------- binary
def legacy_b_shape(a_shape, b_shape, axis):
    """B's shape under the broadcasting of definitions before 7 (B, not of A's shape, aligned
    with A from ``axis``; suffix-matched when ``axis`` is None): ``(shape, start)``, ``shape``
    None where B does not fit A at axis ``start``."""
    a_nd, b_nd = len(a_shape), len(b_shape)
    if math.prod(b_shape) == 1 and b_nd <= a_nd:
        return (), None
    start = a_nd - b_nd if axis is None else (axis + a_nd if axis < 0 else axis)
    if start < 0 or start + b_nd > a_nd or any(
            bd not in (ad, 1) for bd, ad in zip(b_shape, tuple(a_shape)[start:start + b_nd])):
        return None, start
    return tuple(b_shape) + (1,) * (a_nd - start - b_nd), start


def _legacy_align(ctx):
    """The broadcasting of definitions before 7: B aligned with A (None: not legacy)."""
    if "broadcast" not in (ctx.schema.attributes or {}):
        return None
    if not ctx.attr("broadcast", 0):
        def same(a, b):
            if a.shape != b.shape:
                ctx.fail(f"shapes {a.shape} and {b.shape} differ and broadcast=0 (legacy broadcasting of "
                         f"{ctx.op_type}-{ctx.since_version})")
            return b
        return same
    axis = ctx.attr("axis") if ctx.has_attr("axis") else None

    def align(a, b):
        if b.shape == a.shape:
            return b
        shape, start = legacy_b_shape(a.shape, b.shape, axis)
        if shape is None:
            ctx.fail(f"B of shape {b.shape} cannot be broadcast to A of shape {a.shape} at axis {start} "
                     f"(legacy broadcasting of {ctx.op_type}-{ctx.since_version})")
        return b.reshape(shape)
    return align


def _binary(fn, versions, names, upcast=True):
    """A two-input kernel; ``fn(a, b)`` sees float32 for ml_dtypes types when ``upcast``."""
    def factory(ctx):
        align = _legacy_align(ctx)

        def run(a, b):
            if align is not None:
                b = align(a, b)
            with np.errstate(**_IGNORE):
                if upcast and _is_ml(a.dtype):
                    r = _arr(fn(a.astype(np.float32), b.astype(np.float32)))
                    return r if r.dtype == np.bool_ else r.astype(a.dtype)
                return _arr(fn(a, b))
        return run

    for name in names:
        KERNELS.register(name, *versions)(factory)


def _no_integer_zero(b) -> None:
    """Integer Div/Mod by zero has no defined result: refuse it (onnxkit's position on 11.3)."""
    if b.dtype.kind in "iu" and not b.all():
        raise ZeroDivisionError("integer division by zero: the result is undefined, so none is produced "
                                "(onnxkit's position on Clause 11.3)")


def _div(a, b):
    if a.dtype.kind in "iu":
        _no_integer_zero(b)
    if a.dtype.kind == "u":
        return np.floor_divide(a, b)
    if a.dtype.kind == "i":
        q = np.floor_divide(a, b)
        q += ((q * b) != a) & ((a < 0) ^ (b < 0))        # floor -> toward zero
        return q
    return np.divide(a, b)


_binary(np.add, (1, 6, 7, 13, 14), ["Add"])
_binary(np.subtract, (1, 6, 7, 13, 14), ["Sub"])
_binary(np.multiply, (1, 6, 7, 13, 14), ["Mul"])
_binary(_div, (1, 6, 7, 13, 14), ["Div"])
_binary(np.logical_and, (1, 7), ["And"])
_binary(np.logical_or, (1, 7), ["Or"])
_binary(np.logical_xor, (1, 7), ["Xor"])
_binary(np.bitwise_and, (18,), ["BitwiseAnd"])
_binary(np.bitwise_or, (18,), ["BitwiseOr"])
_binary(np.bitwise_xor, (18,), ["BitwiseXor"])
_binary(np.greater, (1, 7, 9, 13), ["Greater"])
_binary(np.less, (1, 7, 9, 13), ["Less"])
_binary(np.greater_equal, (12, 16), ["GreaterOrEqual"])
_binary(np.less_equal, (12, 16), ["LessOrEqual"])


def _text(v):
    return v.decode("utf-8", "surrogateescape") if isinstance(v, (bytes, bytearray)) else v


_as_text = np.vectorize(_text, otypes=[object])


def _equal(a, b):
    if a.dtype == object or b.dtype == object:       # STRING: bytes and str compare as text
        a = _as_text(a) if a.size else a
        b = _as_text(b) if b.size else b
    return np.equal(a, b)


_binary(_equal, (1, 7, 11, 13, 19), ["Equal"])


@KERNELS.register("Mod", 10, 13, 28)
def _mod(ctx):
    fn = np.fmod if ctx.attr("fmod", 0) else np.mod
    if ctx.attr("fmod", 0) not in (0, 1):
        ctx.fail(f"fmod must be 0 or 1, got {ctx.attr('fmod')}")

    def run(a, b):
        _no_integer_zero(b)
        with np.errstate(**_IGNORE):
            if _is_ml(a.dtype):
                return _arr(fn(a.astype(np.float32), b.astype(np.float32))).astype(a.dtype)
            return _arr(fn(a, b))
    return run


@KERNELS.register("Pow", 1, 7, 12, 13, 15)
def _pow(ctx):
    align = _legacy_align(ctx)

    def run(x, y):
        if align is not None:
            y = align(x, y)
        dt = x.dtype
        with np.errstate(**_IGNORE):
            if dt.kind == "f" and dt != np.float16:
                return _arr(np.power(x, y if y.dtype == dt else y.astype(dt)))
            if dt.kind in "fV":                        # float16, bfloat16: through float32
                return _arr(np.power(x.astype(np.float32), y.astype(np.float32))).astype(dt)
            if y.dtype.kind in "iu" and not (y.dtype.kind == "i" and y.size and y.min() < 0):
                return _arr(np.power(x, y.astype(dt)))        # integer power, wraps like C
            # integer base with a float or negative exponent: computed in double, truncated
            r = np.power(x.astype(np.float64), y.astype(np.float64))
            return _arr(np.where(np.isfinite(r), r, 0).astype(dt))
    return run


@KERNELS.register("BitShift", 11, 28)
def _bitshift(ctx):
    direction = ctx.attr_str("direction")
    if direction not in ("LEFT", "RIGHT"):
        ctx.fail(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    left = direction == "LEFT"

    def run(x, y):
        x, y = np.broadcast_arrays(x, y)
        width = x.dtype.itemsize * 8
        ok = (y >= 0) & (y < width)
        n = np.where(ok, y, 0)
        if left:
            u = np.dtype(f"u{x.dtype.itemsize}")
            r = np.left_shift(x.view(u), n.astype(u)).view(x.dtype)
            fill = np.zeros((), x.dtype)
        else:
            r = np.right_shift(x, n.astype(x.dtype))          # arithmetic for signed types
            fill = np.where(x < 0, x.dtype.type(-1), x.dtype.type(0)) if x.dtype.kind == "i" else np.zeros((), x.dtype)
        return _arr(np.where(ok, r, fill))
    return run


# ----------------------------------------------------------------------------- variadic
def _variadic(fn, versions, names, mean=False):
    def factory(ctx):
        same_shape = ctx.since_version < 8

        def run(*xs):
            if not xs:
                ctx.fail("needs at least one input")
            if same_shape and any(x.shape != xs[0].shape for x in xs):
                ctx.fail(f"inputs must all have the same shape before opset 8, got {[x.shape for x in xs]}")
            dt = xs[0].dtype
            wide = _is_ml(dt) or ((mean or fn is np.add) and dt == np.float16)
            if wide:
                xs = [x.astype(np.float32) for x in xs]
            if len(xs) == 1:
                r = xs[0].copy()
            else:
                r = fn(xs[0], xs[1])
                for x in xs[2:]:
                    r = fn(r, x, out=r) if r.shape == np.broadcast_shapes(r.shape, x.shape) else fn(r, x)
            if mean:
                r = r / r.dtype.type(len(xs))
            r = _arr(r)
            return r.astype(dt) if r.dtype != dt else r
        return run

    for name in names:
        KERNELS.register(name, *versions)(factory)


_variadic(np.maximum, (1, 6, 8, 12, 13), ["Max"])
_variadic(np.minimum, (1, 6, 8, 12, 13), ["Min"])
_variadic(np.add, (1, 6, 8, 13), ["Sum"])
_variadic(np.add, (1, 6, 8, 13), ["Mean"], mean=True)


# ----------------------------------------------------------------------------- Clip, Where
def _clip(x, lo, hi):
    """max(x, lo) then min(., hi): where lo > hi every element becomes hi (the ONNX rule)."""
    if _is_ml(x.dtype):
        r = _clip(x.astype(np.float32), None if lo is None else np.float32(lo),
                  None if hi is None else np.float32(hi))
        return r.astype(x.dtype)
    if lo is None and hi is None:
        return x
    if x.dtype.kind == "f":
        lo, hi = -np.inf if lo is None else lo, np.inf if hi is None else hi
    else:
        info = np.iinfo(x.dtype)
        lo, hi = info.min if lo is None else lo, info.max if hi is None else hi
    return _arr(np.clip(x, lo, hi))       # numpy's clip is min(max(x, lo), hi)


@KERNELS.register("Clip", 1, 6)
def _clip_attr(ctx):
    lo = float(ctx.attr("min")) if ctx.has_attr("min") else None
    hi = float(ctx.attr("max")) if ctx.has_attr("max") else None

    def run(x):
        return _clip(x, None if lo is None else x.dtype.type(lo), None if hi is None else x.dtype.type(hi))
    return run


@KERNELS.register("Clip", 11, 12, 13)
def _clip_input(ctx):
    def bound(v, x, which):
        if v is None:
            return None
        if v.size != 1:
            ctx.fail(f"'{which}' must be a scalar (or a one-element tensor), got shape {v.shape}")
        return v.reshape(()).astype(x.dtype, copy=False)

    return lambda x, lo=None, hi=None: _clip(x, bound(lo, x, "min"), bound(hi, x, "max"))


@KERNELS.register("Where", 9, 16)
def _where(ctx):
    def run(cond, x, y):
        r = _arr(np.where(cond, x, y))
        return r if r.dtype == x.dtype else r.astype(x.dtype)
    return run
