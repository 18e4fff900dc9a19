"""Pools on numpy: the portable kernels with their kernel taps folded in place.

A fresh array per tap costs numpy a page-faulting allocation of the whole output each time
(MaxPool 3x3 stride 2 on (1, 64, 112, 112): about 5x slower than folding into one array);
here the first tap is copied once and every other tap is combined into it with ``out=``.
Everything else (attributes, geometry, padding, divisors, indices) is the portable kernel's.
"""

from __future__ import annotations

from onnxkit.plugin import KernelTable
from onnxkit_default_domain.kernels.pool import average_pool_kernel, lp_pool_kernel, max_pool_kernel

KERNELS = KernelTable()


def fold_in_place(op, views):
    """``op`` (a numpy ufunc) folded over ``views`` into a copy of the first."""
    if len(views) == 1:
        return views[0]
    acc = op(views[0], views[1])
    for v in views[2:]:
        op(acc, v, out=acc)
    return acc


@KERNELS.register("MaxPool", 1, 8, 10, 11, 12, 22)
def max_pool(ctx):
    return max_pool_kernel(ctx, fold=fold_in_place)


@KERNELS.register("AveragePool", 1, 7, 10, 11, 19, 22)
def average_pool(ctx):
    return average_pool_kernel(ctx, fold=fold_in_place)


@KERNELS.register("LpPool", 1, 2, 11, 18, 22)
def lp_pool(ctx):
    return lp_pool_kernel(ctx, fold=fold_in_place)
