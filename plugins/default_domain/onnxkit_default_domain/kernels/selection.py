"""Ordering and selection of ai.onnx (every backend): TopK, Unique, CumSum (ArgMax/ArgMin: reduction.py).

TopK-1 takes ``k`` as an attribute, from 10 as the input ``K``; ``largest`` and ``sorted``
come at 11.  CumSum has ``exclusive`` and
``reverse`` throughout; Unique ``sorted`` and ``axis``.

Ties are broken by the lower index (a stable sort), as the reference does; floats of fewer
than 32 bits (float16, bfloat16) are ordered and summed in float32.  Unique's outputs depend
on the values (their extents are known only when it runs): it is computed on the host.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, arrays, size_guard

from ._common import norm_axis, scalar_int

KERNELS = KernelTable()


def sort_key(xp, x):
    """An array that orders like ``x`` and that the namespace sorts natively."""
    if arrays.is_narrow_float(x.dtype):
        return xp.astype(x, xp.float32)
    if arrays.is_bool(x.dtype):
        return xp.astype(x, xp.uint8)
    return x


def _along(ndim: int, axis: int, s: slice) -> tuple:
    return tuple(s if i == axis else slice(None) for i in range(ndim))


# -- TopK --------------------------------------------------------------------------------------
def top_k_check(ctx, x, k: int, axis: int) -> int:
    """TopK's normalised axis; ctx.fail unless 0 <= k <= the extent along it."""
    a = norm_axis(ctx, axis, x.ndim)
    n = int(x.shape[a])
    if not 0 <= k <= n:
        ctx.fail(f"k = {k} must lie in [0, {n}]")
    return a


def top_k_order(ctx, x, k: int, a: int, largest: bool):
    """The positions of the ``k`` largest (smallest) values along axis ``a``, sorted, ties by
    the lower index."""
    xp = ctx.xp
    order = xp.argsort(sort_key(xp, x), axis=a, descending=largest, stable=True)
    return order[_along(x.ndim, a, slice(0, k))]


def top_k(ctx, x, k: int, axis: int, largest: bool):
    xp = ctx.xp
    a = top_k_check(ctx, x, k, axis)
    order = top_k_order(ctx, x, k, a, largest)
    return xp.take_along_axis(x, order, axis=a), xp.astype(order, xp.int64)


def top_k_args(ctx) -> tuple:
    """TopK's ``axis`` and ``largest`` (defined from 11; before, the largest)."""
    axis = int(ctx.attr("axis"))
    return axis, bool(ctx.attr("largest", 1)) if ctx.since_version >= 11 else True


@KERNELS.register("TopK", 1)
def top_k_v1(ctx):
    k, axis = ctx.attr("k"), int(ctx.attr("axis"))
    if k is None:
        ctx.fail("TopK-1 needs the 'k' attribute")
    return lambda x: top_k(ctx, x, int(k), axis, True)


@KERNELS.register("TopK", 10, 11, 24)
def top_k_kernel(ctx):
    axis, largest = top_k_args(ctx)
    return lambda x, k: top_k(ctx, x, scalar_int(ctx, k, "K"), axis, largest)


# -- Unique ------------------------------------------------------------------------------------
def unique_host(ctx, x: np.ndarray, axis, is_sorted: bool) -> tuple:
    """Unique of a host array: (values, first indices, inverse indices, counts)."""
    if axis is None:
        y, ind, inv, cnt = np.unique(x.reshape(-1), return_index=True, return_inverse=True, return_counts=True)
        a = 0
    else:
        a = norm_axis(ctx, axis, x.ndim)
        if x.dtype == object:
            ctx.fail("unique sub-tensors of a STRING tensor along an axis are not supported")
        y, ind, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=a)
    inv = inv.reshape(-1)
    if not is_sorted:   # order of first occurrence
        order = np.argsort(ind, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y, ind, cnt, inv = np.take(y, order, axis=a), ind[order], cnt[order], rank[inv]
    return y.astype(x.dtype, copy=False), ind.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64)


@KERNELS.register("Unique", 11, 28)
@size_guard("unique")
def unique(ctx):
    axis = ctx.attr("axis")
    axis = None if axis is None else int(axis)
    is_sorted = bool(ctx.attr("sorted"))

    return lambda x: tuple(ctx.from_host(v) for v in unique_host(ctx, ctx.to_host(x), axis, is_sorted))


# -- CumSum ------------------------------------------------------------------------------------
@KERNELS.register("CumSum", 11, 14)
def cum_sum(ctx):
    xp = ctx.xp
    exclusive = bool(ctx.attr("exclusive"))
    reverse = bool(ctx.attr("reverse"))

    def fn(x, axis):
        a = norm_axis(ctx, scalar_int(ctx, axis, "axis"), x.ndim)
        acc = xp.float32 if arrays.is_narrow_float(x.dtype) else x.dtype
        y = xp.flip(x, axis=a) if reverse else x
        c = xp.cumulative_sum(xp.astype(y, acc, copy=False), axis=a, dtype=acc, include_initial=exclusive)
        if exclusive:
            c = c[_along(x.ndim, a, slice(0, int(x.shape[a])))]
        if reverse:
            c = xp.flip(c, axis=a)
        return xp.astype(c, x.dtype, copy=False)

    return fn
