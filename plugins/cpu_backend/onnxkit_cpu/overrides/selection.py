"""cpu overrides of the selection family (``onnxkit_default_domain/kernels/selection.py``).

TopK of a few elements of a long axis (8k <= n, and k <= 16 or 64k <= n) is one compiled
bounded-heap pass per row (:func:`onnxkit_cpu.compiled.selection.top_k_loop`); without compiled
loops, k passes of argmax / argmin (k <= 16).  A larger k (4k <= n) partitions by value: the k-th key is the
threshold, every key beyond it is taken and the ties at it by the lower index, then the k
are sorted stably (with ``sorted`` = 0 they stay in index order: the definition leaves that
order open).  Each gives the portable kernel's selection and order (a stable sort: ties by the
lower index) exactly; NaN keys, short axes and k near n take the portable sort.  Parsing and checks
are the portable kernel's functions.

CumSum of float32 / float64 / int32 / int64 writes numpy's running sum straight into the output
(reversed as a view, ``exclusive`` as a shifted view with a zero in front): one pass, where the
portable body flips, sums with an initial zero, slices and flips back.  The sums are the same
additions in the same order; other types take the portable kernel.
"""

from __future__ import annotations

import numpy as np
from onnxkit_default_domain.api import norm_axis, scalar_int, sort_key, top_k_args, top_k_check, top_k_order
from onnxkit_default_domain.api import selection as portable

from onnxkit.plugin import KernelTable
from onnxkit_cpu.compiled.selection import top_k_loop
from onnxkit_cpu.namespace import numpy_namespace

KERNELS = KernelTable()


def _select(key, k, largest):
    """Top-k positions along the last axis, sorted, ties by lower index: k passes of argmax /
    argmin (which return the first extreme) masking each pick.  None when a value equals the
    mask or is NaN."""
    if key.dtype.kind == "f":
        mask = -np.inf if largest else np.inf
        if np.isnan(key).any():
            return None
    else:
        info = np.iinfo(key.dtype)
        mask = info.min if largest else info.max
    if (key == mask).any():
        return None
    n = key.shape[-1]
    work = np.array(key, order="C").reshape(-1, n)
    out = np.empty((work.shape[0], k), dtype=np.int64)
    rows = np.arange(work.shape[0])
    pick = np.argmax if largest else np.argmin
    for j in range(k):
        i = pick(work, axis=1)
        out[:, j] = i
        work[rows, i] = mask
    return out.reshape(key.shape[:-1] + (k,))


def _partition(key, k, largest, ordered=True):
    """Top-k positions along the last axis, ties by the lower index: the k-th key by a value
    partition, the keys beyond it and the first ties at it; sorted stably, or (``ordered``
    False: TopK's ``sorted`` = 0, whose order the definition leaves open) in index order."""
    n = key.shape[-1]
    kth = n - k if largest else k - 1
    thr = np.partition(key, kth, axis=-1)[..., kth:kth + 1]
    take = key > thr if largest else key < thr
    tie = key == thr
    need = k - take.sum(-1, keepdims=True)
    if (tie.sum(-1, keepdims=True) > need).any():     # ties straddle the cut: the lower indices
        tie &= np.cumsum(tie, axis=-1) <= need
    take |= tie
    cand = np.nonzero(take.reshape(-1, n))[1].reshape(key.shape[:-1] + (k,))
    if not ordered:
        return cand
    order = numpy_namespace().argsort(np.take_along_axis(key, cand, -1), axis=-1, descending=largest, stable=True)
    return np.take_along_axis(cand, order, -1)


def _heap(loop, key, k, largest):
    """Top-k positions along the last axis by the compiled bounded heap (module docstring)."""
    n = key.shape[-1]
    rows = np.ascontiguousarray(key).reshape(-1, n)
    out = np.empty((rows.shape[0], k), dtype=np.int64)
    loop(rows, k, largest, out)
    return out.reshape(key.shape[:-1] + (k,))


def top_k(ctx, x, k: int, axis: int, largest: bool, loop=None, ordered=True):
    a = top_k_check(ctx, x, k, axis)
    n = x.shape[a]
    key = sort_key(np, x)
    order = None
    if 0 < k and n >= 64 and key.dtype.kind in "iuf" and not (key.dtype.kind == "f" and np.isnan(key).any()):
        last = np.moveaxis(key, a, -1)
        if loop is not None and 8 * k <= n and (k <= 16 or 64 * k <= n):
            order = _heap(loop, last, k, largest)
        elif k <= 16:
            order = _select(last, k, largest)
        elif 4 * k <= n:
            order = _partition(last, k, largest, ordered)
        if order is not None:
            order = np.moveaxis(order, -1, a)
    if order is None:
        order = top_k_order(ctx, x, k, a, largest)
    return np.take_along_axis(x, order, axis=a), order.astype(np.int64, copy=False)


@KERNELS.register("TopK", 10, 11, 24)
def top_k_kernel(ctx):
    axis, largest = top_k_args(ctx)
    loop = top_k_loop()
    ordered = ctx.since_version < 11 or bool(ctx.attr("sorted", 1))
    return lambda x, k: top_k(ctx, x, scalar_int(ctx, k, "K"), axis, largest, loop, ordered)


_CUMSUM_TYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


@KERNELS.register("CumSum", 11, 14)
def cum_sum(ctx):
    fallback = portable.cum_sum(ctx)
    exclusive, reverse = bool(ctx.attr("exclusive")), bool(ctx.attr("reverse"))

    def fn(x, axis):
        if x.dtype not in _CUMSUM_TYPES or x.ndim == 0:
            return fallback(x, axis)
        a = norm_axis(ctx, scalar_int(ctx, axis, "axis"), x.ndim)
        out = np.empty(x.shape, dtype=x.dtype)
        if x.shape[a] == 0:
            return out
        flip = tuple(slice(None, None, -1) if i == a else slice(None) for i in range(x.ndim))
        src, dst = (x[flip], out[flip]) if reverse else (x, out)
        if exclusive:
            head = tuple(slice(0, 1) if i == a else slice(None) for i in range(x.ndim))
            dst[head] = 0
            cut = tuple(slice(0, -1) if i == a else slice(None) for i in range(x.ndim))
            rest = tuple(slice(1, None) if i == a else slice(None) for i in range(x.ndim))
            np.cumsum(src[cut], axis=a, dtype=x.dtype, out=dst[rest])
        else:
            np.cumsum(src, axis=a, dtype=x.dtype, out=dst)
        return out

    return fn
