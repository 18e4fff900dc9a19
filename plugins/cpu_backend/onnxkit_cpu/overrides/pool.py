"""Pools on numpy: the portable kernels' arithmetic with everything but the array work
prepared once per node and input shape.

MaxPool (without ``Indices``) and AveragePool: per input ``(shape, dtype)`` the first call
checks the element type and works out the geometry (the portable ``geometry_cache``) and the
window reduction (:func:`.pool_windows.window_reduction`): X copied into a per-thread
stride-phase-split padded buffer and the taps folded by whole-buffer contiguous passes, in
blocks of rows that stay in cache (faster than a padded strided fold), or, where nothing is
padded and the windows do not overlap or cover most of the input, the strided fold on X
itself.  The taps are combined in
the portable kernel's order (:func:`~onnxkit_default_domain.kernels.pool.separable`), so
results are bit-identical to it (a NaN's sign aside); an average's sums run with numpy's
floating-point warnings off (the wrapped-around junk lanes of a pass may add inf and -inf).

**Compiled path**: where :func:`onnxkit_cpu.compiled.enabled` at planning, float32 / float64
inputs of one or two spatial axes (nothing empty) take :class:`.pool_windows.Compiled`, the
loop :func:`onnxkit_cpu.compiled.pool.windows` (faster than the passes above): a max
bit-identical to them, an average too but for which of two NaNs meeting in a sum it keeps (see
that module).  float16 / bfloat16 X of a MaxPool, or of an AveragePool of at most
:data:`HALF_EXACT` taps, run that loop on X widened to float32, Y rounded once
(:class:`.half.Narrowed`): the passes' result bit for bit (they too compute in float32 and round
once; a max only selects, such a divisor is exact in X's type).  3-D, ``Indices`` keep the passes.

A MaxPool / AveragePool whose one window per axis covers the whole input (:class:`Whole`: an
oversized ``ceil_mode`` kernel, transformers' EfficientNet pooler) is one reduction over the
spatial axes, the input's positions folded in the taps' order: bit-identical.

GlobalMaxPool is one ``np.maximum.reduce`` over the spatial axes (what ``np.max`` does, less its
per-call overhead: bit-identical).  GlobalAveragePool sums by a BLAS product with a vector of
ones (faster than ``np.add.reduce``) and divides as ``np.mean`` does: the sum's order
differs from the portable kernel's pairwise sum, so results agree to float rounding of the
summation order (a sum of zeros may come out +0 where the portable kernel gives -0).
MaxPool with ``Indices``, LpPool, GlobalLpPool, empty inputs and rank-2 global pools take the
portable kernels.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable, arrays
from onnxkit.plugin import splits_across_threads
from onnxkit_default_domain.api import max_pool_padding as _lowest
from onnxkit_default_domain.api import (average_divisor, average_pool_kernel, compute_dtype, declared_attr,
                                        geometry_cache, global_average_pool, global_max_pool, input_type_checker,
                                        lp_pool_kernel, max_pool_kernel)

from ..compiled import pool as loops
from .half import F32, Halves, Narrowed, is_half
from .pool_windows import Compiled, window_reduction

KERNELS = KernelTable()
#: the largest window (taps) whose count every half type holds exactly (bfloat16's 8-bit significand)
HALF_EXACT = 256
splits_across_threads(("", "MaxPool"), ("", "AveragePool"))


def fold_in_place(op, views):
    """``op`` (a numpy ufunc) folded over ``views`` into a copy of the first."""
    if len(views) == 1:
        return views[0]
    acc = op(views[0], views[1])
    for v in views[2:]:
        op(acc, v, out=acc)
    return acc


def per_shape(ctx, make):
    """``lookup(x)``: ``make(x)`` for ``x``'s shape and dtype, made once (X's element type
    checked then, as the portable kernels do)."""
    check = input_type_checker(ctx)
    known = {}

    def lookup(x):
        key = (x.shape, x.dtype)
        found = known.get(key)
        if found is None:
            check(x)
            found = make(x)
            if len(known) > 64:
                known.clear()
            known[key] = found
        return found

    return lookup


class Whole:
    """A pool whose one window per spatial axis covers the whole input: every output extent 1,
    dilation 1, the window reaching from at or before the first element to at or past the last
    (transformers' EfficientNet pooler, ``AvgPool2d(1280, ceil_mode=True)`` on 7x7: the taps
    would be the kernel's 1280 + 1280 passes).  The fold then runs over the input's own
    positions only: per spatial axis in order, its elements folded in order (``np.maximum`` /
    ``np.add``, one pass per element of the axis), as the tap fold combines them; the fill the
    other taps would add changes nothing (``max(v, -inf)`` is ``v``; ``v + 0`` is ``v`` but for a
    -0, which one ``+ 0`` at the end makes +0 where the window holds a pad or tail position),
    so results are bit-identical to the tap fold; an average is then divided by the portable
    kernel's divisor (the pads counted as ``count_include_pad`` says)."""

    __slots__ = ("axes", "ct", "divisor", "is_max", "padded")

    @staticmethod
    def takes(geometry, shape) -> bool:
        a, out, begin, _, _ = geometry(shape)
        return len(shape) > 2 and all(n > 0 for n in shape) and all(o == 1 for o in out) \
            and all(d == 1 for d in a.dilations) and all(k >= b + n for k, b, n in zip(a.kernel, begin, shape[2:]))

    def __init__(self, geometry, shape, dtype, is_max, include_pad):
        a, out, begin, end, _ = geometry(shape)
        self.axes, self.is_max = tuple(range(2, len(shape))), is_max
        self.ct = compute_dtype(np, dtype)
        # per axis: whether the window holds a position that is not X's (a pad or the ceil tail)
        self.padded = tuple(k > n or b > 0 for k, b, n in zip(a.kernel, begin, shape[2:]))
        self.divisor = None
        if not is_max:
            d = average_divisor(list(shape[2:]), a, out, begin, end, include_pad)
            d[d == 0] = np.nan
            self.divisor = d.astype(arrays.dtype_name(dtype)).astype(self.ct).reshape((1, 1) + tuple(out))

    def __call__(self, x):
        op = np.maximum if self.is_max else np.add
        acc = x if x.dtype == self.ct else x.astype(self.ct)
        with np.errstate(all="ignore"):
            for axis, padded in zip(self.axes, self.padded):
                lead = (slice(None),) * axis
                n = acc.shape[axis]
                folded = acc[lead + (slice(0, 1),)].copy() if n == 1 else \
                    op(acc[lead + (slice(0, 1),)], acc[lead + (slice(1, 2),)])
                for j in range(2, n):
                    op(folded, acc[lead + (slice(j, j + 1),)], out=folded)
                if padded and not self.is_max:
                    np.add(folded, 0.0, out=folded)
                acc = folded
            y = acc if self.is_max else np.true_divide(acc, self.divisor, out=acc)
        return y if y.dtype == x.dtype else y.astype(x.dtype)


def windows_cache(ctx, fill_of, op, fn=None, include_pad=False):
    """``windows(x)``: the node's reduction for ``x``'s shape and dtype: :class:`Whole` where one
    window covers the input, :class:`.Compiled` where ``fn`` (the compiled loop, planned) takes
    it, else :func:`.window_reduction`'s."""
    geometry = geometry_cache(ctx)
    halves = Halves.of(ctx) if fn is not None else None

    def make(x):
        shape = tuple(int(d) for d in x.shape)
        if Whole.takes(geometry, shape):
            return Whole(geometry, shape, x.dtype, op is np.maximum, include_pad)
        if fn is not None and Compiled.takes(geometry, shape, x.dtype):
            return Compiled(fn, geometry, shape, x.dtype, op is np.maximum, include_pad)
        if fn is not None and is_half(x.dtype) and Compiled.takes(geometry, shape, F32) and (
                op is np.maximum or math.prod(geometry(shape)[0].kernel) <= HALF_EXACT):
            # the float32 loop on X widened, Y rounded once (.half.Narrowed): the numpy body's
            # result (a max selects; an average's divisor, at most HALF_EXACT, is exact in X's type)
            return Narrowed(Compiled(fn, geometry, shape, F32, op is np.maximum, include_pad), halves)
        return window_reduction(geometry, shape, compute_dtype(np, x.dtype), fill_of(x.dtype), op)

    return per_shape(ctx, make)


@KERNELS.register("MaxPool", 1, 8, 10, 11, 12, 22)
def max_pool(ctx):
    portable = max_pool_kernel(ctx, fold=fold_in_place)
    if ctx.since_version >= 8 and ctx.output_requested(1):
        return portable
    windows = windows_cache(ctx, _lowest, np.maximum, loops.windows.get())

    def run(x):
        w = windows(x)
        if w.__class__ is Compiled or w.__class__ is Whole or w.__class__ is Narrowed:
            return w(x)
        if w.empty:
            return portable(x)
        return w.reduce(x, x.dtype)

    return run


@KERNELS.register("AveragePool", 1, 7, 10, 11, 19, 22)
def average_pool(ctx):
    portable = average_pool_kernel(ctx, fold=fold_in_place)
    include_pad = bool(declared_attr(ctx, "count_include_pad", 0))
    windows = windows_cache(ctx, lambda dt: 0.0, np.add, loops.windows.get(), include_pad)

    def divisor(w, x):
        d = w.divisor
        if d is None:
            d = average_divisor([int(s) for s in x.shape[2:]], w.a, w.out, w.begin, w.end, include_pad)
            d[d == 0] = np.nan   # a window of pads only (count_include_pad 0): nan, as the portable kernel
            d = w.divisor = w.divisor_on_q(d.astype(arrays.dtype_name(x.dtype)).astype(w.ct))
        return d

    def run(x):
        w = windows(x)
        if w.__class__ is Compiled or w.__class__ is Whole or w.__class__ is Narrowed:
            return w(x)
        if w.empty:
            return portable(x)
        with np.errstate(all="ignore"):
            return w.reduce(x, x.dtype, divisor(w, x))

    return run


@KERNELS.register("LpPool", 1, 2, 11, 18, 22)
def lp_pool(ctx):
    return lp_pool_kernel(ctx, fold=fold_in_place)


_PORTABLE = ("portable",)


def _global(ctx, portable, reduce, mean):
    """A global pool: ``reduce`` (a ufunc's reduce) over the spatial axes, or where ``mean`` their
    sum by BLAS divided by their number of elements (as ``np.mean``: an ``intp`` count, unsafe
    casting)."""

    def make(x):
        if x.ndim <= 2 or x.size == 0:
            return _PORTABLE
        ct = compute_dtype(np, x.dtype)
        count = int(np.prod(x.shape[2:]))
        # a Python int divides in the compute dtype: the same quotient as np.mean's intp
        # (float64, then rounded) where it is exact there
        return (ct, tuple(range(2, x.ndim)), count if count < 2 ** 24 else np.intp(count), np.ones(count, dtype=ct),
                tuple(x.shape[:2]) + (1,) * (x.ndim - 2))

    lookup = per_shape(ctx, make)

    def run(x):
        p = lookup(x)
        if p is _PORTABLE:
            return portable(x)
        ct, axes, count, ones, shape = p
        xc = x if x.dtype == ct else x.astype(ct)
        if mean:             # a sum by BLAS (gemv, faster than np.add.reduce), then np.mean's division
            y = np.matmul(xc.reshape(-1, count), ones).reshape(shape)
            if count.__class__ is int:
                y /= count
            else:
                np.true_divide(y, count, out=y, casting="unsafe")
        else:
            y = reduce(xc, axis=axes, keepdims=True)
        return y if y.dtype == x.dtype else y.astype(x.dtype)

    return run


@KERNELS.register("GlobalAveragePool", 1, 22)
def global_average(ctx):
    return _global(ctx, global_average_pool(ctx), np.add.reduce, True)


@KERNELS.register("GlobalMaxPool", 1, 22)
def global_max(ctx):
    return _global(ctx, global_max_pool(ctx), np.maximum.reduce, False)
