"""The compiled im2col product of a large two-axis convolution, in blocks of output rows.

The columns of a convolution are ``C/G * KH * KW (+1)`` rows of ``OH * OW`` values per image
and group: for a 3x3 convolution of 64 channels on 224 x 224 that is 115 MB, for 512 x 512
inputs over 600 MB, scratch that no size limit of the run sees.  Where the columns of the
whole output would exceed :data:`CACHE_BYTES` (about what the core's L2 cache keeps beside a
block of Y), :class:`RowBlocks` fills and multiplies them a block of output rows at a time into
the thread's shared buffer (so it stays in cache where the blocks can be that small, see
:func:`cache_block_rows`; never more than :data:`~.conv_depthwise.SHARED_BYTES` a block): block ``[oh0, oh1)``
reads X's rows ``oh0 * sh - pad_top ..`` up to its last tap's row (clipped to X), which is itself a convolution of that row window with the pads it
touches, so the compiled loop (:func:`onnxkit_cpu.compiled.conv.planes`) runs unchanged on a
geometry of the block's (its layout from :func:`onnxkit_cpu.compiled.conv.layout`, one padded
plane buffer per distinct block geometry: their zero borders differ), then one ``np.matmul``
writes the block's columns ``oh0 * OW .. oh1 * OW`` of Y.

Each output is the same dot product as in the one-block product (the same ``K`` terms, W with
B as its last column); BLAS may sum it in another order for another number of columns (blocks
of a few columns: up to 2e-5 of the outputs' magnitude seen; vgg19's 224 x 224 layers, 8 MiB
blocks: bit-identical), so results agree to float rounding (Clause 11).

A 1x1 product of few input channels over many positions (:func:`pointwise_columns`) is made in
blocks of output columns too: there the whole product's ``(M, L)`` result streams through
memory while its few ``K`` terms cost little, and OpenBLAS's product of a block of columns
whose result stays in cache runs faster; with several intra-op threads the blocks are split
across them, BLAS at one thread (the same blocks as at one: the same bits).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from onnxkit.plugin import parallel_for

from ..compiled import conv as loops
from .conv_depthwise import SHARED_BYTES, Scratch, Shared

#: output (columns) elements of the compiled loop worth a block of images or channels on an
#: intra-op thread of its own (:func:`onnxkit.runtime.threads.parallel_for`)
PLANE_WORK = 16384

#: a 1x1 product takes :func:`pointwise_columns` where its input channels are at most this many ..
POINTWISE_C = 64

#: a compiled-path product takes column blocks (:func:`product_columns`) where its rows are at most this many
POINTWISE_K = 32

#: .. and its output positions at least this many (per image)
POINTWISE_L = 2048

#: .. in blocks of this many output positions (columns)
POINTWISE_COLUMNS = 256


def takes_pointwise_columns(group: int, c: int, length: int, strided: bool) -> bool:
    """Whether a 1x1 product (``group`` groups, ``c`` input channels, ``length`` output positions
    an image, ``strided``: a subsampled X) is made by :func:`pointwise_columns`: one group, no
    stride, ``c <= POINTWISE_C`` and ``length >= POINTWISE_L``."""
    return group == 1 and not strided and c <= POINTWISE_C and length >= POINTWISE_L


#: column blocks of :data:`POINTWISE_COLUMNS` worth an intra-op thread of their own
COLUMN_GRAIN = 4


def _column_blocks(wg, xs, out, width) -> None:
    """``out[..., j] = (wg @ xs)[..., j]`` one ``np.matmul`` per block of ``width`` columns, the
    blocks split across the run's intra-op threads with BLAS at one thread
    (:func:`~onnxkit.runtime.threads.parallel_for`, ``blas``): each block the product one thread
    makes of it, whatever the count."""
    length = xs.shape[-1]

    def run(lo, hi):
        for i in range(lo, hi):
            a = i * width
            np.matmul(wg, xs[..., a:a + width], out=out[..., a:a + width])

    parallel_for(run, -(-length // width), grain=COLUMN_GRAIN, name="conv.columns_blocks", blas=True)


def pointwise_columns(wg, xs):
    """``wg @ xs`` (``(M, C)`` by ``(C, L)`` or ``(N, C, L)``, float, ``xs`` C-contiguous) as a fresh
    C-contiguous result, one ``np.matmul`` per block of :data:`POINTWISE_COLUMNS` columns written
    into its columns of the result, the blocks split across the run's intra-op threads with BLAS
    at one thread (:func:`_column_blocks`: the same products at every count).  Each output is the
    same ``C``-term dot product as the whole product's (BLAS sums its terms in one order whatever
    the number of columns: the same bits seen on every shape tried).  A non-contiguous ``xs``:
    one product."""
    if not xs.flags.c_contiguous:
        return np.matmul(wg, xs)
    out = np.empty(xs.shape[:-2] + (wg.shape[0], xs.shape[-1]), dtype=np.result_type(wg, xs))
    _column_blocks(wg, xs, out, POINTWISE_COLUMNS)
    return out


def product_columns(wb, mat, out, serial: bool = False) -> bool:
    """``np.matmul(wb, mat, out=out)`` of the compiled path's columns (``mat``: ``(rows,
    length)`` and more dimensions for a batch or groups, ``out`` the product's part of Y), made
    as :func:`pointwise_columns` makes its blocks where ``mat`` is two-dimensional (one image,
    one group) with at most :data:`POINTWISE_K` rows (B's ones row included: a 3-channel 3x3
    stem's 28) and at least :data:`POINTWISE_L` columns.  The blocks are made on this thread where
    ``serial`` (BLAS at one thread: a block of a split of the caller's), else split across the
    run's intra-op threads (:func:`_column_blocks`).  The same dot products (the same bits as one
    product, as there).  Returns whether it made blocks."""
    length, width = mat.shape[-1], POINTWISE_COLUMNS
    if mat.ndim != 2 or mat.shape[0] > POINTWISE_K or length < POINTWISE_L:
        np.matmul(wb, mat, out=out)
        return False
    if not serial:
        _column_blocks(wb, mat, out, width)
        return True
    for lo in range(0, length, width):
        np.matmul(wb, mat[:, lo:lo + width], out=out[:, lo:lo + width])
    return True


def split_columns(fn, args, ct, x4, w4, b1, o4, cols, xp, acc, has_bias) -> None:
    """The loop ``fn`` (:func:`onnxkit_cpu.compiled.conv.planes`, its trailing ``args``) filling
    the columns ``cols`` of ``x4``: for one image of one group split across the run's intra-op
    threads by input channel (a block writes its channels' rows of the columns, padding into a
    plane of its own off the caller's thread; B's ones row written after, once), else one call."""
    n, c = x4.shape[:2]
    taps = w4.shape[2] * w4.shape[3]
    if n != 1 or cols.shape[1] != 1:
        fn(x4, w4, b1, o4, cols, xp, acc, *args, has_bias)
        return

    def block(lo, hi):
        if lo == 0 and hi == c:
            fn(x4, w4, b1, o4, cols, xp, acc, *args, has_bias)
            return
        plane = xp if lo == 0 else np.zeros(xp.shape, ct)
        fn(x4[:, lo:hi], w4, b1, o4, cols[:, :, lo * taps:hi * taps], plane, acc, *args, False)

    if parallel_for(block, c, grain=max(1, PLANE_WORK // max(1, taps * cols.shape[3])), name="conv.im2col") > 1 \
            and has_bias:
        cols[:, :, c * taps] = 1


def split_depthwise(fn, args, ct, no_cols, x4, w4, b1, o4, xp, acc, has_bias) -> None:
    """The depthwise loop ``fn`` of ``x4`` into ``o4`` (``no_cols``: its empty columns), split
    across the run's intra-op threads by image (N > 1) or else by channel (each output plane
    computed alike whatever the split); a block off the caller's thread pads into planes of its own."""
    n, c, mg = x4.shape[0], x4.shape[1], o4.shape[1] // x4.shape[1]

    def block(lo, hi):
        own = (xp, acc) if lo == 0 else (np.zeros(xp.shape, ct), np.empty(acc.shape, ct))
        if lo == 0 and hi == (n if n > 1 else c):
            fn(x4, w4, b1, o4, no_cols, *own, *args, has_bias)
        elif n > 1:
            fn(x4[lo:hi], w4, b1, o4[lo:hi], no_cols, *own, *args, has_bias)
        else:
            fn(x4[:, lo:hi], w4[lo * mg:hi * mg], b1[lo * mg:hi * mg] if has_bias else b1,
               o4[:, lo * mg:hi * mg], no_cols, *own, *args, has_bias)

    items = n if n > 1 else c
    parallel_for(block, items, grain=max(1, PLANE_WORK // max(1, o4.size // items)), name="conv.depthwise")


#: the compiled path's blocks aim at columns of about this many bytes, so that a block's columns
#: (and its part of Y) stay in the core's L2 cache between the loop filling them and the
#: product reading them (a stem convolution with megabytes of columns runs faster in blocks)
CACHE_BYTES = 1 << 20

#: .. where a block of this many columns (output positions) fits them: narrower products lose
#: more in BLAS than the cache saves (a 14 x 14 output is not split in two blocks of 98
#: columns); where it does not, blocks as large as the shared buffer takes (:func:`cache_block_rows`)
MIN_COLUMNS = 384


def block_rows(n: int, group: int, rows: int, ow: int, itemsize: int, budget: int = None) -> int:
    """Output rows per block: the most whose columns fit ``budget`` bytes (default
    :data:`SHARED_BYTES`; one row at least)."""
    budget = SHARED_BYTES if budget is None else budget
    return max(1, budget // max(1, n * group * rows * ow * itemsize))


def cache_block_rows(n: int, group: int, rows: int, oh: int, ow: int, itemsize: int) -> int:
    """Output rows per block of the compiled path (``oh`` or more: one block): columns of about
    :data:`CACHE_BYTES` where a block of :data:`MIN_COLUMNS` output positions fits that, never
    more than :data:`SHARED_BYTES` of columns.  Where a block of :data:`MIN_COLUMNS` positions is
    itself larger than :data:`CACHE_BYTES` (many input channels times taps: the block cannot stay
    in L2 whatever its size), the blocks are the largest the shared buffer takes, of balanced sizes
    (magika's (2, 256, 512, 1) 5x1 convolution, 5 KiB of columns per position: one block rather
    than 384 + 124 positions)."""
    least = -(-MIN_COLUMNS // max(1, ow))
    widest = min(block_rows(n, group, rows, ow, itemsize), oh)
    if least * n * group * rows * ow * itemsize > CACHE_BYTES:
        count = -(-oh // widest)
        return -(-oh // count)
    return min(block_rows(n, group, rows, ow, itemsize, CACHE_BYTES), widest)     # >= least here


class RowBlocks:
    """The blocks of one Planes geometry (``plan``: the portable plan, two spatial axes; ``lo``
    / ``inner`` / ``padded``: :func:`~.conv_depthwise.pad_layout`'s; ``rows``: the columns' rows
    per group, B's ones row included; ``per``: output rows per block)."""

    def __init__(self, plan, lo, inner, padded, ct, rows: int, per: int):
        n, group, m = plan.n, plan.group, plan.m
        (oh_n, ow_n), (kh, _), (sh, sw), (dh, _) = plan.out_shape, plan.kernel, plan.strides, plan.dil
        top = plan.begin[0]                 # pad before row 0 (negative: rows X's first rows cropped)
        w0 = max(0, -plan.begin[1])
        h_in = inner[0] + max(0, -top)      # X rows up to the last one any window reads
        self.ct = np.dtype(ct)
        self.blocks = []
        geometries: dict = {}
        for oh0 in range(0, oh_n, per):
            oh1 = min(oh_n, oh0 + per)
            first, last = oh0 * sh - top, (oh1 - 1) * sh + (kh - 1) * dh - top   # X rows, unclipped
            r0, r1 = max(0, first), min(h_in, last + 1)
            key = (r0 - first, r1 - r0, last + 1 - r1, oh1 - oh0)
            if key not in geometries:
                b_lo, b_in, b_after, b_oh = key
                offs, xsize, _, pws = loops.layout(
                    (b_lo + b_in + b_after, padded[1]), (b_lo, lo[1]), (b_in, inner[1]), tuple(plan.kernel),
                    tuple(plan.strides), tuple(plan.dil), (b_oh, ow_n), False)
                geometries[key] = (len(geometries), offs, xsize, pws)
            g, offs, _, pws = geometries[key]
            length = (oh1 - oh0) * ow_n
            cols = (n, group, rows, length)
            mat = ((rows, length) if n == 1 else (n, rows, length)) if group == 1 else cols
            shape_only = np.empty((n, 0, oh1 - oh0, ow_n), ct)       # the loop reads OH, OW from it
            columns = Shared(cols, ct, lambda c, mat=mat: (c, c.reshape(mat)), threading.local())
            self.blocks.append((g, (offs, pws, sw, r0, w0, r1 - r0, inner[1]), shape_only, columns,
                                (Ellipsis, slice(oh0 * ow_n, oh1 * ow_n))))
        sizes = [v[2] for v in sorted(geometries.values())]
        self.omat = ((m, oh_n * ow_n) if n == 1 else (n, m, oh_n * ow_n)) if group == 1 else \
            (n, group, m // group, oh_n * ow_n)
        nbytes = sum(sizes) * self.ct.itemsize
        self.scratch = Scratch(lambda: ([np.zeros(s, ct) for s in sizes], np.empty(1, ct)), nbytes, threading.local())

    def __call__(self, fn, x, w4, b1, wb, out, has_bias: bool) -> None:
        """Y (``out``, fresh, C-contiguous) of C-contiguous X: every block's columns filled by
        ``fn`` and multiplied by ``wb`` into its columns of Y, the blocks split across the run's
        intra-op threads (:func:`~onnxkit.runtime.threads.parallel_for` with BLAS at one thread:
        each block's fill and product on one thread, in that thread's own planes and columns),
        every block's product made as at one thread, so Y does not depend on the count."""
        y = out.reshape(self.omat)
        todo = self.blocks

        def run(lo, hi):
            planes, acc = self.scratch.get()
            for g, args, shape_only, columns, part in todo[lo:hi]:
                cols, mat = columns.get()
                fn(x, w4, b1, shape_only, cols, planes[g], acc, *args, has_bias)
                product_columns(wb, mat, y[part], serial=True)

        parallel_for(run, len(todo), name="conv.row_blocks", blas=True)
