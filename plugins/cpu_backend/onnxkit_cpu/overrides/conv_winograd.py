"""The Winograd F(2x2, 3x3) path of the cpu Conv (:mod:`onnxkit_cpu.compiled.winograd`: the
algorithm, its transforms and its rounding).

**When** (:meth:`Winograd.takes`, decided at planning per input shape): float32 / float64, two
spatial axes, a 3x3 kernel, strides and dilations 1, one group, pads >= 0, at least
:data:`MIN_CHANNELS` input channels, :data:`MIN_OUTPUTS` output channels and :data:`MIN_TILES`
output tiles, and a block of :data:`MIN_BLOCK_TILES` tiles within the thread's shared buffer
(:data:`~.conv_depthwise.SHARED_BYTES`; thousands of channels: the im2col path, whose blocks
are smaller).  These thresholds are where it is faster than the im2col path; at 16 input
channels or on 7 x 7 outputs (16 tiles) it is no faster, on 8 channels slower: those keep the
im2col path.

**A call** (:meth:`Winograd.__call__`): returns None where the data may not take it (weights or
input not finite or above :data:`~onnxkit_cpu.compiled.winograd.LIMIT` in magnitude: the caller
then runs the im2col path, the same result as without this module); else per image and block
of tile rows (about :data:`BLOCK_BYTES` of transformed input and products, :data:`MIN_BLOCK_TILES`
tiles at least, so that a block's transforms and products stay in the core's cache): the band
of padded rows the block's tiles read (zeros, X's rows copied in), the input transform, the 16
products ``U[k] @ V[k]`` (one batched ``np.matmul``) and the output transform with B into that
block's rows of a fresh Y.  An image's blocks are of balanced sizes, and an even number of them
where each then still has :data:`MIN_BLOCK_TILES` tiles (one block becomes two), so that two
intra-op threads share it evenly; the blocks are split across
the run's intra-op threads with BLAS at one thread (:func:`onnxkit.plugin.parallel_for`, ``blas``):
they depend on the shape alone, so Y does not depend on the thread count.  The 16 transformed matrices of a block lie in one buffer at a
stride that is not a multiple of 4 KiB (:func:`slab_stride`): at such a stride the 16 streams the
transforms read or write fall in one L1 cache set, which makes the transforms several times
slower.

Results agree with the direct correlation to float rounding (max relative error 3e-7 of the
outputs' magnitude seen on (64, 56, 56) float32 against a float64 reference), within Clause 11's
tolerances, not bit for bit.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from numpy.lib.stride_tricks import as_strided

from onnxkit.plugin import parallel_for

from ..compiled import winograd as loops
from . import conv_depthwise
from ._plans import NOT_HELD
from .conv_depthwise import Shared

#: Winograd needs at least this many input channels (16: no faster than im2col, the transforms
#: cost what the thinner products save)
MIN_CHANNELS = 24
#: .. this many output channels
MIN_OUTPUTS = 16
#: .. and this many 2x2 output tiles per image (a 7 x 7 output has 16: slower than im2col)
MIN_TILES = 25
#: transformed input and products of a block of tile rows, about (bytes): they stay in L2
BLOCK_BYTES = 3 << 19
#: .. but at least this many tiles per block where the image has them
MIN_BLOCK_TILES = 128


def slab_stride(rows: int, cols: int) -> int:
    """Elements from one of 16 ``(rows, cols)`` matrices to the next in a block's buffer: their
    size rounded up to 1024, plus 16, so that consecutive matrices start 64 bytes (float32)
    further into a 4 KiB page rather than at the same offset."""
    return -(-rows * cols // 1024) * 1024 + 16


def slabs(flat, rows: int, cols: int, stride: int):
    """The 16 ``(rows, cols)`` C-contiguous matrices ``stride`` elements apart in ``flat``, as one
    ``(16, rows, cols)`` view (for the batched ``np.matmul``)."""
    size = flat.itemsize
    return as_strided(flat, (16, rows, cols), (stride * size, cols * size, size), writeable=True)


class Winograd:
    """The Winograd path of one Conv input shape (``plan``: the portable plan; ``ct``: the compute
    dtype, X's; ``local``: a ``threading.local`` of its own; ``fns``: the compiled
    ``(input_tiles, output_tiles)``).  Its scratch is the thread's buffer that every convolution
    shares (:class:`~.conv_depthwise.Shared`): per block, the band of padded input rows its tiles
    read (zeroed, then X's rows copied in), the transformed input, the products and the output
    transform's four rows."""

    @staticmethod
    def takes(plan, in_shape, ct) -> bool:
        """Whether this input shape takes the Winograd path (module docstring)."""
        if (plan.group != 1 or tuple(plan.kernel) != (3, 3) or tuple(plan.strides) != (1, 1)
                or tuple(plan.dil) != (1, 1) or min(*plan.begin, *plan.end) < 0 or len(in_shape) != 2):
            return False
        if np.dtype(ct) not in (np.dtype(np.float32), np.dtype(np.float64)):
            return False
        oh, ow = plan.out_shape
        tc = -(-ow // 2)
        tiles = -(-oh // 2) * tc
        fewest = min(tiles, tc * -(-MIN_BLOCK_TILES // tc))       # a block's tiles, at the least
        scratch = 16 * (plan.c + plan.m) * fewest * np.dtype(ct).itemsize
        return (plan.c >= MIN_CHANNELS and plan.m >= MIN_OUTPUTS and tiles >= MIN_TILES
                and scratch <= conv_depthwise.SHARED_BYTES)        # else im2col, whose blocks are smaller

    def __init__(self, plan, in_shape, ct, local, fns, held=NOT_HELD):
        self.fn_in, self.fn_out = fns
        self.held = held        # W's Held (a constant of the plan, or the plan's default): U is kept
        self.ct = ct = np.dtype(ct)
        self.n, self.c, self.m = n, c, m = plan.n, plan.c, plan.m
        self.h, self.w = in_shape
        self.top, self.left = plan.begin
        oh, ow = plan.out_shape
        self.out_full = (n, m, oh, ow)
        tr, tc = -(-oh // 2), -(-ow // 2)
        self.tc = tc
        per = BLOCK_BYTES // (16 * (c + m) * tc * ct.itemsize)
        per = min(max(per, -(-MIN_BLOCK_TILES // tc), 1), tr)
        count = -(-tr // per)
        if count % 2 and tr > count and -(-tr // (count + 1)) * tc >= MIN_BLOCK_TILES:
            count += 1          # an even count: two intra-op threads share the image evenly
        per = -(-tr // count)   # balanced blocks (the shape alone decides them: the same bits at any count)
        self.blocks = [(t0, min(tr, t0 + per)) for t0 in range(0, tr, per)]
        band = (c, 2 * per + 2, 2 * tc + 2)
        tiles = per * tc
        sv, sm = slab_stride(c, tiles), slab_stride(m, tiles)
        sizes = (math.prod(band), 16 * sv, 16 * sm, 4 * tiles)
        offsets = np.cumsum((0,) + tuple(-(-v // 16) * 16 for v in sizes))

        def views(flat):
            parts = [flat[a:a + v] for a, v in zip(offsets, sizes)]
            return (parts[0].reshape(band), slabs(parts[1], c, tiles, sv), slabs(parts[2], m, tiles, sm),
                    parts[1], parts[2], parts[3].reshape(4, tiles))
        self.shared = Shared((int(offsets[-1]),), ct, views, local)
        self.strides, self.tiles = (sv, sm), tiles      # the 16 matrices' spacing; their row length
        self.cache = (None, None)
        self.no_bias = np.zeros(1, ct)

    def weights(self, w):
        """``U`` (``(16, M, C)``) of ``w``, or False where ``w`` may not take this path (not finite or
        above :data:`~onnxkit_cpu.compiled.winograd.LIMIT`); kept while the same ``w`` comes back
        where the plan holds it (``held``: :class:`~._plans.Held`), made again each call otherwise."""
        cached = self.cache
        if cached[0] is w:
            return cached[1]
        big = np.max(np.abs(w)) if w.size else 0.0
        u = loops.weight_tiles(w, self.ct) if big <= loops.LIMIT else False     # NaN: False
        if self.held(w):
            self.cache = (w, u)
        return u

    def __call__(self, x, w, b):
        """Y (a fresh C-contiguous array) or None where X or W may not take this path."""
        u = self.weights(w)
        if u is False:
            return None
        if not (-loops.LIMIT <= np.min(x) and np.max(x) <= loops.LIMIT):      # NaN: not taken
            return None
        b1 = self.no_bias if b is None else np.ascontiguousarray(b.reshape(-1), dtype=self.ct)
        (sv, sm), tiles = self.strides, self.tiles
        y = np.empty(self.out_full, self.ct)
        fn_in, fn_out, top, left, h, wd = self.fn_in, self.fn_out, self.top, self.left, self.h, self.w
        work = [(n, t0, t1) for n in range(self.n) for t0, t1 in self.blocks]

        def run(lo, hi):
            """Blocks ``work[lo:hi]`` (split across the run's intra-op threads; each block alike),
            in the running thread's own buffers."""
            band, v, mm, v_flat, mm_flat, outs = self.shared.get()
            for n, t0, t1 in work[lo:hi]:
                xn, yn = x[n], y[n]
                # padded rows 2 t0 .. 2 t1 + 1 are X's rows 2 t0 - top .. (those inside X copied)
                r0, r1 = max(0, 2 * t0 - top), min(h, 2 * t1 + 2 - top)
                band.fill(0)
                if r1 > r0:
                    band[:, r0 + top - 2 * t0:r1 + top - 2 * t0, left:left + wd] = xn[:, r0:r1]
                count = (t1 - t0) * self.tc
                vb, mb = v[:, :, :count], mm[:, :, :count]
                fn_in(band, v_flat, sv, tiles, t1 - t0)
                np.matmul(u, vb, out=mb)
                fn_out(mm_flat, sm, tiles, yn, b1, outs, t0, t1, b is not None)

        parallel_for(run, len(work), name="conv.winograd", blas=True)
        return y
