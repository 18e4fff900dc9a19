"""Col2Im on the cpu backend: the blocks of a tiling fold placed by one pass.

Where the blocks tile the image — ``strides`` equal to ``block_shape``, ``dilations`` 1, no
``pads``, each image extent a multiple of the block's (the fold of MobileViT V2-like models) —
every image position receives exactly one element of one block, so the portable kernel's
zero buffer and per-offset strided additions (onnxkit_default_domain/kernels/conv.py) come to
``0 + v`` per element: computed as one ``np.add(blocks, 0, out=Y)`` over a transposed view of X,
for float32 / float64 X, bit-identical to them (``-0`` gives ``+0`` there too, a NaN keeps its
payload).  The geometry is checked and worked out once per input shape and block values.
Everything else (overlapping or spaced blocks, pads, dilation, other element types, an empty
input, a geometry the portable checks refuse) is the portable kernel's, with its checks and
errors.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit_cpu.overrides._plans import remember
from onnxkit_default_domain.api import conv as portable

KERNELS = KernelTable()

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def tiling_plan(x_shape, image, block, strides, dil, pads):
    """``(X's blocks view shape (N, C, K0, K1 ..., O0, O1 ...), Y's blocks shape (N, C, O0, K0, O1,
    K1 ...), the axes taking the latter to the former, Y's shape)`` where the blocks tile the
    image (module docstring), else None."""
    nd = len(image)
    if len(x_shape) != 3 or len(block) != nd or nd == 0 or any(d <= 0 for d in x_shape):
        return None
    if tuple(strides) != tuple(block) or any(d != 1 for d in dil) or any(pads):
        return None
    if any(b <= 0 or i <= 0 or i % b for i, b in zip(image, block)):
        return None
    n, ck, length = x_shape
    kp = math.prod(block)
    counts = tuple(i // b for i, b in zip(image, block))
    if ck % kp or math.prod(counts) != length:
        return None
    view = (n, ck // kp, *block, *counts)
    order = (0, 1) + tuple(a for i in range(nd) for a in (2 + nd + i, 2 + i))     # (N, C, O0, K0, O1, K1 ...)
    y_blocks = tuple(view[a] for a in order)
    return view, y_blocks, tuple(int(a) for a in np.argsort(order)), (n, ck // kp, *image)


@KERNELS.register("Col2Im", 18)
def col2im(ctx):
    """Col2Im-18: one pass where the blocks tile the image (module docstring), else the portable kernel."""
    other = portable.col2im(ctx)
    nd_attrs = (ctx.attr("strides"), ctx.attr("dilations"), ctx.attr("pads"))
    plans = {}          # (X shape, image, block) -> tiling_plan(...) or None

    def run(x, image_shape, block_shape):
        if x.dtype not in _FLOATS:
            return other(x, image_shape, block_shape)
        image, block = tuple(ctx.ints(image_shape)), tuple(ctx.ints(block_shape))
        key = (x.shape, image, block)
        if key in plans:
            plan = plans[key]
        else:
            nd = len(image)
            strides, dil, pads = (list(v) if v else d for v, d in
                                  zip(nd_attrs, ([1] * nd, [1] * nd, [0] * (2 * nd))))
            plan = remember(plans, key, tiling_plan(tuple(int(d) for d in x.shape), image, block, strides, dil, pads))
        if plan is None:
            return other(x, image_shape, block_shape)
        view, y_blocks, back, y_shape = plan
        y = np.empty(y_shape, x.dtype)
        # in X's order (long contiguous reads), each element written to its place in Y
        np.add(x.reshape(view), x.dtype.type(0), out=y.reshape(y_blocks).transpose(back))
        return y

    return run
