"""Sliding-window and global pools of ai.onnx (every backend): MaxPool (values and the
``Indices`` output), AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool.

Attributes and output geometry come from :mod:`onnxkit_default_domain.inference.pool` (the
same functions inference uses), so a definition reads only the attributes it declares and
inference and kernels cannot disagree on an extent.  Element types are checked against the
definition's type constraints.

torch's and numpy's own pools differ from ONNX in edge cases (``ceil_mode`` windows, the
average divisor with asymmetric pads, dilated averages), so the input is padded explicitly
(with -inf or the integer type's minimum for max, 0 for sums), the ``ceil_mode`` tail
included, and the windows are then reduced with no further padding, one spatial axis at a
time (max and sum are separable), one strided slice per kernel tap.  The average divisor is
the outer product of per-axis tap counts (pads counted or not, per ``count_include_pad``),
worked out on the host.  MaxPool's indices are found with one compare per kernel offset in
row-major offset order (the first maximum wins), as ONNX's flattened index
``(n * C + c) * prod(spatial) + offset`` in the unpadded input (column-major offset for
``storage_order`` 1).  Everything but float32 / float64 is computed in float32 (8-bit
integers and the narrow floats are exact there) and rounded back once.

Backends replace pieces of the window reduction only: ``fold`` (how one axis's taps are
combined: numpy folds them in place) and MaxPool's ``reduce`` (``F.max_pool2d`` on CUDA); the
rest is this module's.
"""

from __future__ import annotations

import itertools

import numpy as np

from onnxkit.plugin import KernelTable, arrays

from ..inference.pool import declared_attr, pool_attrs, pool_geometry
from ._common import as_dtype, compute_dtype, input_type_checker
from .conv_geometry import device_of, pad_spatial, window_slice

KERNELS = KernelTable()

_LEAD = (slice(None), slice(None))


# -- geometry and padding -----------------------------------------------------------------------

def geometry_cache(ctx):
    """``geometry(shape)``: the node's attributes and ``(out, begin, end, tail)`` for an input
    of ``shape`` (a tuple of ints), worked out once per shape."""
    cache = {}

    def geometry(shape):
        g = cache.get(shape)
        if g is None:
            a = pool_attrs(ctx, len(shape) - 2)
            g = cache[shape] = (a, *pool_geometry(ctx, list(shape[2:]), a))
        return g

    return geometry


def padded_input(ctx, x, geometry, fill):
    """``(xpad, attrs, out, begin, end)``: ``x`` padded with ``fill``, ceil-mode tail included."""
    a, out, begin, end, tail = geometry(tuple(int(d) for d in x.shape))
    xpad = pad_spatial(ctx.xp, x, begin, [e + t for e, t in zip(end, tail)], fill)
    return xpad, a, out, begin, end


def fold_taps(op, views):
    """``op`` folded over the views of one axis's kernel taps (a fresh array per tap)."""
    acc = views[0]
    for v in views[1:]:
        acc = op(acc, v)
    return acc


def separable(xp, xpad, a, out, op, fold=fold_taps):
    """The windows of ``xpad`` (padded already) reduced by ``op`` (``xp.maximum`` / ``xp.add``),
    one spatial axis at a time, one strided slice per kernel tap, the taps combined by
    ``fold(op, views)`` (a backend may fold in place into an array of its own)."""
    if 0 in out or 0 in xpad.shape[:2]:
        return xp.zeros(tuple(xpad.shape[:2]) + tuple(out), dtype=xpad.dtype, device=device_of(xpad))
    y = xpad
    for i in range(len(out)):
        k, s, d, o = a.kernel[i], a.strides[i], a.dilations[i], out[i]
        lead = (slice(None),) * (2 + i)
        y = fold(op, [y[lead + (slice(t * d, t * d + (o - 1) * s + 1, s),)] for t in range(k)])
    return y


def _lowest(dtype) -> float:
    """The padding of a max pool: -inf, or an integer type's minimum (exact in float32)."""
    return float(np.iinfo(arrays.dtype_name(dtype)).min) if arrays.is_integer(dtype) else float("-inf")


def index_strides(in_shape, storage_order) -> list:
    """Element strides of MaxPool's flattened spatial index (row-major, or column-major for
    ``storage_order`` 1)."""
    nd = len(in_shape)
    if storage_order == 1:
        return [int(np.prod(in_shape[:i], dtype=np.int64)) for i in range(nd)]
    return [int(np.prod(in_shape[i + 1:], dtype=np.int64)) for i in range(nd)]


# -- MaxPool ------------------------------------------------------------------------------------

def max_pool_kernel(ctx, reduce=None, fold=fold_taps):
    """MaxPool's node function; ``reduce(xpad, attrs, out)`` (a backend's window maximum over
    the padded input, or None to decline) replaces :func:`separable` where given; ``fold`` is
    :func:`separable`'s."""
    xp = ctx.xp
    storage_order = int(declared_attr(ctx, "storage_order", 0))
    want_indices = ctx.since_version >= 8 and ctx.output_requested(1)
    check = input_type_checker(ctx)
    geometry = geometry_cache(ctx)

    def run(x):
        check(x)
        xc = as_dtype(xp, x, compute_dtype(xp, x.dtype))
        xpad, a, out, begin, _ = padded_input(ctx, xc, geometry, _lowest(x.dtype))
        if want_indices:
            y, idx = _max_with_indices(xpad, x, a, out, begin)
            return as_dtype(xp, y, x.dtype), idx
        y = None if reduce is None else reduce(xpad, a, out)
        if y is None:
            y = separable(xp, xpad, a, out, xp.maximum, fold)
        return as_dtype(xp, y, x.dtype)

    def _max_with_indices(xpad, x, a, out, begin):
        in_shape = [int(d) for d in x.shape[2:]]
        n, c = int(x.shape[0]), int(x.shape[1])
        dev = device_of(x)
        if 0 in out or n == 0 or c == 0:
            shape = (n, c, *out)
            return xp.zeros(shape, dtype=xpad.dtype, device=dev), xp.zeros(shape, dtype=xp.int64, device=dev)
        sstr = index_strides(in_shape, storage_order)
        grids = np.meshgrid(*(np.arange(o, dtype=np.int64) * s - b for o, s, b in zip(out, a.strides, begin)),
                            indexing="ij")
        spatial = int(np.prod(in_shape, dtype=np.int64))
        base = sum(g * st for g, st in zip(grids, sstr))
        base = ctx.from_host(base + (np.arange(n * c, dtype=np.int64) * spatial).reshape((n, c) + (1,) * len(out)))
        best = best_idx = None
        for offs in itertools.product(*(range(k) for k in a.kernel)):
            val = xpad[_LEAD + window_slice(offs, a.dilations, out, a.strides)]
            shift = sum(o * d * st for o, d, st in zip(offs, a.dilations, sstr))
            if best is None:
                best, best_idx = val, base + shift
            else:
                better = val > best
                best = xp.where(better, val, best)
                best_idx = xp.where(better, base + shift, best_idx)
        return best, best_idx

    return run


@KERNELS.register("MaxPool", 1, 8, 10, 11, 12, 22)
def max_pool(ctx):
    return max_pool_kernel(ctx)


# -- AveragePool / LpPool -----------------------------------------------------------------------

def _counts(in_len, k, s, d, out, begin, end, include_pad):
    """Per-axis number of window taps counted by the average."""
    o = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - begin
    lo, hi = (-begin, in_len + end) if include_pad else (0, in_len)
    return ((o >= lo) & (o < hi)).sum(axis=1)


def average_divisor(in_shape, a, out, begin, end, include_pad) -> np.ndarray:
    """The average's divisor over the output's spatial shape (host float64): the outer product
    of the per-axis counts."""
    div = np.ones((), dtype=np.float64)
    for i, o in enumerate(out):
        cnt = _counts(in_shape[i], a.kernel[i], a.strides[i], a.dilations[i], o, begin[i], end[i], include_pad)
        div = np.multiply.outer(div, cnt)
    return div


def average_pool_kernel(ctx, fold=fold_taps):
    """AveragePool's node function (``fold``: :func:`separable`'s)."""
    xp = ctx.xp
    include_pad = bool(declared_attr(ctx, "count_include_pad", 0))
    check = input_type_checker(ctx)
    geometry = geometry_cache(ctx)
    divisors = {}

    def divisor(x, a, out, begin, end):
        key = (tuple(x.shape), x.dtype)
        if key not in divisors:
            d = average_divisor([int(n) for n in x.shape[2:]], a, out, begin, end, include_pad)
            d[d == 0] = np.nan   # a window of pads only (count_include_pad 0): nan, with no warning
            divisors[key] = ctx.from_host(d.astype(arrays.dtype_name(x.dtype)))
        return divisors[key]

    def run(x):
        check(x)
        xc = as_dtype(xp, x, compute_dtype(xp, x.dtype))
        xpad, a, out, begin, end = padded_input(ctx, xc, geometry, 0.0)
        y = separable(xp, xpad, a, out, xp.add, fold)
        return as_dtype(xp, y / divisor(xc, a, out, begin, end), x.dtype)

    return run


@KERNELS.register("AveragePool", 1, 7, 10, 11, 19, 22)
def average_pool(ctx):
    return average_pool_kernel(ctx)


def lp_order(ctx) -> float:
    """Attribute ``p`` of LpPool / GlobalLpPool (a FLOAT in version 1, an INT from 2): the order
    of the Lp norm, a finite number above 0."""
    p = float(ctx.attr("p"))
    if not (0 < p < float("inf")):
        ctx.fail(f"attribute p is {p}; the order of an Lp norm must be a finite number greater than 0")
    return p


def lp_pool_kernel(ctx, fold=fold_taps):
    """LpPool's node function (``fold``: :func:`separable`'s)."""
    xp = ctx.xp
    p = lp_order(ctx)
    check = input_type_checker(ctx)
    geometry = geometry_cache(ctx)

    def run(x):
        check(x)
        xa = xp.abs(as_dtype(xp, x, compute_dtype(xp, x.dtype))) ** p
        xpad, a, out, _, _ = padded_input(ctx, xa, geometry, 0.0)
        y = separable(xp, xpad, a, out, xp.add, fold)
        return as_dtype(xp, y ** (1.0 / p), x.dtype)

    return run


@KERNELS.register("LpPool", 1, 2, 11, 18, 22)
def lp_pool(ctx):
    return lp_pool_kernel(ctx)


# -- global pools -------------------------------------------------------------------------------

def _global(ctx, reduce):
    """A global pool: ``reduce(xp, xc, axes)`` over the spatial axes (``()`` for a rank-2
    input), in the compute dtype."""
    xp = ctx.xp
    check = input_type_checker(ctx)

    def run(x):
        check(x)
        if x.ndim < 2:
            ctx.fail(f"the input must have rank 2 or more, got {x.ndim}")
        xc = as_dtype(xp, x, compute_dtype(xp, x.dtype))
        return as_dtype(xp, reduce(xp, xc, tuple(range(2, x.ndim))), x.dtype)

    return run


@KERNELS.register("GlobalAveragePool", 1, 22)
def global_average_pool(ctx):
    return _global(ctx, lambda xp, x, axes: xp.mean(x, axis=axes, keepdims=True) if axes else x)


@KERNELS.register("GlobalMaxPool", 1, 22)
def global_max_pool(ctx):
    return _global(ctx, lambda xp, x, axes: xp.max(x, axis=axes, keepdims=True) if axes else x)


@KERNELS.register("GlobalLpPool", 1, 2, 22)
def global_lp_pool(ctx):
    p = lp_order(ctx)

    def lp(xp, x, axes):
        s = xp.abs(x) ** p
        return (xp.sum(s, axis=axes, keepdims=True) if axes else s) ** (1.0 / p)

    return _global(ctx, lp)
