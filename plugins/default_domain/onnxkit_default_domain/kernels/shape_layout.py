"""Layout operators of ai.onnx (every backend): Pad, DepthToSpace, SpaceToDepth,
CenterCropPad, ReverseSequence, Trilu.

Pad takes ``paddings`` (1) or ``pads``/``value`` (2) as attributes, then ``pads`` and
``constant_value`` as inputs (11), an ``axes`` input from 18 and the ``wrap`` mode from 19;
modes constant / reflect / edge; negative pads remove elements.  DepthToSpace has ``mode``
(DCR / CRD) from 11, SpaceToDepth from 28; before, both are DCR.

The output extents come from :mod:`onnxkit_default_domain.inference.shape_geometry` (the
functions type inference uses).  Fill values are the element type's zero ("" for STRING on
the cpu backend, whose arrays may hold strings).
"""

from __future__ import annotations

import numpy as np
from ._common import device_of

from onnxkit.plugin import KernelTable, size_guard

from ..inference.shape_geometry import center_crop_pad_extents, depth_space_extents, pad_extents, pad_widths
from ._common import scalar_int, shape_of

KERNELS = KernelTable()

_LATEST = (21, 23, 24, 25)   # definitions that only widened the type lists


def fill_of(ctx, x, value=None):
    """A 0-d array of ``x``'s element type holding ``value`` (an array of one element, cast;
    None: the type's zero, "" or b"" for a STRING array)."""
    xp = ctx.xp
    if x.dtype == object:   # strings: only on a host backend
        if value is not None:
            return np.asarray(value).reshape(-1)[:1].reshape(())
        first = x.reshape(-1)[0] if x.size else b""
        return np.asarray("" if isinstance(first, str) else b"", dtype=object)
    if value is None:
        return xp.zeros((), dtype=x.dtype, device=device_of(x))
    return xp.astype(xp.reshape(value, ()), x.dtype)


def filled(ctx, shape, fill):
    """A new array of extents ``shape`` holding ``fill`` (a 0-d array) everywhere."""
    return ctx.xp.asarray(ctx.xp.broadcast_to(fill, tuple(shape)), copy=True)


# -- Pad ---------------------------------------------------------------------------------------
def source_index(mode: str, d: int, b: int, e: int) -> np.ndarray:
    """For each output position along an axis of extent ``d`` padded by (b, e) in ``mode``
    (edge / wrap / reflect), the input position it copies (host arithmetic)."""
    i = np.arange(-b, d + e)
    if mode == "edge":
        return np.clip(i, 0, d - 1)
    if mode == "wrap":
        return np.mod(i, d)
    if d == 1:                                 # reflect of a single element repeats it
        return np.zeros_like(i)
    p = 2 * (d - 1)
    j = np.mod(i, p)
    return np.where(j >= d, p - j, j)


def pad_plan(ctx, x, pads: list, axes) -> tuple:
    """``(crop, begin, end)``: ``crop`` (a tuple of slices, or None) takes off what negative
    pads remove, then ``begin``/``end`` (non-negative, one per axis) are added."""
    begin, end = pad_widths(ctx, x.ndim, pads, axes)
    dims = shape_of(x)
    pad_extents(ctx, dims, begin, end)
    crop = None
    if any(b < 0 or e < 0 for b, e in zip(begin, end)):
        crop = tuple(slice(max(-b, 0), d + min(e, 0)) for b, e, d in zip(begin, end, dims))
        begin, end = [max(b, 0) for b in begin], [max(e, 0) for e in end]
    return crop, begin, end


def pad_array(ctx, x, pads: list, mode: str, value=None, axes=None):
    """Pad of ``x``; ``value``: the constant (an array of one element) or None (zero)."""
    xp = ctx.xp
    crop, begin, end = pad_plan(ctx, x, pads, axes)
    if crop is not None:
        x = x[crop]
    if not any(begin) and not any(end):
        return x
    dims = shape_of(x)
    if mode == "constant":
        out = filled(ctx, [d + b + e for d, b, e in zip(dims, begin, end)], fill_of(ctx, x, value))
        out[tuple(slice(b, b + d) for b, d in zip(begin, dims))] = x
        return out
    for a, (d, b, e) in enumerate(zip(dims, begin, end)):
        if not (b or e):
            continue
        if d == 0:
            ctx.fail(f"mode '{mode}' cannot pad an empty axis")
        x = xp.take(x, ctx.from_host(source_index(mode, d, b, e)), axis=a)
    return x


def pad_mode(ctx) -> str:
    """Pad's ``mode``, checked against what this definition allows (``wrap`` from 19)."""
    allowed = {"constant", "reflect", "edge"} | ({"wrap"} if ctx.since_version >= 19 else set())
    mode = ctx.attr_str("mode")
    if mode not in allowed:
        ctx.fail(f"mode '{mode}' is not one of {sorted(allowed)} at this version")
    return mode


@KERNELS.register("Pad", 1, 2)
@size_guard("value")
def pad_attr(ctx):
    mode = pad_mode(ctx)
    pads = ctx.attr("paddings" if ctx.since_version == 1 else "pads")
    if pads is None:
        ctx.fail("Pad needs its pads attribute")
    pads = [int(p) for p in pads]
    value = ctx.from_host(np.asarray(float(ctx.attr("value"))))   # cast to x's type when used

    def fn(x):
        return pad_array(ctx, x, pads, mode, None if x.dtype == object else value)

    return fn


@KERNELS.register("Pad", 11, 13, 18, 19, *_LATEST)
@size_guard("value")
def pad(ctx):
    mode = pad_mode(ctx)
    with_axes = ctx.since_version >= 18

    def fn(x, pads, constant_value=None, axes=None):
        if axes is not None and not with_axes:
            ctx.fail("the 'axes' input is defined from Pad-18")
        if constant_value is not None and int(np.prod(constant_value.shape)) != 1:
            ctx.fail(f"constant_value must be a scalar, got shape {list(constant_value.shape)}")
        return pad_array(ctx, x, ctx.ints(pads), mode, constant_value, None if axes is None else ctx.ints(axes))

    return fn


# -- DepthToSpace / SpaceToDepth ---------------------------------------------------------------
def block_mode(ctx, has_mode: bool) -> str:
    """DepthToSpace / SpaceToDepth ``mode`` (DCR where the definition has none)."""
    mode = ctx.attr_str("mode", "DCR") if has_mode else "DCR"
    if mode not in ("DCR", "CRD"):
        ctx.fail(f"mode '{mode}' is not DCR or CRD")
    return mode


def blocksize(ctx) -> int:
    bs = ctx.attr("blocksize")
    if bs is None or int(bs) < 1:
        ctx.fail("blocksize must be a positive integer")
    return int(bs)


@KERNELS.register("DepthToSpace", 1, 11, 13, 28)
def depth_to_space(ctx):
    xp = ctx.xp
    bs = blocksize(ctx)
    mode = block_mode(ctx, ctx.since_version >= 11)

    def fn(x):
        out = depth_space_extents(ctx, "DepthToSpace", shape_of(x), bs)
        b, c, h, w = shape_of(x)
        c2 = c // (bs * bs)
        if mode == "DCR":
            t = xp.permute_dims(xp.reshape(x, (b, bs, bs, c2, h, w)), (0, 3, 4, 1, 5, 2))
        else:
            t = xp.permute_dims(xp.reshape(x, (b, c2, bs, bs, h, w)), (0, 1, 4, 2, 5, 3))
        return xp.reshape(t, tuple(out))

    return fn


@KERNELS.register("SpaceToDepth", 1, 13, 28)
def space_to_depth(ctx):
    xp = ctx.xp
    bs = blocksize(ctx)
    mode = block_mode(ctx, ctx.since_version >= 28)
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)

    def fn(x):
        out = depth_space_extents(ctx, "SpaceToDepth", shape_of(x), bs)
        b, c, h, w = shape_of(x)
        t = xp.permute_dims(xp.reshape(x, (b, c, h // bs, bs, w // bs, bs)), perm)
        return xp.reshape(t, tuple(out))

    return fn


# -- CenterCropPad -----------------------------------------------------------------------------
@KERNELS.register("CenterCropPad", 18)
@size_guard("value")
def center_crop_pad(ctx):
    attr_axes = ctx.attr("axes")
    attr_axes = None if not attr_axes else [int(a) for a in attr_axes]

    def fn(x, shape):
        dims = shape_of(x)
        target = ctx.ints(shape)
        out_shape = center_crop_pad_extents(ctx, dims, target, attr_axes)
        if out_shape == dims:
            return x
        crop = [slice(None)] * x.ndim
        place = [slice(None)] * x.ndim
        for a, (d, t) in enumerate(zip(dims, out_shape)):
            if t < d:
                crop[a] = slice((d - t) // 2, (d - t) // 2 + t)
            elif t > d:
                place[a] = slice((t - d) // 2, (t - d) // 2 + d)
        out = filled(ctx, out_shape, fill_of(ctx, x))
        out[tuple(place)] = x[tuple(crop)]
        return out

    return fn


# -- ReverseSequence / Trilu -------------------------------------------------------------------
@KERNELS.register("ReverseSequence", 10, 28)
def reverse_sequence(ctx):
    xp = ctx.xp
    batch_axis = int(ctx.attr("batch_axis"))
    time_axis = int(ctx.attr("time_axis"))
    if {batch_axis, time_axis} != {0, 1}:
        ctx.fail(f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 in some order")

    def fn(x, sequence_lens):
        if x.ndim < 2:
            ctx.fail(f"input must have rank >= 2, got {x.ndim}")
        lens = ctx.to_host(sequence_lens).astype(np.int64).reshape(-1)
        nb, nt = int(x.shape[batch_axis]), int(x.shape[time_axis])
        if lens.shape[0] != nb:
            ctx.fail(f"sequence_lens has {lens.shape[0]} entries for a batch of {nb}")
        if ((lens < 0) | (lens > nt)).any():
            ctx.fail(f"sequence_lens {lens.tolist()} must lie in [0, {nt}]")
        t = np.arange(nt)[None, :]
        src = np.where(t < lens[:, None], lens[:, None] - 1 - t, t)      # [batch, time]
        if time_axis < batch_axis:
            src = src.T
        src = np.ascontiguousarray(np.broadcast_to(src.reshape(src.shape + (1,) * (x.ndim - 2)), shape_of(x)))
        return xp.take_along_axis(x, ctx.from_host(src), axis=time_axis)

    return fn


@KERNELS.register("Trilu", 14)
def trilu(ctx):
    xp = ctx.xp
    upper = bool(ctx.attr("upper"))

    def fn(x, k=None):
        if x.ndim < 2:
            ctx.fail(f"input must have rank >= 2, got {x.ndim}")
        kk = 0 if k is None else scalar_int(ctx, k, "k")
        n, m = (int(d) for d in x.shape[-2:])
        diff = np.arange(m)[None, :] - np.arange(n)[:, None]
        keep = ctx.from_host((diff >= kk) if upper else (diff <= kk))
        return xp.where(keep, x, fill_of(ctx, x))

    return fn

