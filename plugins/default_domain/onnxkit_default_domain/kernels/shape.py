"""Tensor manipulation of ai.onnx (every backend): Reshape, Transpose, Concat, Split,
Squeeze, Unsqueeze, Expand, Tile, Flatten, Shape, Size.

The first definitions take their arguments as attributes (Reshape-1's ``shape``, Split-1/2/11's
``split``, Squeeze/Unsqueeze up to 11's ``axes``, Tile-1's ``tiles``/``axis`` inputs);
later ones as inputs, which are read on the host when the node runs.  Reshape gains
``allowzero`` at 14, Split ``num_outputs`` at 18, Shape ``start``/``end`` at 15; Concat-1's
``axis`` defaults to 1.  The other definitions only widened the type lists.

The output extents come from :mod:`onnxkit_default_domain.inference.shape_geometry`, the
functions type inference uses, so a run and a check cannot disagree.  Results may be views
of the input (Reshape, Transpose, Split, Squeeze...); kernels never write into inputs.
Pad, DepthToSpace, SpaceToDepth, CenterCropPad, ReverseSequence and Trilu are in
:mod:`.shape_layout`; Slice and the Gather / Scatter family in :mod:`.indexing`.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, size_guard

from ..inference.shape_geometry import (
    concat_extents, expand_extents, flatten_extents, reshape_extents, shape_range, split_sizes, squeeze_extents, tile_extents,
    unsqueeze_extents,
)
from ._common import norm_axis, scalar_int, shape_of, size_of

KERNELS = KernelTable()

_LATEST = (21, 23, 24, 25)   # definitions that only widened the type lists


# -- Reshape / Flatten / Squeeze / Unsqueeze ---------------------------------------------------
def reshape_target(ctx, x, target: list, allowzero: bool) -> tuple:
    """The extents Reshape of ``x`` to ``target`` (a list of ints) gives."""
    return tuple(reshape_extents(ctx, shape_of(x), target, allowzero))


@KERNELS.register("Reshape", 1)
def reshape_v1(ctx):
    xp = ctx.xp
    shape = ctx.attr("shape")
    if shape is None:
        ctx.fail("Reshape-1 needs the 'shape' attribute")
    target = [int(s) for s in shape]
    return lambda x: xp.reshape(x, reshape_target(ctx, x, target, False))


def reshape_allowzero(ctx) -> bool:
    """Reshape's ``allowzero`` (defined from 14)."""
    return bool(ctx.attr("allowzero", 0)) if ctx.since_version >= 14 else False


@KERNELS.register("Reshape", 5, 13, 14, 19, *_LATEST)
def reshape(ctx):
    xp = ctx.xp
    allowzero = reshape_allowzero(ctx)
    return lambda x, shape: xp.reshape(x, reshape_target(ctx, x, ctx.ints(shape), allowzero))


@KERNELS.register("Flatten", 1, 9, 11, 13, *_LATEST)
def flatten(ctx):
    xp = ctx.xp
    axis = int(ctx.attr("axis"))
    return lambda x: xp.reshape(x, tuple(flatten_extents(ctx, shape_of(x), axis)))


def squeeze_target(ctx, x, axes) -> tuple:
    """The extents Squeeze of ``x`` over ``axes`` (ints, or None) gives."""
    return tuple(squeeze_extents(ctx, shape_of(x), axes))


def unsqueeze_target(ctx, x, axes) -> tuple:
    """The extents Unsqueeze of ``x`` at ``axes`` (ints) gives."""
    if axes is None:
        ctx.fail("Unsqueeze needs axes")
    return tuple(unsqueeze_extents(ctx, shape_of(x), axes))


def _attr_ints(ctx, name: str):
    """An ints attribute as a list of Python ints, or None when absent."""
    value = ctx.attr(name)
    return None if value is None else [int(a) for a in value]


def axes_attr(ctx):
    """Squeeze / Unsqueeze up to 11: the ``axes`` attribute (None when absent)."""
    return _attr_ints(ctx, "axes")


def _axes_kernel(ctx, target):
    """Squeeze / Unsqueeze over ``target`` (their extents): ``axes`` an attribute up to 11,
    an (optional) input from 13."""
    xp = ctx.xp
    if ctx.since_version <= 11:
        axes = axes_attr(ctx)
        return lambda x: xp.reshape(x, target(ctx, x, axes))
    return lambda x, axes=None: xp.reshape(x, target(ctx, x, None if axes is None else ctx.ints(axes)))


@KERNELS.register("Squeeze", 1, 11, 13, *_LATEST)
def squeeze(ctx):
    return _axes_kernel(ctx, squeeze_target)


@KERNELS.register("Unsqueeze", 1, 11, 13, *_LATEST)
def unsqueeze(ctx):
    return _axes_kernel(ctx, unsqueeze_target)


# -- Transpose ---------------------------------------------------------------------------------
def transpose_perm(ctx):
    """Transpose's ``perm`` as a function of the input's rank giving the permutation (None or
    empty: the axes reversed); ctx.fail where ``perm`` does not permute that many axes."""
    perm = ctx.attr("perm")
    if perm is None or len(perm) == 0:
        return lambda rank: tuple(reversed(range(rank)))
    p = tuple(int(a) for a in perm)
    valid = sorted(p) == list(range(len(p)))

    def of_rank(rank: int) -> tuple:
        if not valid or rank != len(p):
            ctx.fail(f"perm {list(p)} is not a permutation of the {rank} axes")
        return p

    return of_rank


@KERNELS.register("Transpose", 1, 13, *_LATEST)
def transpose(ctx):
    xp = ctx.xp
    perm = transpose_perm(ctx)
    return lambda x: xp.permute_dims(x, perm(x.ndim))


# -- Concat / Split ----------------------------------------------------------------------------
def concat_axis(ctx) -> int:
    """Concat's ``axis`` (required from 4; Concat-1: "Default value is 1")."""
    axis = ctx.attr("axis")
    if axis is None:
        if ctx.since_version >= 4:
            ctx.fail("Concat needs the 'axis' attribute")
        axis = 1
    return int(axis)


def concat_check(ctx, xs, axis: int) -> int:
    """The normalised axis Concat joins ``xs`` on; ctx.fail for no inputs or shapes that differ."""
    if not xs:
        ctx.fail("Concat needs at least one input")
    a = norm_axis(ctx, axis, xs[0].ndim)
    first = tuple(xs[0].shape)
    lead, tail = first[:a], first[a + 1:]
    if any(tuple(v.shape[:a]) != lead or tuple(v.shape[a + 1:]) != tail for v in xs[1:]):
        concat_extents(ctx, [shape_of(v) for v in xs], a)   # fails, saying how they differ
    return a


@KERNELS.register("Concat", 1, 4, 11, 13)
@size_guard("concat")
def concat(ctx):
    xp = ctx.xp
    axis = concat_axis(ctx)
    return lambda *xs: xp.concat(list(xs), axis=concat_check(ctx, xs, axis))


def split_index(ctx, x, axis: int, split, num_outputs) -> tuple:
    """The index of each of the node's outputs in ``x`` for Split along ``axis`` (``split``:
    the lengths, or None)."""
    a = norm_axis(ctx, axis, x.ndim)
    sizes = split_sizes(ctx, int(x.shape[a]), ctx.num_outputs, split, num_outputs)
    index, start = [], 0
    lead = (slice(None),) * a
    for s in sizes:
        index.append(lead + (slice(start, start + s),))
        start += s
    return tuple(index)


def split_parts(ctx, x, axis: int, split, num_outputs) -> tuple:
    """Split of ``x`` along ``axis`` into the node's outputs (views of ``x``)."""
    return tuple(x[i] for i in split_index(ctx, x, axis, split, num_outputs))


def split_attr_args(ctx) -> tuple:
    """Split-1/2/11's ``axis`` and ``split`` attribute (None when absent or empty)."""
    return int(ctx.attr("axis", 0)), _attr_ints(ctx, "split") or None


@KERNELS.register("Split", 1, 2, 11)
def split_attr(ctx):
    axis, attr_split = split_attr_args(ctx)

    def fn(x, split=None):   # Split-1 also takes the lengths as an optional second input
        return split_parts(ctx, x, axis, ctx.ints(split) if split is not None else attr_split, None)

    return fn


def split_args(ctx) -> tuple:
    """Split-13/18's ``axis`` and ``num_outputs`` (from 18; checked against the outputs)."""
    num_outputs = ctx.attr("num_outputs") if ctx.since_version >= 18 else None
    if num_outputs is not None and int(num_outputs) != ctx.num_outputs:
        ctx.fail(f"num_outputs={num_outputs} but the node has {ctx.num_outputs} outputs")
    return int(ctx.attr("axis")), num_outputs


def split_lengths(ctx, sizes, num_outputs):
    """The ``split`` input's lengths (None: absent or empty); both it and ``num_outputs`` fail."""
    if sizes and num_outputs is not None:
        ctx.fail("give either the 'split' input or the 'num_outputs' attribute, not both")
    return sizes or None


@KERNELS.register("Split", 13, 18)
def split(ctx):
    axis, num_outputs = split_args(ctx)

    def fn(x, split=None):
        sizes = split_lengths(ctx, None if split is None else ctx.ints(split), num_outputs)
        return split_parts(ctx, x, axis, sizes, num_outputs)

    return fn


# -- Expand / Tile -----------------------------------------------------------------------------
def expand_target(ctx, x, target: list) -> tuple:
    """Expand's output extents: ``x``'s and ``target`` broadcast both ways (Clause 6.6)."""
    return tuple(expand_extents(ctx, shape_of(x), target))


@KERNELS.register("Expand", 8, 13)
@size_guard("value")
def expand(ctx):
    xp = ctx.xp

    def fn(x, shape):
        out = expand_target(ctx, x, ctx.ints(shape))
        if out == tuple(x.shape):
            return x
        return xp.asarray(xp.broadcast_to(x, out), copy=True)

    return fn


def tile_repeats(ctx, x, repeats: list) -> tuple:
    """Tile's repeat counts, checked (one non-negative count per axis)."""
    tile_extents(ctx, shape_of(x), repeats)
    return tuple(repeats)


@KERNELS.register("Tile", 1)
@size_guard("value")
def tile_v1(ctx):
    xp = ctx.xp

    def fn(x, tiles, axis):
        a = norm_axis(ctx, scalar_int(ctx, axis, "axis"), x.ndim)
        t = scalar_int(ctx, tiles, "tiles")
        if t < 0:
            ctx.fail(f"tiles {t} is negative")
        reps = [1] * x.ndim
        reps[a] = t
        return xp.tile(x, tuple(reps))

    return fn


@KERNELS.register("Tile", 6, 13)
@size_guard("value")
def tile(ctx):
    xp = ctx.xp

    def fn(x, repeats):
        reps = tile_repeats(ctx, x, ctx.ints(repeats))
        return xp.tile(x, reps) if x.ndim else xp.asarray(x, copy=True)

    return fn


# -- Shape / Size ------------------------------------------------------------------------------
def shape_bounds(ctx) -> tuple:
    """Shape's ``start`` and ``end`` (defined from 15; ``end`` None: to the last axis)."""
    if ctx.since_version < 15:
        return 0, None
    end = ctx.attr("end")
    return int(ctx.attr("start", 0)), None if end is None else int(end)


@KERNELS.register("Shape", 1, 13, 15, 19, *_LATEST)
def shape(ctx):
    start, end = shape_bounds(ctx)

    def fn(x):
        dims = shape_of(x)
        lo, hi = shape_range(len(dims), start, end)
        return ctx.from_host(np.array(dims[lo:hi], dtype=np.int64))

    return fn


@KERNELS.register("Size", 1, 13, 19, *_LATEST)
def size(ctx):
    return lambda x: ctx.from_host(np.array(size_of(x), dtype=np.int64))
