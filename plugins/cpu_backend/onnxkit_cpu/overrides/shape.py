"""cpu overrides of the shape family (``onnxkit_default_domain/kernels/shape.py``).

Reshape, Flatten, Squeeze, Unsqueeze, Expand, Concat, Split, Transpose and Shape run in every
model, mostly on small tensors, where the per-call cost is the checks and the geometry, not
the array work.  Each kernel here keeps the portable family's decision per key of its inputs
(:mod:`._plans`: the input's extents and the values of its shape / axes / split input), so a
run of a known key is one dictionary look-up and one numpy call.  The checks and the geometry
are the portable family's own functions, run once per key; a key they refuse is not stored
(every run with it fails, naming the node); where the shape / axes / split input is a
constant of the plan, its values are read once (:class:`._plans.IntPlans`) and a run is
keyed by the extents alone.  Results are those of the portable kernels,
exactly: views where they give views, a fresh C-contiguous array from Expand.
"""

from __future__ import annotations

import numpy as np
from onnxkit_default_domain.api import WIDENED_ONLY_VERSIONS as _LATEST
from onnxkit_default_domain.api import (axes_attr, concat_axis, concat_check, expand_target, flatten_extents,
                                        reshape_allowzero, reshape_target, shape_bounds, split_args, split_attr_args,
                                        split_index, split_lengths, squeeze_target, transpose_perm, unsqueeze_target)

from onnxkit.plugin import KernelTable, binds_constants, declares_output_bytes

from ._plans import IntPlans, remember

KERNELS = KernelTable()


@KERNELS.register("Reshape", 5, 13, 14, 19, *_LATEST)
def reshape(ctx):
    allowzero = reshape_allowzero(ctx)
    plans = IntPlans(lambda x, shape: reshape_target(ctx, x, list(shape), allowzero))

    def fn(x, shape):
        return x.reshape(plans.plan(x, shape))

    def bind(shape):
        plan = plans.fixed(shape)
        return None if plan is None else lambda x, shape: x.reshape(plan(x))

    return binds_constants(fn, bind, 1)


@KERNELS.register("Flatten", 1, 9, 11, 13, *_LATEST)
def flatten(ctx):
    axis = int(ctx.attr("axis"))
    plans: dict = {}

    def fn(x):
        target = plans.get(x.shape)
        if target is None:
            target = remember(plans, x.shape, tuple(flatten_extents(ctx, list(x.shape), axis)))
        return x.reshape(target)

    return fn


def _axes_kernel(ctx, target):
    """Squeeze / Unsqueeze over ``target`` (their extents): ``axes`` an attribute up to 11,
    an (optional) input from 13."""
    plans: dict = {}
    if ctx.since_version <= 11:
        axes = axes_attr(ctx)

        def fn(x):
            out = plans.get(x.shape)
            if out is None:
                out = remember(plans, x.shape, target(ctx, x, axes))
            return x.reshape(out)

        return fn

    plans = IntPlans(lambda x, axes: target(ctx, x, None if axes is None else list(axes)))

    def fn(x, axes=None):
        return x.reshape(plans.plan(x, axes))

    def bind(axes):
        plan = plans.fixed(axes)
        return None if plan is None else lambda x, axes=None: x.reshape(plan(x))

    return binds_constants(fn, bind, 1)


def _axes_factory(name: str, target):
    def factory(ctx):
        return _axes_kernel(ctx, target)

    factory.__name__ = name
    return factory


KERNELS.register("Squeeze", 1, 11, 13, *_LATEST)(_axes_factory("squeeze", squeeze_target))
KERNELS.register("Unsqueeze", 1, 11, 13, *_LATEST)(_axes_factory("unsqueeze", unsqueeze_target))


@KERNELS.register("Transpose", 1, 13, *_LATEST)
def transpose(ctx):
    perm = transpose_perm(ctx)
    perms: dict = {}   # rank -> the permutation (checked once per rank)

    def fn(x):
        p = perms.get(x.ndim)
        if p is None:
            p = remember(perms, x.ndim, perm(x.ndim))
        return x.transpose(p)

    return fn


@KERNELS.register("Concat", 1, 4, 11, 13)
def concat(ctx):
    axis = concat_axis(ctx)
    plans: dict = {}

    def fn(*xs):
        key = tuple([v.shape for v in xs])
        a = plans.get(key)
        if a is None:
            a = remember(plans, key, concat_check(ctx, xs, axis))
        return np.concatenate(xs, axis=a)

    return fn


def _split_kernel(ctx, axis: int, lengths):
    """Split along ``axis``; ``lengths(split)`` gives ``(lengths or None, num_outputs)`` for
    the optional ``split`` input's values (a tuple, or None when absent)."""
    def decide(x, split):
        sizes, num_outputs = lengths(split)
        return split_index(ctx, x, axis, sizes, num_outputs)

    plans = IntPlans(decide)

    def fn(x, split=None):
        return tuple([x[i] for i in plans.plan(x, split)])

    def bind(split):
        plan = plans.fixed(split)
        return None if plan is None else lambda x, split=None: tuple([x[i] for i in plan(x)])

    return binds_constants(fn, bind, 1)


@KERNELS.register("Split", 1, 2, 11)
def split_attr(ctx):
    axis, attr_split = split_attr_args(ctx)
    return _split_kernel(ctx, axis, lambda given: (attr_split if given is None else list(given), None))


@KERNELS.register("Split", 13, 18)
def split(ctx):
    axis, num_outputs = split_args(ctx)
    return _split_kernel(ctx, axis, lambda given: (split_lengths(ctx, None if given is None else list(given), num_outputs),
                                             num_outputs))


def _expanded(x, out: tuple):
    if out == x.shape:
        return x
    y = np.empty(out, dtype=x.dtype)
    y[...] = x
    return y


@KERNELS.register("Expand", 8, 13)
def expand(ctx):
    plans = IntPlans(lambda x, shape: expand_target(ctx, x, list(shape)))

    def fn(x, shape):
        return _expanded(x, plans.plan(x, shape))

    def nbytes(x, shape):
        """The output's bytes, from the same plan (0 where X comes back itself): the size guard
        needs no inference when the shape input's values change every run (a decoder's past)."""
        out = plans.plan(x, shape)
        if out == x.shape:
            return 0
        n = x.dtype.itemsize
        for d in out:
            n *= d
        return n

    def bind(shape):
        plan = plans.fixed(shape)
        return None if plan is None else lambda x, shape: _expanded(x, plan(x))

    return binds_constants(declares_output_bytes(fn, nbytes), bind, 1)


@KERNELS.register("Shape", 1, 13, 15, 19, *_LATEST)
def shape(ctx):
    start, end = shape_bounds(ctx)   # Python slicing clamps them as Shape-15 does
    return lambda x: np.array(x.shape[start:end], dtype=np.int64)
