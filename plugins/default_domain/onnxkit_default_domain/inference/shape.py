"""Shape-manipulating operators: Shape, Size, Reshape, Flatten, (Un)Squeeze, Concat, Split,
Transpose, Expand, Tile, Slice, Pad, DepthToSpace, SpaceToDepth, CenterCropPad.

Integer values known at inference time (constants, or symbolic extents from ``Shape``)
are propagated, so that ``Shape -> Gather -> Concat -> Reshape`` gives a static shape.
The output geometry is computed by :mod:`.shape_geometry`, which the kernels call too.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import FunctionTable, InferenceError
from onnxkit.plugin.inference import (INT64, MAX_CONSTANT_ELEMENTS, dims_of, elem_of, int_list, normalize_axis, product,
                                      shape_input, tensor)

from ._util import definition_keys
from .shape_geometry import (
    center_crop_pad_extents, concat_extents, depth_space_extents, expand_extents, flatten_extents, numpy_slices, pad_extents,
    pad_widths, reshape_extents, shape_range, slice_plan, sliced_extents, split_sizes, squeeze_extents, tile_extents,
    unsqueeze_extents,
)

FUNCTIONS = FunctionTable(definition_keys)


def _sym(extents) -> np.ndarray:
    out = np.empty(len(extents), dtype=object)
    for k, e in enumerate(extents):
        out[k] = e
    return out


@FUNCTIONS.register("Shape")
def _shape(ctx):
    dims = dims_of(ctx.input_type(0))
    if dims is None:
        return [tensor(INT64, [None])]
    start, end = 0, None
    if ctx.since_version >= 15:
        start = int(ctx.attr("start", 0))
        end = ctx.attr("end")
        end = None if end is None else int(end)
    start, end = shape_range(len(dims), start, end)
    sel = dims[start:end]
    ctx.set_output(0, tensor(INT64, [len(sel)]), _sym(sel))


@FUNCTIONS.register("Size")
def _size(ctx):
    dims = dims_of(ctx.input_type(0))
    n = product(dims) if dims is not None else None
    ctx.set_output(0, tensor(INT64, []), None if n is None else np.array(n, dtype=np.int64))


@FUNCTIONS.register("Reshape", 5)
def _reshape(ctx):
    t = ctx.input_type(0)
    elem = elem_of(t)
    dims = dims_of(t)
    target = shape_input(ctx, 1)
    allowzero = bool(ctx.attr("allowzero", 0))
    if target is None:
        st = dims_of(ctx.input_type(1))
        n = st[0] if st is not None and len(st) == 1 and isinstance(st[0], int) else None
        return [tensor(elem, None if n is None else [None] * n)]
    out = reshape_extents(ctx, dims, target, allowzero)
    value = None
    s = ctx.symbolic(0)
    if s is not None and all(isinstance(e, int) and e >= 0 for e in out) and product(out) == s.size:
        value = s.reshape(out)
    ctx.set_output(0, tensor(elem, out), value)


@FUNCTIONS.register("Reshape", 1, 4)
def _reshape_v1(ctx):
    t = ctx.input_type(0)
    shape = ctx.attr("shape")
    if shape is None:
        return [tensor(elem_of(t), None)]
    return [tensor(elem_of(t), reshape_extents(ctx, dims_of(t), [int(x) for x in shape], False))]


@FUNCTIONS.register("Flatten")
def _flatten(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    if dims is None:
        return [tensor(elem_of(t), [None, None])]
    return [tensor(elem_of(t), flatten_extents(ctx, dims, int(ctx.attr("axis", 1))))]


def _squeeze(ctx, axes):
    t = ctx.input_type(0)
    dims = dims_of(t)
    elem = elem_of(t)
    if dims is None:
        return tensor(elem, None), None
    out = squeeze_extents(ctx, dims, axes)
    if out is None:
        return tensor(elem, None), None
    value = None
    s = ctx.symbolic(0)
    if s is not None and s.size == product(out) if is_static(out) else False:
        value = s.reshape(out)
    return tensor(elem, out), value


def is_static(dims):
    return dims is not None and all(isinstance(d, int) for d in dims)


@FUNCTIONS.register("Squeeze", 1, 12)
def _squeeze_attr(ctx):
    a = ctx.attr("axes")
    t, v = _squeeze(ctx, list(a) if a is not None and len(a) else None)
    ctx.set_output(0, t, v)


@FUNCTIONS.register("Squeeze", 13)
def _squeeze_input(ctx):
    if ctx.has_input(1):
        axes = int_list(ctx, 1)
        if axes is None:
            return [tensor(elem_of(ctx.input_type(0)), None)]
    else:
        axes = None
    t, v = _squeeze(ctx, axes)
    ctx.set_output(0, t, v)


def _unsqueeze(ctx, axes):
    t = ctx.input_type(0)
    dims = dims_of(t)
    elem = elem_of(t)
    if dims is None or axes is None:
        return tensor(elem, None), None
    out = unsqueeze_extents(ctx, dims, axes)
    value = None
    s = ctx.symbolic(0)
    if s is not None and is_static(out) and s.size == product(out):
        value = s.reshape(out)
    return tensor(elem, out), value


@FUNCTIONS.register("Unsqueeze", 1, 12)
def _unsqueeze_attr(ctx):
    a = ctx.attr("axes")
    t, v = _unsqueeze(ctx, list(a) if a is not None else None)
    ctx.set_output(0, t, v)


@FUNCTIONS.register("Unsqueeze", 13)
def _unsqueeze_input(ctx):
    t, v = _unsqueeze(ctx, int_list(ctx, 1))
    ctx.set_output(0, t, v)


@FUNCTIONS.register("Concat")
def _concat(ctx):
    types = [ctx.input_type(i) for i in range(ctx.num_inputs) if ctx.has_input(i)]
    elem = next((elem_of(t) for t in types if elem_of(t)), 0)
    ranks = {len(dims_of(t)) for t in types if dims_of(t) is not None}
    if len(ranks) > 1:
        ctx.fail(f"Concat: inputs of different ranks {sorted(ranks)}")
    if not ranks:
        return [tensor(elem, None)]
    r = ranks.pop()
    axis = ctx.attr("axis")
    if axis is None:
        axis = 1  # Concat-1: default 1
    axis = normalize_axis(ctx, int(axis), r) if r else 0
    if r == 0:
        ctx.fail("Concat: inputs must have rank >= 1")
    known = [dims_of(t) for t in types if dims_of(t) is not None]
    out = concat_extents(ctx, known, axis, complete=len(known) == len(types), fresh=ctx.fresh_dim)
    value = None
    if r == 1:
        vals = [ctx.symbolic(i) for i in range(ctx.num_inputs) if ctx.has_input(i)]
        if all(v is not None for v in vals) and sum(v.size for v in vals) <= MAX_CONSTANT_ELEMENTS:
            value = np.concatenate([v.reshape(-1) for v in vals]) if vals else None
            if value is not None:
                out = [value.size]
    consts = [ctx.constant(i) for i in range(ctx.num_inputs) if ctx.has_input(i)]
    if value is None and all(c is not None for c in consts) and sum(c.size for c in consts) <= MAX_CONSTANT_ELEMENTS:
        try:
            value = np.concatenate(consts, axis=axis)
        except ValueError:
            value = None
    ctx.set_output(0, tensor(elem, out), value)


def _split_common(ctx, split):
    t = ctx.input_type(0)
    dims = dims_of(t)
    elem = elem_of(t)
    n = ctx.num_outputs
    if dims is None:
        return [tensor(elem, None)] * n
    r = len(dims)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), r)
    num_outputs = ctx.attr("num_outputs") if ctx.since_version >= 18 else None
    try:
        sizes = split_sizes(ctx, dims[axis], n, split, None if split is not None else num_outputs)
    except InferenceError:
        if split is not None:
            raise
        # parts that do not fit (5 into 4 x 2) are an error when the node runs; a branch that
        # never runs may hold such a node (the ONNX vectors do), so its sizes are left unknown
        sizes = [None] * n
    outs = []
    for s in sizes:
        d = list(dims)
        d[axis] = s if s is not None else (dims[axis] if n == 1 else None)
        outs.append(tensor(elem, d))
    return outs


@FUNCTIONS.register("Split", 1, 12)
def _split_old(ctx):
    split = ctx.attr("split")
    if ctx.since_version < 2 and ctx.has_input(1):
        split = int_list(ctx, 1)
        if split is None:
            return _split_unknown(ctx)
    return _split_common(ctx, list(split) if split else None)


def _split_unknown(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    if dims is None:
        return [tensor(elem_of(t), None)] * ctx.num_outputs
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), len(dims))
    d = list(dims)
    d[axis] = None
    return [tensor(elem_of(t), d)] * ctx.num_outputs


@FUNCTIONS.register("Split", 13)
def _split_new(ctx):
    split = None
    if ctx.has_input(1):
        split = int_list(ctx, 1)
        if split is None:
            return _split_unknown(ctx)
    return _split_common(ctx, split)


@FUNCTIONS.register("Transpose")
def _transpose(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    if dims is None:
        return [tensor(elem_of(t), None)]
    perm = ctx.attr("perm")
    if perm is None or len(perm) == 0:
        perm = list(range(len(dims)))[::-1]
    if sorted(perm) != list(range(len(dims))):
        ctx.fail(f"Transpose: perm {list(perm)} is not a permutation of rank {len(dims)}")
    value = None
    s = ctx.symbolic(0)
    if s is not None:
        value = np.transpose(s, perm)
    ctx.set_output(0, tensor(elem_of(t), [dims[p] for p in perm]), value)


@FUNCTIONS.register("Expand")
def _expand(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    target = shape_input(ctx, 1)
    if target is None:
        st = dims_of(ctx.input_type(1))
        if dims is not None and st is not None and len(st) == 1 and isinstance(st[0], int):
            return [tensor(elem_of(t), [None] * max(len(dims), st[0]))]
        return [tensor(elem_of(t), None)]
    if dims is None:
        return [tensor(elem_of(t), None)]
    return [tensor(elem_of(t), expand_extents(ctx, dims, target))]


@FUNCTIONS.register("Tile")
def _tile(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    if dims is None:
        return [tensor(elem_of(t), None)]
    reps = int_list(ctx, 1)
    if reps is None:
        return [tensor(elem_of(t), [None] * len(dims))]
    return [tensor(elem_of(t), tile_extents(ctx, dims, reps))]


def _slice(ctx, starts, ends, axes, steps):
    t = ctx.input_type(0)
    dims = dims_of(t)
    elem = elem_of(t)
    if dims is None:
        return tensor(elem, None), None
    r = len(dims)
    if starts is None or ends is None or (axes is False) or (steps is False):
        if axes is None and starts is not None:
            pass
        out = list(dims)
        if isinstance(axes, list):
            for a in axes:
                out[normalize_axis(ctx, a, r)] = None
        else:
            out = [None] * r
        return tensor(elem, out), None
    plan = slice_plan(ctx, dims, starts, ends, axes, steps)
    value = None
    sv = ctx.symbolic(0)
    if sv is not None:
        value = sv[numpy_slices(slice_plan(ctx, list(sv.shape), starts, ends, axes, steps), r)]
    return tensor(elem, sliced_extents(dims, plan)), value


@FUNCTIONS.register("Slice", 1, 9)
def _slice_v1(ctx):
    a = ctx.attr("axes")
    t, v = _slice(ctx, list(ctx.attr("starts") or []), list(ctx.attr("ends") or []), list(a) if a is not None else None, None)
    ctx.set_output(0, t, v)


@FUNCTIONS.register("Slice", 10)
def _slice_v10(ctx):
    starts, ends = int_list(ctx, 1), int_list(ctx, 2)
    axes = None
    if ctx.has_input(3):
        axes = int_list(ctx, 3)
        if axes is None:
            axes = False
    steps = None
    if ctx.has_input(4):
        steps = int_list(ctx, 4)
        if steps is None:
            steps = False
    t, v = _slice(ctx, starts, ends, axes, steps)
    ctx.set_output(0, t, v)


def _pad(ctx, pads, axes):
    t = ctx.input_type(0)
    dims = dims_of(t)
    elem = elem_of(t)
    if dims is None:
        return tensor(elem, None)
    r = len(dims)
    if pads is None:
        if axes is None:
            return tensor(elem, [None] * r)
        out = list(dims)
        for a in axes:
            out[normalize_axis(ctx, a, r)] = None
        return tensor(elem, out)
    begin, end = pad_widths(ctx, r, pads, axes)
    return tensor(elem, pad_extents(ctx, dims, begin, end))


@FUNCTIONS.register("Pad", 1, 10)
def _pad_attr(ctx):
    pads = ctx.attr("pads") if ctx.attr("pads") is not None else ctx.attr("paddings")
    return [_pad(ctx, None if pads is None else list(pads), None)]


@FUNCTIONS.register("Pad", 11)
def _pad_input(ctx):
    pads = int_list(ctx, 1)
    axes = None
    if ctx.has_input(3):
        axes = int_list(ctx, 3)
        if axes is None:
            t = ctx.input_type(0)
            d = dims_of(t)
            return [tensor(elem_of(t), None if d is None else [None] * len(d))]
    return [_pad(ctx, pads, axes)]


@FUNCTIONS.register(("DepthToSpace", "SpaceToDepth"))
def _depth_space(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    if dims is None:
        return [tensor(elem_of(t), [None] * 4)]
    return [tensor(elem_of(t), depth_space_extents(ctx, ctx.op_type, dims, int(ctx.attr("blocksize"))))]


@FUNCTIONS.register("CenterCropPad")
def _center_crop_pad(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    target = shape_input(ctx, 1)
    if dims is None:
        return [tensor(elem_of(t), None)]
    axes = ctx.attr("axes")
    return [tensor(elem_of(t), center_crop_pad_extents(ctx, dims, target, None if not axes else list(axes)))]
