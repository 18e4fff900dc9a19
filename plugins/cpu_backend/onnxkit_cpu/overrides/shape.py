"""cpu overrides of the shape family (``onnxkit_default_domain/kernels/shape.py``).

Reshape, Transpose, Concat, Squeeze, Unsqueeze, Expand and Shape run in every model, mostly
on small tensors, where the per-call cost is the array-api-compat wrappers' (a few
microseconds each): these call numpy itself.  Attribute parsing and geometry are the
portable family's.
"""

from __future__ import annotations

import numpy as np
from onnxkit_default_domain.kernels.shape import (
    _LATEST, concat_axis, concat_check, expand_target, reshape_allowzero, reshape_target, shape_bounds,
    squeeze_target, transpose_perm, unsqueeze_target,
)

from onnxkit.plugin import KernelTable

KERNELS = KernelTable()


def _ints(v) -> list:
    """An integer numpy array's elements as Python ints (``tolist`` gives ints already)."""
    return np.asarray(v).reshape(-1).tolist()


@KERNELS.register("Reshape", 5, 13, 14, 19, *_LATEST)
def reshape(ctx):
    allowzero = reshape_allowzero(ctx)
    return lambda x, shape: x.reshape(reshape_target(ctx, x, _ints(shape), allowzero))


@KERNELS.register("Transpose", 1, 13, *_LATEST)
def transpose(ctx):
    perm = transpose_perm(ctx)
    return lambda x: np.transpose(x, perm(x.ndim))


@KERNELS.register("Concat", 1, 4, 11, 13)
def concat(ctx):
    axis = concat_axis(ctx)
    return lambda *xs: np.concatenate(xs, axis=concat_check(ctx, xs, axis))


@KERNELS.register("Squeeze", 13, *_LATEST)
def squeeze(ctx):
    return lambda x, axes=None: x.reshape(squeeze_target(ctx, x, None if axes is None else _ints(axes)))


@KERNELS.register("Unsqueeze", 13, *_LATEST)
def unsqueeze(ctx):
    return lambda x, axes: x.reshape(unsqueeze_target(ctx, x, _ints(axes)))


@KERNELS.register("Expand", 8, 13)
def expand(ctx):
    def fn(x, shape):
        out = expand_target(ctx, x, _ints(shape))
        return x if out == x.shape else np.array(np.broadcast_to(x, out))

    return fn


@KERNELS.register("Shape", 1, 13, 15, 19, *_LATEST)
def shape(ctx):
    start, end = shape_bounds(ctx)   # Python slicing clamps them as Shape-15 does
    return lambda x: np.array(x.shape[start:end], dtype=np.int64)
