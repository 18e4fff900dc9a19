"""Depthwise convolution on numpy (``group`` = input channels, any channel multiplier), and
the window view and scratch rule shared with :mod:`.conv`.

A depthwise product is one small product per channel (``(mg, K) @ (K, L)``): the columns
(im2col, ``K`` times the input) are what costs, not the arithmetic.  Two things cut it:

* where every stride is 1 (and there are two spatial axes or more) the columns are read from
  the *flattened* padded image: the row of tap ``t`` of channel ``c`` is one contiguous run of
  the flat buffer starting at the tap's offset, ``O[0] * prod(P[1:])`` long, so the copy has
  long inner runs instead of ``O[-1]``-long ones; the outputs that fall on the padded
  border columns (``P[i] - O[i]`` per inner axis) are junk and dropped by the final copy
  (which adds the bias on the way);
* the channels are processed in blocks whose columns fit in the core's L2 cache
  (:data:`BLOCK_BYTES`), each block copied into one reused buffer and multiplied with
  ``out=`` into the output (faster than one big copy and product).

Each output element is the same ``K``-term dot product as the portable kernel's, so results
agree with it to float rounding of the BLAS kernel's order (bit-identical in practice).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from onnxkit.plugin import parallel_for

#: columns of one channel block at most this large (bytes): the block stays in L2
BLOCK_BYTES = 384 << 10

#: scratch (padded input, columns) kept per thread and node when no larger than this (bytes)
KEEP_BYTES = 4 << 20

#: column elements worth a run of channel blocks on an intra-op thread of its own
#: (:func:`onnxkit.runtime.threads.parallel_for`)
BLOCK_WORK = 32768

#: elements of an im2col copy worth a block of images or channels on an intra-op thread of its own
COPY_WORK = 65536


def split_copy(dst, src) -> None:
    """``np.copyto(dst, src)`` (both ``(N, C, ...)``) split across the run's intra-op threads by
    image where N > 1, else by channel (a copy: the same values whatever the split)."""
    axis = 0 if dst.shape[0] > 1 else 1
    items = dst.shape[axis]
    if axis == 0:
        def run(lo, hi):
            np.copyto(dst[lo:hi], src[lo:hi])
    else:
        def run(lo, hi):
            np.copyto(dst[:, lo:hi], src[:, lo:hi])
    parallel_for(run, items, grain=max(1, COPY_WORK // max(1, dst.size // max(1, items))), name="conv.columns")


def window_view(xpad, kernel, strides, dil, out_shape):
    """``(N, C, *K, *O)``: a read-only strided view of the windows of the padded input
    (element ``[n, c, k..., o...]`` is ``xpad[n, c, o*s + k*d ...]``)."""
    sp = xpad.strides[2:]
    return np.lib.stride_tricks.as_strided(
        xpad, xpad.shape[:2] + tuple(kernel) + tuple(out_shape),
        xpad.strides[:2] + tuple(d * st for d, st in zip(dil, sp)) + tuple(s * st for s, st in zip(strides, sp)),
        writeable=False)


def pad_layout(in_shape, begin, end) -> tuple:
    """``(crop, lo, inner, padded)`` of padding spatial extents ``in_shape`` by ``begin`` /
    ``end`` (negative: cropping): the slices cropping X (None: nothing to crop), the pads
    before, the cropped extents and the padded extents, per spatial axis."""
    crop = None
    if any(b < 0 for b in begin) or any(e < 0 for e in end):
        crop = (slice(None), slice(None)) + tuple(slice(max(0, -b), d - max(0, -e))
                                                  for d, b, e in zip(in_shape, begin, end))
    lo = [max(0, b) for b in begin]
    inner = [d - max(0, -b) - max(0, -e) for d, b, e in zip(in_shape, begin, end)]
    padded = [i + a + max(0, e) for i, a, e in zip(inner, lo, end)]
    return crop, lo, inner, padded


class Scratch:
    """Per-thread scratch of one prepared convolution: ``get()`` returns the thread's own
    (made by ``make()`` once) when it is at most :data:`KEEP_BYTES`, else a fresh one."""

    __slots__ = ("make", "keep", "local")

    def __init__(self, make, nbytes: int, local):
        self.make, self.keep, self.local = make, nbytes <= KEEP_BYTES, local

    def get(self):
        if not self.keep:
            return self.make()
        mine = getattr(self.local, "scratch", None)
        if mine is None:
            mine = self.local.scratch = self.make()
        return mine


#: the per-thread shared scratch (:class:`Shared`) grows to at most this many bytes
SHARED_BYTES = 8 << 20

_shared = threading.local()


class Shared:
    """Scratch whose memory every user on a thread shares (the convolutions' columns): ``get()``
    returns ``views(array)`` for an array of ``shape`` / ``dtype`` over the thread's one buffer,
    its contents undefined (the caller writes all it reads), or over a fresh array where it is
    larger than :data:`SHARED_BYTES`.  A kernel holds it only during its own call and kernels do
    not nest, so one buffer serves them all; it then stays in cache from one convolution to the
    next (per-node buffers left the next node's columns to come from memory, which slows the
    fill).  ``local``: the node's ``threading.local`` (keeps the views while the buffer is
    the same)."""

    __slots__ = ("shape", "dtype", "nbytes", "views", "local")

    def __init__(self, shape, dtype, views, local):
        self.shape, self.dtype, self.views, self.local = tuple(shape), np.dtype(dtype), views, local
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize

    def get(self):
        if self.nbytes > SHARED_BYTES:
            return self.views(np.empty(self.shape, self.dtype))
        buf = getattr(_shared, "buf", None)
        if buf is None or buf.size < self.nbytes:
            buf = _shared.buf = np.empty(min(SHARED_BYTES, max(self.nbytes, 0 if buf is None else buf.size * 2)), np.uint8)
        mine = getattr(self.local, "shared", None)
        if mine is None or mine[0] is not buf:
            mine = self.local.shared = (buf, self.views(buf[:self.nbytes].view(self.dtype).reshape(self.shape)))
        return mine[1]


class PaddedWindows:
    """The zero-bordered padded input of one convolution shape and the windows read from it
    (``plan``: the portable :class:`ConvPlan`; ``lo`` / ``inner`` / ``padded``: the pads before,
    the cropped input's and the padded extents per spatial axis, :func:`pad_layout`).

    ``flat`` (every stride 1, two spatial axes or more, and ``flat_ok``): the windows are rows of the flattened
    padded image, ``length = O[0] * prod(P[1:])`` long, the outputs on the border columns
    junk that :meth:`finish` drops; else the windows are :func:`window_view`'s, ``length =
    prod(O)``.  ``tail``: the windows' trailing extents (``(length,)`` or ``O``)."""

    def __init__(self, plan, lo, inner, padded, flat_ok=True):
        self.plan, self.lo, self.inner, self.padded = plan, lo, inner, padded
        kernel, out = plan.kernel, plan.out_shape
        nd = len(kernel)
        self.flat = flat_ok and nd >= 2 and all(s == 1 for s in plan.strides)
        if self.flat:
            self.row_strides = [math.prod(padded[i + 1:]) for i in range(nd)]
            self.length = out[0] * self.row_strides[0]
            self.size = max(math.prod(padded),
                            sum((k - 1) * d * p for k, d, p in zip(kernel, plan.dil, self.row_strides)) + self.length)
            self.grid = (plan.n, plan.m, out[0], *padded[1:])
            self.crop = (slice(None),) * 3 + tuple(slice(0, o) for o in out[1:])
            self.tail = (self.length,)
        else:
            self.size = math.prod(padded)
            self.length = math.prod(out)
            self.tail = tuple(out)
        self.out_full = (plan.n, plan.m, *out)

    def make(self, ct):
        """``(interior, windows)`` over a new zero buffer: the view X is copied into and the
        read-only ``(N, C, *K, *tail)`` view of its windows."""
        p = self.plan
        buf = np.zeros((p.n, p.c, self.size), dtype=ct)
        image = buf[:, :, :math.prod(self.padded)].reshape(p.n, p.c, *self.padded)
        interior = image[(slice(None), slice(None)) + tuple(slice(a, a + b) for a, b in zip(self.lo, self.inner))]
        if not self.flat:
            return interior, window_view(image, p.kernel, p.strides, p.dil, p.out_shape)
        it = buf.itemsize
        return interior, np.lib.stride_tricks.as_strided(
            buf, (p.n, p.c, *p.kernel, self.length),
            buf.strides[:2] + tuple(d * r * it for d, r in zip(p.dil, self.row_strides)) + (it,), writeable=False)

    def finish(self, y, bias):
        """The ``(N, M, *O)`` result from a fresh product ``y`` holding ``(N, M, length)``
        values: the junk dropped (a fresh copy) where ``flat``, ``bias`` (``(M, 1...)`` or
        None) added."""
        if self.flat:
            v = y.reshape(self.grid)[self.crop]
            return np.ascontiguousarray(v) if bias is None else np.add(v, bias)
        y = y.reshape(self.out_full)
        if bias is not None:
            y += bias
        return y


class Depthwise:
    """The depthwise product of one input shape (``windows``: its :class:`PaddedWindows`;
    ``ct``: the compute dtype; ``local``: the node's ``threading.local``)."""

    def __init__(self, windows, ct, local):
        plan = windows.plan
        n, c = plan.n, plan.c
        self.windows, self.ct = windows, ct
        self.mg, self.kp = plan.m // c, math.prod(plan.kernel)
        length = windows.length
        self.block = max(1, min(c, BLOCK_BYTES // max(1, self.kp * length * np.dtype(ct).itemsize)))
        self.starts = list(range(0, c, self.block))
        self.shape = (n, c, self.mg, length)
        nbytes = (n * c * windows.size + self.block * self.kp * length) * np.dtype(ct).itemsize
        self.scratch = Scratch(self._make, nbytes, local)

    def _make(self):
        """``(interior of the padded buffer, [(n, c0, c1, source block, column block, its matrix)...])``."""
        interior, src = self.windows.make(self.ct)
        n, c = self.shape[:2]
        cols = np.empty((self.block, *self.windows.plan.kernel, *self.windows.tail), dtype=self.ct)
        mat = cols.reshape(self.block, self.kp, self.windows.length)
        blocks = []
        for i in range(n):
            for c0 in self.starts:
                k = min(c, c0 + self.block) - c0
                blocks.append((i, c0, c0 + k, src[i, c0:c0 + k], cols[:k], mat[:k]))
        return interior, blocks

    def weights(self, w):
        """W as ``(C, mg, K)`` in the compute dtype, one slice per channel block."""
        wg = w.reshape(self.shape[1], self.mg, self.kp).astype(self.ct, copy=False)
        return [wg[c0:c0 + self.block] for c0 in self.starts]

    def __call__(self, x, wblocks, bias):
        """The convolution of ``x`` (cropped already), plus ``bias`` (``(M, 1...)`` or None):
        a fresh ``(N, M, *O)`` array in the compute dtype."""
        interior, blocks = self.scratch.get()
        interior[...] = x
        out = np.empty(self.shape, dtype=self.ct)

        def run(lo, hi):    # channel blocks split across the run's intra-op threads
            own = None      # the first thread's the kept buffer, another its own
            for i, c0, c1, src, cols, mat in blocks[lo:hi]:
                if lo:
                    if own is None:
                        own = np.empty(blocks[0][4].shape, dtype=self.ct)
                    cols = own[:c1 - c0]
                    mat = cols.reshape(c1 - c0, self.kp, self.windows.length)
                np.copyto(cols, src)
                np.matmul(wblocks[c0 // self.block], mat, out=out[i, c0:c1])

        parallel_for(run, len(blocks), grain=max(1, BLOCK_WORK // blocks[0][4].size), name="conv.depthwise")
        return self.windows.finish(out, bias)
