"""cpu fast path of Conv: everything a call needs is prepared once per node and input-shape
key, so a call does only array work.

Per key ``(X shape and dtype, W shape and dtype, B shape and dtype)`` the first call runs the
portable checks (:func:`onnxkit_default_domain.kernels.conv.prepare`: element types, ranks,
channels, groups, kernel, B's size; the same errors) and builds a :class:`Prepared`: the
checked plan, the crop (negative pads) and interior slices of a zero-bordered padded buffer,
and per thread (``threading.local``) that buffer, its window view (built once over it) and the
column buffer, so a call is: copy X into the buffer's interior (casting a narrow float to
float32 on the way), one copy of the window view into the columns, one matrix product, the
bias added in place.  W in its product layout and B as ``(M, 1...)`` in the compute dtype are
kept while the same array objects come back where the planner declares the input a constant of
the plan (:meth:`onnxkit.plugin.NodeContext.is_constant`: an initializer, a folded value) or the
object is the plan's own default for it (``ctx.default``; both read once, by the factory:
:class:`~._plans.Held`), or where the layout is a view of the input (it sees any change made in
place), made again each call otherwise.

The products are the portable kernel's (:func:`~onnxkit_default_domain.kernels.conv.conv_nd`:
``(M, C*K) @ (C*K, L)``, grouped ``(G, Mg, Cg*K) @ (N, G, Cg*K, L)``, 1x1 a plain product, of few
channels over many positions in blocks of columns: :func:`.conv_blocks.pointwise_columns`).
Where every stride is 1 (two spatial axes or more) and the product is small (:data:`FLAT_MACS`)
the columns are rows of the flattened padded image (:class:`~.conv_depthwise.PaddedWindows`:
long copy runs) and the product has a few junk columns more, so
BLAS may sum a dot product in another order than for the portable kernel's ``L``: results
agree with it to float rounding (up to 7e-6 relative seen in float32); bit-identical
otherwise.  Depthwise convolutions go through
:mod:`.conv_depthwise`.  Where the windows tile X (kernel = stride, no pads, no dilation, one
group: a ViT patch embedding) the columns are X's patches by one copy (:class:`~.conv_patches.Patches`), but
where the compiled path below can run and a window row is shorter than :data:`PATCH_RUN` (the
2x2 / 4x4 patch embeddings and downsamplings of ConvNeXt-like and Swin-like models): there the
patches' transposed result costs more than the loop's columns.
Empty shapes take the portable kernel.  Columns that would exceed the thread's shared buffer
(:data:`~.conv_depthwise.SHARED_BYTES`) are made and multiplied a block of output rows at a time
(:meth:`Prepared._blocked_columns`; the compiled path's blocks already from
:data:`~.conv_blocks.CACHE_BYTES` on, so that they stay in L2: :mod:`.conv_blocks`), so a
convolution's scratch stays bounded whatever its input's size.

**Compiled path** (:class:`Planes`, :func:`onnxkit_cpu.compiled.conv.planes`, taken at planning
where :func:`onnxkit_cpu.compiled.enabled`; else everything above): float32 / float64 X (no
narrow float), one or two spatial axes, and

* every *depthwise* convolution (any kernel, strides, dilations, pads, channel multiplier):
  the loop computes it (faster than the numpy body); on a small map of many channels
  (:func:`.conv_channels.takes`: the layout choice per convolution shape) the loop of
  :mod:`onnxkit_cpu.compiled.conv_channels` instead, its vectors along blocks of channels
  (kind ``channels``: the same bits as the planes loop);
* a grouped or plain product on *two* spatial axes with more than one output row: the loop
  fills the columns (B as a ones row), one ``np.matmul`` writes Y (of few rows over many
  columns: in blocks of columns, :func:`.conv_blocks.product_columns`; faster on the corpus'
  small convolutions and on stride-2 stems; with a single output row (or one spatial axis:
  silero's conv1d) the columns are so short that the loop's per-channel cost is no less than
  numpy's, so those keep the numpy body).

Results agree with the numpy body to float rounding (summation order: see that module),
within Clause 11's tolerances, not bit for bit.

**Winograd** (:mod:`.conv_winograd`, on the compiled path): a 3x3 stride-1 convolution of one
group with enough channels and output tiles is computed by F(2x2, 3x3), 2.25x fewer
multiply-adds; data it may not take
(non-finite or huge values) runs the planes path above.

**Which body** runs for each key is reported (:func:`onnxkit.plugin.reports_bodies`:
``portable``, ``pointwise``, ``patches``, ``planes``, ``channels``, ``winograd``, ``depthwise``, ``columns`` or
``line`` (a small 1-D ``columns`` product whose columns :mod:`.conv_line` gathers: the same bits),
the :class:`Prepared` kinds above; read by :mod:`onnxkit.runtime.bodies`, printed by
``onnxkit run --profile``), by the fused epilogue kernel too.

**float16 / bfloat16** X, W and B (an epilogue's Add operand too) run every body above on their
values widened to float32 (W and B once where held: :class:`~.half.Wide`), Y rounded once to
their type (:mod:`.half`: Clause 11.4); a Clip epilogue's half bounds keep the half path.

**Epilogues** (:mod:`onnxkit.runtime.optimizer.epilogue`): the kernel offers ``fuse_epilogue``;
the fused kernel (:func:`.conv_epilogue.epilogue`) applies a following Relu, Add, Add + Relu,
Clip with constant bounds or Add + Clip to its own fresh result, by one compiled pass where it
can (each prepared call's ``fused``; a Clip after it in place), else in place by numpy;
bit-identical to the separate kernels (see that module); a Swish written as ``Mul(y, Sigmoid(y))``
by the node's own kernel, the Sigmoid's, then the product into the Sigmoid's fresh result
(:func:`.conv_epilogue.swish`).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from onnxkit.plugin import KernelTable, offers_epilogue, reports_bodies

from onnxkit_default_domain.api import conv as portable
from onnxkit_default_domain.api import input_type_checker, quiet

from ..compiled import conv as loops, winograd as winograd_loops
from ._plans import NOT_HELD, Held
from .half import Halves, Wide, is_half, narrow, widen
from .conv_blocks import (CACHE_BYTES, RowBlocks, block_rows, cache_block_rows, pointwise_columns, product_columns,
                          split_columns, split_depthwise, takes_pointwise_columns)
from .conv_epilogue import NO_BIAS, epilogue, finish_rows, operand, swish
from .conv_winograd import Winograd
from .conv_depthwise import Depthwise, PaddedWindows, Scratch, Shared, pad_layout, split_copy, window_view
from . import conv_channels, conv_line
from .conv_patches import Patches, tiles

KERNELS = KernelTable()

_ALL = (slice(None), slice(None))

#: compute dtypes of the compiled path (:class:`Planes`)
_COMPILED = (np.dtype(np.float32), np.dtype(np.float64))

#: tiling windows (:func:`tiles`) whose rows are shorter than this take the compiled path where it
#: can run (its columns' fill beats the patches' transposed result there), :class:`Patches` otherwise
PATCH_RUN = 8

#: a convolution's columns are rows of the flattened padded image where one image's product has at most
#: this many multiply-adds (and every stride is 1)
FLAT_MACS = 1 << 20


def strided_columns(xp, xpad, kernel, strides, dil, out_shape):
    """:func:`onnxkit_default_domain.kernels.conv.columns` by one copy of :func:`window_view`."""
    n, c = xpad.shape[:2]
    view = window_view(np.asarray(xpad), kernel, strides, dil, out_shape)
    return np.ascontiguousarray(view).reshape(n, c, -1, *out_shape)


def add_into(y, bias):
    """``y += bias``: ``y`` is the kernel's own fresh product, never an input."""
    y += bias
    return y


def kept(held: bool, v, derived) -> bool:
    """Whether ``derived`` (made from input ``v``) may be reused while ``v`` is the same object:
    ``v`` is ``held`` by the plan (:class:`~._plans.Held`: a constant the planner declared, or the
    plan's own default) or ``derived`` views ``v``'s memory (and so sees any change a caller
    makes in place between runs)."""
    return held or np.may_share_memory(derived, v)


def read_only_view(a):
    """A read-only view of ``a`` (``a`` itself unchanged): the compiled loops get one array type
    (numba compiles per writeable flag), whatever the input was."""
    v = a.view()
    v.flags.writeable = False
    return v


class Planes:
    """The compiled path of one input shape (:func:`onnxkit_cpu.compiled.conv.planes`, ``fn``):
    a depthwise convolution (one or two spatial axes) computed by the loop, or a two-axis
    product whose columns the loop fills (bias as a ones row) before one ``np.matmul`` into Y.
    ``lo`` / ``inner`` / ``padded``: :func:`~.conv_depthwise.pad_layout`'s; X is read uncropped
    (the loop skips what negative pads crop).  The padded plane and accumulators are the
    thread's (``local``); the columns are the thread's one buffer that every convolution shares
    (:class:`~.conv_depthwise.Shared`: it stays in cache), and where they would not fit it the
    product is made in blocks of output rows (:mod:`.conv_blocks`).  W (with B as its last
    column for the product) is kept while the same arrays come back (:func:`kept`; ``held``: the
    :class:`~._plans.Held` of W and of B)."""

    def __init__(self, fn, plan, in_shape, lo, inner, padded, ct, local, depthwise, bias, finish=None,
                 held=(NOT_HELD, NOT_HELD)):
        self.fn, self.ct, self.depthwise, self.finish = fn, ct, depthwise, finish
        self.w_held, self.b_held = held
        self.channels = None        # a depthwise convolution on a small map: conv_channels.Channels
        n, c, m, group = plan.n, plan.c, plan.m, plan.group
        one = (1,) * (2 - len(plan.kernel))           # one spatial axis: H = KH = 1
        zero = (0,) * len(one)
        kernel, out = one + tuple(plan.kernel), one + tuple(plan.out_shape)
        offs, xsize, asize, pws = loops.layout(one + tuple(padded), zero + tuple(lo), one + tuple(inner), kernel,
                                               one + tuple(plan.strides), one + tuple(plan.dil), out, depthwise)
        h0, w0 = (max(0, -v) for v in zero + tuple(plan.begin))
        self.args = (offs, pws, int(plan.strides[-1]), h0, w0, *(one + tuple(inner)))
        self.x4, self.w4 = (n, c, *(one + tuple(in_shape))), (m, c // group, *kernel)
        self.out_full, self.o4 = (n, m, *plan.out_shape), (n, m, *out)
        self.rows = (n * m, math.prod(plan.out_shape))
        self.reshape = len(plan.kernel) == 1
        self.cache = (None, None, None)
        length, rows = math.prod(out), (c // group) * math.prod(kernel) + bias
        cols = (0, 0, 0, 0)
        if not depthwise:
            cols = (n, group, rows, length)
            self.w_shape = (m, rows - bias) if group == 1 else (group, m // group, rows - bias)
            self.mat = ((rows, length) if n == 1 else (n, rows, length)) if group == 1 else cols
            self.omat = ((m, length) if n == 1 else (n, m, length)) if group == 1 else (n, group, m // group, length)
        nbytes = (xsize + asize) * np.dtype(ct).itemsize
        self.scratch = Scratch(lambda: (np.zeros(xsize, self.ct), np.empty(asize, self.ct)), nbytes, local)
        self.columns = None if depthwise else Shared(cols, ct, lambda c: (c, c.reshape(self.mat)), local)
        self.no_columns = (np.empty((0, 0, 0, 0), ct), None)     # depthwise: no columns
        self.blocks = None
        if not depthwise and not self.reshape and math.prod(cols) * np.dtype(ct).itemsize > CACHE_BYTES:
            per = cache_block_rows(n, group, rows, out[0], out[1], np.dtype(ct).itemsize)
            if per < out[0]:
                self.blocks = RowBlocks(plan, lo, inner, padded, ct, rows, per)

    def _prepared(self, w, b):
        """``(W for the loop, B (M,) or a dummy, W for the product or None)``, kept while allowed."""
        ct = self.ct
        w4 = np.ascontiguousarray(w.reshape(self.w4), dtype=ct)
        b1 = np.zeros(1, ct) if b is None else np.ascontiguousarray(b.reshape(-1), dtype=ct)
        wb = None
        keep = kept(self.w_held(w), w, w4) and (b is None or kept(self.b_held(b), b, b1))
        if not self.depthwise:
            wb = w4.reshape(self.w_shape)
            if b is not None:
                wb = np.concatenate([wb, b1.reshape(self.w_shape[:-1] + (1,))], axis=-1)
                keep = self.w_held(w) and self.b_held(b)      # wb is a copy of both
        w4, b1 = read_only_view(w4), read_only_view(b1)   # one numba signature whatever W / B are
        if keep:
            self.cache = (w, b, (w4, b1, wb))
        return w4, b1, wb

    def __call__(self, x, w, b):
        if self.channels is not None:
            return self.channels(x, w, b)
        cached = self.cache
        w4, b1, wb = cached[2] if cached[0] is w and cached[1] is b else self._prepared(w, b)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        out = np.empty(self.out_full, dtype=self.ct)
        if self.blocks is not None:
            self.blocks(self.fn, x, w4, b1, wb, out, b is not None)
            return out
        xp, acc = self.scratch.get()
        if self.columns is None:    # depthwise: images, or one image's channels, split across threads
            x4, o4 = (x.reshape(self.x4), out.reshape(self.o4)) if self.reshape else (x, out)
            self._depthwise(x4, w4, b1, o4, xp, acc, b is not None)
            return out
        cols, mat = self.columns.get()
        x4, o4 = (x.reshape(self.x4), out.reshape(self.o4)) if self.reshape else (x, out)
        self._columns(x4, w4, b1, o4, cols, xp, acc, b is not None)
        if mat is not None:
            product_columns(wb, mat, out.reshape(self.omat))
        return out

    def _columns(self, x4, w4, b1, o4, cols, xp, acc, has_bias):
        """The loop's im2col (:func:`.conv_blocks.split_columns`)."""
        split_columns(self.fn, self.args, self.ct, x4, w4, b1, o4, cols, xp, acc, has_bias)

    def _depthwise(self, x4, w4, b1, o4, xp, acc, has_bias):
        """The depthwise loop (:func:`.conv_blocks.split_depthwise`)."""
        split_depthwise(self.fn, self.args, self.ct, self.no_columns[0], x4, w4, b1, o4, xp, acc, has_bias)

    def fused(self, x, w, b, r, side, relu):
        """The convolution with an epilogue (:mod:`.conv_epilogue`) applied by one compiled pass
        (:func:`onnxkit_cpu.compiled.conv.finish`; B is inside the product), or None, computing
        nothing, where that pass cannot run."""
        fin = self.finish
        r2 = False if fin is None else operand(r, self.out_full, self.ct, self.rows)
        if r2 is False:
            return None
        y = self(x, w, b)
        finish_rows(fin, y.reshape(self.rows), NO_BIAS[self.ct], r2, side, relu)
        return y


class Prepared:
    """One input-shape key of a Conv node, ready to run (see the module docstring).  ``kind``:
    ``"pointwise"`` (1x1, no pads: a product of X itself), ``"columns"`` (im2col into the
    thread's buffers), ``"patches"`` (:class:`Patches`), ``"depthwise"``, ``"planes"`` (the
    compiled path, :class:`Planes`; ``fn``: the compiled loop or None, ``bias``: whether B is
    given), ``"winograd"`` (:class:`~.conv_winograd.Winograd`, with :class:`Planes` for the data
    it declines) or ``"portable"`` (empty shapes).  ``finish``: the compiled epilogue pass
    (:func:`onnxkit_cpu.compiled.conv.finish`) or None; kept where the convolution computes in
    its output's float32 / float64.  ``held``: the :class:`~._plans.Held` of W and of B (what
    is derived from them is kept where it says so: :func:`kept`)."""

    def __init__(self, plan, in_shape, ct, out_dtype, fn=None, bias=False, finish=None, winograd=None,
                 held=(NOT_HELD, NOT_HELD), channels=None):
        self.plan, self.ct, self.out_dtype = plan, ct, out_dtype
        self.w_held, self.b_held = held
        self.finish = finish if ct == out_dtype and ct in _COMPILED else None
        n, c, m, group = plan.n, plan.c, plan.m, plan.group
        nd = len(plan.kernel)
        cg, mg = c // group, m // group
        kp, length = math.prod(plan.kernel), math.prod(plan.out_shape)
        self.out_full = (n, m, *plan.out_shape)
        self.rows = (n * m, length)
        self.bf_cache = (None, None)
        self.bias_shape = (m,) + (1,) * nd
        self.w_cache = (None, None)
        self.b_cache = (None, None)
        self.local = threading.local()
        self.crop, lo, inner, padded = pad_layout(in_shape, plan.begin, plan.end)
        if n == 0 or c == 0 or m == 0 or length == 0 or kp == 0:
            self.kind = "portable"
            return
        if kp == 1 and not any(plan.begin) and not any(plan.end):
            self.kind = "pointwise"
            self.sub = None if all(s == 1 for s in plan.strides) else _ALL + tuple(
                slice(0, (o - 1) * s + 1, s) for o, s in zip(plan.out_shape, plan.strides))
            self.x_shape = ((c, length) if n == 1 else (n, c, length)) if group == 1 else (n, group, cg, length)
            self.w_shape = (m, c) if group == 1 else (group, mg, cg)
            self.pw_blocks = takes_pointwise_columns(group, c, length, self.sub is not None)
            return
        depthwise = cg == 1 and group > 1
        compiled = fn is not None and nd <= 2 and ct == out_dtype and ct in _COMPILED
        if tiles(plan) and not (compiled and nd == 2 and plan.out_shape[0] > 1 and plan.kernel[-1] < PATCH_RUN):
            self.kind = "patches"
            self.patches = Patches(plan, in_shape, ct, self.local)
            return
        if compiled and (depthwise or (nd == 2 and plan.out_shape[0] > 1)):
            self.kind = "planes"
            self.planes = Planes(fn, plan, in_shape, lo, inner, padded, ct, self.local, depthwise, bias, self.finish,
                                 held)
            if depthwise and channels is not None and conv_channels.takes(plan, ct, channels[0]):
                self.kind = "channels"      # a small map: vectors along channels (the same bits)
                self.planes.channels = conv_channels.Channels(channels[1], plan, lo, inner, padded, ct, held,
                                                               read_only_view)
            if winograd is not None and Winograd.takes(plan, in_shape, ct):
                self.kind = "winograd"      # the planes path stays for data Winograd declines
                # a threading.local of its own: Shared keeps its views there, as the planes' columns do
                self.winograd = Winograd(plan, in_shape, ct, threading.local(), winograd, self.w_held)
            return
        # flat rows: always for a depthwise product (the copy is its cost), else only for small
        # products, where the copy dominates (on larger ones the few junk columns slow BLAS more
        # than the longer copy runs gain).  Decided
        # by one image's product, so an image's result does not depend on the batch it is in.
        windows = PaddedWindows(plan, lo, inner, padded, depthwise or m * cg * kp * length <= FLAT_MACS)
        if depthwise:
            self.kind = "depthwise"
            self.depthwise = Depthwise(windows, ct, self.local)
            return
        self.kind = "columns"
        self.windows = windows
        length = windows.length
        self.w_shape = (m, cg * kp) if group == 1 else (group, mg, cg * kp)
        mat = ((cg * kp, length) if n == 1 else (n, cg * kp, length)) if group == 1 else (n, group, cg * kp, length)
        self.col_blocks = None
        out0, rest = plan.out_shape[0], math.prod(plan.out_shape[1:])
        per = block_rows(n, c, kp, rest, np.dtype(ct).itemsize)
        if per >= out0 and conv_line.takes(plan, depthwise):    # a small 1-D convolution: one gather
            self.kind = "line"
            self.line = conv_line.Line(plan, lo, inner, ct, self.local)
            return
        if windows.flat or per >= out0:
            nbytes = (n * c * windows.size + n * c * kp * length) * np.dtype(ct).itemsize
            self.scratch = Scratch(lambda: self._columns_scratch(mat), nbytes, self.local)
        else:      # columns over the shared buffer: blocks of output rows
            self.scratch = Scratch(lambda: self.windows.make(self.ct), n * c * windows.size * np.dtype(ct).itemsize,
                                   self.local)
            self.col_blocks = []
            for o0 in range(0, out0, per):
                o1 = min(out0, o0 + per)
                shape = (n, c, *plan.kernel, o1 - o0, *plan.out_shape[1:])
                bmat = mat[:-1] + ((o1 - o0) * rest,)
                part = (slice(None),) * (2 + nd) + (slice(o0, o1),)
                self.col_blocks.append((part, Shared(shape, ct, lambda cb, bmat=bmat: (cb, cb.reshape(bmat)),
                                                     threading.local())))

    def _columns_scratch(self, mat):
        """``(buffer interior, window view, columns, columns as the product's matrix)``."""
        interior, view = self.windows.make(self.ct)
        cols = np.empty(view.shape, dtype=self.ct)
        return interior, view, cols, cols.reshape(mat)

    def _blocked_columns(self, x, wg, bias):
        """The ``columns`` product a block of output rows at a time (:attr:`col_blocks`: where the
        whole columns would exceed the shared buffer, as :mod:`.conv_blocks` for the compiled
        path): each block's windows copied into the thread's shared buffer, one ``np.matmul``
        into that block's rows of Y (a view: the block's trailing extents are contiguous)."""
        interior, view = self.scratch.get()
        interior[...] = x
        plan = self.plan
        n, m, group = plan.n, plan.m, plan.group
        out = np.empty(self.out_full, dtype=self.ct)
        for part, shared in self.col_blocks:
            cols, mat = shared.get()
            split_copy(cols, view[part])
            rows = out[part[:2] + (part[-1],)]
            target = rows.reshape((m, -1) if n == 1 else (n, m, -1)) if group == 1 else rows.reshape(n, group, m // group, -1)
            np.matmul(wg, mat, out=target)
        if bias is not None:
            out += bias
        return out

    def weights(self, w):
        """W in this kind's product layout (kept: see :func:`kept`)."""
        cached = self.w_cache
        if cached[0] is w:
            return cached[1]
        if self.kind == "depthwise":
            wg = self.depthwise.weights(w)
            if kept(self.w_held(w), w, wg[0]):
                self.w_cache = (w, wg)
            return wg
        if self.kind == "patches":
            wt = self.patches.weights(w)
            if kept(self.w_held(w), w, wt):
                self.w_cache = (w, wt)
            return wt
        wg = w.reshape(self.w_shape).astype(self.ct, copy=False)
        if kept(self.w_held(w), w, wg):
            self.w_cache = (w, wg)
        return wg

    def bias(self, b):
        """B as ``(M, 1...)`` in the compute dtype (kept: see :func:`kept`)."""
        cached = self.b_cache
        if cached[0] is b:
            return cached[1]
        bias = b.reshape(self.bias_shape).astype(self.ct, copy=False)
        if kept(self.b_held(b), b, bias):
            self.b_cache = (b, bias)
        return bias

    def b_flat(self, b):
        """B as ``(M,)`` in the compute dtype, kept as :meth:`bias` keeps its layout."""
        cached = self.bf_cache
        if cached[0] is b:
            return cached[1]
        flat = np.ascontiguousarray(b.reshape(-1), dtype=self.ct)
        if kept(self.b_held(b), b, flat):
            self.bf_cache = (b, flat)
        return flat

    def _pointwise(self, x, wg):
        """The 1x1 product ``W @ X`` (a fresh array in the product's shape, no B)."""
        xs = (x if self.sub is None else x[self.sub]).astype(self.ct, copy=False).reshape(self.x_shape)
        return pointwise_columns(wg, xs) if self.pw_blocks else np.matmul(wg, xs)

    def fused(self, x, w, b, r, side, relu):
        """The convolution with an epilogue (:mod:`.conv_epilogue`) applied by one compiled pass
        (:func:`onnxkit_cpu.compiled.conv.finish`; on the 1x1 path B too, left out of the product),
        or None, computing nothing, where that pass cannot run."""
        fin = self.finish
        r2 = False if fin is None or self.kind == "portable" else operand(r, self.out_full, self.ct, self.rows)
        if r2 is False:
            return None
        if self.kind == "pointwise" and b is not None:
            cached = self.w_cache
            y = self._pointwise(x, cached[1] if cached[0] is w else self.weights(w))
            if not y.flags.c_contiguous:  # matmul keeps a non-contiguous X's layout: a reshape would copy
                y = np.ascontiguousarray(y)
            finish_rows(fin, y.reshape(self.rows), self.b_flat(b), r2, side, relu)
            return y.reshape(self.out_full)
        y = self(x, w, b)
        if not y.flags.c_contiguous:      # (every kind's result is: a reshape must be a view of it)
            y = np.ascontiguousarray(y)
        finish_rows(fin, y.reshape(self.rows), NO_BIAS[self.ct], r2, side, relu)
        return y

    def __call__(self, x, w, b):
        """The convolution (a fresh array)."""
        if self.kind == "planes":
            return self.planes(x, w, b)
        if self.kind == "winograd":
            y = self.winograd(x, w, b)
            return self.planes(x, w, b) if y is None else y
        cached = self.w_cache
        wg = cached[1] if cached[0] is w else self.weights(w)
        bias = None
        if b is not None:
            cached = self.b_cache
            bias = cached[1] if cached[0] is b else self.bias(b)
        if self.crop is not None:
            x = x[self.crop]
        kind = self.kind
        if kind == "line":
            y = self.line(x, wg, bias)
        elif kind == "columns" and self.col_blocks is not None:
            y = self._blocked_columns(x, wg, bias)
        elif kind == "columns":
            interior, view, cols, mat = self.scratch.get()
            interior[...] = x
            split_copy(cols, view)
            windows = self.windows
            if bias is None or not windows.flat:
                y = windows.finish(np.matmul(wg, mat), bias)
            else:   # the junk dropped first (a fresh copy), the bias added to it as (N, M, L): contiguous
                y = windows.finish(np.matmul(wg, mat), None)
                flat = y.reshape(y.shape[0], y.shape[1], -1)
                np.add(flat, bias.reshape(-1, 1), out=flat)
        elif kind == "pointwise":
            y = self._pointwise(x, wg).reshape(self.out_full)
            if bias is not None:
                y += bias
        elif kind == "patches":
            y = self.patches(x, wg, bias)
        else:
            y = self.depthwise(x, wg, bias)
        return y if y.dtype == self.out_dtype else y.astype(self.out_dtype)


@KERNELS.register("Conv", 1, 11, 22)
def conv(ctx):
    xp = ctx.xp
    allowed, plans = portable.conv_setup(ctx)
    fallback = portable.make_conv(ctx, strided_columns, add_into)
    fn = loops.planes.get()         # None: numba missing or disabled (numpy bodies)
    finish = loops.finish.get()
    channels = conv_channels.planned(ctx)      # ((k, column stride), the channel-block loop) or None
    tiles_in, tiles_out = winograd_loops.input_tiles.get(), winograd_loops.output_tiles.get()
    winograd = None if tiles_in is None else (tiles_in, tiles_out)
    known = {}
    kinds = {}                      # key -> the body chosen for it (reports_bodies)
    held = (Held(ctx, 1), Held(ctx, 2))     # W, B: where their derived layouts are kept across runs

    def prepare(key, x, w, b):
        _, plan, ct, _ = portable.prepare(ctx, xp, allowed, plans, x, w, b)     # the checks, once per key
        p = Prepared(plan, [int(d) for d in x.shape[2:]], ct, x.dtype, fn, b is not None, finish, winograd, held,
                     channels)
        call = p.planes if p.kind in ("planes", "channels") else (None if p.kind == "portable" else p)
        if len(known) > 64:
            known.clear()
            kinds.clear()
        known[key] = call
        kinds[key] = p.kind
        return call

    def lookup(x, w, b):
        """The prepared call of the inputs' key (None: the portable kernel)."""
        key = (x.shape, x.dtype, w.shape, w.dtype, None if b is None else (b.shape, b.dtype))
        call = known.get(key, prepare)
        return prepare(key, x, w, b) if call is prepare else call

    def convolve(x, w, b=None):
        key = (x.shape, x.dtype, w.shape, w.dtype, None if b is None else (b.shape, b.dtype))
        call = known.get(key, prepare)
        if call is prepare:
            call = prepare(key, x, w, b)
        return fallback(x, w, b) if call is None else call(x, w, b)

    h = Halves.of(ctx)
    wide_w, wide_b = Wide.of(ctx, 1, h), Wide.of(ctx, 2, h)
    check = input_type_checker(ctx)   # the definition's types (bfloat16 from Conv-22), before widening

    def halved(body):
        """``body`` with float16 / bfloat16 X, W, B (and an Add operand) computed on the float32
        key (compiled bodies included; W, B widened once where held) and Y rounded once (.half)."""
        def run(x, w, b=None, *rest):
            t = x.dtype
            if is_half(t) and w.dtype == t and (b is None or b.dtype == t) and all(
                    type(r) is np.ndarray and r.dtype == t for r in rest):
                check(x, w, b)
                return narrow(body(widen(x, h), wide_w(w), wide_b(b), *[widen(r, h) for r in rest]), t, h)
            return body(x, w, b, *rest)
        return run

    run = quiet(halved(convolve))     # numpy's floating-point warnings off: an inf times a zero is a NaN result
    def report():
        return {key_text(k): kind for k, kind in list(kinds.items())}

    def fuse(ops):
        if tuple(op[0] for op in ops) == ("Swish",):
            return reports_bodies(swish(run, ops[0]), report)
        fused = epilogue(lookup, fallback, ops)
        if fused is not None and ops[-1][0] != "Clip":     # (a Clip's bounds keep the half type: not widened)
            fused = halved(fused)
        return None if fused is None else reports_bodies(fused, report)

    return reports_bodies(offers_epilogue(run, fuse, 3), report)


def key_text(key) -> str:
    """A Conv input-shape key as text: ``X[1, 3, 8, 8] float32, W[4, 3, 3, 3] float32[, B[4] float32]``."""
    xs, xd, ws, wd, b = key
    text = f"X{list(xs)} {xd}, W{list(ws)} {wd}"
    return text if b is None else f"{text}, B{list(b[0])} {b[1]}"
