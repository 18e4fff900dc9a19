"""Tensor manipulation kernels of ai.onnx on the gpu backend (torch).

Operators and the since_versions (definitions) implemented:

* Reshape 1 (``shape`` attribute), 5, 13 (``shape`` input), 14, 19, 21, 23, 24, 25 (``allowzero``)
* Transpose 1, 13, 21, 23, 24, 25
* Concat 1 (``axis`` optional, default 1), 4, 11, 13
* Split 1 (``split`` attribute or second input), 2, 11 (attribute), 13 (input), 18 (``num_outputs``)
* Squeeze / Unsqueeze 1, 11 (``axes`` attribute), 13, 21, 23, 24, 25 (``axes`` input)
* Expand 8, 13;  Tile 1 (``tiles`` and ``axis`` inputs), 6, 13 (``repeats`` input)
* Pad 1 (``paddings``), 2 (``pads``/``value`` attributes), 11, 13 (inputs), 18 (``axes`` input),
  19, 21, 23, 24, 25 (``wrap`` mode); modes constant / reflect / edge (/ wrap from 19);
  negative pads remove elements
* Flatten 1, 9, 11, 13, 21, 23, 24, 25
* Shape 1, 13, 15 (``start``/``end``), 19, 21, 23, 24, 25;  Size 1, 13, 19, 21, 23, 24, 25

Slice / Gather / GatherElements are in :mod:`.indexing`, Constant / ConstantOfShape / Range in
:mod:`.generators` (the cpu backend's family names).

Shapes, axes, pads and the like are read on the host (``tolist``); the data stays on the
device.  Results may be views of the input (Reshape, Transpose, Split...).  The host-side
arithmetic (axis normalisation, Reshape's extents, Split's sizes, Pad's crop and widths) is
the cpu backend's own (:mod:`onnxkit_cpu.kernels.shape`).
"""

from __future__ import annotations

import math

import numpy as np
from onnxkit_cpu.kernels.shape import (
    _pad_mode, _split_sizes, norm_axis, pad_plan, reshape_extents, squeeze_extents, unsqueeze_extents,
)

from onnxkit.runtime import KernelTable

from .cast import convert

KERNELS = KernelTable()

_LATEST = (21, 23, 24, 25)   # definitions that only widened the type lists


# -- helpers shared by the family modules ------------------------------------------------------
def int_list(value) -> list:
    """A 0-d or 1-d integer tensor (torch or numpy) or a list as a list of Python ints."""
    if hasattr(value, "detach"):
        return [int(v) for v in value.detach().reshape(-1).tolist()]
    return [int(v) for v in np.asarray(value).reshape(-1).tolist()]


def scalar_int(ctx, value, what: str) -> int:
    vals = int_list(value)
    if len(vals) != 1:
        ctx.fail(f"{what} must hold exactly one value, got {len(vals)}")
    return vals[0]


def _shape(x) -> list:
    return list(x.shape)


# -- Reshape -----------------------------------------------------------------------------------
def reshape_to(ctx, x, shape, allowzero: bool):
    return x.reshape(reshape_extents(ctx, x.shape, x.numel(), int_list(shape), allowzero))


@KERNELS.register("Reshape", 1)
def reshape_v1(ctx):
    shape = ctx.attr("shape")
    if shape is None:
        ctx.fail("Reshape-1 needs the 'shape' attribute")
    return lambda x: reshape_to(ctx, x, shape, False)


@KERNELS.register("Reshape", 5, 13, 14, 19, *_LATEST)
def reshape(ctx):
    allowzero = bool(ctx.attr("allowzero", 0)) if ctx.since_version >= 14 else False
    return lambda x, shape: reshape_to(ctx, x, shape, allowzero)


# -- Transpose ---------------------------------------------------------------------------------
@KERNELS.register("Transpose", 1, 13, *_LATEST)
def transpose(ctx):
    perm = ctx.attr("perm")

    def fn(x):
        if perm is None or (len(perm) == 0 and x.ndim):
            return x.permute(*reversed(range(x.ndim)))
        p = [int(a) for a in perm]
        if sorted(p) != list(range(x.ndim)):
            ctx.fail(f"perm {p} is not a permutation of the {x.ndim} axes")
        return x.permute(*p)

    return fn


# -- Concat ------------------------------------------------------------------------------------
@KERNELS.register("Concat", 1, 4, 11, 13)
def concat(ctx):
    import torch

    axis = ctx.attr("axis")
    if axis is None:
        if ctx.since_version >= 4:
            ctx.fail("Concat needs the 'axis' attribute")
        axis = 1   # Concat-1: "Default value is 1"

    def fn(*xs):
        if not xs:
            ctx.fail("Concat needs at least one input")
        rank = xs[0].ndim
        a = norm_axis(ctx, axis, rank)
        for x in xs[1:]:
            if x.ndim != rank or any(x.shape[i] != xs[0].shape[i] for i in range(rank) if i != a):
                ctx.fail(f"inputs of shapes {[_shape(v) for v in xs]} cannot be joined on axis {axis}")
        return torch.cat(xs, dim=a)

    return fn


# -- Split -------------------------------------------------------------------------------------
@KERNELS.register("Split", 1, 2, 11)
def split_attr(ctx):
    import torch

    axis = ctx.attr("axis", 0)
    attr_split = ctx.attr("split")
    if attr_split is not None and len(attr_split) == 0:
        attr_split = None
    n = ctx.num_outputs

    def fn(x, split=None):   # Split-1 also takes the lengths as an optional second input
        s = split if split is not None else attr_split
        a = norm_axis(ctx, axis, x.ndim)
        return tuple(torch.split(x, _split_sizes(ctx, x.shape[a], n, s, None), dim=a))

    return fn


@KERNELS.register("Split", 13, 18)
def split(ctx):
    import torch

    axis = ctx.attr("axis", 0)
    num_outputs = ctx.attr("num_outputs") if ctx.since_version >= 18 else None
    n = ctx.num_outputs

    def fn(x, split=None):
        if split is not None and split.numel() == 0:
            split = None
        if split is not None and num_outputs is not None:
            ctx.fail("give either the 'split' input or the 'num_outputs' attribute, not both")
        if num_outputs is not None and int(num_outputs) != n:
            ctx.fail(f"num_outputs={num_outputs} but the node has {n} outputs")
        a = norm_axis(ctx, axis, x.ndim)
        return tuple(torch.split(x, _split_sizes(ctx, x.shape[a], n, split, num_outputs), dim=a))

    return fn


# -- Squeeze / Unsqueeze ------------------------------------------------------------------------
def _squeeze(ctx, x, axes):
    return x.reshape(squeeze_extents(ctx, list(x.shape), None if axes is None else int_list(axes)))


def _unsqueeze(ctx, x, axes):
    return x.reshape(unsqueeze_extents(ctx, list(x.shape), None if axes is None else int_list(axes)))


@KERNELS.register("Squeeze", 1, 11)
def squeeze_attr(ctx):
    axes = ctx.attr("axes")
    return lambda x: _squeeze(ctx, x, axes)


@KERNELS.register("Squeeze", 13, *_LATEST)
def squeeze(ctx):
    return lambda x, axes=None: _squeeze(ctx, x, axes)


@KERNELS.register("Unsqueeze", 1, 11)
def unsqueeze_attr(ctx):
    axes = ctx.attr("axes")
    return lambda x: _unsqueeze(ctx, x, axes)


@KERNELS.register("Unsqueeze", 13, *_LATEST)
def unsqueeze(ctx):
    return lambda x, axes: _unsqueeze(ctx, x, axes)


# -- Expand / Tile -----------------------------------------------------------------------------
@KERNELS.register("Expand", 8, 13)
def expand(ctx):
    import torch

    def fn(x, shape):
        shape = int_list(shape)
        try:
            out = tuple(torch.broadcast_shapes(tuple(x.shape), tuple(shape)))
        except RuntimeError:
            ctx.fail(f"cannot expand {_shape(x)} to {shape} (Clause 6.6 broadcasting)")
        if out == tuple(x.shape):
            return x
        return x.expand(out).contiguous()

    return fn


@KERNELS.register("Tile", 1)
def tile_v1(ctx):
    def fn(x, tiles, axis):
        a = norm_axis(ctx, scalar_int(ctx, axis, "axis"), x.ndim)
        t = scalar_int(ctx, tiles, "tiles")
        if t < 0:
            ctx.fail(f"tiles {t} is negative")
        reps = [1] * x.ndim
        reps[a] = t
        return x.repeat(reps)

    return fn


@KERNELS.register("Tile", 6, 13)
def tile(ctx):
    def fn(x, repeats):
        reps = int_list(repeats)
        if len(reps) != x.ndim or any(r < 0 for r in reps):
            ctx.fail(f"repeats {reps} must hold {x.ndim} non-negative counts")
        return x.repeat(reps) if x.ndim else x.clone()

    return fn


# -- Pad ---------------------------------------------------------------------------------------
def _source_index(torch, mode: str, d: int, b: int, e: int, device):
    """For each output position along an axis padded by (b, e), the input position it copies."""
    i = torch.arange(-b, d + e, device=device)
    if mode == "edge":
        return torch.clamp(i, 0, d - 1)
    if mode == "wrap":
        return torch.remainder(i, d)
    if d == 1:                                 # reflect of a single element repeats it
        return torch.zeros_like(i)
    p = 2 * (d - 1)
    j = torch.remainder(i, p)
    return torch.where(j >= d, p - j, j)


def pad_array(ctx, x, pads, mode: str, value, axes=None):
    """``value``: None (zero) or a 0-d tensor of x's dtype."""
    import torch

    crop, begin, end = pad_plan(ctx, x.shape, int_list(pads), None if axes is None else int_list(axes))
    if crop is not None:
        x = x[crop]
    if not any(begin) and not any(end):
        return x
    out_shape = [d + b + e for d, b, e in zip(x.shape, begin, end)]
    if mode == "constant":
        out = torch.zeros(out_shape, dtype=x.dtype, device=x.device)
        if value is not None:
            out.fill_(value.reshape(()))
        out[tuple(slice(b, b + d) for b, d in zip(begin, x.shape))] = x
        return out
    for d, b, e in zip(x.shape, begin, end):
        if d == 0 and (b or e):
            ctx.fail(f"mode '{mode}' cannot pad an empty axis")
    fast = _torch_pad(torch, x, mode, begin, end)
    if fast is not None:
        return fast
    for a, (d, b, e) in enumerate(zip(x.shape, begin, end)):
        if b or e:
            x = x.index_select(a, _source_index(torch, mode, d, b, e, x.device))
    return x


_TORCH_MODES = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def _torch_pad(torch, x, mode, begin, end):
    """torch's own padding (one pass) where it computes the same: floating types, the padded
    axes among the last three, reflect pads below the extent, wrap pads at most the extent."""
    padded = [a for a in range(x.ndim) if begin[a] or end[a]]
    if not x.dtype.is_floating_point or not padded or x.numel() == 0:
        return None
    k = x.ndim - padded[0]
    if k > 3:
        return None
    tail = x.shape[x.ndim - k:]
    for d, b, e in zip(tail, begin[x.ndim - k:], end[x.ndim - k:]):
        if (mode == "reflect" and max(b, e) >= d) or (mode == "wrap" and max(b, e) > d):
            return None
    widths = []
    for b, e in zip(reversed(begin[x.ndim - k:]), reversed(end[x.ndim - k:])):
        widths += [b, e]                            # F.pad lists the last axis first
    lead = x.shape[:x.ndim - k]
    t = x.reshape((-1,) + tuple(tail)) if lead else x.reshape((1,) + tuple(tail))
    out = torch.nn.functional.pad(t, widths, mode=_TORCH_MODES[mode])
    return out.reshape(tuple(lead) + tuple(out.shape[1:]))


@KERNELS.register("Pad", 1, 2)
def pad_attr(ctx):
    import torch

    mode = _pad_mode(ctx, {"constant", "reflect", "edge"})
    pads = ctx.attr("paddings" if ctx.since_version == 1 else "pads")
    if pads is None:
        ctx.fail("Pad needs its pads attribute")
    value = float(ctx.attr("value", 0.0))

    def fn(x):
        v = convert(torch.tensor(value, dtype=torch.float64, device=x.device), x.dtype)
        return pad_array(ctx, x, pads, mode, v)

    return fn


def _constant_value(ctx, x, v):
    if v is None:
        return None
    if v.numel() != 1:
        ctx.fail(f"constant_value must be a scalar, got shape {_shape(v)}")
    return v.reshape(()).to(x.dtype)


@KERNELS.register("Pad", 11, 13, 18, 19, *_LATEST)
def pad(ctx):
    modes = {"constant", "reflect", "edge"} | ({"wrap"} if ctx.since_version >= 19 else set())
    mode = _pad_mode(ctx, modes)
    with_axes = ctx.since_version >= 18

    def fn(x, pads, constant_value=None, axes=None):
        if axes is not None and not with_axes:
            ctx.fail("the 'axes' input is defined from Pad-18")
        return pad_array(ctx, x, pads, mode, _constant_value(ctx, x, constant_value), axes)

    return fn


# -- Flatten / Shape / Size --------------------------------------------------------------------
@KERNELS.register("Flatten", 1, 9, 11, 13, *_LATEST)
def flatten(ctx):
    axis = int(ctx.attr("axis", 1))

    def fn(x):
        r = x.ndim
        if not -r <= axis <= r:
            ctx.fail(f"axis {axis} is out of range for a tensor of rank {r}")
        a = axis + r if axis < 0 else axis
        return x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:]))

    return fn


@KERNELS.register("Shape", 1, 13, 15, 19, *_LATEST)
def shape(ctx):
    import torch

    start = int(ctx.attr("start", 0)) if ctx.since_version >= 15 else 0
    end = ctx.attr("end") if ctx.since_version >= 15 else None
    end = None if end is None else int(end)
    return lambda x: torch.tensor(list(x.shape)[start:end], dtype=torch.int64, device=x.device)


@KERNELS.register("Size", 1, 13, 19, *_LATEST)
def size(ctx):
    import torch

    return lambda x: torch.tensor(x.numel(), dtype=torch.int64, device=x.device)
