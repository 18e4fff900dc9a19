"""Indexing, selection and scan kernels of ai.onnx (cpu backend).

Operators and the since_versions (definitions) implemented:

* Slice 1 (``starts``/``ends``/``axes`` attributes), 10, 11, 13 (inputs, with ``steps``)
* Gather 1, 11, 13;  GatherElements 11, 13;  GatherND 11, 12 (``batch_dims``), 13
* Scatter 9, 11 (deprecated, still evaluated: ScatterElements without reduction)
* ScatterElements 11, 13, 16 (``reduction`` none/add/mul), 18 (max/min)
* ScatterND 11, 13, 16 (``reduction`` none/add/mul), 18 (max/min)
* OneHot 9, 11, 28;  NonZero 9, 13
* TopK 1 (``k`` attribute), 10 (``K`` input), 11, 24 (``largest``/``sorted``)
* ArgMax / ArgMin 1, 11, 12 (``select_last_index``), 13
* Unique 11, 28;  CumSum 11, 14

Index values may be negative (counted from the end) where the operator allows it; an index
out of range is an evaluation error naming the node, never a raw IndexError.
"""

from __future__ import annotations

import numpy as np

from onnxkit.runtime import KernelTable

from .shape import int_list, norm_axes, norm_axis, scalar_int

KERNELS = KernelTable()


def _check_index(ctx, idx: np.ndarray, n: int, what: str = "index") -> np.ndarray:
    """``idx`` (int64) with negative values wrapped; ctx.fail if any lies outside [-n, n-1]."""
    idx = np.asarray(idx)
    if idx.dtype.kind not in "iu":
        ctx.fail(f"{what} must be an integer tensor, got {idx.dtype}")
    idx = idx.astype(np.int64, copy=False)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            ctx.fail(f"{what} {bad} is out of range for an extent of {n}")
        if lo < 0:
            idx = np.where(idx < 0, idx + n, idx)
    return idx


def _sort_key(x: np.ndarray) -> np.ndarray:
    """An array that orders like ``x`` and that numpy sorts natively (ml_dtypes floats as float32)."""
    return x.astype(np.float32) if x.dtype.kind == "V" else x


# -- Slice -------------------------------------------------------------------------------------
def slice_plan(ctx, in_shape, starts: list, ends: list, axes=None, steps=None) -> list:
    """Slice's ``starts``/``ends``/``axes``/``steps`` (lists of ints; axes and steps may be
    None) for an input of extents ``in_shape``, as ``(axis, start, end, step)`` per sliced axis
    with start and end clamped: to [0, d] for a positive step, to [-1, d-1] for a negative one
    (-1: before the first element).  Host-side arithmetic only: the gpu backend uses it too."""
    in_shape = list(in_shape)
    rank = len(in_shape)
    n = len(starts)
    axes = list(range(n)) if axes is None else norm_axes(ctx, axes, rank)
    steps = [1] * n if steps is None else steps
    if not (len(ends) == len(axes) == len(steps) == n):
        ctx.fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have the same length")
    if n > rank:
        ctx.fail(f"{n} slices for a tensor of rank {rank}")
    plan = []
    for a, s, e, st in zip(axes, starts, ends, steps):
        d = in_shape[a]
        if st == 0:
            ctx.fail("a step of 0 is not allowed")
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, -1), d - 1), min(max(e, -1), d - 1)
        plan.append((a, s, e, st))
    return plan


def slice_array(ctx, x, starts, ends, axes=None, steps=None) -> np.ndarray:
    plan = slice_plan(ctx, x.shape, int_list(starts), int_list(ends),
                      None if axes is None else int_list(axes), None if steps is None else int_list(steps))
    index = [slice(None)] * x.ndim
    for a, s, e, st in plan:
        if st > 0:
            index[a] = slice(s, e, st)
        else:
            index[a] = slice(0, 0) if s < 0 else slice(s, None if e < 0 else e, st)
    return x[tuple(index)]


@KERNELS.register("Slice", 1)
def slice_v1(ctx):
    starts, ends, axes = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes")
    if starts is None or ends is None:
        ctx.fail("Slice-1 needs the 'starts' and 'ends' attributes")
    return lambda x: slice_array(ctx, x, starts, ends, axes, None)


@KERNELS.register("Slice", 10, 11, 13)
def slice_(ctx):
    return lambda x, starts, ends, axes=None, steps=None: slice_array(ctx, x, starts, ends, axes, steps)


# -- Gather family -----------------------------------------------------------------------------
@KERNELS.register("Gather", 1, 11, 13)
def gather(ctx):
    axis = int(ctx.attr("axis", 0))

    def fn(x, indices):
        a = norm_axis(ctx, axis, x.ndim)
        idx = _check_index(ctx, indices, x.shape[a], "indices value")
        return np.take(x, idx, axis=a)

    return fn


@KERNELS.register("GatherElements", 11, 13)
def gather_elements(ctx):
    axis = int(ctx.attr("axis", 0))

    def fn(x, indices):
        a = norm_axis(ctx, axis, x.ndim)
        indices = np.asarray(indices)
        if indices.ndim != x.ndim or any(indices.shape[i] > x.shape[i] for i in range(x.ndim) if i != a):
            ctx.fail(f"indices of shape {list(indices.shape)} do not fit data of shape {list(x.shape)}")
        idx = _check_index(ctx, indices, x.shape[a], "indices value")
        part = x[tuple(slice(None) if i == a else slice(0, indices.shape[i]) for i in range(x.ndim))]
        return np.take_along_axis(part, idx, axis=a)

    return fn


def gather_nd(ctx, x, indices, b: int) -> np.ndarray:
    indices = np.asarray(indices)
    r, q = x.ndim, indices.ndim
    if q < 1 or r < 1 or not 0 <= b < min(q, r):
        ctx.fail(f"batch_dims {b} must be below the ranks of data ({r}) and indices ({q})")
    if x.shape[:b] != indices.shape[:b]:
        ctx.fail(f"the batch dimensions of data {list(x.shape)} and indices {list(indices.shape)} differ")
    m = indices.shape[-1]
    if not 1 <= m <= r - b:
        ctx.fail(f"indices.shape[-1] = {m} must lie in [1, {r - b}]")
    nb = int(np.prod(x.shape[:b], dtype=np.int64))
    k = int(np.prod(indices.shape[b:-1], dtype=np.int64))
    idx = indices.reshape(nb, k, m)
    data = x.reshape((nb,) + x.shape[b:])
    key = [np.arange(nb)[:, None]]
    for j in range(m):
        key.append(_check_index(ctx, idx[..., j], x.shape[b + j], "indices value"))
    out = data[tuple(key)]
    return out.reshape(x.shape[:b] + indices.shape[b:-1] + x.shape[b + m:])


@KERNELS.register("GatherND", 11, 12, 13)
def gather_nd_kernel(ctx):
    b = int(ctx.attr("batch_dims", 0)) if ctx.since_version >= 12 else 0
    return lambda x, indices: gather_nd(ctx, x, indices, b)


# -- Scatter family ----------------------------------------------------------------------------
_REDUCE_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _reduction(ctx, allowed) -> str:
    r = ctx.attr_str("reduction", "none")
    if r not in allowed:
        ctx.fail(f"reduction '{r}' is not one of {sorted(allowed)} at this version")
    return r


def _reduction_versions(ctx):
    if ctx.since_version >= 18:
        return {"none", "add", "mul", "max", "min"}
    if ctx.since_version >= 16:
        return {"none", "add", "mul"}
    return {"none"}


def _apply(out, key, upd, reduction):
    """``out[key] (op)= upd`` in place; ``key`` indexes the leading axes of ``out`` (a fresh C copy).

    Reductions combine duplicate targets first (sort + ``reduceat``), then apply once per target;
    the stable sort keeps the updates of one target in their order.
    """
    if reduction == "none":
        out[key] = upd
        return out
    ufunc = _REDUCE_AT[reduction]
    lead = out.shape[:len(key)]
    lin = np.ravel_multi_index(tuple(np.broadcast_arrays(*key)), lead).reshape(-1) if key else np.zeros(1, np.intp)
    if lin.size == 0:
        return out
    tail = int(np.prod(out.shape[len(key):], dtype=np.int64))
    flat = out.reshape(-1, tail)
    u = upd.reshape(-1, tail)
    order = np.argsort(lin, kind="stable")
    ls = lin[order]
    starts = np.flatnonzero(np.concatenate(([True], ls[1:] != ls[:-1])))
    counts = np.diff(np.append(starts, ls.size))
    if tail >= 16 and counts.max() <= 32:
        # wide slices, few duplicates: one pass per occurrence rank (no target repeats in a pass)
        rank = np.arange(ls.size) - np.repeat(starts, counts)
        uo = u[order]
        for r in range(int(counts.max())):
            sel = rank == r
            t = ls[sel]
            flat[t] = ufunc(flat[t], uo[sel])
        return out
    targets = ls[starts]
    try:
        combined = ufunc.reduceat(u[order], starts, axis=0)
    except TypeError:   # an element type without a reduceat loop
        ufunc.at(flat, lin, u)
        return out
    flat[targets] = ufunc(flat[targets], combined)
    return out


def scatter_elements(ctx, x, indices, updates, axis, reduction):
    indices, updates = np.asarray(indices), np.asarray(updates)
    if indices.shape != updates.shape or indices.ndim != x.ndim:
        ctx.fail(f"indices {list(indices.shape)} and updates {list(updates.shape)} must have the same shape, "
                 f"of the rank of data ({x.ndim})")
    a = norm_axis(ctx, axis, x.ndim)
    if any(indices.shape[i] > x.shape[i] for i in range(x.ndim) if i != a):
        ctx.fail(f"indices of shape {list(indices.shape)} do not fit data of shape {list(x.shape)}")
    idx = _check_index(ctx, indices, x.shape[a], "indices value")
    key = list(np.indices(idx.shape, sparse=True))
    key[a] = idx
    return _apply(x.copy(), tuple(key), updates.astype(x.dtype, copy=False), reduction)


@KERNELS.register("Scatter", 9, 11)
def scatter(ctx):
    axis = int(ctx.attr("axis", 0))
    return lambda x, indices, updates: scatter_elements(ctx, x, indices, updates, axis, "none")


@KERNELS.register("ScatterElements", 11, 13, 16, 18)
def scatter_elements_kernel(ctx):
    axis = int(ctx.attr("axis", 0))
    reduction = _reduction(ctx, _reduction_versions(ctx))
    return lambda x, indices, updates: scatter_elements(ctx, x, indices, updates, axis, reduction)


def scatter_nd(ctx, x, indices, updates, reduction):
    indices, updates = np.asarray(indices), np.asarray(updates)
    if indices.ndim < 1:
        ctx.fail("indices must have rank >= 1")
    k = indices.shape[-1]
    if k > x.ndim:
        ctx.fail(f"indices.shape[-1] = {k} exceeds the rank of data ({x.ndim})")
    want = indices.shape[:-1] + x.shape[k:]
    if updates.shape != want:
        ctx.fail(f"updates of shape {list(updates.shape)}; expected {list(want)}")
    key = tuple(_check_index(ctx, indices[..., j], x.shape[j], "indices value") for j in range(k))
    return _apply(x.copy(), key, updates.astype(x.dtype, copy=False), reduction)


@KERNELS.register("ScatterND", 11, 13, 16, 18)
def scatter_nd_kernel(ctx):
    reduction = _reduction(ctx, _reduction_versions(ctx))
    return lambda x, indices, updates: scatter_nd(ctx, x, indices, updates, reduction)


# -- OneHot / NonZero --------------------------------------------------------------------------
@KERNELS.register("OneHot", 9, 11, 28)
def one_hot(ctx):
    axis = int(ctx.attr("axis", -1))

    def fn(indices, depth, values):
        d = np.asarray(depth).reshape(-1)
        if d.size != 1:
            ctx.fail(f"depth must be a scalar, got {d.size} values")
        d = int(d[0])
        if d < 1:
            ctx.fail(f"depth {d} must be positive")
        vals = np.asarray(values).reshape(-1)
        if vals.size != 2:
            ctx.fail(f"values must hold [off_value, on_value], got {vals.size} values")
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu":
            idx = np.trunc(idx.astype(np.float64))
        idx = idx.astype(np.int64)
        r = idx.ndim
        if not -(r + 1) <= axis <= r:
            ctx.fail(f"axis {axis} is out of range for an output of rank {r + 1}")
        a = axis + r + 1 if axis < 0 else axis
        idx = np.where(idx < 0, idx + d, idx)
        classes = np.arange(d).reshape([d if i == a else 1 for i in range(r + 1)])
        hot = np.expand_dims(idx, a) == classes
        return np.where(hot, vals[1:2], vals[0:1]).astype(vals.dtype, copy=False)

    return fn


@KERNELS.register("NonZero", 9, 13)
def non_zero(ctx):
    def fn(x):
        if x.ndim == 0:
            return np.zeros((0, int(np.count_nonzero(x))), dtype=np.int64)
        nz = x != 0 if x.dtype != object else np.vectorize(bool, otypes=[bool])(x)
        return np.stack(np.nonzero(nz)).astype(np.int64, copy=False).reshape(x.ndim, -1)

    return fn


# -- TopK --------------------------------------------------------------------------------------
def _stable_order(key, axis, largest):
    """Positions that sort ``key`` along ``axis`` (descending if ``largest``), ties by lower index."""
    if largest:   # stable ascending sort of the reversed axis, reversed back
        n = key.shape[axis]
        return (n - 1) - np.flip(np.argsort(np.flip(key, axis), axis=axis, kind="stable"), axis)
    return np.argsort(key, axis=axis, kind="stable")


def _top_k_select(key, k, largest):
    """Top-k positions along the last axis, sorted, ties by lower index: k passes of argmax/argmin
    (which return the first extreme) masking each pick.  None when a value equals the mask."""
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


def _top_k_partition(key, k, largest):
    """Top-k positions along the last axis via argpartition; None when ties straddle the cut."""
    n = key.shape[-1]
    kth = n - k if largest else k - 1
    part = np.argpartition(key, kth, axis=-1)
    cand = part[..., n - k:] if largest else part[..., :k]
    thr = np.take_along_axis(key, part[..., kth:kth + 1], -1)
    if ((key == thr).sum(-1) > (np.take_along_axis(key, cand, -1) == thr).sum(-1)).any():
        return None
    cand = np.sort(cand, axis=-1)
    return np.take_along_axis(cand, _stable_order(np.take_along_axis(key, cand, -1), -1, largest), -1)


def top_k(ctx, x, k: int, axis: int, largest: bool):
    a = norm_axis(ctx, axis, x.ndim)
    n = x.shape[a]
    if not 0 <= k <= n:
        ctx.fail(f"k = {k} must lie in [0, {n}]")
    key = _sort_key(x)
    order = None
    if 0 < k and n >= 64 and key.dtype.kind in "iuf":
        last = np.moveaxis(key, a, -1)
        if k <= 16:
            order = _top_k_select(last, k, largest)
        elif 4 * k <= n and not (key.dtype.kind == "f" and np.isnan(key).any()):
            order = _top_k_partition(last, k, largest)
        if order is not None:
            order = np.moveaxis(order, -1, a)
    if order is None:
        order = _stable_order(key, a, largest)
        order = order[tuple(slice(0, k) if i == a else slice(None) for i in range(x.ndim))]
    return np.take_along_axis(x, order, axis=a), order.astype(np.int64, copy=False)


@KERNELS.register("TopK", 1)
def top_k_v1(ctx):
    k, axis = ctx.attr("k"), int(ctx.attr("axis", -1))
    if k is None:
        ctx.fail("TopK-1 needs the 'k' attribute")
    return lambda x: top_k(ctx, x, int(k), axis, True)


@KERNELS.register("TopK", 10, 11, 24)
def top_k_kernel(ctx):
    axis = int(ctx.attr("axis", -1))
    largest = bool(ctx.attr("largest", 1)) if ctx.since_version >= 11 else True
    return lambda x, k: top_k(ctx, x, scalar_int(ctx, k, "K"), axis, largest)


# -- ArgMax / ArgMin ---------------------------------------------------------------------------
def _arg_kernel(ctx, func):
    axis = int(ctx.attr("axis", 0))
    keepdims = bool(ctx.attr("keepdims", 1))
    last = bool(ctx.attr("select_last_index", 0)) if ctx.since_version >= 12 else False

    def fn(x):
        a = norm_axis(ctx, axis, x.ndim)
        n = x.shape[a]
        if n == 0:
            ctx.fail(f"axis {a} is empty")
        key = _sort_key(x)
        if last:
            r = (n - 1) - func(np.flip(key, a), axis=a, keepdims=keepdims)
        else:
            r = func(key, axis=a, keepdims=keepdims)
        return np.asarray(r, dtype=np.int64)

    return fn


@KERNELS.register("ArgMax", 1, 11, 12, 13)
def arg_max(ctx):
    return _arg_kernel(ctx, np.argmax)


@KERNELS.register("ArgMin", 1, 11, 12, 13)
def arg_min(ctx):
    return _arg_kernel(ctx, np.argmin)


# -- Unique ------------------------------------------------------------------------------------
@KERNELS.register("Unique", 11, 28)
def unique(ctx):
    axis = ctx.attr("axis")
    is_sorted = bool(ctx.attr("sorted", 1))

    def fn(x):
        if axis is None:
            src, a = x.reshape(-1), 0
            y, ind, inv, cnt = np.unique(src, return_index=True, return_inverse=True, return_counts=True)
        else:
            a = norm_axis(ctx, axis, x.ndim)
            if x.dtype == object:
                ctx.fail("unique sub-tensors of a STRING tensor along an axis are not supported")
            y, ind, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=a)
        inv = inv.reshape(-1)
        if not is_sorted:   # order of first occurrence
            order = np.argsort(ind, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            y, ind, cnt, inv = np.take(y, order, axis=a), ind[order], cnt[order], rank[inv]
        return (y.astype(x.dtype, copy=False), ind.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64))

    return fn


# -- CumSum ------------------------------------------------------------------------------------
@KERNELS.register("CumSum", 11, 14)
def cum_sum(ctx):
    exclusive = bool(ctx.attr("exclusive", 0))
    reverse = bool(ctx.attr("reverse", 0))

    def fn(x, axis):
        a = norm_axis(ctx, scalar_int(ctx, axis, "axis"), x.ndim)
        acc = np.float32 if x.dtype.kind == "V" or x.dtype == np.float16 else x.dtype
        y = np.flip(x, a) if reverse else x
        c = np.cumsum(y, axis=a, dtype=acc)
        if exclusive:
            c = np.concatenate([np.zeros_like(c[tuple(slice(0, 1) if i == a else slice(None) for i in range(x.ndim))]),
                                c[tuple(slice(0, -1) if i == a else slice(None) for i in range(x.ndim))]], axis=a)
        if reverse:
            c = np.flip(c, a)
        return c.astype(x.dtype, copy=False)

    return fn
