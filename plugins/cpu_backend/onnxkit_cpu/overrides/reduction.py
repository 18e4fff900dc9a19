"""numpy fast path for ReduceSum and ReduceMean of ``onnxkit_default_domain.kernels.reduction``.

A sum over a block of adjacent axes of a C-contiguous float32/float64 tensor, with no more
than one side of the block longer than 1, is a BLAS matrix-vector product with a vector of
ones: much faster than numpy's reduction over many short rows.  Anything else, the axes
parsing and the output geometry are the portable family's.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit_default_domain.kernels import reduction as portable

KERNELS = KernelTable()
_BLAS_MAX = 1 << 16


def _blas_sum(ctx, x, ax, kd):
    """The sum over the sorted axes ``ax`` as ``x2d @ ones``, or None if not applicable."""
    if x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous or x.size == 0:
        return None
    if ax[-1] - ax[0] + 1 != len(ax):
        return None
    outer = int(np.prod(x.shape[:ax[0]], dtype=np.int64))
    r = int(np.prod(x.shape[ax[0]:ax[-1] + 1], dtype=np.int64))
    inner = int(np.prod(x.shape[ax[-1] + 1:], dtype=np.int64))
    if r > _BLAS_MAX or (outer > 1 and inner > 1):
        return None
    ones = np.ones(r, dtype=x.dtype)
    out = x.reshape(outer, r) @ ones if inner == 1 else ones @ x.reshape(r, inner)
    return out.reshape(portable.out_shape(ctx, x, ax, kd))


def _sum(ctx, xp, x, ax, kd):
    fast = _blas_sum(ctx, x, ax, kd)
    return portable.BODIES["ReduceSum"](ctx, xp, x, ax, kd) if fast is None else fast


def _mean(ctx, xp, x, ax, kd):
    fast = _blas_sum(ctx, x, ax, kd)
    if fast is None:
        return portable.BODIES["ReduceMean"](ctx, xp, x, ax, kd)
    fast /= x.size // max(fast.size, 1)
    return fast


for _name, _versions, _input_from in portable.REDUCE_DEFINITIONS:
    if _name == "ReduceSum":
        KERNELS.register("ReduceSum", *_versions)(portable.reduction_factory(_name, _input_from, _sum))
    elif _name == "ReduceMean":
        KERNELS.register("ReduceMean", *_versions)(portable.reduction_factory(_name, _input_from, _mean))
