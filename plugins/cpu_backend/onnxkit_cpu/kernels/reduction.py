"""Reduction kernels of ai.onnx (cpu backend).

Operators and the since_versions (definitions) implemented:

* ReduceSum 1, 11 (``axes`` attribute), 13 (``axes`` input, ``noop_with_empty_axes``)
* ReduceMean, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare 1, 11, 13 (attribute), 18 (input)
* ReduceLogSum, ReduceLogSumExp 1, 11, 13 (attribute), 18, 28 (input)
* ReduceMax, ReduceMin 1, 11, 12, 13 (attribute), 18 (input), 20 (BOOL)

Rules: ``axes`` absent or empty reduces every axis, unless ``noop_with_empty_axes`` is set
(input forms only), in which case the reduction is over no axis and only the element-wise
part of a composite reduction applies (ReduceSumSquare squares, ReduceLogSum takes the log).
Over an empty set of values: Sum, L1, L2, SumSquare give 0, Prod 1, LogSum and LogSumExp
-inf, Max the lowest value of the type (-inf for floats, False for BOOL) and Min the highest.
float16 and bfloat16 accumulate in float32; integer results keep their type.
"""

from __future__ import annotations

import numpy as np

from onnxkit.runtime import KernelTable

from .shape import int_list, norm_axes

KERNELS = KernelTable()


def _work(x: np.ndarray) -> np.ndarray:
    """The array the arithmetic runs on: half and ml_dtypes floats widened to float32."""
    return x.astype(np.float32) if x.dtype == np.float16 or x.dtype.kind == "V" else x


def _acc_dtype(x: np.ndarray):
    return np.float32 if x.dtype == np.float16 or x.dtype.kind == "V" else x.dtype


def _out_shape(shape, axes, keepdims):
    ax = range(len(shape)) if axes is None else axes
    if keepdims:
        return tuple(1 if i in ax else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in ax)


_BLAS_MAX = 1 << 16


def _blas_sum(x, ax, kd):
    """The sum over a block of adjacent axes of a C-contiguous float32/float64 tensor as a BLAS
    matrix-vector product (numpy's reduction is slow for many short rows); None if not applicable."""
    if x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous or x.size == 0:
        return None
    axes = tuple(range(x.ndim)) if ax is None else ax
    if not axes or axes[-1] - axes[0] + 1 != len(axes):
        return None
    outer = int(np.prod(x.shape[:axes[0]], dtype=np.int64))
    r = int(np.prod(x.shape[axes[0]:axes[-1] + 1], dtype=np.int64))
    inner = int(np.prod(x.shape[axes[-1] + 1:], dtype=np.int64))
    if r > _BLAS_MAX or (outer > 1 and inner > 1):
        return None
    ones = np.ones(r, dtype=x.dtype)
    out = x.reshape(outer, r) @ ones if inner == 1 else ones @ x.reshape(r, inner)
    return out.reshape(_out_shape(x.shape, ax, kd))


def _sum(x, ax, kd):
    fast = _blas_sum(x, ax, kd)
    return fast if fast is not None else np.sum(x, axis=ax, keepdims=kd, dtype=_acc_dtype(x))


def _mean(x, ax, kd):
    fast = _blas_sum(x, ax, kd)
    if fast is not None:
        count = x.size // max(fast.size, 1)
        fast /= count
        return fast
    if x.dtype.kind in "iub":
        return np.mean(x, axis=ax, keepdims=kd, dtype=np.float64)
    return np.mean(x, axis=ax, keepdims=kd, dtype=_acc_dtype(x))


def _prod(x, ax, kd):
    return np.prod(x, axis=ax, keepdims=kd, dtype=_acc_dtype(x))


def _l1(x, ax, kd):
    return np.sum(np.abs(_work(x)), axis=ax, keepdims=kd)


def _sum_square(x, ax, kd):
    w = _work(x)
    return np.sum(w * w, axis=ax, keepdims=kd)


def _l2(x, ax, kd):
    w = _work(x)
    if w.dtype.kind in "iu":
        w = w.astype(np.float64)
    return np.sqrt(np.sum(w * w, axis=ax, keepdims=kd))


def _log_sum(x, ax, kd):
    s = np.sum(_work(x), axis=ax, keepdims=kd)
    return np.log(s if s.dtype.kind == "f" else s.astype(np.float64))


def _log_sum_exp(x, ax, kd):
    w = _work(x)
    if w.dtype.kind != "f":
        w = w.astype(np.float64)
    if w.size == 0:
        return np.full(_out_shape(w.shape, ax, kd), -np.inf, dtype=w.dtype)
    m = np.max(np.where(np.isinf(w), -np.inf, w), axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0).astype(w.dtype, copy=False)
    r = np.log(np.sum(np.exp(w - m), axis=ax, keepdims=True)) + m
    if not kd:
        r = r.reshape(_out_shape(w.shape, ax, False))
    return r


def _extreme(ufunc, is_min: bool):
    """ReduceMax / ReduceMin; over an empty set, the highest (Min) or lowest (Max) value of the type."""
    def run(x, ax, kd):
        if x.size == 0:
            if x.dtype == np.bool_:
                fill = is_min
            elif x.dtype.kind in "iu":
                info = np.iinfo(x.dtype)
                fill = info.max if is_min else info.min
            else:
                fill = np.inf if is_min else -np.inf
            return np.full(_out_shape(x.shape, ax, kd), fill, dtype=x.dtype)
        return ufunc.reduce(_work(x), axis=ax, keepdims=kd)

    return run


_OPS = {
    "ReduceSum": _sum, "ReduceMean": _mean, "ReduceProd": _prod, "ReduceL1": _l1, "ReduceL2": _l2,
    "ReduceSumSquare": _sum_square, "ReduceLogSum": _log_sum, "ReduceLogSumExp": _log_sum_exp,
    "ReduceMax": _extreme(np.maximum, is_min=False), "ReduceMin": _extreme(np.minimum, is_min=True),
}


def reduce(ctx, op, x: np.ndarray, axes, keepdims: bool) -> np.ndarray:
    """``op`` over ``axes`` (None: every axis; (): none)."""
    ax = None if axes is None else tuple(sorted(norm_axes(ctx, axes, x.ndim)))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = op(x, ax, keepdims)
    return np.asarray(r).astype(x.dtype, copy=False)


def _factory(name: str, input_from: int):
    op = _OPS[name]

    def factory(ctx):
        keepdims = bool(ctx.attr("keepdims", 1))
        if ctx.since_version < input_from:
            attr_axes = ctx.attr("axes")
            axes = [int(a) for a in attr_axes] if attr_axes else None
            return lambda x: reduce(ctx, op, x, axes, keepdims)
        noop = bool(ctx.attr("noop_with_empty_axes", 0))

        def fn(x, axes=None):
            ax = None if axes is None else int_list(axes)
            if not ax:
                ax = () if noop else None
            return reduce(ctx, op, x, ax, keepdims)

        return fn

    factory.__name__ = name
    return factory


# (op, since_versions, the version from which the axes are an input)
REDUCE_DEFINITIONS = (
    ("ReduceSum", (1, 11, 13), 13),
    *((n, (1, 11, 13, 18), 18) for n in ("ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare")),
    *((n, (1, 11, 13, 18, 28), 18) for n in ("ReduceLogSum", "ReduceLogSumExp")),
    *((n, (1, 11, 12, 13, 18, 20), 18) for n in ("ReduceMax", "ReduceMin")),
)
for _name, _versions, _input_from in REDUCE_DEFINITIONS:
    KERNELS.register(_name, *_versions)(_factory(_name, _input_from))
