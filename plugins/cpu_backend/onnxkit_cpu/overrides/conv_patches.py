"""The product of a convolution whose windows tile its input (:func:`tiles`: a ViT patch
embedding, a ConvNeXt-like stem), for :mod:`.conv`: :class:`Patches`."""

from __future__ import annotations

import math

import numpy as np

from .conv_depthwise import Scratch

_ALL = (slice(None), slice(None))


def tiles(plan) -> bool:
    """Whether the windows of ``plan`` tile its input: one group, kernel = stride (more than
    one tap), dilation 1, no pads."""
    return (plan.group == 1 and math.prod(plan.kernel) > 1 and tuple(plan.strides) == tuple(plan.kernel)
            and all(d == 1 for d in plan.dil) and not any(plan.begin) and not any(plan.end))


class Patches:
    """The product of a convolution whose windows tile X (:func:`tiles`): per image, the
    columns are X's patches, ``(L, C*K)`` (patch-major), made by one copy of a reshaped and
    transposed view of X (runs of ``K[-1]`` contiguous elements, where the window view's
    ``(C*K, L)`` columns read runs of one element: faster), then
    ``(L, C*K) @ W^T`` (W^T made once per W), written transposed into Y by the bias addition
    (or a copy).  Each output is the same ``C*K``-term dot product as the portable kernel's
    ``(M, C*K) @ (C*K, L)``; OpenBLAS may order its terms differently for the other product
    shape, so results agree to float rounding (bit-identical on ViT patch embeddings, e.g.
    (3, 3, 32, 32) by 8x8 and (1, 3, 224, 224) by 16x16; on small odd shapes differences up
    to 1.2e-6 of the outputs' magnitude seen).  The patches buffer is the thread's (``local``)."""

    def __init__(self, plan, in_shape, ct, local):
        n, c, m = plan.n, plan.c, plan.m
        k, o = tuple(plan.kernel), tuple(plan.out_shape)
        nd = len(k)
        self.ct = ct
        exact = all(oi * ki == d for oi, ki, d in zip(o, k, in_shape))
        self.crop = None if exact else _ALL + tuple(slice(0, oi * ki) for oi, ki in zip(o, k))  # rows no window reads
        self.split = (n, c) + tuple(v for ok in zip(o, k) for v in ok)        # (N, C, O0, K0, O1, K1 ...)
        self.order = (0,) + tuple(range(2, 2 + 2 * nd, 2)) + (1,) + tuple(range(3, 3 + 2 * nd, 2))
        self.mat = (n, math.prod(o), c * math.prod(k))
        self.out_full, self.out_mat = (n, m, *o), (n, m, math.prod(o))
        shape = (n, *o, c, *k)
        self.scratch = Scratch(lambda: np.empty(shape, dtype=ct), math.prod(shape) * np.dtype(ct).itemsize, local)

    def weights(self, w):
        """W^T: ``(C*K, M)``, contiguous, in the compute dtype (a new array)."""
        return np.ascontiguousarray(w.reshape(w.shape[0], -1).T, dtype=self.ct)

    def __call__(self, x, wt, bias):
        cols = self.scratch.get()
        if self.crop is not None:
            x = x[self.crop]
        np.copyto(cols, x.reshape(self.split).transpose(self.order))
        y = np.matmul(cols.reshape(self.mat), wt)                             # (N, L, M)
        out = np.empty(self.out_full, dtype=self.ct)
        into = out.reshape(self.out_mat).transpose(0, 2, 1)                   # Y as (N, L, M)
        if bias is None:
            np.copyto(into, y)
        else:
            np.add(y, bias.reshape(-1), out=into)
        return out
