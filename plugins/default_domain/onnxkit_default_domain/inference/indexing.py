"""Indexing: Gather*, Scatter*, Compress, OneHot, NonZero, TopK, Unique, TensorScatter.

The output geometry is computed by :mod:`.shape_geometry`, which the kernels call too.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import INT64, dims_of, elem_of, normalize_axis, same_as_input, scalar, tensor

from ._util import definition_keys
from .shape_geometry import check_elements_fit, gather_extents, gather_nd_extents, norm_axis, one_hot_extents, wrap_indices

FUNCTIONS = FunctionTable(definition_keys)


@FUNCTIONS.register("Gather")
def _gather(ctx):
    dt, it = ctx.input_type(0), ctx.input_type(1)
    elem = elem_of(dt)
    d, i = dims_of(dt), dims_of(it)
    if d is None or i is None:
        return [tensor(elem, None)]
    out = gather_extents(ctx, d, i, int(ctx.attr("axis", 0)))
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), len(d))
    value = None
    s, idx = ctx.symbolic(0), ctx.constant(1)
    if s is not None and idx is not None and idx.dtype.kind in "iu":
        idx = wrap_indices(ctx, np, idx, s.shape[axis])
        value = np.asarray(np.take(s, idx, axis=axis), dtype=object)
    ctx.set_output(0, tensor(elem, out), value)


@FUNCTIONS.register("GatherElements")
def _gather_elements(ctx):
    d, i = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    if d is not None and i is not None:
        check_elements_fit(ctx, d, i, norm_axis(ctx, int(ctx.attr("axis", 0)), len(d)))
    return [tensor(elem_of(ctx.input_type(0)), i)]


@FUNCTIONS.register("GatherND")
def _gather_nd(ctx):
    d, i = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    elem = elem_of(ctx.input_type(0))
    if d is None or i is None:
        return [tensor(elem, None)]
    b = int(ctx.attr("batch_dims", 0)) if ctx.since_version >= 12 else 0
    return [tensor(elem, gather_nd_extents(ctx, d, i, b))]


FUNCTIONS.register(("Scatter", "ScatterElements", "ScatterND"))(same_as_input(0))
FUNCTIONS.register("TensorScatter")(same_as_input(0))


@FUNCTIONS.register("Compress")
def _compress(ctx):
    t = ctx.input_type(0)
    d = dims_of(t)
    axis = ctx.attr("axis")
    if axis is None:
        return [tensor(elem_of(t), [None])]
    if d is None:
        return [tensor(elem_of(t), None)]
    a = normalize_axis(ctx, int(axis), len(d))
    out = list(d)
    out[a] = None
    return [tensor(elem_of(t), out)]


@FUNCTIONS.register("OneHot")
def _one_hot(ctx):
    i = dims_of(ctx.input_type(0))
    elem = elem_of(ctx.input_type(2))
    if i is None:
        return [tensor(elem, None)]
    depth = scalar(ctx, 1)
    return [tensor(elem, one_hot_extents(ctx, i, None if depth is None else int(depth), int(ctx.attr("axis", -1))))]


@FUNCTIONS.register("NonZero")
def _non_zero(ctx):
    d = dims_of(ctx.input_type(0))
    return [tensor(INT64, [None if d is None else len(d), None])]


@FUNCTIONS.register("TopK")
def _top_k(ctx):
    t = ctx.input_type(0)
    d = dims_of(t)
    if d is None:
        return [tensor(elem_of(t), None), tensor(INT64, None)]
    axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), len(d))
    if ctx.since_version >= 10:
        k = scalar(ctx, 1)
        k = None if k is None else int(k)
    else:
        k = int(ctx.attr("k"))
    out = list(d)
    out[axis] = k
    return [tensor(elem_of(t), out), tensor(INT64, out)]


@FUNCTIONS.register("Unique")
def _unique(ctx):
    t = ctx.input_type(0)
    d = dims_of(t)
    axis = ctx.attr("axis")
    if axis is None:
        y = tensor(elem_of(t), [None])
    elif d is None:
        y = tensor(elem_of(t), None)
    else:
        a = normalize_axis(ctx, int(axis), len(d))
        y = tensor(elem_of(t), [None if k == a else e for k, e in enumerate(d)])
    n = tensor(INT64, [None])
    inv = tensor(INT64, [None])
    if axis is None and d is not None and all(isinstance(e, int) for e in d):
        inv = tensor(INT64, [int(np.prod(d))])
    elif axis is not None and d is not None:
        inv = tensor(INT64, [d[normalize_axis(ctx, int(axis), len(d))]])
    return [y, n, inv, n]
