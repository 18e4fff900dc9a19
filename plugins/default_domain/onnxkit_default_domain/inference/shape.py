"""Shape-manipulating operators: Shape, Size, Reshape, Flatten, (Un)Squeeze, Concat, Split,
Transpose, Expand, Tile, Slice, Pad, DepthToSpace, SpaceToDepth, CenterCropPad.

Integer values known at inference time (constants, or symbolic extents from ``Shape``)
are propagated, so that ``Shape -> Gather -> Concat -> Reshape`` gives a static shape.
"""

from __future__ import annotations

import numpy as np

from onnxkit.inference.common import (
    INT64, broadcast, dims_of, elem_of, int_list, normalize_axis, product, shape_input, tensor, unify,
)
from onnxkit.inference.context import MAX_CONSTANT_ELEMENTS

from ._util import rule

FUNCTIONS: dict = {}


def _sym(extents) -> np.ndarray:
    out = np.empty(len(extents), dtype=object)
    for k, e in enumerate(extents):
        out[k] = e
    return out


@rule(FUNCTIONS, "Shape")
def _shape(ctx):
    dims = dims_of(ctx.input_type(0))
    if dims is None:
        return [tensor(INT64, [None])]
    r = len(dims)
    start, end = 0, r
    if ctx.since_version >= 15:
        start = int(ctx.attr("start", 0))
        end = ctx.attr("end")
        end = r if end is None else int(end)
        start = min(max(start + r if start < 0 else start, 0), r)
        end = min(max(end + r if end < 0 else end, 0), r)
    sel = dims[start:end] if end > start else []
    ctx.set_output(0, tensor(INT64, [len(sel)]), _sym(sel))


@rule(FUNCTIONS, "Size")
def _size(ctx):
    dims = dims_of(ctx.input_type(0))
    n = product(dims) if dims is not None else None
    ctx.set_output(0, tensor(INT64, []), None if n is None else np.array(n, dtype=np.int64))


def _reshape_dims(ctx, dims, target, allowzero):
    """Output extents of Reshape: ``target`` entries int / str / None."""
    out = list(target)
    minus = [k for k, e in enumerate(out) if e == -1]
    if len(minus) > 1:
        ctx.fail("Reshape: more than one -1 in the shape")
    for k, e in enumerate(out):
        if e == 0 and not allowzero:
            if dims is not None and k < len(dims):
                out[k] = dims[k]
            elif dims is not None:
                ctx.fail(f"Reshape: shape entry {k} is 0 but the input has rank {len(dims)}")
            else:
                out[k] = None
        elif isinstance(e, int) and e < -1:
            ctx.fail(f"Reshape: invalid shape entry {e}")
    if minus:
        k = minus[0]
        out[k] = None
        if dims is not None:
            rest = [e for j, e in enumerate(out) if j != k]
            # cancel variables that occur on both sides (the same extent); never compute over them
            left = list(dims)
            right = []
            for e in rest:
                if isinstance(e, str) and e in left:
                    left.remove(e)
                else:
                    right.append(e)
            lvars = [e for e in left if not isinstance(e, int)]
            rvars = [e for e in right if not isinstance(e, int)]
            a = product([e for e in left if isinstance(e, int)])
            b = product([e for e in right if isinstance(e, int)])
            if not rvars and b != 0:
                if not lvars and a % b == 0:
                    out[k] = a // b
                elif len(lvars) == 1 and isinstance(lvars[0], str) and a == b:
                    out[k] = lvars[0]  # N * a / a is N
    return out


@rule(FUNCTIONS, "Reshape", 5)
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
    out = _reshape_dims(ctx, dims, target, allowzero)
    value = None
    s = ctx.symbolic(0)
    if s is not None and all(isinstance(e, int) and e >= 0 for e in out) and product(out) == s.size:
        value = s.reshape(out)
    ctx.set_output(0, tensor(elem, out), value)


@rule(FUNCTIONS, "Reshape", 1, 4)
def _reshape_v1(ctx):
    t = ctx.input_type(0)
    shape = ctx.attr("shape")
    if shape is None:
        return [tensor(elem_of(t), None)]
    return [tensor(elem_of(t), _reshape_dims(ctx, dims_of(t), [int(x) for x in shape], False))]


def _prod_extent(ctx, part):
    if not part:
        return 1
    p = product(part)
    if p is not None:
        return p
    nonone = [d for d in part if d != 1]
    if len(nonone) == 1 and isinstance(nonone[0], str):
        return nonone[0]
    return None


@rule(FUNCTIONS, "Flatten")
def _flatten(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    if dims is None:
        return [tensor(elem_of(t), [None, None])]
    r = len(dims)
    axis = int(ctx.attr("axis", 1))
    if not -r <= axis <= r:
        ctx.fail(f"Flatten: axis {axis} out of range for rank {r}")
    axis = axis + r if axis < 0 else axis
    return [tensor(elem_of(t), [_prod_extent(ctx, dims[:axis]), _prod_extent(ctx, dims[axis:])])]


def _squeeze(ctx, axes):
    t = ctx.input_type(0)
    dims = dims_of(t)
    elem = elem_of(t)
    if dims is None:
        return tensor(elem, None), None
    r = len(dims)
    if axes is None:
        if any(not isinstance(d, int) for d in dims):
            return tensor(elem, None), None
        out = [d for d in dims if d != 1]
    else:
        ax = {normalize_axis(ctx, a, r) for a in axes}
        for a in ax:
            if isinstance(dims[a], int) and dims[a] != 1:
                ctx.fail(f"Squeeze: axis {a} has extent {dims[a]}, not 1")
        out = [d for k, d in enumerate(dims) if k not in ax]
    value = None
    s = ctx.symbolic(0)
    if s is not None and s.size == product(out) if is_static(out) else False:
        value = s.reshape(out)
    return tensor(elem, out), value


def is_static(dims):
    return dims is not None and all(isinstance(d, int) for d in dims)


@rule(FUNCTIONS, "Squeeze", 1, 12)
def _squeeze_attr(ctx):
    a = ctx.attr("axes")
    t, v = _squeeze(ctx, list(a) if a is not None and len(a) else None)
    ctx.set_output(0, t, v)


@rule(FUNCTIONS, "Squeeze", 13)
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
    r = len(dims) + len(axes)
    ax = sorted(normalize_axis(ctx, a, r) for a in axes)
    if len(set(ax)) != len(ax):
        ctx.fail("Unsqueeze: repeated axis")
    out, it = [], iter(dims)
    for k in range(r):
        out.append(1 if k in ax else next(it))
    value = None
    s = ctx.symbolic(0)
    if s is not None and is_static(out) and s.size == product(out):
        value = s.reshape(out)
    return tensor(elem, out), value


@rule(FUNCTIONS, "Unsqueeze", 1, 12)
def _unsqueeze_attr(ctx):
    a = ctx.attr("axes")
    t, v = _unsqueeze(ctx, list(a) if a is not None else None)
    ctx.set_output(0, t, v)


@rule(FUNCTIONS, "Unsqueeze", 13)
def _unsqueeze_input(ctx):
    t, v = _unsqueeze(ctx, int_list(ctx, 1))
    ctx.set_output(0, t, v)


@rule(FUNCTIONS, "Concat")
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
    out = []
    for k in range(r):
        col = [d[k] for d in known]
        if k == axis:
            if len(known) == len(types) and all(isinstance(x, int) for x in col):
                out.append(sum(col))
            elif len(known) == len(types) and len([x for x in col if x != 0]) == 1:
                out.append(next(x for x in col if x != 0))  # N concatenated with empty tensors is N
            else:
                out.append(ctx.fresh_dim())
        else:
            for a in col:
                for b in col:
                    if isinstance(a, int) and isinstance(b, int) and a != b:
                        ctx.fail(f"Concat: extents {a} and {b} differ at axis {k}")
            out.append(unify(*col))
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


def _split_sizes(ctx, dim, n, split, v18):
    if split is not None:
        return list(split)
    if isinstance(dim, int) and n:
        if v18:
            chunk = -(-dim // n)
            sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
            return sizes
        if dim % n == 0:
            return [dim // n] * n
    return [None] * n


def _split_common(ctx, split):
    t = ctx.input_type(0)
    dims = dims_of(t)
    elem = elem_of(t)
    n = ctx.num_outputs
    if dims is None:
        return [tensor(elem, None)] * n
    r = len(dims)
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), r)
    v18 = ctx.since_version >= 18 and ctx.attr("num_outputs") is not None
    sizes = _split_sizes(ctx, dims[axis], n, split, v18)
    if split is not None:
        if len(split) != n:
            ctx.fail(f"Split: {len(split)} sizes for {n} outputs")
        if isinstance(dims[axis], int) and sum(split) != dims[axis]:
            ctx.fail(f"Split: sizes {split} do not add up to {dims[axis]}")
    outs = []
    for s in sizes:
        d = list(dims)
        d[axis] = s if s is not None else (dims[axis] if n == 1 else None)
        outs.append(tensor(elem, d))
    return outs


@rule(FUNCTIONS, "Split", 1, 12)
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


@rule(FUNCTIONS, "Split", 13)
def _split_new(ctx):
    split = None
    if ctx.has_input(1):
        split = int_list(ctx, 1)
        if split is None:
            return _split_unknown(ctx)
    return _split_common(ctx, split)


@rule(FUNCTIONS, "Transpose")
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


@rule(FUNCTIONS, "Expand")
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
    return [tensor(elem_of(t), broadcast(ctx, [dims, target]))]


@rule(FUNCTIONS, "Tile")
def _tile(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    if dims is None:
        return [tensor(elem_of(t), None)]
    reps = int_list(ctx, 1)
    if reps is None:
        return [tensor(elem_of(t), [None] * len(dims))]
    if len(reps) != len(dims):
        ctx.fail(f"Tile: {len(reps)} repeats for rank {len(dims)}")
    out = [d * r if isinstance(d, int) else (d if r == 1 else None) for d, r in zip(dims, reps)]
    return [tensor(elem_of(t), out)]


def _slice_extent(dim, start, end, step):
    if step == 0:
        return None
    if not isinstance(dim, int):
        if step == 1 and start == 0 and end >= 2**31 - 1:
            return dim
        if step == -1 and start >= 2**31 - 1 and end <= -(2**31):
            return dim
        return None
    return len(range(*slice(start, end, step).indices(dim)))


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
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    if not (len(starts) == len(ends) == len(axes) == len(steps)):
        ctx.fail("Slice: starts, ends, axes and steps differ in length")
    out = list(dims)
    slices = [slice(None)] * r
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = normalize_axis(ctx, a, r)
        if st == 0:
            ctx.fail("Slice: step 0")
        out[a] = _slice_extent(dims[a], s, e, st)
        slices[a] = slice(s, e, st)
    value = None
    sv = ctx.symbolic(0)
    if sv is not None:
        value = sv[tuple(slices)]
    return tensor(elem, out), value


@rule(FUNCTIONS, "Slice", 1, 9)
def _slice_v1(ctx):
    a = ctx.attr("axes")
    t, v = _slice(ctx, list(ctx.attr("starts") or []), list(ctx.attr("ends") or []), list(a) if a is not None else None, None)
    ctx.set_output(0, t, v)


@rule(FUNCTIONS, "Slice", 10)
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
    if axes is None:
        axes = list(range(r))
    axes = [normalize_axis(ctx, a, r) for a in axes]
    if len(pads) != 2 * len(axes):
        ctx.fail(f"Pad: {len(pads)} pads for {len(axes)} axes")
    out = list(dims)
    n = len(axes)
    for k, a in enumerate(axes):
        b, e = pads[k], pads[k + n]
        d = dims[a]
        if isinstance(d, int):
            out[a] = d + b + e
        else:
            out[a] = d if b == 0 and e == 0 else None
    return tensor(elem, out)


@rule(FUNCTIONS, "Pad", 1, 10)
def _pad_attr(ctx):
    pads = ctx.attr("pads") if ctx.attr("pads") is not None else ctx.attr("paddings")
    return [_pad(ctx, None if pads is None else list(pads), None)]


@rule(FUNCTIONS, "Pad", 11)
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


@rule(FUNCTIONS, "DepthToSpace SpaceToDepth")
def _depth_space(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    if dims is None:
        return [tensor(elem_of(t), [None] * 4)]
    if len(dims) != 4:
        ctx.fail(f"{ctx.op_type}: input must have rank 4, not {len(dims)}")
    b = int(ctx.attr("blocksize"))
    n, c, h, w = dims
    mul = lambda d, k: d * k if isinstance(d, int) else None  # noqa: E731
    div = lambda d, k: d // k if isinstance(d, int) and d % k == 0 else None  # noqa: E731
    if ctx.op_type == "DepthToSpace":
        return [tensor(elem_of(t), [n, div(c, b * b), mul(h, b), mul(w, b)])]
    return [tensor(elem_of(t), [n, mul(c, b * b), div(h, b), div(w, b)])]


@rule(FUNCTIONS, "CenterCropPad")
def _center_crop_pad(ctx):
    t = ctx.input_type(0)
    dims = dims_of(t)
    target = shape_input(ctx, 1)
    if dims is None:
        return [tensor(elem_of(t), None)]
    axes = ctx.attr("axes")
    r = len(dims)
    axes = list(range(r)) if not axes else [normalize_axis(ctx, a, r) for a in axes]
    out = list(dims)
    for k, a in enumerate(axes):
        out[a] = target[k] if target is not None and k < len(target) else None
    return [tensor(elem_of(t), out)]
