"""Tensor manipulation kernels of ai.onnx (cpu backend).

Operators and the since_versions (definitions) implemented:

* Reshape 1 (``shape`` attribute), 5, 13 (``shape`` input), 14, 19, 21, 23, 24, 25 (``allowzero``)
* Transpose 1, 13, 21, 23, 24, 25
* Concat 1 (``axis`` optional, default 1), 4, 11, 13
* Split 1 (``split`` attribute or second input), 2, 11 (attribute), 13 (input), 18 (``num_outputs``)
* Squeeze / Unsqueeze 1, 11 (``axes`` attribute), 13, 21, 23, 24, 25 (``axes`` input)
* Expand 8, 13
* Tile 1 (``tiles`` and ``axis`` inputs), 6, 13 (``repeats`` input)
* Pad 1 (``paddings``), 2 (``pads``/``value`` attributes), 11, 13 (inputs), 18 (``axes`` input),
  19, 21, 23, 24, 25 (``wrap`` mode); modes constant / reflect / edge (/ wrap from 19)
* Flatten 1, 9, 11, 13, 21, 23, 24, 25
* Shape 1, 13, 15 (``start``/``end``), 19, 21, 23, 24, 25;  Size 1, 13, 19, 21, 23, 24, 25
* DepthToSpace 1 (DCR), 11, 13, 28 (``mode`` DCR/CRD);  SpaceToDepth 1, 13 (DCR), 28 (``mode``)
* CenterCropPad 18, ReverseSequence 10, 28, Trilu 14, Compress 9, 11, 28
"""

from __future__ import annotations

import numpy as np

from onnxkit.runtime import KernelTable

KERNELS = KernelTable()

_LATEST = (21, 23, 24, 25)   # definitions that only widened the type lists


# -- helpers shared by the family modules ------------------------------------------------------
def norm_axis(ctx, axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in [-rank, rank-1] made non-negative; ctx.fail otherwise."""
    axis = int(axis)
    if not -rank <= axis < rank:
        ctx.fail(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return axis + rank if axis < 0 else axis


def norm_axes(ctx, axes, rank: int, what: str = "axes") -> list:
    """Each axis normalised; repeated axes rejected."""
    out = [norm_axis(ctx, a, rank, what) for a in axes]
    if len(set(out)) != len(out):
        ctx.fail(f"{what} {list(axes)} repeats an axis")
    return out


def int_list(value) -> list:
    """A 0-d or 1-d integer tensor (or a list) as a list of Python ints."""
    return [int(v) for v in np.asarray(value).reshape(-1).tolist()]


def scalar_int(ctx, value, what: str) -> int:
    a = np.asarray(value)
    if a.size != 1:
        ctx.fail(f"{what} must hold exactly one value, got shape {list(a.shape)}")
    return int(a.reshape(-1)[0])


def zero_of(x: np.ndarray):
    """The padding/fill value 'zero' of x's element type (empty string for STRING, False for BOOL)."""
    if x.dtype == object:
        first = x.reshape(-1)[0] if x.size else b""
        return "" if isinstance(first, str) else b""
    return np.zeros((), dtype=x.dtype)


# -- Reshape -----------------------------------------------------------------------------------
def reshape_extents(ctx, in_shape, size: int, shape: list, allowzero: bool) -> list:
    """The output extents of Reshape of an input of extents ``in_shape`` (``size`` elements)
    to the ``shape`` input (a list of ints): 0 copies, -1 infers; ctx.fail when impossible.
    Host-side arithmetic only: the gpu backend uses it too."""
    in_shape = list(in_shape)
    rank = len(in_shape)
    out = list(shape)
    for i, s in enumerate(shape):
        if s < -1:
            ctx.fail(f"shape {shape} holds an invalid extent {s}")
        if s == 0 and not allowzero:
            if i >= rank:
                ctx.fail(f"shape {shape}: 0 at position {i} copies an extent the input (rank {rank}) lacks")
            out[i] = in_shape[i]
    infer = [i for i, s in enumerate(out) if s == -1]
    if len(infer) > 1:
        ctx.fail(f"shape {shape} holds more than one -1")
    if infer:
        if allowzero and 0 in shape:
            ctx.fail(f"shape {shape}: allowzero=1 forbids a 0 together with a -1")
        known = int(np.prod([s for s in out if s != -1], dtype=np.int64))
        if known == 0 or size % known:
            ctx.fail(f"cannot reshape {in_shape} to {shape}")
        out[infer[0]] = size // known
    if int(np.prod(out, dtype=np.int64)) != size:
        ctx.fail(f"cannot reshape {in_shape} ({size} elements) to {shape}")
    return out


def reshape_to(ctx, x: np.ndarray, shape, allowzero: bool) -> np.ndarray:
    return x.reshape(reshape_extents(ctx, x.shape, x.size, int_list(shape), allowzero))


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
            return np.transpose(x)
        p = [int(a) for a in perm]
        if sorted(p) != list(range(x.ndim)):
            ctx.fail(f"perm {p} is not a permutation of the {x.ndim} axes")
        return np.transpose(x, p)

    return fn


# -- Concat ------------------------------------------------------------------------------------
@KERNELS.register("Concat", 1, 4, 11, 13)
def concat(ctx):
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
                ctx.fail(f"inputs of shapes {[list(v.shape) for v in xs]} cannot be joined on axis {axis}")
        return np.concatenate(xs, axis=a)

    return fn


# -- Split -------------------------------------------------------------------------------------
def _split_sizes(ctx, dim: int, n: int, split, num_outputs):
    if split is not None:
        sizes = int_list(split)
        if len(sizes) != n:
            ctx.fail(f"split {sizes} gives {len(sizes)} parts for {n} outputs")
        if any(s < 0 for s in sizes) or sum(sizes) != dim:
            ctx.fail(f"split {sizes} does not add up to the extent {dim}")
        return sizes
    if num_outputs is not None:
        n = int(num_outputs)
        if n < 1:
            ctx.fail(f"num_outputs {n} must be positive")
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
        if sizes[-1] < 0:
            ctx.fail(f"an extent of {dim} cannot be split into {n} parts of {chunk}")
        return sizes
    if dim % n:
        ctx.fail(f"an extent of {dim} cannot be split into {n} equal parts")
    return [dim // n] * n


def _split(ctx, x, axis, sizes):
    a = norm_axis(ctx, axis, x.ndim)
    ends = np.cumsum(sizes)[:-1].tolist()
    return tuple(np.split(x, ends, axis=a))


@KERNELS.register("Split", 1, 2, 11)
def split_attr(ctx):
    axis = ctx.attr("axis", 0)
    attr_split = ctx.attr("split")
    if attr_split is not None and len(attr_split) == 0:
        attr_split = None
    n = ctx.num_outputs

    def fn(x, split=None):   # Split-1 also takes the lengths as an optional second input
        s = split if split is not None else attr_split
        a = norm_axis(ctx, axis, x.ndim)
        return _split(ctx, x, a, _split_sizes(ctx, x.shape[a], n, s, None))

    return fn


@KERNELS.register("Split", 13, 18)
def split(ctx):
    axis = ctx.attr("axis", 0)
    num_outputs = ctx.attr("num_outputs") if ctx.since_version >= 18 else None
    n = ctx.num_outputs

    def fn(x, split=None):
        if split is not None and np.size(split) == 0:
            split = None
        if split is not None and num_outputs is not None:
            ctx.fail("give either the 'split' input or the 'num_outputs' attribute, not both")
        if num_outputs is not None and int(num_outputs) != n:
            ctx.fail(f"num_outputs={num_outputs} but the node has {n} outputs")
        a = norm_axis(ctx, axis, x.ndim)
        return _split(ctx, x, a, _split_sizes(ctx, x.shape[a], n, split, num_outputs))

    return fn


# -- Squeeze / Unsqueeze ------------------------------------------------------------------------
def squeeze_extents(ctx, shape, axes) -> list:
    """Squeeze's output shape; ``axes`` a list of ints, None or empty = every extent of 1."""
    if not axes:   # empty axes squeeze every extent of 1, as absent ones do
        return [d for d in shape if d != 1]
    ax = norm_axes(ctx, axes, len(shape))
    for a in ax:
        if shape[a] != 1:
            ctx.fail(f"cannot squeeze axis {a} of extent {shape[a]}")
    return [d for i, d in enumerate(shape) if i not in ax]


def unsqueeze_extents(ctx, shape, axes) -> list:
    """Unsqueeze's output shape; ``axes`` a list of ints."""
    if axes is None:
        ctx.fail("Unsqueeze needs axes")
    rank = len(shape) + len(axes)
    ax = set(norm_axes(ctx, axes, rank))
    it = iter(shape)
    return [1 if i in ax else next(it) for i in range(rank)]


def _squeeze(ctx, x, axes):
    return x.reshape(squeeze_extents(ctx, x.shape, None if axes is None else int_list(axes)))


def _unsqueeze(ctx, x, axes):
    return x.reshape(unsqueeze_extents(ctx, x.shape, None if axes is None else int_list(axes)))


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
    def fn(x, shape):
        shape = int_list(shape)
        try:
            out = np.broadcast_shapes(x.shape, tuple(shape))
        except ValueError:
            ctx.fail(f"cannot expand {list(x.shape)} to {shape} (Clause 6.6 broadcasting)")
        if out == x.shape:
            return x
        return np.array(np.broadcast_to(x, out))

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
        return np.tile(x, reps)

    return fn


@KERNELS.register("Tile", 6, 13)
def tile(ctx):
    def fn(x, repeats):
        reps = int_list(repeats)
        if len(reps) != x.ndim or any(r < 0 for r in reps):
            ctx.fail(f"repeats {reps} must hold {x.ndim} non-negative counts")
        return np.tile(x, reps) if x.ndim else x.copy()

    return fn


# -- Pad ---------------------------------------------------------------------------------------
def pad_plan(ctx, in_shape, pads: list, axes):
    """Pad's ``pads`` (a list of ints) over ``axes`` (None: all; a list of ints) of an input of
    extents ``in_shape`` as ``(crop, begin, end)``: ``crop`` (a tuple of slices, or None) first
    removes what negative pads remove, then ``begin``/``end`` (non-negative, one per axis) pad.
    Host-side arithmetic only: the gpu backend uses it too."""
    in_shape = list(in_shape)
    rank = len(in_shape)
    axes = list(range(rank)) if axes is None else norm_axes(ctx, axes, rank)
    n = len(axes)
    if len(pads) != 2 * n:
        ctx.fail(f"pads {pads} must hold 2 x {n} values")
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[n + i]
    crop = None
    if any(b < 0 or e < 0 for b, e in zip(begin, end)):        # negative pads remove elements
        crop = tuple(slice(-b if b < 0 else 0, d + e if e < 0 else d) for b, e, d in zip(begin, end, in_shape))
        if any(s.stop < s.start for s in crop):
            ctx.fail(f"pads {pads} remove more than the extents {in_shape}")
        begin, end = [max(b, 0) for b in begin], [max(e, 0) for e in end]
    return crop, begin, end


def pad_array(ctx, x, pads, mode: str, value, axes=None) -> np.ndarray:
    crop, begin, end = pad_plan(ctx, x.shape, int_list(pads), None if axes is None else int_list(axes))
    if crop is not None:
        x = x[crop]
    if not any(begin) and not any(end):
        return x
    out_shape = tuple(d + b + e for d, b, e in zip(x.shape, begin, end))
    if mode == "constant":
        if value is None:
            value = zero_of(x)
        out = np.full(out_shape, value, dtype=x.dtype)
        out[tuple(slice(b, b + d) for b, d in zip(begin, x.shape))] = x
        return out
    for d, b, e in zip(x.shape, begin, end):
        if d == 0 and (b or e):
            ctx.fail(f"mode '{mode}' cannot pad an empty axis")
    return np.pad(x, list(zip(begin, end)), mode=mode)


def _pad_mode(ctx, allowed) -> str:
    mode = ctx.attr_str("mode", "constant")
    if mode not in allowed:
        ctx.fail(f"mode '{mode}' is not one of {sorted(allowed)} at this version")
    return mode


def _attr_value(x, value):
    return None if value is None else np.asarray(value).astype(x.dtype)


@KERNELS.register("Pad", 1, 2)
def pad_attr(ctx):
    mode = _pad_mode(ctx, {"constant", "reflect", "edge"})
    pads = ctx.attr("paddings" if ctx.since_version == 1 else "pads")
    if pads is None:
        ctx.fail("Pad needs its pads attribute")
    value = ctx.attr("value", 0.0)
    return lambda x: pad_array(ctx, x, pads, mode, _attr_value(x, value))


def _constant_value(ctx, x, v):
    if v is None:
        return None
    v = np.asarray(v)
    if v.size != 1:
        ctx.fail(f"constant_value must be a scalar, got shape {list(v.shape)}")
    return v.reshape(-1)[0] if x.dtype == object else v.reshape(()).astype(x.dtype)


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
        outer = int(np.prod(x.shape[:a], dtype=np.int64))
        return x.reshape(outer, int(np.prod(x.shape[a:], dtype=np.int64)))

    return fn


@KERNELS.register("Shape", 1, 13, 15, 19, *_LATEST)
def shape(ctx):
    start = int(ctx.attr("start", 0)) if ctx.since_version >= 15 else 0
    end = ctx.attr("end") if ctx.since_version >= 15 else None
    end = None if end is None else int(end)
    return lambda x: np.array(np.shape(x)[start:end], dtype=np.int64)


@KERNELS.register("Size", 1, 13, 19, *_LATEST)
def size(ctx):
    return lambda x: np.array(np.size(x), dtype=np.int64)


# -- DepthToSpace / SpaceToDepth ---------------------------------------------------------------
def _mode(ctx, has_mode: bool) -> str:
    mode = ctx.attr_str("mode", "DCR") if has_mode else "DCR"
    if mode not in ("DCR", "CRD"):
        ctx.fail(f"mode '{mode}' is not DCR or CRD")
    return mode


def _blocksize(ctx) -> int:
    bs = ctx.attr("blocksize")
    if bs is None or int(bs) < 1:
        ctx.fail("blocksize must be a positive integer")
    return int(bs)


@KERNELS.register("DepthToSpace", 1, 11, 13, 28)
def depth_to_space(ctx):
    bs = _blocksize(ctx)
    mode = _mode(ctx, ctx.since_version >= 11)

    def fn(x):
        if x.ndim != 4 or x.shape[1] % (bs * bs):
            ctx.fail(f"input of shape {list(x.shape)} is not [N, C, H, W] with C divisible by {bs * bs}")
        b, c, h, w = x.shape
        c2 = c // (bs * bs)
        if mode == "DCR":
            t = x.reshape(b, bs, bs, c2, h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            t = x.reshape(b, c2, bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
        return t.reshape(b, c2, h * bs, w * bs)

    return fn


@KERNELS.register("SpaceToDepth", 1, 13, 28)
def space_to_depth(ctx):
    bs = _blocksize(ctx)
    mode = _mode(ctx, ctx.since_version >= 28)

    def fn(x):
        if x.ndim != 4 or x.shape[2] % bs or x.shape[3] % bs:
            ctx.fail(f"input of shape {list(x.shape)} is not [N, C, H, W] with H and W divisible by {bs}")
        b, c, h, w = x.shape
        t = x.reshape(b, c, h // bs, bs, w // bs, bs)
        t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
        return t.reshape(b, c * bs * bs, h // bs, w // bs)

    return fn


# -- CenterCropPad -----------------------------------------------------------------------------
@KERNELS.register("CenterCropPad", 18)
def center_crop_pad(ctx):
    attr_axes = ctx.attr("axes")

    def fn(x, shape):
        target = int_list(shape)
        axes = list(range(x.ndim)) if attr_axes is None else norm_axes(ctx, attr_axes, x.ndim)
        if len(target) != len(axes):
            ctx.fail(f"shape {target} must hold one extent per axis ({len(axes)})")
        crop = [slice(None)] * x.ndim
        place = [slice(None)] * x.ndim
        out_shape = list(x.shape)
        for a, t in zip(axes, target):
            d = x.shape[a]
            if t < 0:
                ctx.fail(f"shape {target} holds a negative extent")
            out_shape[a] = t
            if t < d:
                s = (d - t) // 2
                crop[a] = slice(s, s + t)
            elif t > d:
                s = (t - d) // 2
                place[a] = slice(s, s + d)
        if out_shape == list(x.shape):
            return x
        out = np.full(out_shape, zero_of(x), dtype=x.dtype)
        out[tuple(place)] = x[tuple(crop)]
        return out

    return fn


# -- ReverseSequence ---------------------------------------------------------------------------
@KERNELS.register("ReverseSequence", 10, 28)
def reverse_sequence(ctx):
    batch_axis = int(ctx.attr("batch_axis", 1))
    time_axis = int(ctx.attr("time_axis", 0))
    if {batch_axis, time_axis} != {0, 1}:
        ctx.fail(f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 in some order")

    def fn(x, sequence_lens):
        if x.ndim < 2:
            ctx.fail(f"input must have rank >= 2, got {x.ndim}")
        lens = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
        nb, nt = x.shape[batch_axis], x.shape[time_axis]
        if lens.shape[0] != nb:
            ctx.fail(f"sequence_lens has {lens.shape[0]} entries for a batch of {nb}")
        if ((lens < 0) | (lens > nt)).any():
            ctx.fail(f"sequence_lens {lens.tolist()} must lie in [0, {nt}]")
        t = np.arange(nt)[None, :]
        src = np.where(t < lens[:, None], lens[:, None] - 1 - t, t)      # [batch, time]
        if time_axis < batch_axis:
            src = src.T
        src = src.reshape(src.shape + (1,) * (x.ndim - 2))
        return np.take_along_axis(x, src, axis=time_axis)

    return fn


# -- Trilu / Compress --------------------------------------------------------------------------
@KERNELS.register("Trilu", 14)
def trilu(ctx):
    upper = bool(ctx.attr("upper", 1))

    def fn(x, k=None):
        if x.ndim < 2:
            ctx.fail(f"input must have rank >= 2, got {x.ndim}")
        kk = 0 if k is None else scalar_int(ctx, k, "k")
        n, m = x.shape[-2:]
        rows, cols = np.arange(n)[:, None], np.arange(m)[None, :]
        keep = (cols - rows >= kk) if upper else (cols - rows <= kk)
        out = np.full(x.shape, zero_of(x), dtype=x.dtype)
        np.copyto(out, x, where=keep)
        return out

    return fn


@KERNELS.register("Compress", 9, 11, 28)
def compress(ctx):
    axis = ctx.attr("axis")

    def fn(x, condition):
        cond = np.asarray(condition).reshape(-1).astype(bool, copy=False)
        if axis is None:
            flat = x.reshape(-1)
            if cond.shape[0] > flat.shape[0]:
                ctx.fail(f"condition of length {cond.shape[0]} is longer than the {flat.shape[0]} elements")
            return flat[:cond.shape[0]][cond]
        a = norm_axis(ctx, axis, x.ndim)
        if cond.shape[0] > x.shape[a]:
            ctx.fail(f"condition of length {cond.shape[0]} is longer than axis {a} ({x.shape[a]})")
        return np.compress(cond, x, axis=a)

    return fn
