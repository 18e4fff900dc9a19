"""cpu overrides of the Reduce* operators of ``onnxkit_default_domain.kernels.reduction``.

Per node, a plan per ``(shape, dtype, contiguity, axes)`` of a run: the axes are read once
(``tolist``), normalised and checked by the portable family's own functions, and the output
geometry fixed, so a run of a known key does only the array work.  Bad axes are not cached:
every run with them fails, naming the node, as the portable kernel does.

Array work of a float32/float64 input, non-empty, over at least one axis:

* ReduceSum / ReduceMean over a block of adjacent axes of a C-contiguous tensor (at most
  2^16 summed elements) is a BLAS product with a vector of ones (a batched one where both
  sides of the block are longer than 1): much faster than numpy's reduction over many short
  rows.  Otherwise ``np.add.reduce``, the portable body's own reduction (bit-identical).
  The BLAS sum is a float sum in another order: within Clause 11's tolerance of the exact one.
* ReduceMax / ReduceMin: ``np.maximum.reduce`` / ``np.minimum.reduce``, the portable body's
  own reduction (bit-identical).

Of an integer input (not bool), non-empty, over at least one axis: ReduceSum is ``np.add.reduce``
(numpy's sum: integers narrower than the default integer accumulate in it), its low bits kept in
the input's type, and ReduceMax / ReduceMin the ufuncs' reductions, as the portable bodies
compute them (exact).  That plan is decided once per rank, element type and axes (not per
shape: a decoder's attention mask has a new extent every token).

Everything else (other types, empty inputs, no axes, the other operators) runs the portable
:func:`~onnxkit_default_domain.kernels.reduction.reduce` with the cached axes.
"""

from __future__ import annotations

import math

import numpy as np
from onnxkit_default_domain.api import reduction as portable
from onnxkit_default_domain.api import norm_axes, quiet

from onnxkit.plugin import KernelTable, binds_constants

from ._plans import host_ints, remember

KERNELS = KernelTable()
_BLAS_MAX = 1 << 16
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _blas_sum(x, ax: tuple, out_shape: tuple, scale: int):
    """``run(x)``: the sum over the sorted axes ``ax`` as a product with ones (divided by
    ``scale`` when it is not 1), or None where that does not apply."""
    if ax[-1] - ax[0] + 1 != len(ax):
        return None
    dims = x.shape
    outer, r, inner = math.prod(dims[:ax[0]]), math.prod(dims[ax[0]:ax[-1] + 1]), math.prod(dims[ax[-1] + 1:])
    if r > _BLAS_MAX:
        return None
    if inner == 1:
        ones, lhs = np.ones(r, dtype=x.dtype), (outer, r)
        prod = lambda x: x.reshape(lhs) @ ones            # noqa: E731
    elif outer == 1:
        ones, rhs = np.ones(r, dtype=x.dtype), (r, inner)
        prod = lambda x: ones @ x.reshape(rhs)            # noqa: E731
    else:
        ones, rhs = np.ones((1, r), dtype=x.dtype), (outer, r, inner)
        prod = lambda x: np.matmul(ones, x.reshape(rhs))  # noqa: E731

    @quiet
    def run(x):
        y = prod(x)
        if scale != 1:
            y /= scale
        return y.reshape(out_shape)

    return run


def _ufunc_reduce(ufunc, ax: tuple, kd: bool, scale: int, warnings_off: bool):
    """``run(x)``: ``ufunc.reduce`` over ``ax`` (then divided by ``scale`` when it is not 1),
    as the portable body computes it, with numpy's floating-point warnings off where
    ``warnings_off`` (:func:`~onnxkit_default_domain.kernels.elementwise.quiet`)."""
    def run(x):
        r = ufunc.reduce(x, axis=ax, keepdims=kd)
        if scale != 1:
            r = r / scale
        return r if type(r) is np.ndarray else np.asarray(r)

    return quiet(run) if warnings_off else run


def _int_reduce(ufunc, ax: tuple, kd: bool, dtype):
    """``run(x)``: ``ufunc.reduce`` over ``ax`` of an integer ``x``, in ``dtype`` (the low bits
    of a sum accumulated in a wider integer)."""
    def run(x):
        r = ufunc.reduce(x, axis=ax, keepdims=kd)
        if type(r) is not np.ndarray:
            r = np.asarray(r)
        return r if r.dtype == dtype else r.astype(dtype)

    return run


_INT_UFUNCS = {"ReduceSum": np.add, "ReduceMax": np.maximum, "ReduceMin": np.minimum}


def _fast(ctx, name: str, x, ax: tuple, kd: bool):
    """The array work of a fast case, or None."""
    if x.size == 0 or not ax:
        return None
    if x.dtype.kind in "iu":
        ufunc = _INT_UFUNCS.get(name)
        return None if ufunc is None else _int_reduce(ufunc, ax, kd, x.dtype)
    if x.dtype not in _FLOATS:
        return None
    if name in ("ReduceMax", "ReduceMin"):
        return _ufunc_reduce(np.maximum if name == "ReduceMax" else np.minimum, ax, kd, 1, False)
    if name not in ("ReduceSum", "ReduceMean"):
        return None
    scale = 1 if name == "ReduceSum" else math.prod(x.shape[a] for a in ax)
    if x.flags.c_contiguous:
        run = _blas_sum(x, ax, portable.out_shape(ctx, x, ax, kd), scale)
        if run is not None:
            return run
    return _ufunc_reduce(np.add, ax, kd, scale, True)


def _plan(ctx, name: str, body, x, axes, kd: bool):
    """``run(x)`` for inputs like ``x`` reduced over ``axes`` (ints, None: every axis, ():
    none), after the portable kernel's checks."""
    ax = tuple(range(x.ndim)) if axes is None else tuple(sorted(norm_axes(ctx, axes, x.ndim)))
    run = _fast(ctx, name, x, ax, kd) if ax else None
    if run is None:
        return lambda x: portable.reduce(ctx, body, x, axes, kd)
    return run


def reduction_factory(name: str, input_from: int):
    """The kernel factory of Reduce* ``name`` (axes an input from definition ``input_from``),
    as the portable :func:`~onnxkit_default_domain.kernels.reduction.reduction_factory`, with
    a plan per input key."""
    body = portable.BODIES[name]

    def factory(ctx):
        kd = bool(ctx.attr("keepdims"))
        plans: dict = {}
        if ctx.since_version < input_from:
            attr_axes = ctx.attr("axes")
            fixed = [int(a) for a in attr_axes] if attr_axes else None

            def fn(x):
                key = (x.shape, x.dtype, x.flags.c_contiguous)
                run = plans.get(key)
                if run is None:
                    run = remember(plans, key, _plan(ctx, name, body, x, fixed, kd))
                return run(x)

            return fn
        noop = bool(ctx.attr("noop_with_empty_axes", 0))

        def planned(x, given, plans: dict):
            dt = x.dtype
            # a non-empty integer input's plan depends on its rank alone (a decoder's mask: a new
            # extent every token, one plan); any other input's on its extents and layout too
            key = (x.ndim, dt, given) if dt.kind in "iu" and x.size else (x.shape, dt, x.flags.c_contiguous, given)
            run = plans.get(key)
            if run is None:
                ax = list(given) if given else (() if noop else None)
                run = remember(plans, key, _plan(ctx, name, body, x, ax, kd))
            return run

        def fn(x, axes=None):
            return planned(x, None if axes is None else host_ints(axes), plans)(x)

        def bind(axes):
            if axes is not None and not (type(axes) is np.ndarray and axes.dtype.kind in "iu"):
                return None
            given = None if axes is None else host_ints(axes)
            fixed: dict = {}
            return lambda x, axes=None: planned(x, given, fixed)(x)

        return binds_constants(fn, bind, 1)

    factory.__name__ = name
    return factory


for _name, _versions, _input_from in portable.REDUCE_DEFINITIONS:
    KERNELS.register(_name, *_versions)(reduction_factory(_name, _input_from))
