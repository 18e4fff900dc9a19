"""The window reduction of MaxPool / AveragePool on numpy, by whole-buffer contiguous passes
(a helper of :mod:`.pool`; no kernels).

The portable kernel pads X, then folds the kernel taps one spatial axis at a time, one strided
slice per tap (:func:`~onnxkit_default_domain.kernels.pool.separable`).  On numpy a strided
slice costs a loop per output row (a fixed cost per row on top of the elements), and an array
larger than the core's cache costs memory bandwidth on every pass.
This module does the same arithmetic on the same operands in the same order, laid out so that
every tap of every pass is *one contiguous run* of a flat buffer:

* the padded input is stored split by stride phase (space-to-depth): element
  ``xpad[c, s0*i0 + p0, s1*i1 + p1, ...]`` at ``B[p0, p1, ..., c, i0, i1, ...]``, extents
  ``Q[a] = out[a] + (k[a]-1)*d[a] // s[a]`` per axis (what the windows reach), the pads and
  whatever no window reaches holding the fill (-inf, the type's minimum, 0), written once per
  thread; a call copies X into it, one copy (whole rows) per used phase.  The last axis is not
  split (``s = 1`` there: a split would copy element by element): it is reduced densely and
  every ``s``-th output kept;
* tap ``t`` of axis ``a`` reads padded index ``s*o + t*d``: phase ``t*d % s``, offset
  ``t*d // s``; so the pass over axis ``a`` folds, per tap in order, the slab of its phase
  shifted by the offset times the axis's flat stride, into the next stage (the remaining
  phases, then ``c, i...``): whole-buffer ufunc calls with ``out=``; the outputs that the
  shift wraps into the next row or channel (``i[a] >= out[a]``) are junk, never read for a
  kept output;
* the last stage is divided by the average's divisor (laid out on ``Q``) in place, then the
  kept outputs are copied (cast to X's type) into a fresh result.

The ``N * C`` rows go through in blocks of about :data:`BLOCK_BYTES` so that the stages of a
block stay in the core's cache.  Each output is the portable fold of the same taps (the pads
included) in the same order: bit-identical to the portable kernel.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from onnxkit.plugin import parallel_for
from onnxkit_default_domain.api import average_divisor

from ..compiled import pool as loops
from .conv_depthwise import Scratch

#: stages of one block about this many bytes: they stay in the core's L2 cache
BLOCK_BYTES = 512 << 10

#: input and output elements of the compiled loop worth a block of planes on an intra-op thread
#: of its own (:func:`onnxkit.runtime.threads.parallel_for`)
PLANE_WORK = 32768


def _phase_copy(length, begin, s, q, used):
    """Per used phase ``p`` of one axis: ``(p, input slice, buffer slice)`` placing the input
    elements ``r`` with ``(r + begin) % s == p`` (padded index ``r + begin`` within the
    ``q * s`` the windows reach) at index ``(r + begin) // s``."""
    lo, hi = max(0, -begin), min(length, q * s - begin)
    moves = []
    for p in used:
        first = lo + (p - (lo + begin)) % s
        count = len(range(first, hi, s))
        if count > 0:
            at = (first + begin) // s
            moves.append((p, slice(first, first + (count - 1) * s + 1, s), slice(at, at + count)))
        else:
            moves.append((p, None, None))
    return moves


class Windows:
    """The phase-split flat reduction by ``op`` (``np.maximum`` / ``np.add``) of one input ``shape``
    (ints) with the portable ``geometry``, computed in ``ct`` and padded with ``fill``:
    :meth:`reduce`.  ``empty`` where the output or the input is empty (the caller's portable
    kernel answers those)."""

    def __init__(self, geometry, shape, ct, fill, op):
        a, out, begin, end, _tail = geometry(shape)
        self.a, self.out, self.begin, self.end = a, out, begin, end
        self.ct, self.op, self.divisor = ct, op, None
        n, c = shape[:2]
        spatial = list(shape[2:])
        self.empty = 0 in out or 0 in shape
        if self.empty:
            return
        nd = len(spatial)
        k, s, d = list(a.kernel), list(a.strides), list(a.dilations)
        split = s[:-1] + [1]                # the last axis: dense (contiguous rows), subsampled at the end
        q = [((o - 1) * ss + (kk - 1) * dd) // sp + 1 for o, kk, dd, ss, sp in zip(out, k, d, s, split)]
        taps = [[(t * dd % sp, t * dd // sp) for t in range(kk)] for kk, dd, sp in zip(k, d, split)]
        used = [sorted({p for p, _ in tt}) for tt in taps]          # phases some tap reads
        rank = [{p: j for j, p in enumerate(u)} for u in used]
        self.rows, self.shape, self.q = n * c, (n, c, *out), q
        per_row, phases = math.prod(q), tuple(len(u) for u in used)
        self.block = max(1, min(self.rows, BLOCK_BYTES // (np.dtype(ct).itemsize * per_row * math.prod(phases))))
        self.block = -(-self.rows // -(-self.rows // self.block))     # blocks of equal size
        # the stages: stage a (before the pass over axis a) is (used phases of axes a.., rows, q...)
        sizes = [math.prod(len(u) for u in used[i:]) * self.block * per_row for i in range(nd + 1)]
        # flat element strides of q[i] within (rows, q...)
        qstride = [math.prod(q[i + 1:]) for i in range(nd)]
        self.passes, self.work = [], 0
        for i in range(nd):
            self.work += (k[i] - 1) * sizes[i + 1] // self.block
            slab = sizes[i + 1]                                        # one phase of axis i
            offs = [rank[i][p] * slab + off * qstride[i] for p, off in taps[i]]
            self.passes.append((offs, slab))
        slack = [max(0, max(offs) + slab - sizes[i]) for i, (offs, slab) in enumerate(self.passes)] + [0]
        moves = [_phase_copy(ln, b, sp, qq, u) for ln, b, sp, qq, u in zip(spatial, begin, split, q, used)]
        self.moves = []
        for combo in np.ndindex(*[len(u) for u in used]):
            mv = [m[j] for m, j in zip(moves, combo)]
            if all(src is not None for _, src, _ in mv):
                self.moves.append((combo, (slice(None),) + tuple(src for _, src, _ in mv),
                                   (slice(None),) + tuple(dst for _, _, dst in mv)))
        block, itemsize = self.block, np.dtype(ct).itemsize

        def make():
            stages = [np.full(sizes[0] + slack[0], fill, dtype=ct)]      # the pads: written once
            stages += [np.zeros(sizes[i] + slack[i], dtype=ct) for i in range(1, nd + 1)]
            b = stages[0][:sizes[0]].reshape(phases + (block, *q))
            return stages, [b[combo] for combo, _, _ in self.moves]

        self.scratch = Scratch(make, itemsize * (sum(sizes) + sum(slack)), threading.local())
        self.crop = (slice(None),) + tuple(slice(0, (o - 1) * (ss // sp) + 1, ss // sp)
                                           for o, ss, sp in zip(out, s, split))

    def divisor_on_q(self, d):
        """``d`` (over the output's spatial shape) laid out on the last stage's ``q``
        extents (1 where no output is kept), flat."""
        full = np.ones(self.q, dtype=d.dtype)
        full[self.crop[1:]] = d
        return full.reshape(-1)

    def reduce(self, x, dtype, divisor=None):
        """The reduced windows of ``x`` as a fresh array of ``dtype``, divided by ``divisor``
        (:meth:`divisor_on_q`) where given."""
        rows, block, op = self.rows, self.block, self.op
        xr = x.reshape((rows, *x.shape[2:]))
        y = np.empty((rows, *self.out), dtype=dtype)
        stages, planes = self.scratch.get()
        last = stages[-1]
        for r in range(0, rows, block):
            m = min(block, rows - r)        # a short last block: the rows after m are junk
            xb = xr[r:r + m]
            for plane, (_, src, dst) in zip(planes, self.moves):
                plane[(slice(0, m),) + dst[1:]] = xb[src]
            for (offs, slab), src, dst in zip(self.passes, stages, stages[1:]):
                out = dst[:slab]
                if len(offs) == 1:
                    np.copyto(out, src[offs[0]:offs[0] + slab])
                    continue
                op(src[offs[0]:offs[0] + slab], src[offs[1]:offs[1] + slab], out=out)
                for o in offs[2:]:
                    op(out, src[o:o + slab], out=out)
            res = last[:block * math.prod(self.q)].reshape(block, -1)
            if divisor is not None:
                np.true_divide(res, divisor, out=res)
            np.copyto(y[r:r + m], res[:m].reshape((m, *self.q))[self.crop], casting="unsafe")
        return y.reshape(self.shape)


class Strided:
    """The portable kernel's fold itself, for an input with nothing padded (no pads, no
    ``ceil_mode`` tail): one strided view of X per tap, folded with ``out=`` into the thread's
    intermediates, the last axis into a fresh array; best where the windows do not overlap or
    cover much of the input (a 2x2 stride 2 or a 7x7 pool of a 7x7 input), as there is nothing
    to copy and little to compute.  Same interface as :class:`Windows`."""

    def __init__(self, geometry, shape, ct, op):
        a, out, self.begin, self.end, _tail = geometry(shape)
        kernel, strides, dilations = a.kernel, a.strides, a.dilations
        self.a, self.ct, self.op, self.divisor, self.out, self.empty = a, ct, op, None, out, False
        n, c, spatial = shape[0], shape[1], list(shape[2:])
        self.taps, shapes = [], []
        for i, (k, s, d, o) in enumerate(zip(kernel, strides, dilations, out)):
            lead = (slice(None),) * (2 + i)
            self.taps.append([lead + (slice(t * d, t * d + (o - 1) * s + 1, s),) for t in range(k)])
            shapes.append((n, c, *out[:i + 1], *spatial[i + 1:]))
        self.work = sum((k - 1) * math.prod(sh[2:]) for k, sh in zip(kernel, shapes))
        inters = shapes[:-1]

        def make():
            return [np.empty(sh, dtype=ct) for sh in inters]

        self.scratch = Scratch(make, np.dtype(ct).itemsize * sum(math.prod(sh) for sh in inters), threading.local())

    def divisor_on_q(self, d):
        """``d`` as it is (over the output's spatial shape)."""
        return d

    def reduce(self, x, dtype, divisor=None):
        """The reduced windows of ``x`` as a fresh array of ``dtype``, divided by ``divisor``
        (over the output's spatial shape) where given."""
        y = x if x.dtype == self.ct else x.astype(self.ct)
        op, inters, last, fresh = self.op, self.scratch.get(), len(self.taps) - 1, False
        for i, taps in enumerate(self.taps):
            if len(taps) == 1:
                y, fresh = y[taps[0]], False
                continue
            dst = op(y[taps[0]], y[taps[1]], out=None if i == last else inters[i])
            for t in taps[2:]:
                op(dst, y[t], out=dst)
            y, fresh = dst, i == last
        if not fresh:
            y = y.copy()                 # a view of X or of the thread's buffers (1-tap axes)
        if divisor is not None:
            np.true_divide(y, divisor, out=y)
        return y if y.dtype == dtype else y.astype(dtype)


class Compiled:
    """The compiled loop (:func:`onnxkit_cpu.compiled.pool.windows`, ``fn``) of one input
    ``shape`` (ints) with the portable ``geometry``: float32 / float64 X of one or two spatial
    axes, nothing empty (:meth:`takes`); a max (``is_max``) or an average (its divisor as the
    numpy body's: the portable ``average_divisor``, 0 -> NaN, in X's type).  Called with X,
    returns Y; bit-identical to :class:`Windows` / :class:`Strided` (the loop's docstring).
    The row buffer is the thread's."""

    DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

    @staticmethod
    def takes(geometry, shape, dtype) -> bool:
        """Whether the loop computes this input (else the numpy body)."""
        if np.dtype(dtype) not in Compiled.DTYPES or len(shape) not in (3, 4) or 0 in shape:
            return False
        out = geometry(shape)[1]
        return 0 not in out

    def __init__(self, fn, geometry, shape, dtype, is_max, include_pad):
        a, out, begin, end, _tail = geometry(shape)
        dt = np.dtype(dtype)
        one, zero = (1,) * (4 - len(shape)), (0,) * (4 - len(shape))
        spatial = list(shape[2:])
        rows, counts, zpad, self.geo, size = loops.layout(
            one + tuple(spatial), one + tuple(out), one + tuple(a.kernel), one + tuple(a.strides),
            one + tuple(a.dilations), zero + tuple(begin), not is_max)
        self.fn, self.is_max, self.dt, self.rows, self.counts = fn, bool(is_max), dt, rows, counts
        self.z = np.where(zpad, 0.0, -0.0).astype(dt)
        self.x3 = (shape[0] * shape[1], *(one + tuple(spatial)))
        self.out, self.total = (shape[0], shape[1], *out), shape[0] * shape[1] * math.prod(out)
        self.divisor = np.ones(1, dt)
        if not is_max:
            d = average_divisor(spatial, a, out, begin, end, include_pad)
            d[d == 0] = np.nan   # a window of pads only (count_include_pad 0): nan, as the numpy body
            self.divisor = np.concatenate([d.astype(dt).reshape(-1), np.ones(loops.RUN, dt)])
        self.y_size = self.total + loops.RUN
        self.scratch = Scratch(lambda: np.zeros(size, dt), size * dt.itemsize, threading.local())

    def __call__(self, x):
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = np.empty(self.y_size, self.dt)
        x3, planes = x.reshape(self.x3), self.x3[0]
        per = self.total // planes

        def block(lo, hi):
            """Planes ``[lo, hi)`` (split across the run's intra-op threads; each plane alike): the
            last block into Y (its junk slack Y's), another into its own array copied in (the
            loop's slack past a block would overwrite the next block's first outputs)."""
            into = y[lo * per:] if hi == planes else np.empty((hi - lo) * per + loops.RUN, self.dt)
            self.fn(x3[lo:hi], into, self.scratch.get(), self.rows, self.counts, self.z, self.divisor, self.geo,
                    self.is_max)
            if hi != planes:
                y[lo * per:hi * per] = into[:(hi - lo) * per]

        parallel_for(block, planes, grain=max(1, PLANE_WORK // max(1, per + x3[0].size)), name="pool.planes")
        return y[:self.total].reshape(self.out)


def window_reduction(geometry, shape, ct, fill, op):
    """The faster of :class:`Windows` and (where nothing is padded) :class:`Strided` for one
    input ``shape`` (ints), computed in ``ct`` (``fill``: the pad value)."""
    phased = Windows(geometry, shape, ct, fill, op)
    a, out, begin, end, tail = geometry(shape)
    if phased.empty or any(begin) or any(end) or any(tail):
        return phased
    strided = Strided(geometry, shape, ct, op)
    overlap = any(k * d > s for k, d, s in zip(a.kernel, a.dilations, a.strides))
    return phased if overlap and phased.work < 3 * strided.work else strided
