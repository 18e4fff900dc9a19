"""numpy fast paths of the elementwise family (portable: ``onnxkit_default_domain/kernels/
elementwise.py``, which holds the rules and the attribute parsing):

* the binary operators (Add, Sub, Mul, Div, the comparisons, the logical and bitwise ones)
  and Where call their numpy function directly when the operands share one element type that
  numpy computes natively (float32/float64 with the floating-point warnings off, integers and
  bool as they are; integer Div stays portable for its zero check): the same ufunc the
  portable body calls, without its per-call type dispatch; anything else (narrow floats,
  mixed types, STRING, legacy broadcasting before 7) is the portable kernel's;
* Clip by one ``np.clip`` pass (numpy's clip is min(max(x, lo), hi), the ONNX rule, lo > hi
  included) instead of maximum-then-minimum;
* Sum and Mean of three or more inputs accumulate into the first partial result (``out=``)
  instead of allocating one array per input;
* Pow of a float32/float64 base by a one-element float32/float64 exponent 2, 3 or 0.5 (the
  portable :func:`~onnxkit_default_domain.kernels.elementwise.small_power`: ``x * x``,
  ``x * x * x``, ``sqrt(x)``) without the portable body's per-call type dispatch and host
  read, warnings off (the exponent read once where it is a constant of the plan); every other
  Pow is the portable kernel's;
* Add, Sub, Mul and Div of float16 / bfloat16 operands of one type: on their values widened to
  float32 (a constant operand once, :mod:`.half`), the result rounded once to their type: the
  portable body's arithmetic (it computes narrow floats in float32 too), with
  :mod:`.half`'s faster float16 conversions.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, binds_constants
from onnxkit_default_domain.api import elementwise as portable

from .half import Halves, Wide, is_half, narrow

KERNELS = KernelTable()


# -- binary operators, Where ------------------------------------------------------------------
_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float64))
_EXACT = frozenset(np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64,
                                         np.uint8, np.uint16, np.uint32, np.uint64))
#: numpy 2's error-state context variable and its all-ignore value, as portable.quiet sets them
#: (None on numpy 1: the portable wrapper, np.errstate, is used)
_STATE = getattr(portable, "_ERROR_STATE", None)
_IGNORE_ALL = getattr(portable, "_IGNORE_ALL", None)


def direct_factory(family, name: str, ufunc, arity: int = 2, exact: bool = True, quiet_floats: bool = True):
    """The factory of an override of every definition of ``name`` in the portable ``family``
    module (registered for ``family.KERNELS.versions(name)``): ``ufunc`` called directly on
    ``arity`` operands of one element type: of
    :data:`_FLOATS` (numpy's warnings off unless not ``quiet_floats``) or, with ``exact``, of
    :data:`_EXACT` (integer and boolean loops raise no floating-point flag); the portable
    kernel otherwise and for legacy broadcasting.  ``out=...`` makes a 0-d result an array.
    The warnings are turned off as :func:`portable.quiet` does, inline (its two extra calls
    would be a large share of a small Add's cost)."""
    make = {v: family.KERNELS[("", name, v)] for v in family.KERNELS.versions(name)}
    if _STATE is None or not quiet_floats:                              # pragma: no cover (numpy 1)
        def direct(*xs):
            return ufunc(*xs, out=...)
        floats = portable.quiet(direct) if quiet_floats else direct
    else:
        floats = None
    set_state, reset_state = (_STATE.set, _STATE.reset) if _STATE is not None else (None, None)

    def factory(ctx):
        other = make[ctx.since_version](ctx)
        if portable.legacy_align(ctx) is not None:
            return other
        half = _half_operands(ctx) if arity == 2 and name in _HALF_ARITH else None

        def binary(a, b):
            dt = a.dtype
            if dt is b.dtype:
                if dt in _FLOATS:
                    if floats is not None:
                        return floats(a, b)
                    token = set_state(_IGNORE_ALL)
                    try:
                        return ufunc(a, b, out=...)
                    finally:
                        reset_state(token)
                if exact and dt in _EXACT:
                    return ufunc(a, b, out=...)
                if half is not None and is_half(dt):
                    return _half_binary(ufunc, half, a, b, dt)
            return other(a, b)

        def unary(x):
            dt = x.dtype
            if dt in _FLOATS:
                if floats is not None:
                    return floats(x)
                token = set_state(_IGNORE_ALL)
                try:
                    return ufunc(x, out=...)
                finally:
                    reset_state(token)
            if exact and dt in _EXACT:
                return ufunc(x, out=...)
            return other(x)
        return binary if arity == 2 else unary

    factory.__name__ = f"{name.lower()}_direct"
    return factory


#: the binary operators whose float16 / bfloat16 operands are computed by :func:`_half_binary`
_HALF_ARITH = frozenset({"Add", "Sub", "Mul", "Div"})


def _half_operands(ctx):
    """(conversions, A's and B's widened copies) of a binary node (:mod:`.half`)."""
    halves = Halves.of(ctx)
    return halves, Wide.of(ctx, 0, halves), Wide.of(ctx, 1, halves)


def _half_binary(ufunc, half, a, b, dt):
    """``ufunc`` on half operands widened to float32, rounded once to ``dt`` (float32 holds
    every sum, difference, product and quotient of two such values to within half a float32 ulp,
    and 24 >= 2 * 11 + 2 bits: rounding that to float16 / bfloat16 is the correctly rounded result)."""
    halves, wa, wb = half
    with np.errstate(all="ignore"):
        r = ufunc(wa(a), wb(b), out=...)
    return narrow(r, dt, halves)


for _name, _ufunc in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Equal", np.equal),
                      ("Greater", np.greater), ("Less", np.less), ("GreaterOrEqual", np.greater_equal),
                      ("LessOrEqual", np.less_equal), ("And", np.logical_and), ("Or", np.logical_or),
                      ("Xor", np.logical_xor), ("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                      ("BitwiseXor", np.bitwise_xor)):
    KERNELS.register(_name, *portable.KERNELS.versions(_name))(direct_factory(portable, _name, _ufunc))
# integer Div: the portable zero check
KERNELS.register("Div", *portable.KERNELS.versions("Div"))(direct_factory(portable, "Div", np.divide, exact=False))


@KERNELS.register("Where", *sorted(v for (_, op, v) in portable.KERNELS if op == "Where"))
def where(ctx):
    other = portable.where(ctx)

    def run(cond, x, y):
        if cond.dtype is _BOOL and x.dtype is y.dtype:
            return np.where(cond, x, y)
        return other(cond, x, y)
    return run


_BOOL = np.dtype(np.bool_)


# -- Clip --------------------------------------------------------------------------------------
def _np_clip(xp, x, lo, hi):
    if x.dtype.kind == "V":                             # ml_dtypes (bfloat16...): no numpy loops
        return portable.clip(xp, x, lo, hi)
    return portable.as_array(xp, np.clip(x, lo, hi))    # min(max(x, lo), hi), as ONNX says


@KERNELS.register("Clip", 1, 6)
def clip_attr(ctx):
    return portable.clip_attr(ctx, clip=_np_clip)


@KERNELS.register("Clip", 11, 12, 13)
def clip_input(ctx):
    return portable.clip_input(ctx, clip=_np_clip)


# -- Sum, Mean ---------------------------------------------------------------------------------
def _fold_in_place(xp, fn, xs):
    r = fn(xs[0], xs[1])
    for x in xs[2:]:
        r = fn(r, x, out=r) if r.shape == np.broadcast_shapes(r.shape, x.shape) else fn(r, x)
    return r


@KERNELS.register("Sum", 1, 6, 8, 13)
def sum_(ctx):
    return portable.sum_(ctx, fold=_fold_in_place)


@KERNELS.register("Mean", 1, 6, 8, 13)
def mean(ctx):
    return portable.mean(ctx, fold=_fold_in_place)


# -- Pow ---------------------------------------------------------------------------------------
def _square(x):
    return np.multiply(x, x, out=...)


def _cube(x):
    r = np.multiply(x, x, out=...)
    return np.multiply(r, x, out=r)


def _root(x):
    return np.sqrt(x, out=...)


_SMALL_POWERS = {2.0: portable.quiet(_square), 3.0: portable.quiet(_cube), 0.5: portable.quiet(_root)}


@KERNELS.register("Pow", *sorted(v for (_, op, v) in portable.KERNELS if op == "Pow"))
def pow_(ctx):
    other = portable.pow_(ctx)
    if portable.legacy_align(ctx) is not None:
        return other

    def run(x, y):
        if x.dtype in _FLOATS and type(y) is np.ndarray and y.size == 1 and y.dtype in _FLOATS and y.ndim <= x.ndim:
            fn = _SMALL_POWERS.get(y.item())
            if fn is not None:
                return fn(x)
        return other(x, y)

    def bind(y):
        """A constant exponent: its value read once."""
        if not (type(y) is np.ndarray and y.size == 1 and y.dtype in _FLOATS):
            return None
        fn, rank = _SMALL_POWERS.get(y.item()), y.ndim
        if fn is None:
            return None

        def fixed(x, y):
            if x.dtype in _FLOATS and rank <= x.ndim:
                return fn(x)
            return other(x, y)
        return fixed

    return binds_constants(run, bind, 1)
