"""Resizing and sampling: Resize, Upsample, GridSample, AffineGrid, Col2Im."""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import DataType, FunctionTable
from onnxkit.plugin.inference import dims_of, elem_of, int_list, normalize_axis, tensor, unify

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)
INT32, UINT8 = int(DataType.INT32), int(DataType.UINT8)


# -- resizing, sampling ---------------------------------------------------------------------------

def resize_extents(dims, axes, scales=None, sizes=None, policy="stretch"):
    """The per-axis scales and the output extents of Resize / Upsample, for inference and the
    kernels alike.

    ``dims``: the input's extents (int, or str / None where symbolic / unknown); ``axes``: the
    distinct non-negative axes that ``scales`` or ``sizes`` (host sequences, exactly one of
    them given) hold one value each for; ``policy``: ``keep_aspect_ratio_policy`` (sizes only).
    Returns full-rank lists ``(scales, extents)``; an axis not listed keeps its extent and scale
    1.0.  From scales, an extent is floor(scale * input extent), whatever the roi (as the ONNX
    reference and onnxruntime compute it); an unknown input extent stays as it is under scale 1
    and becomes None otherwise.  From sizes, ``stretch`` takes them as they are (scale = size /
    input extent); ``not_larger`` / ``not_smaller`` take the smallest / largest of those ratios
    for every listed axis, each extent then round-half-up(scale * input extent), and every
    listed extent is None unless all listed input extents are known.  A zero input extent has
    scale 1.0.  A scale that is not positive or a negative size gives extent None (the kernels
    refuse both).
    """
    r = len(dims)
    out_scales, out = [1.0] * r, list(dims)

    def ratio(a, s):
        d = dims[a]
        return None if not isinstance(d, int) else (s / d if d else 1.0)

    if sizes is not None:
        sizes = [int(s) for s in sizes]
        if policy == "stretch":
            for a, s in zip(axes, sizes):
                out_scales[a], out[a] = ratio(a, s), (s if s >= 0 else None)
        elif not all(isinstance(dims[a], int) for a in axes):
            for a in axes:
                out_scales[a] = out[a] = None
        else:
            pick = min if policy == "not_larger" else max
            s = pick(ratio(a, n) for a, n in zip(axes, sizes))
            for a in axes:
                out_scales[a] = s
                out[a] = int(math.floor(s * dims[a] + 0.5)) if s > 0 else None
        return out_scales, out
    for a, s in zip(axes, scales):
        s = float(s)
        d = dims[a]
        out_scales[a] = s
        if s <= 0:
            out[a] = None
        elif isinstance(d, int):
            out[a] = int(math.floor(d * s))
        else:
            out[a] = d if s == 1 else None
    return out_scales, out


@FUNCTIONS.register("Resize", 10, 10)
def _resize_10(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    scales = ctx.constant(1)
    if xd is None or scales is None or scales.size != len(xd):
        return [tensor(elem_of(x), None if xd is None else [None] * len(xd))]
    return [tensor(elem_of(x), resize_extents(xd, range(len(xd)), scales=scales.reshape(-1).tolist())[1])]


@FUNCTIONS.register("Resize", 11)
def _resize(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    elem = elem_of(x)
    if xd is None:
        return [tensor(elem, None)]
    r = len(xd)
    axes = ctx.attr("axes")
    axes = list(range(r)) if not axes else [normalize_axis(ctx, a, r) for a in axes]
    unknown = tensor(elem, [xd[k] if k not in axes else None for k in range(r)])
    sizes = int_list(ctx, 3) if ctx.has_input(3) else None
    scales_c = ctx.constant(2) if ctx.has_input(2) else None
    if scales_c is not None and scales_c.size == 0:
        scales_c = None
    if ctx.has_input(3) and sizes is None and scales_c is None:
        return [unknown]
    if sizes is not None and len(sizes) == len(axes):
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        return [tensor(elem, resize_extents(xd, axes, sizes=sizes, policy=policy)[1])]
    if scales_c is not None and scales_c.size == len(axes):
        return [tensor(elem, resize_extents(xd, axes, scales=scales_c.reshape(-1).tolist())[1])]
    return [unknown]


@FUNCTIONS.register("Upsample")
def _upsample(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    if xd is None:
        return [tensor(elem_of(x), None)]
    if ctx.since_version >= 9:
        c = ctx.constant(1)
        scales = None if c is None else [float(s) for s in c.reshape(-1)]
    elif ctx.since_version >= 7:
        scales = ctx.attr("scales")
    else:
        scales = [1.0, 1.0, float(ctx.attr("height_scale")), float(ctx.attr("width_scale"))] if len(xd) == 4 else None
    if scales is None or len(scales) != len(xd):
        return [tensor(elem_of(x), [None] * len(xd))]
    return [tensor(elem_of(x), resize_extents(xd, range(len(xd)), scales=scales)[1])]


@FUNCTIONS.register("GridSample")
def _grid_sample(ctx):
    xd, gd = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    elem = elem_of(ctx.input_type(0))
    if xd is None and gd is None:
        return [tensor(elem, None)]
    n = unify(xd[0] if xd else None, gd[0] if gd else None)
    c = xd[1] if xd is not None and len(xd) > 1 else None
    sp = gd[1:-1] if gd is not None else [None] * (len(xd) - 2)
    return [tensor(elem, [n, c] + sp)]


@FUNCTIONS.register("AffineGrid")
def _affine_grid(ctx):
    elem = elem_of(ctx.input_type(0))
    size = int_list(ctx, 1)
    if size is None:
        sd = dims_of(ctx.input_type(1))
        if sd is not None and sd[0] in (4, 5):
            return [tensor(elem, [None] * (sd[0]))]
        return [tensor(elem, None)]
    sp = size[2:]
    return [tensor(elem, [size[0]] + sp + [len(sp)])]


@FUNCTIONS.register("Col2Im")
def _col2im(ctx):
    xd = dims_of(ctx.input_type(0))
    elem = elem_of(ctx.input_type(0))
    image, block = int_list(ctx, 1), int_list(ctx, 2)
    n = xd[0] if xd else None
    c = None
    if xd is not None and len(xd) == 3 and isinstance(xd[1], int) and block and all(b > 0 for b in block):
        p = int(np.prod(block))
        c = xd[1] // p if xd[1] % p == 0 else None
    if image is None:
        rd = dims_of(ctx.input_type(1))
        return [tensor(elem, None if rd is None or not isinstance(rd[0], int) else [n, c] + [None] * rd[0])]
    return [tensor(elem, [n, c] + image)]
