"""cpu overrides of the indexing family (``onnxkit_default_domain/kernels/indexing.py``).

Slice takes numpy's own view (negative steps included), its index kept per key of the input's
extents and the starts / ends / axes / steps values (:mod:`._plans`; by the extents alone
where those are constants), and Gather ``take``
(which checks the bounds itself and counts negative indices from the end): both run in every model, on small tensors, where the portable
bodies' extra passes (the index bounds, ``flip``) cost more than the work.  ScatterElements /
ScatterND with a reduction combine duplicate targets in one sorted ``reduceat`` pass instead
of a pass per duplicate; slices of 1,024 elements or more are combined in place one update
at a time.  GatherElements is one compiled pass over (outer, axis, inner) views
(:func:`onnxkit_cpu.compiled.selection.gather_elements_loop`) where the indices span the
data's other extents.  NonZero is a count and one compiled pass writing the coordinates
(:func:`onnxkit_cpu.compiled.selection.non_zero_loop`; numpy's ``nonzero`` makes one array per
axis, then they are stacked).  Attribute parsing, geometry and the
targets of a scatter are the portable family's.
"""

from __future__ import annotations

import math

import numpy as np
from onnxkit_default_domain.api import indexing as portable
from onnxkit_default_domain.api import (elements_targets, nd_targets, norm_axis, numpy_slices, occurrence_passes,
                                        scatter_reduction, slice_plan, wrap_indices)

from onnxkit.plugin import KernelTable, binds_constants

from onnxkit_cpu.compiled.selection import gather_elements_loop, non_zero_loop

from ._plans import IntPlans, remember

KERNELS = KernelTable()


@KERNELS.register("Slice", 1)
def slice_v1(ctx):
    plans: dict = {}

    def take(ctx, x, starts, ends, axes, steps):
        index = plans.get(x.shape)
        if index is None:
            index = remember(plans, x.shape, numpy_slices(slice_plan(ctx, x.shape, starts, ends, axes, steps), x.ndim))
        return x[index]

    return portable.slice_v1(ctx, take=take)


@KERNELS.register("Slice", 10, 11, 13)
def slice_(ctx):
    plans = IntPlans(lambda x, *given: numpy_slices(
        slice_plan(ctx, x.shape, *[None if v is None else list(v) for v in given]), x.ndim))

    def fn(x, starts, ends, axes=None, steps=None):
        return x[plans.plan(x, starts, ends, axes, steps)]

    def bind(starts, ends, axes, steps):
        plan = None if starts is None or ends is None else plans.fixed(starts, ends, axes, steps)
        return None if plan is None else lambda x, starts, ends, axes=None, steps=None: x[plan(x)]

    return binds_constants(fn, bind, 1, 2, 3, 4)


@KERNELS.register("Gather", 1, 11, 13)
def gather(ctx):
    axis = int(ctx.attr("axis"))
    def fn(x, indices):
        if x.ndim == 0:
            ctx.fail("data must have rank >= 1")
        a = norm_axis(ctx, axis, x.ndim)
        if indices.dtype.kind not in "iu":
            wrap_indices(ctx, np, indices, x.shape[a])   # fails, naming the element type
        try:
            out = x.take(indices, axis=a)
        except IndexError:
            wrap_indices(ctx, np, indices, x.shape[a])   # fails, naming the index out of range
            raise
        return out if type(out) is np.ndarray else np.asarray(out)   # one element of a vector: a 0-d tensor

    return fn


# -- Scatter: duplicate targets combined by a sorted reduceat ---------------------------------
_REDUCE_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _apply(x, lin: np.ndarray, tail: int, updates, reduction: str):
    """A copy of ``x`` with ``updates`` written (combined) at the flat positions ``lin`` of
    ``x`` seen as [positions, ``tail`` elements]; the stable sort keeps one target's updates
    in their order."""
    out = np.array(x, order="C")
    if lin.size == 0 or tail == 0:
        return out
    flat = out.reshape(-1, tail)
    u = np.asarray(updates).astype(x.dtype, copy=False).reshape(-1, tail)
    if reduction == "none":
        flat[lin] = u
        return out
    ufunc = _REDUCE_AT[reduction]
    if tail >= 1024:
        # wide slices: each update combined in place, in order (a pass of its own per slice
        # costs less than gathering, combining and scattering whole groups)
        for i, t in enumerate(lin.tolist()):
            ufunc(flat[t], u[i], out=flat[t])
        return out
    order = np.argsort(lin, kind="stable")
    ls = lin[order]
    starts = np.flatnonzero(np.concatenate(([True], ls[1:] != ls[:-1])))
    if tail >= 16 and int(np.diff(np.append(starts, ls.size)).max()) <= 32:
        # wide slices, few duplicates: a pass per occurrence (no target repeats in a pass)
        for sel in occurrence_passes(lin):
            t = lin[sel]
            flat[t] = ufunc(flat[t], u[sel])
        return out
    targets = ls[starts]
    try:
        combined = ufunc.reduceat(u[order], starts, axis=0)
    except TypeError:   # an element type without a reduceat loop
        ufunc.at(flat, lin, u)
        return out
    flat[targets] = ufunc(flat[targets], combined)
    return out


@KERNELS.register("Scatter", 9, 11)
def scatter(ctx):
    axis = int(ctx.attr("axis"))
    return lambda x, indices, updates: _apply(x, *elements_targets(ctx, x, indices, updates, axis), updates, "none")


@KERNELS.register("ScatterElements", 11, 13, 16, 18)
def scatter_elements(ctx):
    axis = int(ctx.attr("axis"))
    reduction = scatter_reduction(ctx)
    return lambda x, indices, updates: _apply(x, *elements_targets(ctx, x, indices, updates, axis), updates, reduction)


@KERNELS.register("ScatterND", 11, 13, 16, 18)
def scatter_nd(ctx):
    reduction = scatter_reduction(ctx)
    return lambda x, indices, updates: _apply(x, *nd_targets(ctx, x, indices, updates), updates, reduction)


@KERNELS.register("NonZero", 9, 13)
def non_zero(ctx):
    fallback = portable.non_zero(ctx)
    loop = non_zero_loop()
    if loop is None:
        return fallback

    def fn(x):
        if x.ndim == 0 or x.dtype.kind not in "biuf" or (x.dtype.kind == "f" and x.dtype.itemsize < 4):
            return fallback(x)      # scalars, strings, narrow floats: the portable kernel
        flat = np.ascontiguousarray(x).reshape(-1)
        if flat.dtype == np.bool_:
            flat = flat.view(np.uint8)
        out = np.empty((x.ndim, np.count_nonzero(flat)), dtype=np.int64)
        loop(flat, np.array(x.shape, dtype=np.int64), out)
        return out

    return fn


_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@KERNELS.register("GatherElements", 11, 13)
def gather_elements(ctx):
    fallback = portable.gather_elements(ctx)
    loop = gather_elements_loop()
    if loop is None:
        return fallback
    axis = int(ctx.attr("axis"))

    def fn(x, indices):
        bits = _BITS.get(x.dtype.itemsize) if x.dtype.kind in "biufV" else None
        if bits is None or x.ndim == 0 or indices.ndim != x.ndim or indices.dtype.kind not in "iu" or \
                indices.size == 0:
            return fallback(x, indices)
        a = norm_axis(ctx, axis, x.ndim)
        n = x.shape[a]
        if any(indices.shape[i] != x.shape[i] for i in range(x.ndim) if i != a) or n == 0:
            return fallback(x, indices)        # partial extents: the portable kernel
        outer, inner = math.prod(x.shape[:a]), math.prod(x.shape[a + 1:])
        data = np.ascontiguousarray(x).view(bits).reshape(outer, n, inner)
        idx = np.ascontiguousarray(indices).reshape(outer, indices.shape[a], inner)
        out = np.empty(indices.shape, dtype=x.dtype)
        if not loop(data, idx, out.view(bits).reshape(idx.shape)):
            return fallback(x, indices)        # an index out of range: the portable kernel's error
        return out

    return fn
