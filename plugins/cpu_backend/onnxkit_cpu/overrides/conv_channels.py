"""Depthwise convolutions on small maps computed in blocks of channels, for :mod:`.conv`'s
compiled path (:func:`onnxkit_cpu.compiled.conv_channels.loop`, the layout choice per
convolution shape).

The planes loop (:func:`onnxkit_cpu.compiled.conv.planes`) runs its vectors along an output
row; on a small map most of a vector is the row's tail and junk border columns.  Where
:func:`takes` says so the loop of :mod:`onnxkit_cpu.compiled.conv_channels` runs instead: the
vectors run along :data:`~onnxkit_cpu.compiled.conv_channels.CB` channels of one pixel (the
block's planes copied into a channels-last padded plane and the result copied back, per
block).  Taken where:

* the convolution is depthwise with channel multiplier 1 (``group = C = M``), float32, two
  spatial axes, a square 3x3 or 5x5 kernel with column stride 1 or 2 or a 7x7 kernel with
  column stride 1, column dilation 1 (any row stride, row dilation and pads), its kernel side
  and column stride known at planning (:func:`planned`: from ``kernel_shape`` or a constant W,
  and ``strides``), so that the plan loads that one loop;
* it has at least :data:`MIN_CHANNELS` channels; and
* its output rows are at most :data:`WIDTH` wide for its kernel side (on wider maps the planes
  loop's vectors are full and the two copies cost more than the channel vectors gain; with
  nine taps a pixel the copies outweigh the gain sooner than with 25 or 49).

Results are the planes loop's bits (the same sums in the same order: see that module).  The
``(image, channel block)`` items are split across the run's intra-op threads
(:func:`onnxkit.runtime.threads.parallel_for`, at least :data:`CHANNEL_WORK` multiply-adds a
thread), each thread with its own padded plane and accumulators; an item is computed alike
whatever the split, so every thread count gives the same bits.
"""

from __future__ import annotations

import threading

import numpy as np

from onnxkit.plugin import parallel_for

from ..compiled import conv_channels as loops
from .conv_depthwise import Scratch

#: per kernel side, output rows at most this wide take the channel blocks (0 or absent: never)
WIDTH = {3: 14, 5: 28, 7: 28}

#: .. where the convolution has at least this many channels
MIN_CHANNELS = loops.CB

#: multiply-adds (junk pixels included) worth a run of ``(image, channel block)`` items on an
#: intra-op thread of its own (a block's hand-off to a pool thread costs about as much as a small
#: map's whole convolution on a busy machine: only large ones are split)
CHANNEL_WORK = 1 << 19

#: (kernel side, column stride) pairs there is a loop for
PASSES = tuple(loops.LOOPS)


def planned(ctx):
    """``((kernel side, column stride), compiled loop)`` a Conv node may take (see the module
    docstring), or None: not a grouped node, its kernel unknown at planning or without a loop,
    or compiled loops off (:func:`onnxkit_cpu.compiled.conv_channels.loop`)."""
    if int(ctx.attr("group")) <= 1 or not WIDTH:
        return None
    kernel = ctx.attr("kernel_shape")
    if kernel is None and ctx.num_inputs > 1 and ctx.is_constant(1):
        w = ctx.constant(1)
        kernel = None if w is None or getattr(w, "ndim", 0) != 4 else tuple(w.shape[2:])
    strides = ctx.attr("strides") or (1, 1)
    if kernel is None or len(kernel) != 2 or len(strides) != 2 or kernel[0] != kernel[1]:
        return None
    key = (int(kernel[0]), int(strides[1]))
    if key not in PASSES:
        return None
    fn = loops.loop(*key)
    return None if fn is None else (key, fn)


def takes(plan, ct, key=None) -> bool:
    """Whether the depthwise convolution ``plan`` (computing in ``ct``) takes the channel
    blocks (see the module docstring; ``key``: :func:`planned`'s, which it must match)."""
    kernel, strides, dil = tuple(plan.kernel), tuple(plan.strides), tuple(plan.dil)
    return ((key is None or key == (kernel[0], strides[-1])) and len(kernel) == 2 and np.dtype(ct) == np.float32 and plan.group == plan.c == plan.m
            and kernel[0] == kernel[1] and (kernel[0], strides[1]) in PASSES and dil[1] == 1
            and plan.c >= MIN_CHANNELS and 0 < plan.out_shape[1] <= WIDTH.get(kernel[0], 0) and plan.out_shape[0] > 0)


class Channels:
    """The channel-block loop of one input shape (``fn``: the compiled
    :func:`~onnxkit_cpu.compiled.conv_channels.loop` of its kernel; ``plan``: the portable plan; ``lo`` /
    ``inner`` / ``padded``: :func:`~.conv_depthwise.pad_layout`'s; ``held``: the
    :class:`~._plans.Held` of W and of B).  W in the loop's layout, ``(blocks, K*K, CB)``, is
    kept while the same W comes back where it is held (it is a copy); B likewise, or while its
    layout is a view of it.  ``frozen``: :func:`.conv.read_only_view` (the loop gets read-only W
    and B whatever they were: one numba signature)."""

    def __init__(self, fn, plan, lo, inner, padded, ct, held, frozen):
        self.fn, self.ct, self.frozen = fn, np.dtype(ct), frozen
        self.w_held, self.b_held = held
        n, c = plan.n, plan.c
        k, (sh, _), (dh, _) = plan.kernel[0], plan.strides, plan.dil
        pwx, owr, xsize, asize = loops.layout(padded, plan.kernel, plan.strides, plan.dil, plan.out_shape)
        h0, w0 = (max(0, -v) for v in plan.begin)
        self.nblk = -(-c // loops.CB)
        self.k, self.c = k, c
        self.args = (pwx, int(sh), int(dh), lo[0], lo[1], h0, w0, inner[0], inner[1])
        self.out_full = (n, c, *plan.out_shape)
        self.items = n * self.nblk
        work = plan.out_shape[0] * owr * k * k * loops.CB
        self.grain = max(1, CHANNEL_WORK // max(1, work))
        nbytes = (xsize + asize) * self.ct.itemsize
        self.scratch = Scratch(lambda: (np.zeros(xsize, self.ct), np.empty(asize, self.ct)), nbytes, threading.local())
        self.cache = (None, None, None, None)

    def weights(self, w):
        """W ``(C, 1, K, K)`` as ``(blocks, K*K, CB)`` in the compute dtype, zero past the channels."""
        c, cb, taps = self.c, loops.CB, self.k * self.k
        wcl = np.zeros((self.nblk * cb, taps), self.ct)
        wcl[:c] = w.reshape(c, taps)
        return np.ascontiguousarray(wcl.reshape(self.nblk, cb, taps).transpose(0, 2, 1))

    def _prepared(self, w, b):
        """``(W in the loop's layout, B as (C,) or a dummy)``, kept while allowed."""
        cached = self.cache
        if cached[0] is w and cached[1] is b:
            return cached[2], cached[3]
        wcl = self.frozen(self.weights(w))
        b1 = self.frozen(np.zeros(1, self.ct) if b is None else np.ascontiguousarray(b.reshape(-1), dtype=self.ct))
        if self.w_held(w) and (b is None or self.b_held(b) or np.may_share_memory(b1, b)):
            self.cache = (w, b, wcl, b1)
        return wcl, b1

    def __call__(self, x, w, b):
        """The convolution of ``x`` (uncropped, any layout) plus ``b`` (or None): a fresh
        ``(N, C, OH, OW)`` array in the compute dtype."""
        wcl, b1 = self._prepared(w, b)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        out = np.empty(self.out_full, dtype=self.ct)
        has_bias = b is not None
        fn, args, scratch = self.fn, self.args, self.scratch

        def run(lo, hi):    # (image, channel block) items; each thread its own plane and accumulators
            xcl, acc = scratch.get()
            fn(x, wcl, b1, out, xcl, acc, *args, lo, hi, has_bias)

        parallel_for(run, self.items, grain=self.grain, name="conv.channels")
        return out

