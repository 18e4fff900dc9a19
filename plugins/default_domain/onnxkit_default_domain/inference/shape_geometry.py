"""Output geometry of the shape and indexing operators, written once for inference and kernels.

Each function takes extents ``int | str | None`` (a static extent, a dimension variable,
unknown) and the operator's integer arguments as Python ints, and returns output extents in
the same terms.  The inference functions (:mod:`.shape`, :mod:`.indexing`) call them with
what is known when a model is checked; the kernels (``onnxkit_default_domain.kernels``)
call them with the concrete extents of a run, where every extent is an int and so is every
result.  A contradiction of the operator's definition is reported with ``ctx.fail`` (an
inference error when checking, an evaluation error naming the node when running), so the
two cannot disagree about what is valid.

This module defines no inference functions itself (no ``FUNCTIONS``).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from onnxkit.plugin.inference import BroadcastError, broadcast_multidirectional, product

from ..kernels._common import norm_axes, norm_axis  # noqa: F401  (the kernels' own axis rules)

#: Slice ends at or beyond this (or starts, for a negative step) mean "to the end" even where
#: the extent is not known.
_TO_END = 2**31 - 1


# -- Reshape / Flatten / Squeeze / Unsqueeze ---------------------------------------------------
def reshape_extents(ctx, dims: Optional[list], target: list, allowzero: bool) -> list:
    """Reshape's output extents for an input of extents ``dims`` (None: unknown rank) and the
    ``shape`` input ``target``: a 0 copies the input's extent at that position (unless
    ``allowzero``), one -1 takes what is left.  With every extent static the element counts
    must agree (ctx.fail otherwise); a variable on both sides cancels (``[N, 4] -> [-1, 4]``
    gives ``N``)."""
    out = list(target)
    for k, e in enumerate(target):
        if isinstance(e, int) and e < -1:
            ctx.fail(f"shape {list(target)} holds an invalid extent {e}")
        if e == 0 and not allowzero:
            if dims is None:
                out[k] = None
            elif k < len(dims):
                out[k] = dims[k]
            else:
                ctx.fail(f"shape {list(target)}: 0 at position {k} copies an extent the input (rank {len(dims)}) lacks")
    minus = [k for k, e in enumerate(out) if e == -1]
    if len(minus) > 1:
        ctx.fail(f"shape {list(target)} holds more than one -1")
    if minus and allowzero and 0 in target:
        ctx.fail(f"shape {list(target)}: allowzero=1 forbids a 0 together with a -1")
    size = None if dims is None else product(dims)
    if minus:
        k = minus[0]
        out[k] = None
        if size is not None:
            rest = product([e for j, e in enumerate(out) if j != k])
            if rest is not None:
                if rest == 0 or size % rest:
                    ctx.fail(f"cannot reshape {list(dims)} to {list(target)}")
                out[k] = size // rest
        elif dims is not None:
            out[k] = _cancelled(dims, [e for j, e in enumerate(out) if j != k])
    if size is not None and product(out) not in (None, size):
        ctx.fail(f"cannot reshape {list(dims)} ({size} elements) to {list(target)}")
    return out


def _cancelled(left: list, right: list):
    """What ``product(left) / product(right)`` is when variables occur on both sides (they are
    the same extent, cancelled, never computed over), or None."""
    left = list(left)
    rest = []
    for e in right:
        if isinstance(e, str) and e in left:
            left.remove(e)
        else:
            rest.append(e)
    lvars = [e for e in left if not isinstance(e, int)]
    a = product([e for e in left if isinstance(e, int)])
    b = product(rest)
    if b is None or b == 0:
        return None
    if not lvars:
        return a // b if a % b == 0 else None
    if len(lvars) == 1 and isinstance(lvars[0], str) and a == b:
        return lvars[0]   # N * a / a is N
    return None


def product_extent(part: list):
    """The product of extents: an int, the one variable among extents of 1, or None."""
    p = product(part)
    if p is not None:
        return p
    others = [d for d in part if d != 1]
    return others[0] if len(others) == 1 and isinstance(others[0], str) else None


def flatten_extents(ctx, dims: list, axis: int) -> list:
    """Flatten's two output extents; ``axis`` in [-rank, rank]."""
    r = len(dims)
    if not -r <= axis <= r:
        ctx.fail(f"axis {axis} is out of range for a tensor of rank {r}")
    a = axis + r if axis < 0 else axis
    return [product_extent(dims[:a]), product_extent(dims[a:])]


def squeeze_extents(ctx, dims: list, axes: Optional[list]) -> Optional[list]:
    """Squeeze's output extents; ``axes`` None or empty removes every extent of 1 (None: the
    rank is unknown because an extent is).  A named axis must have extent 1 (a variable is
    taken to be 1)."""
    if not axes:
        if any(not isinstance(d, int) for d in dims):
            return None
        return [d for d in dims if d != 1]
    ax = norm_axes(ctx, axes, len(dims))
    for a in ax:
        if isinstance(dims[a], int) and dims[a] != 1:
            ctx.fail(f"cannot squeeze axis {a} of extent {dims[a]}")
    return [d for i, d in enumerate(dims) if i not in ax]


def unsqueeze_extents(ctx, dims: list, axes: list) -> list:
    """Unsqueeze's output extents: an extent of 1 at each of ``axes`` (of the output's rank)."""
    rank = len(dims) + len(axes)
    ax = set(norm_axes(ctx, axes, rank))
    it = iter(dims)
    return [1 if i in ax else next(it) for i in range(rank)]


# -- Concat / Split / Tile / Expand ------------------------------------------------------------
def concat_extents(ctx, shapes: list, axis: int, complete: bool = True, fresh=None) -> list:
    """Concat's output extents from the inputs' extents (``shapes``, one rank; ``complete``:
    every input's shape is among them), ``axis`` normalised.  The joined extent is the sum
    where known, else ``fresh()`` (a new variable) or None; the others must agree."""
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        ctx.fail(f"inputs of shapes {[list(s) for s in shapes]} have different ranks")
    out = []
    for k in range(rank):
        col = [s[k] for s in shapes]
        if k == axis:
            nonzero = [e for e in col if e != 0]
            if complete and all(isinstance(e, int) for e in col):
                out.append(sum(col))
            elif complete and len(nonzero) == 1:
                out.append(nonzero[0])   # N joined with empty tensors is N
            else:
                out.append(fresh() if fresh is not None else None)
            continue
        static = {e for e in col if isinstance(e, int)}
        if len(static) > 1:
            ctx.fail(f"inputs of shapes {[list(s) for s in shapes]} cannot be joined on axis {axis}")
        out.append(next(iter(static)) if static else next((e for e in col if isinstance(e, str)), None))
    return out


def split_sizes(ctx, dim, n: int, split: Optional[list], num_outputs: Optional[int]) -> list:
    """The extents of Split's ``n`` outputs along the split axis of extent ``dim``: the given
    ``split`` (which must have ``n`` non-negative entries adding up to ``dim``), else
    ``num_outputs`` parts of ceil(dim / num_outputs) with a smaller last one, else ``n`` equal
    parts (``dim`` must divide evenly).  Unknown sizes are None."""
    if split is not None:
        if len(split) != n:
            ctx.fail(f"split {split} gives {len(split)} parts for {n} outputs")
        if any(s < 0 for s in split) or (isinstance(dim, int) and sum(split) != dim):
            ctx.fail(f"split {split} does not add up to the extent {dim}")
        return list(split)
    if num_outputs is not None:
        n = int(num_outputs)
        if n < 1:
            ctx.fail(f"num_outputs {n} must be positive")
        if not isinstance(dim, int):
            return [None] * n
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
        if sizes[-1] < 0:
            ctx.fail(f"an extent of {dim} cannot be split into {n} parts of {chunk}")
        return sizes
    if not isinstance(dim, int):
        return [dim] if n == 1 else [None] * n
    if n < 1 or dim % n:
        ctx.fail(f"an extent of {dim} cannot be split into {n} equal parts")
    return [dim // n] * n


def expand_extents(ctx, dims: list, target: list) -> list:
    """Expand's output extents: ``dims`` and the ``shape`` input broadcast both ways (6.6.2)."""
    if all(isinstance(d, int) for d in dims) and all(isinstance(d, int) for d in target):
        try:
            return list(np.broadcast_shapes(tuple(dims), tuple(target)))   # the same rule, static extents
        except ValueError:
            pass   # the general rule says why
    try:
        return list(broadcast_multidirectional([dims, target]).shape)
    except BroadcastError as exc:
        ctx.fail(f"cannot expand {list(dims)} to {list(target)}: {exc}")


def tile_extents(ctx, dims: list, repeats: list) -> list:
    """Tile's output extents: each extent times its (non-negative) repeat count."""
    if len(repeats) != len(dims) or any(r < 0 for r in repeats):
        ctx.fail(f"repeats {repeats} must hold {len(dims)} non-negative counts")
    return [d * r if isinstance(d, int) else (d if r == 1 else (0 if r == 0 else None)) for d, r in zip(dims, repeats)]


# -- Pad / CenterCropPad -----------------------------------------------------------------------
def pad_widths(ctx, rank: int, pads: list, axes: Optional[list]) -> tuple:
    """Pad's ``pads`` over ``axes`` (None: every axis) as ``(begin, end)``, one width per axis
    of the input (0 for an axis not padded; a negative width removes elements)."""
    axes = list(range(rank)) if axes is None else norm_axes(ctx, axes, rank)
    n = len(axes)
    if len(pads) != 2 * n:
        ctx.fail(f"pads {pads} must hold 2 x {n} values")
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[n + i]
    return begin, end


def pad_extents(ctx, dims: list, begin: list, end: list) -> list:
    """Pad's output extents; ctx.fail where negative widths remove more than an extent holds."""
    out = []
    for d, b, e in zip(dims, begin, end):
        if isinstance(d, int):
            if d + min(b, 0) + min(e, 0) < 0:
                ctx.fail(f"pads {begin + end} remove more than the extents {list(dims)}")
            out.append(d + b + e)
        else:
            out.append(d if b == 0 and e == 0 else None)
    return out


def center_crop_pad_extents(ctx, dims: list, target: Optional[list], axes: Optional[list]) -> list:
    """CenterCropPad's output extents: ``target`` (None: unknown) on ``axes`` (None: all)."""
    axes = list(range(len(dims))) if not axes else norm_axes(ctx, axes, len(dims))
    if target is not None and len(target) != len(axes):
        ctx.fail(f"shape {target} must hold one extent per axis ({len(axes)})")
    out = list(dims)
    for k, a in enumerate(axes):
        t = None if target is None else target[k]
        if isinstance(t, int) and t < 0:
            ctx.fail(f"shape {target} holds a negative extent")
        out[a] = t
    return out


def depth_space_extents(ctx, op_type: str, dims: list, blocksize: int) -> list:
    """DepthToSpace / SpaceToDepth output extents of an [N, C, H, W] input."""
    if len(dims) != 4:
        ctx.fail(f"input must have rank 4 ([N, C, H, W]), got rank {len(dims)}")
    if blocksize < 1:
        ctx.fail(f"blocksize {blocksize} must be positive")
    n, c, h, w = dims
    b = blocksize

    def div(d, k, what):
        if not isinstance(d, int):
            return None
        if d % k:
            ctx.fail(f"input of shape {list(dims)}: {what} {d} is not divisible by {k}")
        return d // k

    def mul(d, k):
        return d * k if isinstance(d, int) else None

    if op_type == "DepthToSpace":
        return [n, div(c, b * b, "C"), mul(h, b), mul(w, b)]
    return [n, mul(c, b * b), div(h, b, "H"), div(w, b, "W")]


# -- Shape / Slice -----------------------------------------------------------------------------
def shape_range(rank: int, start: int, end: Optional[int]) -> tuple:
    """Shape-15's ``start``/``end`` clamped to [0, rank] (``end`` None: the rank)."""
    end = rank if end is None else end
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return start, max(start, end)


def slice_axis(dim, start: int, end: int, step: int) -> tuple:
    """``(start, end, extent)`` of one sliced axis.  For a static ``dim`` start and end are
    counted from the end when negative, then clamped: to [0, dim] for a positive step, to
    [-1, dim-1] for a negative one (-1: before the first element).  For an extent not known
    start and end are None, and the extent is known only for the whole axis."""
    if isinstance(dim, int):
        s = start + dim if start < 0 else start
        e = end + dim if end < 0 else end
        if step > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
            return s, e, max(0, -((s - e) // step))
        s, e = min(max(s, -1), dim - 1), min(max(e, -1), dim - 1)
        return s, e, max(0, -((e - s) // -step))
    if (step == 1 and start == 0 and end >= _TO_END) or (step == -1 and start >= _TO_END and end < -_TO_END):
        return None, None, dim
    return None, None, None


def slice_plan(ctx, dims: list, starts: list, ends: list, axes: Optional[list] = None,
               steps: Optional[list] = None) -> list:
    """Slice's arguments (``axes`` None: the first ones; ``steps`` None: 1) as
    ``(axis, start, end, step, extent)`` per sliced axis (see :func:`slice_axis`)."""
    rank = len(dims)
    n = len(starts)
    axes = list(range(n)) if axes is None else norm_axes(ctx, axes, rank)
    steps = [1] * n if steps is None else list(steps)
    if not (len(ends) == len(axes) == len(steps) == n):
        ctx.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have the same length")
    if n > rank:
        ctx.fail(f"{n} slices for a tensor of rank {rank}")
    plan = []
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            ctx.fail("a step of 0 is not allowed")
        s, e, extent = slice_axis(dims[a], s, e, st)
        plan.append((a, s, e, st, extent))
    return plan


def sliced_extents(dims: list, plan: list) -> list:
    """The output extents of a :func:`slice_plan`."""
    out = list(dims)
    for a, _, _, _, n in plan:
        out[a] = n
    return out


def numpy_slices(plan: list, rank: int) -> tuple:
    """A numpy index (basic slices, negative steps allowed) that takes a :func:`slice_plan`
    of static extents."""
    index = [slice(None)] * rank
    for a, s, e, st, n in plan:
        if n == 0:
            index[a] = slice(0, 0)
        else:
            index[a] = slice(s, e, st) if st > 0 else slice(s, None if e < 0 else e, st)
    return tuple(index)


# -- Gather family -----------------------------------------------------------------------------
def gather_extents(ctx, dims: list, idims: list, axis: int) -> list:
    """Gather's output extents: the data's with axis ``axis`` replaced by the indices'."""
    if not dims:
        ctx.fail("data must have rank >= 1")
    a = norm_axis(ctx, axis, len(dims))
    return list(dims[:a]) + list(idims) + list(dims[a + 1:])


def gather_nd_extents(ctx, dims: list, idims: list, batch_dims: int) -> Optional[list]:
    """GatherND's output extents (None where the last indices extent is unknown)."""
    r, q, b = len(dims), len(idims), batch_dims
    if q < 1 or r < 1 or not 0 <= b < min(q, r):
        ctx.fail(f"batch_dims {b} must be below the ranks of data ({r}) and indices ({q})")
    for d, i in zip(dims[:b], idims[:b]):
        if isinstance(d, int) and isinstance(i, int) and d != i:
            ctx.fail(f"the batch dimensions of data {list(dims)} and indices {list(idims)} differ")
    m = idims[-1]
    if not isinstance(m, int):
        return None
    if not 1 <= m <= r - b:
        ctx.fail(f"indices.shape[-1] = {m} must lie in [1, {r - b}]")
    return list(idims[:-1]) + list(dims[b + m:])


def check_elements_fit(ctx, dims: list, idims: list, axis: int) -> None:
    """GatherElements / ScatterElements: indices of the data's rank, no extent above the
    data's except along ``axis``."""
    if len(idims) != len(dims) or any(isinstance(i, int) and isinstance(d, int) and i > d
                                      for k, (i, d) in enumerate(zip(idims, dims)) if k != axis):
        ctx.fail(f"indices of shape {list(idims)} do not fit data of shape {list(dims)}")


def wrap_indices(ctx, xp, idx, n: int, what: str = "indices value"):
    """Index values ``idx`` (an integer array of namespace ``xp``) as int64 with negative ones
    counted from the end of an extent of ``n``; ctx.fail if one lies outside [-n, n-1].  The
    bounds are read on the host, so an index out of range never reaches a device kernel."""
    from onnxkit.plugin import arrays

    if not arrays.is_integer(idx.dtype):
        ctx.fail(f"{what} must be an integer tensor, got {arrays.dtype_name(idx.dtype)}")
    idx = xp.astype(idx, xp.int64, copy=False)
    if 0 not in tuple(idx.shape):
        lo, hi = int(xp.min(idx)), int(xp.max(idx))
        if lo < -n or hi >= n:
            ctx.fail(f"{what} {lo if lo < -n else hi} is out of range for an extent of {n}")
        if lo < 0:
            idx = xp.where(idx < 0, idx + n, idx)
    return idx


def one_hot_extents(ctx, idims: list, depth, axis: int) -> list:
    """OneHot's output extents: ``depth`` (None: unknown) inserted at ``axis`` (output rank)."""
    r = len(idims) + 1
    if not -r <= axis < r:
        ctx.fail(f"axis {axis} is out of range for an output of rank {r}")
    a = axis + r if axis < 0 else axis
    if depth is not None and depth < 1:
        ctx.fail(f"depth {depth} must be positive")
    return list(idims[:a]) + [depth] + list(idims[a:])
