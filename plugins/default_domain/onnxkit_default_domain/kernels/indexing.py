"""Indexing and selection of ai.onnx (every backend): Slice, Gather, GatherElements, GatherND,
Scatter, ScatterElements, ScatterND, Compress, OneHot, NonZero.

Slice-1 takes ``starts``/``ends``/``axes`` as attributes; from 10 they are inputs, with
``steps``.  GatherND has ``batch_dims`` from 12.  ScatterElements and ScatterND take
``reduction`` none from 11, add / mul from 16, max / min from 18; Scatter (9, 11, deprecated)
is ScatterElements without reduction.  The other definitions only widened the type lists.

Index values may be negative (counted from the end) where the operator allows it; one out of
range is an evaluation error naming the node on every backend, found on the host before any
device kernel sees it (:func:`~onnxkit_default_domain.inference.shape_geometry.wrap_indices`).
Output extents and slice plans come from
:mod:`onnxkit_default_domain.inference.shape_geometry`, the functions type inference uses.
Slices of negative step are taken as positive-step slices reversed (``xp.flip``).
"""

from __future__ import annotations

import numpy as np
from ._common import device_of

from onnxkit.plugin import KernelTable, accepts_beyond, arrays, size_guard

from ..inference.shape_geometry import (
    check_elements_fit, gather_extents, gather_nd_extents, one_hot_extents, slice_plan, wrap_indices,
)
from ._common import norm_axis, shape_of, size_of

KERNELS = KernelTable()


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


# -- Slice -------------------------------------------------------------------------------------
def slice_key(ctx, x, starts, ends, axes=None, steps=None) -> tuple:
    """``(index, flips)``: a tuple of positive-step slices and the axes to reverse after
    taking it, for Slice of ``x`` (``starts``... lists of ints; axes and steps may be None)."""
    index = [slice(None)] * x.ndim
    flips = []
    for a, s, e, st, n in slice_plan(ctx, shape_of(x), starts, ends, axes, steps):
        if n == 0:
            index[a] = slice(0, 0)
        elif st > 0:
            index[a] = slice(s, s + (n - 1) * st + 1, st)
        else:   # s, s+st, ..., low: take low..s with step -st, then reverse
            low = s + (n - 1) * st
            index[a] = slice(low, s + 1, -st)
            flips.append(a)
    return tuple(index), tuple(flips)


def slice_value(ctx, x, starts, ends, axes=None, steps=None):
    index, flips = slice_key(ctx, x, starts, ends, axes, steps)
    y = x[index]
    return ctx.xp.flip(y, axis=flips) if flips else y


def _attr_ints(ctx, name: str):
    v = ctx.attr(name)
    return None if v is None else [int(a) for a in v]


@KERNELS.register("Slice", 1)
def slice_v1(ctx, take=slice_value):
    """Slice-1 (attributes); ``take(ctx, x, starts, ends, axes, steps)`` slices (a backend's
    override passes its own)."""
    starts, ends, axes = _attr_ints(ctx, "starts"), _attr_ints(ctx, "ends"), _attr_ints(ctx, "axes")
    if starts is None or ends is None:
        ctx.fail("Slice-1 needs the 'starts' and 'ends' attributes")
    return lambda x: take(ctx, x, starts, ends, axes, None)


@KERNELS.register("Slice", 10, 11, 13)
def slice_(ctx, take=slice_value, ints=None):
    """Slice from 10 (inputs, read on the host by ``ints``, default ``ctx.ints``); ``take`` as
    for :func:`slice_v1`."""
    ints = ints or ctx.ints

    def fn(x, starts, ends, axes=None, steps=None):
        return take(ctx, x, ints(starts), ints(ends), None if axes is None else ints(axes),
                    None if steps is None else ints(steps))

    return fn


# -- Gather family -----------------------------------------------------------------------------
@KERNELS.register("Gather", 1, 11, 13)
@size_guard("gather")
def gather(ctx):
    xp = ctx.xp
    axis = int(ctx.attr("axis"))

    def fn(x, indices):
        out = gather_extents(ctx, shape_of(x), shape_of(indices), axis)
        a = norm_axis(ctx, axis, x.ndim)
        idx = wrap_indices(ctx, xp, indices, int(x.shape[a]))
        return xp.reshape(xp.take(x, xp.reshape(idx, (-1,)), axis=a), tuple(out))

    return fn


@KERNELS.register("GatherElements", 11, 13)
def gather_elements(ctx):
    xp = ctx.xp
    axis = int(ctx.attr("axis"))

    def fn(x, indices):
        a = norm_axis(ctx, axis, x.ndim)
        idims = shape_of(indices)
        check_elements_fit(ctx, shape_of(x), idims, a)
        idx = wrap_indices(ctx, xp, indices, int(x.shape[a]))
        part = x[tuple(slice(None) if i == a else slice(0, idims[i]) for i in range(x.ndim))]
        return xp.take_along_axis(part, idx, axis=a)

    return fn


def gather_nd(ctx, x, indices, b: int):
    """GatherND of ``x`` with ``b`` batch dimensions: the indexed positions as one linear
    index per batch, taken from ``x`` seen as [positions, trailing elements]."""
    xp = ctx.xp
    dims, idims = shape_of(x), shape_of(indices)
    out = gather_nd_extents(ctx, dims, idims, b)
    m = idims[-1]
    inner = dims[b:b + m]
    nb, k = _prod(dims[:b]), _prod(idims[b:-1])
    idx = xp.reshape(indices, (nb, k, m))
    lin = xp.zeros((nb, k), dtype=xp.int64, device=device_of(x))
    for j in range(m):
        lin = lin * inner[j] + wrap_indices(ctx, xp, idx[:, :, j], inner[j])
    lin = lin + xp.reshape(xp.arange(nb, dtype=xp.int64, device=device_of(x)) * _prod(inner), (nb, 1))
    data = xp.reshape(x, (nb * _prod(inner), _prod(dims[b + m:])))
    return xp.reshape(xp.take(data, xp.reshape(lin, (-1,)), axis=0), tuple(out))


@KERNELS.register("GatherND", 11, 12, 13)
@size_guard("product")
def gather_nd_kernel(ctx):
    b = int(ctx.attr("batch_dims", 0)) if ctx.since_version >= 12 else 0
    return lambda x, indices: gather_nd(ctx, x, indices, b)


# -- Scatter family ----------------------------------------------------------------------------
def scatter_reduction(ctx) -> str:
    """``reduction``, checked against this definition (add / mul from 16, max / min from 18),
    max / min at 16 too, as 18 defines them: onnxruntime accepts them there; the kernels declare
    it (``accepts_beyond``), so the checker reports each such node and ``strict=True`` refuses it."""
    allowed = {"none"}
    if ctx.since_version >= 16:
        allowed |= {"add", "mul", "max", "min"}
    r = ctx.attr_str("reduction", "none")
    if r not in allowed:
        ctx.fail(f"reduction '{r}' is not one of {sorted(allowed)} at this version")
    return r


def elements_targets(ctx, x, indices, updates, axis: int) -> tuple:
    """ScatterElements: ``(lin, tail)``, the flat position in ``x`` each update goes to (host
    int64, in the updates' row-major order) and 1 (one element per update)."""
    dims, idims = shape_of(x), shape_of(indices)
    if idims != shape_of(updates) or len(idims) != len(dims):
        ctx.fail(f"indices {idims} and updates {shape_of(updates)} must have the same shape, "
                 f"of the rank of data ({len(dims)})")
    a = norm_axis(ctx, axis, len(dims))
    check_elements_fit(ctx, dims, idims, a)
    key = list(np.indices(idims, sparse=True))
    key[a] = wrap_indices(ctx, np, ctx.to_host(indices), dims[a])
    if 0 in idims:
        return np.zeros(0, dtype=np.int64), 1
    return np.ravel_multi_index(tuple(np.broadcast_arrays(*key)), dims).reshape(-1), 1


def nd_targets(ctx, x, indices, updates) -> tuple:
    """ScatterND: ``(lin, tail)``, the flat position of the slice of ``x`` (of ``tail``
    elements) each slice of updates goes to (host int64)."""
    dims, idims = shape_of(x), shape_of(indices)
    if len(idims) < 1:
        ctx.fail("indices must have rank >= 1")
    k = idims[-1]
    if k > len(dims):
        ctx.fail(f"indices.shape[-1] = {k} exceeds the rank of data ({len(dims)})")
    if shape_of(updates) != idims[:-1] + dims[k:]:
        ctx.fail(f"updates of shape {shape_of(updates)}; expected {idims[:-1] + dims[k:]}")
    host = ctx.to_host(indices).reshape(-1, k)
    cols = tuple(wrap_indices(ctx, np, host[:, j], dims[j]) for j in range(k))
    if k == 1:
        return cols[0], _prod(dims[1:])
    lin = np.ravel_multi_index(cols, dims[:k]) if host.shape[0] and k else np.zeros(host.shape[0], dtype=np.int64)
    return np.asarray(lin, dtype=np.int64).reshape(-1), _prod(dims[k:])


def occurrence_passes(lin: np.ndarray) -> list:
    """The update positions grouped so that no target repeats within a group, each group's
    updates in their order (host arithmetic): applying the groups one after the other
    combines duplicate targets in order."""
    order = np.argsort(lin, kind="stable")
    ls = lin[order]
    starts = np.flatnonzero(np.concatenate(([True], ls[1:] != ls[:-1])))
    counts = np.diff(np.append(starts, ls.size))
    rank = np.arange(ls.size) - np.repeat(starts, counts)
    return [order[rank == r] for r in range(int(counts.max()))]


def _combine(xp, reduction: str):
    return {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": xp.maximum, "min": xp.minimum}[reduction]


def scatter_apply(ctx, x, lin: np.ndarray, tail: int, updates, reduction: str):
    """A copy of ``x`` with ``updates`` written (or combined by ``reduction``) at the flat
    positions ``lin`` of ``x`` seen as [positions, ``tail`` elements]."""
    import array_api_extra as xpx  # imported here: its import cost is paid by a model that scatters only

    xp = ctx.xp
    if lin.size == 0 or tail == 0:
        return xp.asarray(x, copy=True)
    flat = xp.reshape(xp.asarray(x, copy=True), (-1, tail))
    u = xp.reshape(xp.astype(updates, x.dtype), (-1, tail))
    if reduction == "none":
        flat = xpx.at(flat, ctx.from_host(lin)).set(u, copy=False)
    else:
        op = _combine(xp, reduction)
        for sel in occurrence_passes(lin):
            t, s = ctx.from_host(lin[sel]), ctx.from_host(sel)
            flat = xpx.at(flat, t).set(op(xp.take(flat, t, axis=0), xp.take(u, s, axis=0)), copy=False)
    return xp.reshape(flat, tuple(x.shape))


@KERNELS.register("Scatter", 9, 11)
def scatter(ctx):
    axis = int(ctx.attr("axis"))

    def fn(x, indices, updates):
        lin, tail = elements_targets(ctx, x, indices, updates, axis)
        return scatter_apply(ctx, x, lin, tail, updates, "none")

    return fn


@KERNELS.register("ScatterElements", 11, 13, 16, 18)
@accepts_beyond("reduction", ("max", "min"), 18)
def scatter_elements(ctx):
    axis = int(ctx.attr("axis"))
    reduction = scatter_reduction(ctx)

    def fn(x, indices, updates):
        lin, tail = elements_targets(ctx, x, indices, updates, axis)
        return scatter_apply(ctx, x, lin, tail, updates, reduction)

    return fn


@KERNELS.register("ScatterND", 11, 13, 16, 18)
@accepts_beyond("reduction", ("max", "min"), 18)
def scatter_nd(ctx):
    reduction = scatter_reduction(ctx)

    def fn(x, indices, updates):
        lin, tail = nd_targets(ctx, x, indices, updates)
        return scatter_apply(ctx, x, lin, tail, updates, reduction)

    return fn


# -- Compress / OneHot / NonZero ---------------------------------------------------------------
@KERNELS.register("Compress", 9, 11, 28)
def compress(ctx):
    xp = ctx.xp
    axis = ctx.attr("axis")

    def fn(x, condition):
        cond = ctx.to_host(condition).reshape(-1).astype(bool, copy=False)
        if axis is None:
            x, a = xp.reshape(x, (-1,)), 0
        else:
            a = norm_axis(ctx, axis, x.ndim)
        if cond.shape[0] > x.shape[a]:
            ctx.fail(f"condition of length {cond.shape[0]} is longer than axis {a} ({x.shape[a]})")
        return xp.take(x, ctx.from_host(np.flatnonzero(cond)), axis=a)

    return fn


@KERNELS.register("OneHot", 9, 11, 28)
@size_guard("value")
def one_hot(ctx):
    xp = ctx.xp
    axis = int(ctx.attr("axis"))

    def fn(indices, depth, values):
        d = ctx.to_host(depth).reshape(-1)
        if d.size != 1:
            ctx.fail(f"depth must be a scalar, got {d.size} values")
        d = int(d[0])
        out = one_hot_extents(ctx, shape_of(indices), d, axis)
        if size_of(values) != 2:
            ctx.fail(f"values must hold [off_value, on_value], got {size_of(values)} values")
        vals = xp.reshape(values, (2,))
        idx = indices
        if not arrays.is_integer(idx.dtype):
            idx = xp.trunc(xp.astype(idx, xp.float64 if arrays.dtype_name(idx.dtype) == "float64" else xp.float32))
        idx = xp.astype(idx, xp.int64)
        idx = xp.where(idx < 0, idx + d, idx)
        a = axis + len(out) if axis < 0 else axis
        classes = xp.reshape(xp.arange(d, dtype=xp.int64, device=device_of(idx)),
                             tuple(d if i == a else 1 for i in range(len(out))))
        return xp.where(xp.expand_dims(idx, axis=a) == classes, vals[1], vals[0])

    return fn


@KERNELS.register("NonZero", 9, 13)
@size_guard("nonzero")
def non_zero(ctx):
    xp = ctx.xp

    def fn(x):
        if x.dtype == object:    # strings (a host backend): "" is zero
            x = np.vectorize(bool, otypes=[bool])(x)
        if x.ndim == 0:
            return xp.zeros((0, int(bool(x))), dtype=xp.int64, device=device_of(x))
        coords = xp.nonzero(x)
        return xp.reshape(xp.stack([xp.astype(c, xp.int64) for c in coords]), (x.ndim, -1))

    return fn
