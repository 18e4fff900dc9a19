"""Element-wise math and logic of ai.onnx on the gpu backend (torch, multidirectional
broadcasting, Clause 6.6).

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
leave that side unbounded.  Integer Div truncates toward zero; Mod ``fmod=0`` takes the
divisor's sign (numpy's rule for floats, -0/+0 included); an integer division or remainder by
zero gives 0 (undefined by ONNX; torch would raise or give garbage).  BitShift implements the
definition of 28 (a shift < 0 or >= the width gives the sign-fill: -1 for RIGHT of a negative
X, else 0).  Sign keeps NaN.  Pow with an integer base and a negative or float exponent is
computed in double and truncated (non-finite -> 0).  float16 and bfloat16 arithmetic is one
torch operation, rounded once (Sum and Mean accumulate them in float32, Mod computes them in
float32).  Element types torch lacks never reach a kernel (the backend refuses them on entry).
"""

from __future__ import annotations

from onnxkit.runtime import KernelTable
from onnxkit_cpu.kernels.elementwise import legacy_b_shape

KERNELS = KernelTable()


def zero(x):
    """A 0-d zero of x's dtype on x's device."""
    import torch

    return torch.zeros((), dtype=x.dtype, device=x.device)


def low_float(dt) -> bool:
    import torch

    return dt in (torch.float16, torch.bfloat16)


# ----------------------------------------------------------------------------- unary
def _unary(make, versions, names):
    """Register ``make(torch) -> fn(x)`` for each op in ``names``."""
    def factory(ctx):
        import torch

        return make(torch)

    for name in names:
        KERNELS.register(name, *versions)(factory)


_unary(lambda t: t.abs, (1, 6, 13), ["Abs"])
_unary(lambda t: t.neg, (1, 6, 13), ["Neg"])
for _name, _fn in (("Ceil", "ceil"), ("Floor", "floor"), ("Sqrt", "sqrt"), ("Exp", "exp"), ("Log", "log"),
                   ("Reciprocal", "reciprocal")):
    _unary(lambda t, f=_fn: getattr(t, f), (1, 6, 13), [_name])
for _name, _fn in (("Sin", "sin"), ("Cos", "cos"), ("Tan", "tan"), ("Asin", "asin"), ("Acos", "acos"),
                   ("Atan", "atan")):
    _unary(lambda t, f=_fn: getattr(t, f), (7, 22), [_name])
for _name, _fn in (("Sinh", "sinh"), ("Cosh", "cosh"), ("Asinh", "asinh"), ("Acosh", "acosh"),
                   ("Atanh", "atanh")):
    _unary(lambda t, f=_fn: getattr(t, f), (9, 22), [_name])
_unary(lambda t: t.round, (11, 22), ["Round"])          # torch rounds half to even, as ONNX requires
_unary(lambda t: t.logical_not, (1,), ["Not"])
_unary(lambda t: t.bitwise_not, (18,), ["BitwiseNot"])


def _sign(torch):
    def fn(x):
        s = torch.sign(x)
        return torch.where(torch.isnan(x), x, s) if x.dtype.is_floating_point else s   # torch.sign(NaN) is 0
    return fn


_unary(_sign, (9, 13), ["Sign"])


def _erf(torch):
    def fn(x):
        if x.dtype.is_floating_point:
            return torch.erf(x)
        return torch.erf(x.to(torch.float64)).to(x.dtype)     # Erf-9 takes integers: truncated
    return fn


_unary(_erf, (9, 13), ["Erf"])


@KERNELS.register("IsNaN", 9, 13, 20)
def _isnan(ctx):
    import torch

    return torch.isnan


@KERNELS.register("IsInf", 10, 20)
def _isinf(ctx):
    import torch

    neg, pos = bool(ctx.attr("detect_negative", 1)), bool(ctx.attr("detect_positive", 1))
    if neg and pos:
        return torch.isinf
    if neg:
        return torch.isneginf
    if pos:
        return torch.isposinf
    return lambda x: torch.zeros(x.shape, dtype=torch.bool, device=x.device)


@KERNELS.register("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25)
def _identity(ctx):
    return lambda x: list(x) if isinstance(x, list) else x


# ----------------------------------------------------------------------------- binary
def legacy_align(ctx):
    """The broadcasting of definitions before 7: B aligned with A (None: not legacy)."""
    if "broadcast" not in (ctx.schema.attributes or {}):
        return None
    if not ctx.attr("broadcast", 0):
        def same(a, b):
            if a.shape != b.shape:
                ctx.fail(f"shapes {list(a.shape)} and {list(b.shape)} differ and broadcast=0 (legacy "
                         f"broadcasting of {ctx.op_type}-{ctx.since_version})")
            return b
        return same
    axis = ctx.attr("axis") if ctx.has_attr("axis") else None

    def align(a, b):
        if b.shape == a.shape:
            return b
        shape, start = legacy_b_shape(tuple(a.shape), tuple(b.shape), axis)
        if shape is None:
            ctx.fail(f"B of shape {list(b.shape)} cannot be broadcast to A of shape {list(a.shape)} at axis "
                     f"{start} (legacy broadcasting of {ctx.op_type}-{ctx.since_version})")
        return b.reshape(shape)
    return align


def _binary(make, versions, names):
    """A two-input kernel ``make(torch) -> fn(a, b)``, legacy broadcasting applied to B."""
    def factory(ctx):
        import torch

        fn = make(torch)
        align = legacy_align(ctx)
        if align is None:
            return fn
        return lambda a, b: fn(a, align(a, b))

    for name in names:
        KERNELS.register(name, *versions)(factory)


def _int_safe(torch, op):
    """``op(a, b)`` for integers, refusing b == 0 as the cpu backend does (onnxkit's position on
    Clause 11.3: integer division by zero has no result; torch raises on CPU, is undefined on CUDA)."""
    def fn(a, b):
        if not bool(b.all()):
            raise ZeroDivisionError("integer division by zero: the result is undefined, so none is produced "
                                    "(onnxkit's position on Clause 11.3)")
        return op(a, b)
    return fn


def _div(torch):
    trunc = _int_safe(torch, lambda a, b: torch.div(a, b, rounding_mode="trunc"))

    def fn(a, b):
        if a.dtype.is_floating_point:
            return torch.div(a, b)
        return trunc(a, b)
    return fn


_binary(lambda t: t.add, (1, 6, 7, 13, 14), ["Add"])
_binary(lambda t: t.sub, (1, 6, 7, 13, 14), ["Sub"])
_binary(lambda t: t.mul, (1, 6, 7, 13, 14), ["Mul"])
_binary(_div, (1, 6, 7, 13, 14), ["Div"])
_binary(lambda t: t.logical_and, (1, 7), ["And"])
_binary(lambda t: t.logical_or, (1, 7), ["Or"])
_binary(lambda t: t.logical_xor, (1, 7), ["Xor"])
_binary(lambda t: t.bitwise_and, (18,), ["BitwiseAnd"])
_binary(lambda t: t.bitwise_or, (18,), ["BitwiseOr"])
_binary(lambda t: t.bitwise_xor, (18,), ["BitwiseXor"])
_binary(lambda t: t.gt, (1, 7, 9, 13), ["Greater"])
_binary(lambda t: t.lt, (1, 7, 9, 13), ["Less"])
_binary(lambda t: t.ge, (12, 16), ["GreaterOrEqual"])
_binary(lambda t: t.le, (12, 16), ["LessOrEqual"])
_binary(lambda t: t.eq, (1, 7, 11, 13, 19), ["Equal"])


@KERNELS.register("Mod", 10, 13, 28)
def _mod(ctx):
    import torch

    fmod = ctx.attr("fmod", 0)
    if fmod not in (0, 1):
        ctx.fail(f"fmod must be 0 or 1, got {fmod}")
    int_fmod = _int_safe(torch, torch.fmod)
    int_mod = _int_safe(torch, torch.remainder)

    def float_mod(a, b):                 # numpy's rule: the divisor's sign, a zero result signed like b
        r = torch.fmod(a, b)
        fix = (r != 0) & ((r < 0) != (b < 0))
        r = torch.where(fix, r + b, r)
        return torch.where(r == 0, torch.copysign(zero(r), b), r)

    def run(a, b):
        dt = a.dtype
        if not dt.is_floating_point:
            return int_fmod(a, b) if fmod else int_mod(a, b)
        if low_float(dt):
            a, b = a.float(), b.float()
        r = torch.fmod(a, b) if fmod else float_mod(a, b)
        return r.to(dt)
    return run


@KERNELS.register("Pow", 1, 7, 12, 13, 15)
def _pow(ctx):
    import torch

    align = legacy_align(ctx)

    def run(x, y):
        if align is not None:
            y = align(x, y)
        dt = x.dtype
        if dt.is_floating_point:
            if low_float(dt):
                return torch.pow(x.float(), y.float()).to(dt)
            return torch.pow(x, y if y.dtype == dt else y.to(dt))
        # integer base: integer power (wraps like C) for exponents >= 0; a float or negative
        # exponent is computed in double and truncated (non-finite results give 0)
        wide = torch.pow(x.to(torch.float64), y.to(torch.float64))
        wide = torch.where(torch.isfinite(wide), wide, torch.zeros((), dtype=wide.dtype, device=wide.device))
        wide = torch.trunc(wide).to(torch.int64).to(dt)
        if y.dtype.is_floating_point:
            return wide
        # in int64: the low bits of the exact power (x's own width could wrap the exponent)
        exact = torch.pow(x.to(torch.int64), torch.clamp(y.to(torch.int64), min=0)).to(dt)
        return torch.where(y < 0, wide, exact) if y.dtype.is_signed else exact
    return run


@KERNELS.register("BitShift", 11, 28)
def _bitshift(ctx):
    import torch

    direction = ctx.attr_str("direction")
    if direction not in ("LEFT", "RIGHT"):
        ctx.fail(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    left = direction == "LEFT"

    def run(x, y):
        width = x.element_size() * 8
        ok = (y >= 0) & (y < width)
        n = torch.where(ok, y, torch.zeros((), dtype=y.dtype, device=y.device)).to(x.dtype)
        if left:
            r = torch.bitwise_left_shift(x, n)
            fill = zero(x)
        else:
            r = torch.bitwise_right_shift(x, n)               # arithmetic for signed types
            fill = torch.where(x < 0, torch.full((), -1, dtype=x.dtype, device=x.device), zero(x)) \
                if x.dtype.is_signed else zero(x)
        return torch.where(ok, r, fill)
    return run


# ----------------------------------------------------------------------------- variadic
def _variadic(op_name, versions, names, mean=False):
    def factory(ctx):
        import torch

        op = getattr(torch, op_name)
        same_shape = ctx.since_version < 8
        widen = mean or op_name == "add"

        def run(*xs):
            if not xs:
                ctx.fail("needs at least one input")
            if same_shape and any(x.shape != xs[0].shape for x in xs):
                ctx.fail(f"inputs must all have the same shape before opset 8, got {[list(x.shape) for x in xs]}")
            if len(xs) == 1:
                return xs[0]
            dt = xs[0].dtype
            if widen and low_float(dt):
                xs = [x.float() for x in xs]
            r = op(xs[0], xs[1])
            for x in xs[2:]:
                r = op(r, x)
            if mean:
                r = r / len(xs)
            return r if r.dtype == dt else r.to(dt)
        return run

    for name in names:
        KERNELS.register(name, *versions)(factory)


_variadic("maximum", (1, 6, 8, 12, 13), ["Max"])
_variadic("minimum", (1, 6, 8, 12, 13), ["Min"])
_variadic("add", (1, 6, 8, 13), ["Sum"])
_variadic("add", (1, 6, 8, 13), ["Mean"], mean=True)


# ----------------------------------------------------------------------------- Clip, Where
def _clip(torch, x, lo, hi):
    """max(x, lo) then min(., hi): where lo > hi every element becomes hi (the ONNX rule)."""
    if lo is not None:
        x = torch.maximum(x, lo)
    if hi is not None:
        x = torch.minimum(x, hi)
    return x


@KERNELS.register("Clip", 1, 6)
def _clip_attr(ctx):
    import torch

    lo = float(ctx.attr("min")) if ctx.has_attr("min") else None
    hi = float(ctx.attr("max")) if ctx.has_attr("max") else None
    bounds: dict = {}          # (dtype, device) -> the bounds rounded to the element type

    def run(x):
        key = (x.dtype, x.device)
        b = bounds.get(key)
        if b is None:
            b = bounds[key] = tuple(None if v is None else torch.tensor(v, dtype=x.dtype, device=x.device)
                                    for v in (lo, hi))
        return _clip(torch, x, *b)
    return run


@KERNELS.register("Clip", 11, 12, 13)
def _clip_input(ctx):
    import torch

    def bound(v, x, which):
        if v is None:
            return None
        if v.numel() != 1:
            ctx.fail(f"'{which}' must be a scalar (or a one-element tensor), got shape {list(v.shape)}")
        return v.reshape(()).to(x.dtype)

    return lambda x, lo=None, hi=None: _clip(torch, x, bound(lo, x, "min"), bound(hi, x, "max"))


@KERNELS.register("Where", 9, 16)
def _where(ctx):
    import torch

    def run(cond, x, y):
        if cond.dtype != torch.bool:
            cond = cond != 0
        r = torch.where(cond, x, y)
        return r if r.dtype == x.dtype else r.to(x.dtype)
    return run
