"""Reductions of ai.onnx, written once for every backend: ReduceSum, ReduceMean, ReduceProd,
ReduceMax, ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, and
ArgMax / ArgMin, every definition of opsets 1..28.

Version rules.  The ``axes`` of a Reduce* operator are an attribute up to the definition in
:data:`REDUCE_DEFINITIONS` (13 for ReduceSum, 18 for the others) and an optional input from
it on, together with ``noop_with_empty_axes``.  ``axes`` absent or empty reduces every axis,
unless ``noop_with_empty_axes`` is set, in which case the reduction is over no axis and only
the element-wise part of a composite reduction applies (ReduceSumSquare squares, ReduceLogSum
takes the log...).  Repeated axes are an error.  ReduceMax/ReduceMin take BOOL from 20.
ArgMax/ArgMin give the first extreme along ``axis`` (the last with ``select_last_index``,
from 12) as int64; an empty axis is an error.

Values.  Over an empty set: Sum, L1, L2, SumSquare give 0, Prod 1, Mean NaN, LogSum and
LogSumExp -inf, Max the lowest value of the type (-inf for floats, False for BOOL) and Min the
highest.  LogSumExp subtracts the largest finite value before exponentiating.  float16,
bfloat16 and the 8-bit floats are computed (sums accumulated) in float32; integer Sum, Prod,
L1 and SumSquare keep the low bits of the exact result in the input type; integer Mean, L2,
LogSum and LogSumExp are computed in double and truncated.  The output geometry is
:func:`~onnxkit.inference.common.reduce_shape`, the function the inference rules use.

:func:`reduction_factory` (axes parsing) and the bodies in :data:`BODIES` are public so a
backend override replaces a body and nothing else.
"""

from __future__ import annotations

import math

import numpy as np
from ._common import device_of as device

from onnxkit.plugin import KernelTable, arrays

from ..inference.reduction import reduce_shape
from ._common import norm_axes, norm_axis, shape_of, size_of

KERNELS = KernelTable()


def work(xp, x):
    """The array non-linear arithmetic runs on: narrow floats as float32, integers as float64."""
    if arrays.is_narrow_float(x.dtype):
        return xp.astype(x, xp.float32)
    return x if arrays.is_float(x.dtype) else xp.astype(x, xp.float64)


def summand(xp, x):
    """The array a sum runs on: narrow floats as float32, others as they are (integer sums
    accumulate in the namespace's default integer; the caller keeps the low bits)."""
    return xp.astype(x, xp.float32) if arrays.is_narrow_float(x.dtype) else x


def out_shape(ctx, x, ax: tuple, kd: bool) -> tuple:
    """The extents of the reduction of ``x`` over the (normalised) axes ``ax``."""
    return tuple(reduce_shape(ctx, shape_of(x), list(ax), kd))


def _count(x, ax) -> int:
    return math.prod(int(x.shape[a]) for a in ax)


def _sum(ctx, xp, x, ax, kd):
    return xp.sum(summand(xp, x), axis=ax, keepdims=kd)


def _mean(ctx, xp, x, ax, kd):
    w = summand(xp, x) if arrays.is_float(x.dtype) else xp.astype(x, xp.float64)
    return xp.sum(w, axis=ax, keepdims=kd) / _count(x, ax)      # 0 / 0: NaN over an empty set


def _prod(ctx, xp, x, ax, kd):
    return xp.prod(summand(xp, x), axis=ax, keepdims=kd)


def _l1(ctx, xp, x, ax, kd):
    return xp.sum(xp.abs(summand(xp, x)), axis=ax, keepdims=kd)


def _sum_square(ctx, xp, x, ax, kd):
    w = summand(xp, x)
    return xp.sum(w * w, axis=ax, keepdims=kd)


def _l2(ctx, xp, x, ax, kd):
    w = work(xp, x)
    return xp.sqrt(xp.sum(w * w, axis=ax, keepdims=kd))


def _log_sum(ctx, xp, x, ax, kd):
    s = xp.sum(summand(xp, x), axis=ax, keepdims=kd)
    return xp.log(s if arrays.is_float(s.dtype) else xp.astype(s, xp.float64))


def _log_sum_exp(ctx, xp, x, ax, kd):
    w = work(xp, x)
    if size_of(w) == 0:
        return xp.full(out_shape(ctx, w, ax, kd), -math.inf, dtype=w.dtype, device=device(w))
    m = xp.max(xp.where(xp.isinf(w), -math.inf, w), axis=ax, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0.0)                         # all infinite: shift by 0
    r = xp.log(xp.sum(xp.exp(w - m), axis=ax, keepdims=True)) + m
    return r if kd else xp.reshape(r, out_shape(ctx, w, ax, False))


def _extreme(is_min: bool):
    """ReduceMax / ReduceMin; over an empty set, the highest (Min) or lowest (Max) value of the type."""
    def run(ctx, xp, x, ax, kd):
        dt = x.dtype
        if size_of(x) == 0:
            if arrays.is_bool(dt):
                fill = is_min
            elif arrays.is_integer(dt):
                info = xp.iinfo(dt)
                fill = info.max if is_min else info.min
            else:
                fill = math.inf if is_min else -math.inf
            return xp.full(out_shape(ctx, x, ax, kd), fill, dtype=dt, device=device(x))
        w = xp.astype(x, xp.uint8) if arrays.is_bool(dt) else summand(xp, x)   # every namespace orders uint8
        return (xp.min if is_min else xp.max)(w, axis=ax, keepdims=kd)

    return run


#: The body of each Reduce* operator: ``body(ctx, xp, x, axes, keepdims)`` over a non-empty
#: tuple of normalised axes, any result type (the caller casts to the input's type).
BODIES = {
    "ReduceSum": _sum, "ReduceMean": _mean, "ReduceProd": _prod, "ReduceL1": _l1, "ReduceL2": _l2,
    "ReduceSumSquare": _sum_square, "ReduceLogSum": _log_sum, "ReduceLogSumExp": _log_sum_exp,
    "ReduceMax": _extreme(is_min=False), "ReduceMin": _extreme(is_min=True),
}


def reduce(ctx, body, x, axes, keepdims: bool):
    """``body`` over ``axes`` (None: every axis; (): none, the element-wise part only), the
    result in ``x``'s type."""
    xp = ctx.xp
    ax = tuple(range(x.ndim)) if axes is None else tuple(sorted(norm_axes(ctx, axes, x.ndim)))
    with np.errstate(all="ignore"):
        if ax:
            r = body(ctx, xp, x, ax, keepdims)
        else:        # over no axis (or a 0-d input): a reduction of one value per element
            r = body(ctx, xp, xp.expand_dims(x, axis=0), (0,), False)
        if r.ndim == 0:
            r = xp.asarray(r)          # numpy gives a scalar for a reduction to 0-d
        return r if r.dtype == x.dtype else xp.astype(r, x.dtype)


def reduction_factory(name: str, input_from: int, body=None):
    """The kernel factory of Reduce* operator ``name`` whose ``axes`` are an input from
    definition ``input_from`` on; ``body`` replaces :data:`BODIES` ``[name]`` (a backend's
    override)."""
    body = BODIES[name] if body is None else body

    def factory(ctx):
        keepdims = bool(ctx.attr("keepdims"))
        if ctx.since_version < input_from:
            attr_axes = ctx.attr("axes")
            axes = [int(a) for a in attr_axes] if attr_axes else None
            return lambda x: reduce(ctx, body, x, axes, keepdims)
        noop = bool(ctx.attr("noop_with_empty_axes", 0))

        def fn(x, axes=None):
            ax = None if axes is None else ctx.ints(axes)
            if not ax:
                ax = () if noop else None
            return reduce(ctx, body, x, ax, keepdims)

        return fn

    factory.__name__ = name
    return factory


#: (operator, its since_versions, the definition from which the axes are an input)
REDUCE_DEFINITIONS = (
    ("ReduceSum", (1, 11, 13), 13),
    *((n, (1, 11, 13, 18), 18) for n in ("ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare")),
    *((n, (1, 11, 13, 18, 28), 18) for n in ("ReduceLogSum", "ReduceLogSumExp")),
    *((n, (1, 11, 12, 13, 18, 20), 18) for n in ("ReduceMax", "ReduceMin")),
)
for _name, _versions, _input_from in REDUCE_DEFINITIONS:
    KERNELS.register(_name, *_versions)(reduction_factory(_name, _input_from))


# -- ArgMax / ArgMin ---------------------------------------------------------------------------
def _arg_kernel(ctx, is_min: bool):
    xp = ctx.xp
    func = xp.argmin if is_min else xp.argmax
    axis = int(ctx.attr("axis"))
    keepdims = bool(ctx.attr("keepdims"))
    last = bool(ctx.attr("select_last_index", 0)) if ctx.since_version >= 12 else False

    def fn(x):
        a = norm_axis(ctx, axis, x.ndim)
        n = int(x.shape[a])
        if n == 0:
            ctx.fail(f"axis {a} is empty")
        if arrays.is_bool(x.dtype):
            x = xp.astype(x, xp.uint8)
        elif arrays.is_narrow_float(x.dtype):
            x = xp.astype(x, xp.float32)          # orders alike; every namespace compares float32
        if last:
            r = (n - 1) - func(xp.flip(x, axis=a), axis=a, keepdims=keepdims)
        else:
            r = func(x, axis=a, keepdims=keepdims)
        return xp.astype(xp.asarray(r), xp.int64)

    return fn


@KERNELS.register("ArgMax", 1, 11, 12, 13)
def arg_max(ctx):
    return _arg_kernel(ctx, False)


@KERNELS.register("ArgMin", 1, 11, 12, 13)
def arg_min(ctx):
    return _arg_kernel(ctx, True)
