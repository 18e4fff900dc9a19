"""Tensor manipulation, indexing and generator kernels of ai.onnx on the gpu backend (torch).

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
* Slice 1 (``starts``/``ends``/``axes`` attributes), 10, 11, 13 (inputs, with ``steps``)
* Gather 1, 11, 13;  GatherElements 11, 13 (negative indices counted from the end; an index out
  of range is an error naming the node: checked on the host, never a device-side assert)
* ConstantOfShape 9, 20, 21, 23, 24, 25;  Constant 1, 9 (``value``), 11 (``sparse_value``, made
  dense), 12, 13, 19, 21, 23, 24, 25 (``value_float(s)``, ``value_int(s)``)
* Range 11, 27 (``stash_type`` for float16 / bfloat16)

Shapes, axes, pads, starts/ends and the like are read on the host (``tolist``); the data stays
on the device.  Results may be views of the input (Reshape, Transpose, Split, Slice with
positive steps...).  A STRING constant, or a constant of a type torch lacks, is refused with
an error naming the type.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.runtime import KernelTable

from ..device import torch_dtype
from .cast import convert

KERNELS = KernelTable()

_LATEST = (21, 23, 24, 25)   # definitions that only widened the type lists


# -- helpers shared by the family modules ------------------------------------------------------
def int_list(value) -> list:
    """A 0-d or 1-d integer tensor (torch or numpy) or a list as a list of Python ints."""
    if hasattr(value, "detach"):
        return [int(v) for v in value.detach().reshape(-1).tolist()]
    return [int(v) for v in np.asarray(value).reshape(-1).tolist()]


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


def scalar_int(ctx, value, what: str) -> int:
    vals = int_list(value)
    if len(vals) != 1:
        ctx.fail(f"{what} must hold exactly one value, got {len(vals)}")
    return vals[0]


def _shape(x) -> list:
    return list(x.shape)


# -- Reshape -----------------------------------------------------------------------------------
def reshape_to(ctx, x, shape, allowzero: bool):
    shape = int_list(shape)
    out = list(shape)
    for i, s in enumerate(shape):
        if s < -1:
            ctx.fail(f"shape {shape} holds an invalid extent {s}")
        if s == 0 and not allowzero:
            if i >= x.ndim:
                ctx.fail(f"shape {shape}: 0 at position {i} copies an extent the input (rank {x.ndim}) lacks")
            out[i] = x.shape[i]
    infer = [i for i, s in enumerate(out) if s == -1]
    n = x.numel()
    if len(infer) > 1:
        ctx.fail(f"shape {shape} holds more than one -1")
    if infer:
        if allowzero and 0 in shape:
            ctx.fail(f"shape {shape}: allowzero=1 forbids a 0 together with a -1")
        known = math.prod(s for s in out if s != -1)
        if known == 0 or n % known:
            ctx.fail(f"cannot reshape {_shape(x)} to {shape}")
        out[infer[0]] = n // known
    if math.prod(out) != n:
        ctx.fail(f"cannot reshape {_shape(x)} ({n} elements) to {shape}")
    return x.reshape(out)


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
    axes = None if axes is None else int_list(axes)
    if not axes:   # empty axes squeeze every extent of 1, as absent ones do
        return x.reshape([d for d in x.shape if d != 1])
    ax = norm_axes(ctx, axes, x.ndim)
    for a in ax:
        if x.shape[a] != 1:
            ctx.fail(f"cannot squeeze axis {a} of extent {x.shape[a]}")
    return x.reshape([d for i, d in enumerate(x.shape) if i not in ax])


def _unsqueeze(ctx, x, axes):
    if axes is None:
        ctx.fail("Unsqueeze needs axes")
    axes = int_list(axes)
    rank = x.ndim + len(axes)
    ax = set(norm_axes(ctx, axes, rank))
    it = iter(x.shape)
    return x.reshape([1 if i in ax else next(it) for i in range(rank)])


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

    rank = x.ndim
    pads = int_list(pads)
    axes = list(range(rank)) if axes is None else norm_axes(ctx, int_list(axes), rank)
    n = len(axes)
    if len(pads) != 2 * n:
        ctx.fail(f"pads {pads} must hold 2 x {n} values")
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[n + i]
    if any(b < 0 or e < 0 for b, e in zip(begin, end)):        # negative pads remove elements
        crop = tuple(slice(-b if b < 0 else 0, d + e if e < 0 else d) for b, e, d in zip(begin, end, x.shape))
        if any(s.stop < s.start for s in crop):
            ctx.fail(f"pads {pads} remove more than the extents {_shape(x)}")
        x = x[crop]
        begin, end = [max(b, 0) for b in begin], [max(e, 0) for e in end]
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


def _pad_mode(ctx, allowed) -> str:
    mode = ctx.attr_str("mode", "constant")
    if mode not in allowed:
        ctx.fail(f"mode '{mode}' is not one of {sorted(allowed)} at this version")
    return mode


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


# -- Slice -------------------------------------------------------------------------------------
def slice_tensor(ctx, x, starts, ends, axes=None, steps=None):
    import torch

    starts, ends = int_list(starts), int_list(ends)
    n = len(starts)
    axes = list(range(n)) if axes is None else norm_axes(ctx, int_list(axes), x.ndim)
    steps = [1] * n if steps is None else int_list(steps)
    if not (len(ends) == len(axes) == len(steps) == n):
        ctx.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have the same length")
    if n > x.ndim:
        ctx.fail(f"{n} slices for a tensor of rank {x.ndim}")
    index = [slice(None)] * x.ndim
    reverse = []
    for a, s, e, st in zip(axes, starts, ends, steps):
        d = x.shape[a]
        if st == 0:
            ctx.fail("a step of 0 is not allowed")
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
            index[a] = slice(s, max(s, e), st)
        else:
            s, e = min(max(s, -1), d - 1), min(max(e, -1), d - 1)
            if s <= e:
                index[a] = slice(0, 0)
            else:
                reverse.append((a, s, e, st))      # torch slicing takes no negative step
    x = x[tuple(index)]
    for a, s, e, st in reverse:
        x = x.index_select(a, torch.arange(s, e, st, device=x.device))
    return x


@KERNELS.register("Slice", 1)
def slice_v1(ctx):
    starts, ends, axes = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes")
    if starts is None or ends is None:
        ctx.fail("Slice-1 needs the 'starts' and 'ends' attributes")
    return lambda x: slice_tensor(ctx, x, starts, ends, axes, None)


@KERNELS.register("Slice", 10, 11, 13)
def slice_(ctx):
    return lambda x, starts, ends, axes=None, steps=None: slice_tensor(ctx, x, starts, ends, axes, steps)


# -- Gather / GatherElements -------------------------------------------------------------------
def check_index(ctx, idx, n: int, what: str = "indices value"):
    """``idx`` as int64 with negative values wrapped; ctx.fail if any lies outside [-n, n-1]
    (checked on the host: an out-of-range index must not reach a device kernel)."""
    import torch

    if idx.dtype.is_floating_point or idx.dtype in (torch.bool,) or idx.dtype.is_complex:
        ctx.fail(f"{what} must be an integer tensor, got {idx.dtype}")
    idx = idx.to(torch.int64)
    if idx.numel():
        lo, hi = torch.aminmax(idx)
        lo, hi = int(lo), int(hi)
        if lo < -n or hi >= n:
            ctx.fail(f"{what} {lo if lo < -n else hi} is out of range for an extent of {n}")
        if lo < 0:
            idx = torch.where(idx < 0, idx + n, idx)
    return idx


@KERNELS.register("Gather", 1, 11, 13)
def gather(ctx):
    axis = int(ctx.attr("axis", 0))

    def fn(x, indices):
        a = norm_axis(ctx, axis, x.ndim)
        idx = check_index(ctx, indices, x.shape[a])
        out = x.index_select(a, idx.reshape(-1))
        return out.reshape(tuple(x.shape[:a]) + tuple(idx.shape) + tuple(x.shape[a + 1:]))

    return fn


@KERNELS.register("GatherElements", 11, 13)
def gather_elements(ctx):
    import torch

    axis = int(ctx.attr("axis", 0))

    def fn(x, indices):
        a = norm_axis(ctx, axis, x.ndim)
        if indices.ndim != x.ndim or any(indices.shape[i] > x.shape[i] for i in range(x.ndim) if i != a):
            ctx.fail(f"indices of shape {_shape(indices)} do not fit data of shape {_shape(x)}")
        idx = check_index(ctx, indices, x.shape[a])
        return torch.gather(x, a, idx)

    return fn


# -- Constant / ConstantOfShape ----------------------------------------------------------------
#: attribute -> (first since_version that defines it, how its value becomes an array; None:
#: STRING, which this backend refuses)
_CONSTANT_FORMS = {
    "value": (1, lambda v: v.numpy()),
    "sparse_value": (11, lambda v: v.to_dense()),
    "value_float": (12, lambda v: np.array(v, dtype=np.float32)),
    "value_floats": (12, lambda v: np.array(list(v), dtype=np.float32).reshape(-1)),
    "value_int": (12, lambda v: np.array(v, dtype=np.int64)),
    "value_ints": (12, lambda v: np.array(list(v), dtype=np.int64).reshape(-1)),
    "value_string": (12, None),
    "value_strings": (12, None),
}


def _to_device(ctx, array, what: str):
    """A host array (None: a STRING one) as a tensor on the device, or a function failing with the reason."""
    from onnxkit.dtypes import from_numpy_dtype

    from ..device import asarray

    if array is None or array.dtype == object or torch_dtype(array.dtype) is None:
        name = "STRING" if array is None or array.dtype == object else from_numpy_dtype(array.dtype).name

        def refuse(*_):
            ctx.fail(f"{what} of element type {name}: the gpu backend has no torch dtype for it")
        return refuse
    return asarray(array)


@KERNELS.register("Constant", 1, 9, 11, 12, 13, 19, 21, 23, 24, 25)
def constant(ctx):
    given = [name for name in _CONSTANT_FORMS if ctx.has_attr(name)]
    if len(given) != 1:
        ctx.fail(f"exactly one of value, sparse_value or value_* must be given, not {given or 'none'}")
    name = given[0]
    since, make = _CONSTANT_FORMS[name]
    if ctx.since_version < since:
        ctx.fail(f"attribute '{name}' is defined from Constant-{since}")
    value = ctx.attr(name)
    if value is None:
        ctx.fail(f"attribute '{name}' holds no value")
    t = _to_device(ctx, None if make is None else np.asarray(make(value)), "a constant")
    if callable(t):
        return t
    return lambda: t     # the same tensor is every run's output: kernels never write into inputs


@KERNELS.register("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def constant_of_shape(ctx):
    value = ctx.attr_tensor("value")
    if value is None:
        value = np.zeros((), dtype=np.float32)
    if value.size != 1:
        ctx.fail(f"'value' must hold exactly one element, got {value.size}")
    fill = _to_device(ctx, np.asarray(value).reshape(()), "a fill value")
    if callable(fill):
        return fill
    import torch

    def fn(shape):
        dims = int_list(shape)
        if any(d < 0 for d in dims):
            ctx.fail(f"shape {dims} holds a negative extent")
        return torch.empty(dims, dtype=fill.dtype, device=fill.device).fill_(fill)

    return fn


# -- Range -------------------------------------------------------------------------------------
def _range(ctx, start, limit, delta, compute=None):
    import torch

    for what, v in (("start", start), ("limit", limit), ("delta", delta)):
        if v.numel() != 1:
            ctx.fail(f"{what} must be a scalar, got shape {_shape(v)}")
    dtype, dev = start.dtype, start.device
    if not dtype.is_floating_point:
        s, l, d = (int(v.reshape(()).item()) for v in (start, limit, delta))
        if d == 0:
            ctx.fail("delta must not be 0")
        n = max(-((s - l) // d), 0)   # ceil((l - s) / d), exactly
        return (torch.arange(n, dtype=torch.int64, device=dev) * d + s).to(dtype)
    s, l, d = (float(v.reshape(()).item()) for v in (start, limit, delta))
    if d == 0:
        ctx.fail("delta must not be 0")
    if not all(math.isfinite(v) for v in (s, l, d)):
        ctx.fail(f"start {s}, limit {l} and delta {d} must be finite")
    n = max(int(math.ceil((l - s) / d)), 0)
    work = torch.float64 if compute is None else compute
    out = torch.arange(n, dtype=work, device=dev)
    out = out * torch.tensor(d, dtype=work, device=dev) + torch.tensor(s, dtype=work, device=dev)
    return convert(out, dtype)


@KERNELS.register("Range", 11)
def range_v11(ctx):
    return lambda start, limit, delta: _range(ctx, start, limit, delta)


@KERNELS.register("Range", 27)
def range_v27(ctx):
    import torch

    from .cast import tdtype

    stash = int(ctx.attr("stash_type", 1))
    stash_dtype = tdtype(stash)

    def fn(start, limit, delta):
        dtype = start.dtype
        if dtype not in (torch.float16, torch.bfloat16):
            return _range(ctx, start, limit, delta)
        if stash_dtype == dtype:           # computed in the element type itself
            return _range(ctx, start, limit, delta, compute=dtype)
        if stash_dtype not in (torch.float32, torch.float64):
            ctx.fail(f"stash_type {stash} is not FLOAT or DOUBLE")
        return _range(ctx, start, limit, delta, compute=stash_dtype)

    return fn
