"""Element-wise binary, comparison, logic and variadic operators of ai.onnx, and Clip, Where,
Identity (every backend; multidirectional broadcasting, Clause 6.6).

Covered: Add, Sub, Mul, Div, Pow, Mod, BitShift, BitwiseAnd/Or/Xor, Equal, Greater, Less,
GreaterOrEqual, LessOrEqual, And, Or, Xor, Max, Min, Sum, Mean, Clip, Where, Identity, every
definition of opsets 1..28.  The unary math operators are in :mod:`.elementwise_math`.

Version rules.  Definitions before 7 of the binary operators carry ``broadcast``/``axis``:
with ``broadcast=1`` B is aligned with A from ``axis`` (suffix matching when it is unset) by
:func:`~onnxkit_default_domain.inference.elementwise.legacy_b_shape`, the rule inference uses
too; with ``broadcast=0`` the shapes must be equal.  ``consumed_inputs`` is ignored.
Max/Min/Sum/Mean before 8 require equal shapes.  Clip before 11 reads ``min``/``max``
attributes (absent: that side unbounded), from 11 optional scalar inputs; where min > max
every element becomes max (the ONNX rule: max(x, min) then min(., max)).

Numeric rules.  Narrow floats (float16, bfloat16, ...) are computed in float32 and rounded
back once (a single correctly rounded operation gives the same result as native float16
arithmetic); outputs keep the input element type.  Integer arithmetic wraps.  Integer Div
truncates toward zero; Mod ``fmod=0`` takes the divisor's sign (a zero result signed like the
divisor, floats too), ``fmod=1`` the dividend's.  An integer Div or Mod by zero has no
defined result: the node fails, naming itself (onnxkit's position on Clause 11.3).  Pow with
an integer base: integer power wrapping like C for exponents >= 0, else computed in float64,
truncated (non-finite results give 0).  BitShift implements the definition of 28 (a shift < 0
or >= the width gives the sign fill: -1 for RIGHT of a negative X, else 0), which is also what
11 leaves undefined.  Equal on STRING tensors (numpy object arrays, cpu only) compares bytes
and str alike as text.
"""

from __future__ import annotations

import functools

import numpy as np
from ._common import device_of as device

from onnxkit.plugin import KernelTable, Unsupported, arrays, fails_on_values, size_guard
from onnxkit_default_domain.inference.elementwise import legacy_b_shape

from ._common import shape_of, size_of

KERNELS = KernelTable()

_DIVISION_BY_ZERO = ("integer division by zero: the result is undefined, so none is produced "
                     "(onnxkit's position on Clause 11.3)")


def as_array(xp, r):
    """``r`` as an array: numpy ufuncs give numpy scalars for 0-d operands."""
    return xp.asarray(r) if isinstance(r, np.generic) else r


try:     # numpy >= 2 keeps the floating-point error state in a context variable
    from numpy._core.umath import _extobj_contextvar as _ERROR_STATE
except ImportError:                                                      # pragma: no cover
    _ERROR_STATE = None
if _ERROR_STATE is not None:
    with np.errstate(all="ignore"):
        _IGNORE_ALL = _ERROR_STATE.get()


def quiet(fn):
    """``fn`` run with numpy's floating-point warnings off (overflow, 0/0 ... are results here).

    On numpy 2 the error state is a context variable (per thread and per task): the wrapper
    sets it to an all-ignore state made once, which costs a fraction of a microsecond where
    entering ``np.errstate`` costs about one per call; numpy's public ``np.errstate`` decorator
    is used where that variable is not there."""
    if _ERROR_STATE is None:                                             # pragma: no cover
        return np.errstate(all="ignore")(fn)
    set_state, reset_state = _ERROR_STATE.set, _ERROR_STATE.reset

    def run(*args):
        token = set_state(_IGNORE_ALL)
        try:
            return fn(*args)
        finally:
            reset_state(token)
    return run


def back(xp, r, dtype):
    """``r`` (an array or a numpy scalar) as an array of ``dtype``."""
    r = as_array(xp, r)
    return r if r.dtype == dtype else xp.astype(r, dtype)


def widen(xp, *xs):
    """The operands in float32 when the first is a narrow float, else as they are."""
    if arrays.is_narrow_float(xs[0].dtype):
        return [xp.astype(x, xp.float32) for x in xs]
    return list(xs)


# -- legacy broadcasting (definitions before 7) ------------------------------------------------
def legacy_align(ctx):
    """``align(a, b) -> b`` reshaped by the broadcasting of definitions before 7 (None for a
    definition without ``broadcast``); fails naming the node where B does not fit A."""
    if "broadcast" not in (ctx.schema.attributes or {}):
        return None
    xp = ctx.xp
    what = f"legacy broadcasting of {ctx.op_type}-{ctx.since_version}"
    if not ctx.attr("broadcast", 0):
        def same(a, b):
            if shape_of(a) != shape_of(b):
                ctx.fail(f"shapes {shape_of(a)} and {shape_of(b)} differ and broadcast=0 ({what})")
            return b
        return same
    axis = int(ctx.attr("axis")) if ctx.has_attr("axis") else None

    def align(a, b):
        sa, sb = shape_of(a), shape_of(b)
        if sa == sb:
            return b
        shape, start = legacy_b_shape(sa, sb, axis)
        if shape is None:
            ctx.fail(f"B of shape {sb} cannot be broadcast to A of shape {sa} at axis {start} ({what})")
        return xp.reshape(b, shape)
    return align


def aligned(ctx, fn):
    """The node function ``fn(a, b)`` with B first aligned by the legacy broadcasting (where
    the definition has it), numpy's warnings off."""
    align = legacy_align(ctx)
    if align is None:
        return quiet(fn)
    return quiet(lambda a, b: fn(a, align(a, b)))


def _binary(body, versions, names, upcast=True):
    """Register a two-input kernel ``body(xp) -> fn(a, b)`` (legacy broadcasting applied to B);
    with ``upcast`` narrow floats are computed in float32 (bool results stay bool)."""
    def factory(ctx):
        xp = ctx.xp
        fn = body(xp)

        def run(a, b):
            if upcast and arrays.is_narrow_float(a.dtype):
                r = as_array(xp, fn(xp.astype(a, xp.float32), xp.astype(b, xp.float32)))
                return r if arrays.is_bool(r.dtype) else xp.astype(r, a.dtype)
            return as_array(xp, fn(a, b))
        return aligned(ctx, run)

    size_guard("broadcast")(factory)  # a broadcasting product: the run-time size check's bound
    for name in names:
        KERNELS.register(name, *versions)(factory)


_binary(lambda xp: xp.add, (1, 6, 7, 13, 14), ["Add"])
_binary(lambda xp: xp.subtract, (1, 6, 7, 13, 14), ["Sub"])
_binary(lambda xp: xp.multiply, (1, 6, 7, 13, 14), ["Mul"])
_binary(lambda xp: xp.logical_and, (1, 7), ["And"])
_binary(lambda xp: xp.logical_or, (1, 7), ["Or"])
_binary(lambda xp: xp.logical_xor, (1, 7), ["Xor"])
_binary(lambda xp: xp.bitwise_and, (18,), ["BitwiseAnd"])
_binary(lambda xp: xp.bitwise_or, (18,), ["BitwiseOr"])
_binary(lambda xp: xp.bitwise_xor, (18,), ["BitwiseXor"])
_binary(lambda xp: xp.greater, (1, 7, 9, 13), ["Greater"])
_binary(lambda xp: xp.less, (1, 7, 9, 13), ["Less"])
_binary(lambda xp: xp.greater_equal, (12, 16), ["GreaterOrEqual"])
_binary(lambda xp: xp.less_equal, (12, 16), ["LessOrEqual"])


# -- Equal (STRING too) ------------------------------------------------------------------------
def _text(v):
    return v.decode("utf-8", "surrogateescape") if isinstance(v, (bytes, bytearray)) else v


_as_text = np.vectorize(_text, otypes=[object])


def _equal(xp):
    def fn(a, b):
        if a.dtype == object or b.dtype == object:          # numpy's STRING tensors
            a, b = (_as_text(v) if v.size else v for v in (np.asarray(a), np.asarray(b)))  # STRING: host
            return np.equal(a, b)
        return xp.equal(a, b)
    return fn


_binary(_equal, (1, 7, 11, 13, 19), ["Equal"])


# -- Div, Mod ----------------------------------------------------------------------------------
def no_integer_zero(ctx, xp, b) -> None:
    """Fail naming the node where an integer divisor holds a zero (one host read)."""
    if bool(xp.any(b == 0)):
        ctx.fail(_DIVISION_BY_ZERO)


def trunc_divide(xp, a, b):
    """Integer a / b truncated toward zero (b has no zero)."""
    q = xp.floor_divide(a, b)
    if arrays.is_unsigned(a.dtype):
        return q
    fix = ((a - q * b) != 0) & ((a < 0) != (b < 0))       # floor -> toward zero
    return q + xp.astype(fix, q.dtype)


@KERNELS.register("Div", 1, 6, 7, 13, 14)
@size_guard("broadcast")
@fails_on_values
def div(ctx):
    xp = ctx.xp

    def run(a, b):
        if arrays.is_integer(a.dtype):
            no_integer_zero(ctx, xp, b)
            return as_array(xp, trunc_divide(xp, a, b))
        if arrays.is_narrow_float(a.dtype):
            return back(xp, xp.astype(a, xp.float32) / xp.astype(b, xp.float32), a.dtype)
        return as_array(xp, xp.divide(a, b))
    return aligned(ctx, run)


def float_mod(xp, fmod, a, b):
    """Float a mod b with the divisor's sign, a zero result signed like b (numpy's rule)."""
    r = fmod(a, b)
    fix = (r != 0) & ((r < 0) != (b < 0))
    r = xp.where(fix, r + b, r)
    return xp.where(r == 0, xp.copysign(xp.zeros_like(r), b), r)


@KERNELS.register("Mod", 10, 13, 28)
@size_guard("broadcast")
@fails_on_values
def mod(ctx):
    xp = ctx.xp
    fmod = ctx.attr("fmod")
    if fmod not in (0, 1):
        ctx.fail(f"fmod must be 0 or 1, got {fmod}")
    native_fmod = getattr(xp, "fmod", None)      # not in the array API standard; numpy and torch have it
    if native_fmod is None:
        raise Unsupported("the backend's array namespace has no fmod")

    @quiet
    def run(a, b):
        if arrays.is_integer(a.dtype):
            no_integer_zero(ctx, xp, b)
            r = a - trunc_divide(xp, a, b) * b if fmod else xp.remainder(a, b)
            return as_array(xp, r)
        x, y = widen(xp, a, b)
        r = native_fmod(x, y) if fmod else float_mod(xp, native_fmod, x, y)
        return back(xp, r, a.dtype)
    return run


# -- Pow ---------------------------------------------------------------------------------------
def integer_pow(xp, x, y):
    """An integer base to any exponent: the low bits of the exact power for exponents >= 0,
    else the float64 power truncated (non-finite -> 0); x's type."""
    dt = x.dtype
    wide = xp.pow(xp.astype(x, xp.float64), xp.astype(y, xp.float64))
    wide = xp.trunc(xp.where(xp.isfinite(wide), wide, xp.zeros_like(wide)))
    wide = xp.astype(xp.astype(wide, xp.int64), dt)
    if arrays.is_float(y.dtype):
        return wide
    y64 = xp.astype(y, xp.int64)
    exact = xp.astype(xp.pow(xp.astype(x, xp.int64), xp.where(y64 < 0, xp.zeros_like(y64), y64)), dt)
    return exact if arrays.is_unsigned(y.dtype) else xp.where(y64 < 0, wide, exact)


def small_power(ctx, xp, x, y):
    """``x ** y`` for a one-element float exponent 2, 3 or 0.5, by products or a square root
    (what exporters' GELU and norm expansions use; within two ulps of pow, as onnxruntime
    computes them), else None.  The exponent is read on the host only when it has one element."""
    if y.ndim > x.ndim or any(int(d) != 1 for d in y.shape):
        return None
    e = float(ctx.to_host(y).reshape(-1)[0])
    if e == 2.0:
        return x * x
    if e == 3.0:
        r = x * x          # a fresh array: multiplied in place
        r *= x
        return r
    if e == 0.5:
        return xp.sqrt(x)
    return None


@KERNELS.register("Pow", 1, 7, 12, 13, 15)
@size_guard("broadcast")
def pow_(ctx):
    xp = ctx.xp

    def run(x, y):
        dt = x.dtype
        if arrays.is_narrow_float(dt):
            return back(xp, xp.pow(xp.astype(x, xp.float32), xp.astype(y, xp.float32)), dt)
        if arrays.is_float(dt):
            fast = small_power(ctx, xp, x, y) if arrays.is_float(y.dtype) and x.ndim >= y.ndim else None
            if fast is not None:
                return as_array(xp, fast)
            return as_array(xp, xp.pow(x, y if y.dtype == dt else xp.astype(y, dt)))
        return as_array(xp, integer_pow(xp, x, y))
    return aligned(ctx, run)


# -- BitShift ----------------------------------------------------------------------------------
@KERNELS.register("BitShift", 11, 28)
@size_guard("broadcast")
def bit_shift(ctx):
    xp = ctx.xp
    direction = ctx.attr_str("direction")
    if direction not in ("LEFT", "RIGHT"):
        ctx.fail(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    left = direction == "LEFT"

    def run(x, y):
        width = xp.iinfo(x.dtype).bits
        ok = (y >= 0) & (y < width)
        n = xp.astype(xp.where(ok, y, xp.zeros_like(y)), x.dtype)
        if left:
            r = xp.bitwise_left_shift(x, n)
            return as_array(xp, xp.where(ok, r, xp.zeros_like(r)))
        r = xp.bitwise_right_shift(x, n)                    # arithmetic for signed types
        fill = xp.zeros_like(r) if arrays.is_unsigned(x.dtype) else -xp.astype(x < 0, r.dtype)
        return as_array(xp, xp.where(ok, r, fill))
    return run


# -- Max, Min, Sum, Mean -----------------------------------------------------------------------
def fold(xp, fn, xs):
    """``fn`` (a binary function of ``xp``) folded over ``xs`` left to right."""
    r = fn(xs[0], xs[1])
    for x in xs[2:]:
        r = fn(r, x)
    return r


def variadic(ctx, fn, mean=False, fold=fold):
    """The node function of Max/Min/Sum/Mean: ``fn`` folded over the inputs (by ``fold``, or a
    backend's faster equivalent), divided by their count for Mean; narrow floats in float32."""
    xp = ctx.xp
    same_shape = ctx.since_version < 8

    def run(*xs):
        if not xs:
            ctx.fail("needs at least one input")
        if same_shape and any(shape_of(x) != shape_of(xs[0]) for x in xs):
            ctx.fail(f"inputs must all have the same shape before opset 8, got {[shape_of(x) for x in xs]}")
        if len(xs) == 1:
            return xs[0]
        r = fold(xp, fn, widen(xp, *xs))
        if mean:
            r = r / len(xs)
        return back(xp, r, xs[0].dtype)
    return run


@KERNELS.register("Max", 1, 6, 8, 12, 13)
@size_guard("broadcast")
def max_(ctx):
    return variadic(ctx, ctx.xp.maximum)


@KERNELS.register("Min", 1, 6, 8, 12, 13)
@size_guard("broadcast")
def min_(ctx):
    return variadic(ctx, ctx.xp.minimum)


@KERNELS.register("Sum", 1, 6, 8, 13)
@size_guard("broadcast")
def sum_(ctx, fold=fold):
    """Sum; ``fold`` as for :func:`variadic`."""
    return variadic(ctx, ctx.xp.add, fold=fold)


@KERNELS.register("Mean", 1, 6, 8, 13)
@size_guard("broadcast")
def mean(ctx, fold=fold):
    """Mean; ``fold`` as for :func:`variadic`."""
    return variadic(ctx, ctx.xp.add, mean=True, fold=fold)


# -- Clip --------------------------------------------------------------------------------------
def clip(xp, x, lo, hi):
    """max(x, lo) then min(., hi) (``lo``/``hi``: 0-d arrays of x's type, or None): where
    lo > hi every element becomes hi (the ONNX rule); NaN stays NaN.  Narrow floats in float32."""
    if lo is None and hi is None:
        return x
    r, = widen(xp, x)
    if lo is not None:
        r = xp.maximum(r, xp.astype(lo, r.dtype))
    if hi is not None:
        r = xp.minimum(r, xp.astype(hi, r.dtype))
    return back(xp, r, x.dtype)


def clip_attr_bounds(ctx):
    """Clip 1/6: the ``min``/``max`` attributes as floats, None where the node gives none (Clip-6
    then clips to the input type's limits, :func:`clip_attr`)."""
    return tuple(float(ctx.attr(name)) if ctx.has_attr(name) else None for name in ("min", "max"))


@functools.lru_cache(maxsize=None)
def _float_limits(dtype) -> tuple:
    """``(lowest, max)`` of a floating type (numpy's, or ml_dtypes' for the narrow ones), or
    ``(None, None)`` for any other type (an integer's limits clip nothing)."""
    if not arrays.is_float(dtype):
        return None, None
    name = arrays.dtype_name(dtype)
    try:
        info = np.finfo(name)
    except (TypeError, ValueError):
        import ml_dtypes

        info = ml_dtypes.finfo(getattr(ml_dtypes, name))
    return float(info.min), float(info.max)


@KERNELS.register("Clip", 1, 6)
def clip_attr(ctx, clip=clip):
    """Clip 1/6; ``clip``: :func:`clip` or a backend's faster equivalent."""
    xp = ctx.xp
    bounds = clip_attr_bounds(ctx)

    limits = ctx.since_version >= 6   # Clip-6's defaults (Part 2: -3.402823e+38, 3.402823e+38, float's limits)

    def run(x):
        lo, hi = (None if v is None else xp.asarray(v, dtype=x.dtype, device=device(x)) for v in bounds)
        if limits:   # as the type's own limits (float32's for float32, as onnxruntime; a float64 x keeps 1e300)
            lo = clip_bound(ctx, xp, None, x, "min") if lo is None else lo
            hi = clip_bound(ctx, xp, None, x, "max") if hi is None else hi
        return clip(xp, x, lo, hi)
    return run


def clip_bound(ctx, xp, v, x, which: str):
    """Clip 11+: an optional bound input as a 0-d array of x's type; fails unless one element.
    An absent bound of a floating-point x is the type's lowest / largest value (Part 2: the
    defaults are ``numeric_limits::lowest()`` and ``max()``, so an infinity is clipped to them,
    as onnxruntime does); of an integer x, None (its limits clip nothing)."""
    if v is None:
        limit = _float_limits(x.dtype)[0 if which == "min" else 1]
        return None if limit is None else xp.asarray(limit, dtype=x.dtype, device=device(x))
    if size_of(v) != 1:
        ctx.fail(f"'{which}' must be a scalar (or a one-element tensor), got shape {shape_of(v)}")
    if v.ndim:
        v = xp.reshape(v, ())
    return v if v.dtype == x.dtype else xp.astype(v, x.dtype)


@KERNELS.register("Clip", 11, 12, 13)
def clip_input(ctx, clip=clip):
    """Clip 11+; ``clip`` as for :func:`clip_attr`."""
    xp = ctx.xp

    def run(x, lo=None, hi=None):
        return clip(xp, x, clip_bound(ctx, xp, lo, x, "min"), clip_bound(ctx, xp, hi, x, "max"))
    return run


# -- Where, Identity ---------------------------------------------------------------------------
@KERNELS.register("Where", 9, 16)
@size_guard("broadcast")
def where(ctx):
    xp = ctx.xp

    def run(cond, x, y):
        if not arrays.is_bool(cond.dtype):
            cond = cond != 0
        return back(xp, xp.where(cond, x, y), x.dtype)
    return run


@KERNELS.register("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25)
def identity(ctx):
    return lambda x: list(x) if isinstance(x, list) else x
