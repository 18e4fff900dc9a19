"""Reduction kernels of ai.onnx on the gpu backend (torch).

Operators and the since_versions (definitions) implemented:

* ReduceSum 1, 11 (``axes`` attribute), 13 (``axes`` input, ``noop_with_empty_axes``)
* ReduceMean, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare 1, 11, 13 (attribute), 18 (input)
* ReduceLogSum, ReduceLogSumExp 1, 11, 13 (attribute), 18, 28 (input)
* ReduceMax, ReduceMin 1, 11, 12, 13 (attribute), 18 (input), 20 (BOOL)
* ArgMax / ArgMin 1, 11, 12 (``select_last_index``), 13

Rules: ``axes`` absent or empty reduces every axis, unless ``noop_with_empty_axes`` is set
(input forms only), in which case the reduction is over no axis and only the element-wise
part of a composite reduction applies (ReduceSumSquare squares, ReduceLogSum takes the log).
Over an empty set of values: Sum, L1, L2, SumSquare give 0, Prod 1, LogSum and LogSumExp
-inf, Max the lowest value of the type (-inf for floats, False for BOOL) and Min the highest.
float16 and bfloat16 accumulate in float32; integer Sum/Prod/L1/SumSquare keep their type (the
low bits of the exact result), integer Mean/L2/LogSum/LogSumExp are computed in double and
truncated.  ArgMax/ArgMin give the first extreme (the last with ``select_last_index``) as int64.
"""

from __future__ import annotations

import math

from onnxkit.runtime import KernelTable
from onnxkit_cpu.kernels.reduction import REDUCE_DEFINITIONS
from onnxkit_cpu.kernels.shape import norm_axes, norm_axis

from .elementwise import low_float
from .shape import int_list

KERNELS = KernelTable()


def _out_shape(shape, axes, keepdims):
    if keepdims:
        return [1 if i in axes else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in axes]


def _flat(torch, op, x, ax, kd):
    """``op(t, dim=-1)`` over several axes: they are moved last and merged into one."""
    if len(ax) == 1:
        return op(x, dim=ax[0], keepdim=kd)
    rest = [i for i in range(x.ndim) if i not in ax]
    t = x.permute(*rest, *ax).reshape([x.shape[i] for i in rest] + [math.prod(x.shape[i] for i in ax)])
    return op(t, dim=-1).reshape(_out_shape(x.shape, ax, kd))


def _float_work(torch, x):
    """The tensor the arithmetic of a non-linear reduction runs on: float32 for half types,
    double for integers."""
    if low_float(x.dtype):
        return x.float()
    if not x.dtype.is_floating_point:
        return x.to(torch.float64)
    return x


def _sum_work(torch, x):
    """Sums of half types accumulate in float32, integers in int64 (cast back keeps the low bits)."""
    if low_float(x.dtype):
        return x.float()
    if not x.dtype.is_floating_point and x.dtype != torch.int64:
        return x.to(torch.int64)
    return x


def _sum(torch, x, ax, kd):
    return torch.sum(_sum_work(torch, x), dim=ax, keepdim=kd)


def _mean(torch, x, ax, kd):
    w = _float_work(torch, x)
    return torch.sum(w, dim=ax, keepdim=kd) / math.prod(x.shape[i] for i in ax) if x.numel() \
        else torch.mean(w, dim=ax, keepdim=kd)


def _prod(torch, x, ax, kd):
    return _flat(torch, torch.prod, _sum_work(torch, x), ax, kd)


def _l1(torch, x, ax, kd):
    return torch.sum(torch.abs(_sum_work(torch, x)), dim=ax, keepdim=kd)


def _sum_square(torch, x, ax, kd):
    w = _sum_work(torch, x)
    return torch.sum(w * w, dim=ax, keepdim=kd)


def _l2(torch, x, ax, kd):
    w = _float_work(torch, x)
    return torch.sqrt(torch.sum(w * w, dim=ax, keepdim=kd))


def _log_sum(torch, x, ax, kd):
    s = torch.sum(_sum_work(torch, x), dim=ax, keepdim=kd)
    return torch.log(s if s.dtype.is_floating_point else s.to(torch.float64))


def _log_sum_exp(torch, x, ax, kd):
    w = _float_work(torch, x)
    if w.numel() == 0:
        return torch.full(_out_shape(w.shape, ax, kd), -math.inf, dtype=w.dtype, device=w.device)
    ninf = torch.full((), -math.inf, dtype=w.dtype, device=w.device)
    m = torch.amax(torch.where(torch.isinf(w), ninf, w), dim=ax, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros((), dtype=w.dtype, device=w.device))
    r = torch.log(torch.sum(torch.exp(w - m), dim=ax, keepdim=True)) + m
    return r if kd else r.reshape(_out_shape(w.shape, ax, False))


def _extreme(is_min: bool):
    """ReduceMax / ReduceMin; over an empty set, the highest (Min) or lowest (Max) value of the type."""
    def run(torch, x, ax, kd):
        if x.numel() == 0:
            if x.dtype == torch.bool:
                fill = is_min
            elif x.dtype.is_floating_point:
                fill = math.inf if is_min else -math.inf
            else:
                info = torch.iinfo(x.dtype)
                fill = info.max if is_min else info.min
            return torch.full(_out_shape(x.shape, ax, kd), fill, dtype=x.dtype, device=x.device)
        if x.dtype == torch.bool:       # as uint8 (cast back by the caller): every device has amax for it
            x = x.to(torch.uint8)
        return (torch.amin if is_min else torch.amax)(x, dim=ax, keepdim=kd)

    return run


_OPS = {
    "ReduceSum": _sum, "ReduceMean": _mean, "ReduceProd": _prod, "ReduceL1": _l1, "ReduceL2": _l2,
    "ReduceSumSquare": _sum_square, "ReduceLogSum": _log_sum, "ReduceLogSumExp": _log_sum_exp,
    "ReduceMax": _extreme(is_min=False), "ReduceMin": _extreme(is_min=True),
}


def reduce(ctx, torch, op, x, axes, keepdims: bool):
    """``op`` over ``axes`` (None: every axis; (): none, the element-wise part only)."""
    if axes is None:
        ax = tuple(range(x.ndim))
    else:
        ax = tuple(sorted(norm_axes(ctx, axes, x.ndim)))
    if not ax:     # over no axis (or a 0-d input): a reduction of one value per element
        r = op(torch, x.unsqueeze(0), (0,), False)
    else:
        r = op(torch, x, ax, keepdims)
    return r if r.dtype == x.dtype else r.to(x.dtype)


def _factory(name: str, input_from: int):
    op = _OPS[name]

    def factory(ctx):
        import torch

        keepdims = bool(ctx.attr("keepdims", 1))
        if ctx.since_version < input_from:
            attr_axes = ctx.attr("axes")
            axes = [int(a) for a in attr_axes] if attr_axes else None
            return lambda x: reduce(ctx, torch, op, x, axes, keepdims)
        noop = bool(ctx.attr("noop_with_empty_axes", 0))

        def fn(x, axes=None):
            ax = None if axes is None else int_list(axes)
            if not ax:
                ax = () if noop else None
            return reduce(ctx, torch, op, x, ax, keepdims)

        return fn

    factory.__name__ = name
    return factory


for _name, _versions, _input_from in REDUCE_DEFINITIONS:
    KERNELS.register(_name, *_versions)(_factory(_name, _input_from))


# -- ArgMax / ArgMin ---------------------------------------------------------------------------
def _arg_kernel(ctx, is_min: bool):
    import torch

    func = torch.argmin if is_min else torch.argmax
    axis = int(ctx.attr("axis", 0))
    keepdims = bool(ctx.attr("keepdims", 1))
    last = bool(ctx.attr("select_last_index", 0)) if ctx.since_version >= 12 else False

    def fn(x):
        a = norm_axis(ctx, axis, x.ndim)
        n = x.shape[a]
        if n == 0:
            ctx.fail(f"axis {a} is empty")
        if x.dtype == torch.bool:
            x = x.to(torch.uint8)
        if last:
            return (n - 1) - func(torch.flip(x, (a,)), dim=a, keepdim=keepdims)
        return func(x, dim=a, keepdim=keepdims)

    return fn


@KERNELS.register("ArgMax", 1, 11, 12, 13)
def arg_max(ctx):
    return _arg_kernel(ctx, False)


@KERNELS.register("ArgMin", 1, 11, 12, 13)
def arg_min(ctx):
    return _arg_kernel(ctx, True)
