"""cpu overrides of the selection family (``onnxkit_default_domain/kernels/selection.py``).

TopK of a few elements of a long axis: k passes of argmax / argmin (k <= 16) or an
argpartition (4k <= n) instead of a full stable sort, where they give the same order (ties
by the lower index).  Otherwise, and for parsing and checks, the portable kernel's functions.
"""

from __future__ import annotations

import array_api_compat.numpy as xnp
import numpy as np
from onnxkit_default_domain.api import scalar_int, sort_key, top_k_args, top_k_check, top_k_order

from onnxkit.plugin import KernelTable

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


def _partition(key, k, largest):
    """Top-k positions along the last axis via argpartition; None when ties straddle the cut."""
    n = key.shape[-1]
    kth = n - k if largest else k - 1
    part = np.argpartition(key, kth, axis=-1)
    cand = part[..., n - k:] if largest else part[..., :k]
    thr = np.take_along_axis(key, part[..., kth:kth + 1], -1)
    if ((key == thr).sum(-1) > (np.take_along_axis(key, cand, -1) == thr).sum(-1)).any():
        return None
    cand = np.sort(cand, axis=-1)
    order = xnp.argsort(np.take_along_axis(key, cand, -1), axis=-1, descending=largest, stable=True)
    return np.take_along_axis(cand, order, -1)


def top_k(ctx, x, k: int, axis: int, largest: bool):
    a = top_k_check(ctx, x, k, axis)
    n = x.shape[a]
    key = sort_key(np, x)
    order = None
    if 0 < k and n >= 64 and key.dtype.kind in "iuf":
        last = np.moveaxis(key, a, -1)
        if k <= 16:
            order = _select(last, k, largest)
        elif 4 * k <= n and not (key.dtype.kind == "f" and np.isnan(key).any()):
            order = _partition(last, k, largest)
        if order is not None:
            order = np.moveaxis(order, -1, a)
    if order is None:
        order = top_k_order(ctx, x, k, a, largest)
    return np.take_along_axis(x, order, axis=a), order.astype(np.int64, copy=False)


@KERNELS.register("TopK", 10, 11, 24)
def top_k_kernel(ctx):
    axis, largest = top_k_args(ctx)
    return lambda x, k: top_k(ctx, x, scalar_int(ctx, k, "K"), axis, largest)
