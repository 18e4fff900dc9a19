"""numpy fast paths of the elementwise family (portable: ``onnxkit_default_domain/kernels/
elementwise.py``, which holds the rules and the attribute parsing):

* Clip by one ``np.clip`` pass (numpy's clip is min(max(x, lo), hi), the ONNX rule, lo > hi
  included) instead of maximum-then-minimum;
* Sum and Mean of three or more inputs accumulate into the first partial result (``out=``)
  instead of allocating one array per input.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit_default_domain.kernels import elementwise as portable

KERNELS = KernelTable()


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
