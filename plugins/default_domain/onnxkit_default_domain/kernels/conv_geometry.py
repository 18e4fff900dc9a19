"""Window attributes, geometry and padding of the sliding-window kernels (convolutions, pools).

The output extents and pads are :mod:`onnxkit_default_domain.inference.nn_geometry`'s (the
inference functions use the same functions); here they are read from a node's attributes
and an impossible geometry fails naming the node.  :func:`pad_spatial` and
:func:`window_slice` work over any array namespace.
"""

from __future__ import annotations

import math

from ..inference.nn_geometry import GeometryError, transpose_geometry, window_geometry
from ._common import device_of  # noqa: F401  (pool.py and conv.py take it from here)


def spatial_attrs(ctx, nd: int, kernel=None) -> tuple:
    """``(kernel_shape, strides, dilations, pads or None, auto_pad)`` of a node for ``nd``
    spatial axes; ``kernel`` (W's extents) where the node has no ``kernel_shape``."""
    ks = ctx.attr("kernel_shape")
    kernel = [int(k) for k in ks] if ks else (None if kernel is None else [int(k) for k in kernel])
    strides = [int(s) for s in (ctx.attr("strides") or [1] * nd)]
    dil = [int(d) for d in (ctx.attr("dilations") or [1] * nd)]
    pads = ctx.attr("pads")
    pads = [int(p) for p in pads] if pads else None
    auto_pad = ctx.attr_str("auto_pad") or "NOTSET"
    return kernel, strides, dil, pads, auto_pad


def conv_geometry(ctx, in_shape, kernel, strides, dil, pads, auto_pad, ceil_mode=False) -> tuple:
    """``(out, begin, end)`` of a sliding window over spatial extents ``in_shape``
    (:func:`~onnxkit_default_domain.inference.nn_geometry.window_geometry`); ctx.fail for an
    impossible geometry."""
    try:
        return window_geometry([int(d) for d in in_shape], kernel, strides, dil, pads, auto_pad, ceil_mode)
    except GeometryError as exc:
        ctx.fail(str(exc))


def conv_transpose_geometry(ctx, in_shape, kernel, strides, dil, pads, auto_pad, out_pad_attr,
                            out_shape_attr) -> tuple:
    """``(output_padding, effective kernel extents, begin, end, output extents)`` of a
    ConvTranspose (:func:`~onnxkit_default_domain.inference.nn_geometry.transpose_geometry`);
    ctx.fail for an impossible geometry."""
    try:
        out_pad, begin, end, final = transpose_geometry([int(d) for d in in_shape], kernel, strides, dil, pads,
                                                        auto_pad, out_pad_attr, out_shape_attr)
    except GeometryError as exc:
        ctx.fail(str(exc))
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    return out_pad, eff, begin, end, final


def col2im_geometry(ctx, x_shape, image, block) -> tuple:
    """Col2Im's geometry: ``strides, dilations, pads, prod(block), counts`` (the blocks along
    each image axis: the window rule of Conv over the padded image); ctx.fail where the input
    does not hold exactly those blocks."""
    nd = len(image)
    if len(block) != nd:
        ctx.fail(f"image_shape {image} and block_shape {block} differ in length")
    strides = [int(s) for s in (ctx.attr("strides") or [1] * nd)]
    dil = [int(d) for d in (ctx.attr("dilations") or [1] * nd)]
    pads = [int(p) for p in (ctx.attr("pads") or [0] * (2 * nd))]
    if len(x_shape) != 3:
        ctx.fail(f"input must have rank 3, got {len(x_shape)}")
    n, ck, length = (int(d) for d in x_shape)
    kp = math.prod(block)
    if kp == 0 or ck % kp:
        ctx.fail(f"input dimension 1 ({ck}) is not a multiple of prod(block_shape) ({kp})")
    counts, _, _ = conv_geometry(ctx, image, block, strides, dil, pads, "NOTSET")
    if math.prod(counts) != length or not all(counts):
        ctx.fail(f"input dimension 2 ({length}) differs from the number of blocks {counts}")
    return strides, dil, pads, kp, counts


def pad_spatial(xp, x, begin, end, value=0):
    """``x`` with its spatial axes (2..) padded by ``begin``/``end`` with ``value`` (negative
    pads crop); ``x`` itself when there is nothing to do (never written into)."""
    if not any(begin) and not any(end):
        return x
    lead = (slice(None), slice(None))
    crop = tuple(slice(max(0, -b), int(x.shape[2 + i]) - max(0, -e)) for i, (b, e) in enumerate(zip(begin, end)))
    x = x[lead + crop]
    begin = [max(0, b) for b in begin]
    end = [max(0, e) for e in end]
    if not any(begin) and not any(end):
        return x
    inner = [int(d) for d in x.shape[2:]]
    shape = tuple(int(d) for d in x.shape[:2]) + tuple(d + b + e for d, b, e in zip(inner, begin, end))
    out = xp.full(shape, value, dtype=x.dtype, device=device_of(x))
    out[lead + tuple(slice(b, b + d) for b, d in zip(begin, inner))] = x
    return out


def window_slice(offs, dil, out_shape, strides) -> tuple:
    """The strided slices of a padded input read by kernel offset ``offs``."""
    return tuple(slice(o * d, o * d + (n - 1) * s + 1, s) for o, d, n, s in zip(offs, dil, out_shape, strides))
