"""numpy fast paths of Conv: im2col as one copy of a strided window view of the padded input
(faster than stacking a slice per kernel offset: 1.3x on depthwise 3x3 columns), and the bias
added into the kernel's own product (no second output-sized array).

Everything else (attributes, geometry, checks, the 1x1 / depthwise / grouped products) is the
portable family's (:mod:`onnxkit_default_domain.kernels.conv`).
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable

from onnxkit_default_domain.kernels import conv as portable

KERNELS = KernelTable()


def window_view(xpad, kernel, strides, dil, out_shape):
    """``(N, C, *K, *O)``: a read-only strided view of the windows of the padded input
    (element ``[n, c, k..., o...]`` is ``xpad[n, c, o*s + k*d ...]``)."""
    sp = xpad.strides[2:]
    return np.lib.stride_tricks.as_strided(
        xpad, xpad.shape[:2] + tuple(kernel) + tuple(out_shape),
        xpad.strides[:2] + tuple(d * st for d, st in zip(dil, sp)) + tuple(s * st for s, st in zip(strides, sp)),
        writeable=False)


def strided_columns(xp, xpad, kernel, strides, dil, out_shape):
    """:func:`onnxkit_default_domain.kernels.conv.columns` by one copy of :func:`window_view`."""
    n, c = xpad.shape[:2]
    view = window_view(np.asarray(xpad), kernel, strides, dil, out_shape)
    return np.ascontiguousarray(view).reshape(n, c, -1, *out_shape)


def add_into(y, bias):
    """``y += bias``: ``y`` is the kernel's own fresh product, never an input."""
    y += bias
    return y


@KERNELS.register("Conv", 1, 11, 22)
def conv(ctx):
    return portable.make_conv(ctx, strided_columns, add_into)
