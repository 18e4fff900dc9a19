"""BatchNormalization, LRN and LayerNormalization on numpy.

BatchNormalization and LRN are the portable kernels with their large intermediates computed
in place (a fresh array of X's size per step costs numpy a page-faulting allocation);
attributes, checks and the rest of the computation are the portable kernels'.

**Inference BatchNormalization, compiled** (:func:`batch_norm`, where compiled loops are on at
planning): a node in inference mode (:func:`onnxkit.plugin.batch_norm_mode`, the rule the
optimizer's folds read too: versions 1 and 6 ``is_test`` nonzero, 7 to 13 no output after Y
named, ``training_mode`` 0 from 14) with ``spatial`` 1, given a float32 or float64 X of rank 2
or more and not empty, computes ``inv = scale / sqrt(var + epsilon)`` and ``shift = B - mean *
inv`` as the portable kernel does (the same numpy operations in X's type, the parameters cast
to it first) and then Y in one compiled pass, ``x * inv[c]`` rounded then ``+ shift[c]``
rounded (:data:`onnxkit_cpu.compiled.norm.channel_affine`): bit-identical to the numpy body,
one pass over X instead of two.  ``inv`` and ``shift`` are computed once
while the same four arrays come back where the plan holds all four (:class:`~._plans.Held`:
constants the planner declares, :meth:`onnxkit.plugin.NodeContext.is_constant`, such as
initializers and folded values, or the plan's own defaults); otherwise (a runtime input,
possibly written in place between runs) they are computed again each call, with the portable
type checks.  Where ``inv`` or ``shift`` holds a NaN the numpy body runs instead: a product of two
NaNs takes the first operand's payload on x86 and the compiler may order a product's operands
either way, so only the numpy body gives its own bits there.  Everything else (training,
``spatial`` 0, float16 / bfloat16 X, an empty X, parameters of the wrong size or type) is the
portable kernel's, with its checks and errors.  The kernel offers a following Relu to the
``epilogue`` plan pass: the fused step applies ``max(v, 0)`` in the same pass (as
``np.maximum(v, 0)``, the cpu Relu: NaN keeps its bits, -0 gives +0), or, where the pass does
not apply, the Relu's own kernel on the portable result.

LayerNormalization (:func:`layer_norm`) has a lean body for float32 and float64 X whose
statistics are in X's own type (every stash_type but 11 for float32, any for float64): the
portable kernel's operations in its order (``np.mean`` as numpy computes it, ``1 / sqrt(var +
epsilon)``, ``d * inv * scale + B``), so the results are bit-identical, with the attributes,
the axis geometry and the outputs requested decided at planning or once per input shape and
every step after the first written into an array of the kernel's.  float16 / bfloat16 X, scale and
B with stash_type 1 (float32, the default: the definition computes the statistics in it) take the
float32 body on their values widened (scale and B once where held, :mod:`.half`), Y rounded once
to X's type, Mean and InvStdDev float32 as the definition types them.  Everything else (other
narrow floats, float32 with stash_type 11, an empty X, a scale or B that would broadcast X to a
larger shape) is the portable kernel's.

Where compiled loops are on (:mod:`onnxkit_cpu.compiled`, decided at planning), the lean body's
common case — scale and B (if any) of the normalized block's shape, or that shape with leading
1s — runs as one compiled loop over the rows: on float64 X :mod:`onnxkit_cpu.compiled.norm`'s
``layer_norm_loop``, with the same results bit for bit (that module's docstring says why), on
float32 X its ``layer_norm_rows32``, vectorized, the statistics summed in float64 (within a few
ulp of the definition: that module's docstring states the bound); a non-contiguous X is made
contiguous first, other broadcasts of scale and B keep the numpy body.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable, offers_epilogue
from onnxkit.plugin import parallel_for, splits_across_threads
from onnxkit_cpu.compiled import norm as norm_loops
from onnxkit_cpu.compiled.norm import layer_norm_loop
from onnxkit_cpu.overrides._plans import Held, remember
from onnxkit_cpu.overrides.half import Halves, Wide, is_half, narrow, widen
from onnxkit_default_domain.api import layer_norm as portable_layer_norm
from onnxkit_default_domain.api import (as_dtype, batch_norm_kernel, batch_norm_mode, input_type_checker, lrn_kernel,
                                        norm_axis)

KERNELS = KernelTable()
splits_across_threads(("", "LayerNormalization"), ("", "BatchNormalization"))
#: elements of the compiled loops worth a block of rows (channels) on a thread of its own
#: (:func:`onnxkit.runtime.threads.parallel_for`)
ROW_WORK = 16384


def scale_shift_in_place(x, inv, shift):
    """``x * inv + shift`` into one fresh array."""
    y = np.multiply(x, inv)
    y += shift
    return y


def lrn_base_in_place(xp, xc, size, lo, scale, bias):
    """:func:`~onnxkit_default_domain.kernels.norm.lrn_base` in one padded array and one sum."""
    c = xc.shape[1]
    padded = np.zeros((xc.shape[0], c + size - 1) + xc.shape[2:], dtype=xc.dtype)
    np.multiply(xc, xc, out=padded[:, lo:lo + c])
    acc = padded[:, 0:c].copy()
    for t in range(1, size):
        acc += padded[:, t:t + c]
    acc *= acc.dtype.type(scale)
    acc += acc.dtype.type(bias)
    return acc


def _params_fixed(scale, b, mean, var, last) -> bool:
    """Whether ``last`` (a kept :func:`batch_norm` parameters entry: only made where the plan
    holds the four parameters) was made from these same four arrays."""
    return last is not None and last[0] is scale and last[1] is b and last[2] is mean and last[3] is var


@KERNELS.register("BatchNormalization", 1, 6, 7, 9, 14, 15)
def batch_norm(ctx):
    """BatchNormalization: the compiled inference pass where it applies (module docstring),
    else the portable kernel with an in-place affine.  Offers a following Relu to the
    ``epilogue`` plan pass (``fuse_epilogue``) where the compiled pass is on."""
    other = batch_norm_kernel(ctx, affine=scale_shift_in_place)
    loop = norm_loops.channel_affine.get()       # None: numba missing or disabled (the numpy body alone)
    training, spatial = batch_norm_mode(ctx)
    if loop is None or training or not spatial:
        return other
    xp = ctx.xp
    eps = float(ctx.attr("epsilon"))
    check = input_type_checker(ctx)
    shapes = {}         # (X shape, dtype) -> (N, C, L) of the pass, or None: the portable kernel
    last = [None]       # [(scale, B, mean, var, dtype, inv, shift)]: the kept parameters
    #: where the plan holds the four parameters (constants it declares, its defaults): inv / shift are kept
    held = [Held(ctx, i) for i in (1, 2, 3, 4)]

    def geometry(key, x):
        shape, dt = key
        fits = (dt is _F32 or dt is _F64) and x.ndim >= 2 and x.size > 0
        return remember(shapes, key, (shape[0], shape[1], x.size // (shape[0] * shape[1])) if fits else None)

    def derive(x, c, scale, b, mean, var):
        """``(inv, shift)`` of C values in X's type, as the portable kernel computes them (the
        same operations in the same order and dtype; its (1, C, 1...) shape does not change an
        element's value), or None (a size or array kind the portable kernel judges)."""
        p = last[0]
        dt = x.dtype
        if (p is not None and p[4] is dt and (p[5] is None or p[5].shape[0] == c)
                and _params_fixed(scale, b, mean, var, p)):
            return p
        values = (scale, b, mean, var)
        if not all(type(v) is np.ndarray and v.size == c for v in values):
            return None
        check(x, scale, b, mean, var)
        s, bb, m, vv = (xp.reshape(as_dtype(xp, v, dt), (c,)) for v in values)
        inv = s / xp.sqrt(vv + eps)
        shift = bb - m * inv
        if np.isnan(inv).any() or np.isnan(shift).any():
            inv = shift = None          # the numpy body: see the module docstring (NaN payloads)
        p = (scale, b, mean, var, dt, inv, shift)
        if all(h(v) for h, v in zip(held, values)):
            last[0] = p
        return p

    def fast(x, scale, b, mean, var, relu):
        """Y by the compiled pass (with the Relu where ``relu``), or None: the portable kernel."""
        key = (x.shape, x.dtype)
        g = shapes[key] if key in shapes else geometry(key, x)
        if g is None:
            return None
        p = derive(x, g[1], scale, b, mean, var)
        if p is None or p[5] is None:
            return None
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = np.empty(x.shape, x.dtype)
        x3, y3, inv, shift = x.reshape(g), y.reshape(g), p[5], p[6]
        if g[0] > 1:        # images split across the run's intra-op threads, else channels
            def block(lo, hi):
                loop(x3[lo:hi], inv, shift, y3[lo:hi], relu)
        else:
            def block(lo, hi):
                loop(x3[:, lo:hi], inv[lo:hi], shift[lo:hi], y3[:, lo:hi], relu)
        parallel_for(block, g[0] if g[0] > 1 else g[1], grain=max(1, ROW_WORK // (g[2] * (g[1] if g[0] > 1 else 1))),
                     name="batch_norm.channels")
        return y

    def run(x, scale, b, mean, var):
        y = fast(x, scale, b, mean, var, False)
        return other(x, scale, b, mean, var) if y is None else y

    def fuse_epilogue(ops):
        """BatchNormalization + Relu in one pass (:mod:`onnxkit.runtime.optimizer.epilogue`);
        declines anything else.  Where the pass does not apply, the Relu's own kernel runs on
        the portable kernel's result."""
        if len(ops) != 1 or ops[0][0] != "Relu":
            return None
        relu = ops[0][1]

        def fused(x, scale, b, mean, var):
            y = fast(x, scale, b, mean, var, True)
            return relu(other(x, scale, b, mean, var)) if y is None else y
        return fused

    return offers_epilogue(run, fuse_epilogue, 5)


@KERNELS.register("LRN", 1, 13)
def lrn(ctx):
    return lrn_kernel(ctx, base=lrn_base_in_place, divide=lambda x, d: np.divide(x, d, out=d))


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _mean_into(s, n):
    """``s`` (a sum over ``n`` elements, an array of the kernel's) divided by ``n`` in place,
    with np.mean's result: np.mean divides by an ``intp`` count in float64 and casts back; a
    Python int ``n`` below 2**24 is exact in float32, and a float32 quotient correctly rounded
    once equals the float64 one rounded to float32 (53 >= 2 * 24 + 2 bits), so ``n`` is given
    as a Python int then (one float32 division, half the cost) and as ``np.intp`` otherwise."""
    if type(n) is int:
        return np.divide(s, n, out=s)
    return np.true_divide(s, n, out=s, casting="unsafe")


def _block_shaped(shape, block) -> bool:
    """Whether an array of ``shape`` is, flattened, the normalized ``block``'s elements in
    order: ``block`` itself with any number of leading 1s (one element per block position)."""
    k = len(block)
    return (len(shape) >= k and tuple(shape[len(shape) - k:]) == block
            and all(d == 1 for d in shape[:len(shape) - k])) or (
                len(shape) < k and all(d == 1 for d in block[:k - len(shape)]) and tuple(shape) == block[k - len(shape):])


@KERNELS.register("LayerNormalization", 17)
def layer_norm(ctx):
    """LayerNormalization-17: the compiled rows loop or the lean float32/float64 body (module
    docstring), else the portable kernel.  Returns Y alone when the node names one output,
    else (Y, Mean, InvStdDev) with None for an output not requested."""
    other = portable_layer_norm(ctx)
    eps = float(ctx.attr("epsilon"))
    axis_attr = int(ctx.attr("axis"))
    stash = int(ctx.attr("stash_type"))
    stat_dtype = {_F32: None if stash == 11 else _F32, _F64: _F32 if stash == 1 else _F64}
    want_mean, want_inv = ctx.output_requested(1), ctx.output_requested(2)
    only_y = ctx.num_outputs == 1
    check = input_type_checker(ctx)
    rows32 = norm_loops.layer_norm_rows32()
    rows_loop = layer_norm_loop()
    rows_of = {_F64: rows_loop, _F32: rows32 if rows_loop is not None else None}    # the loop per X's type
    eps_of = {_F32: np.float32(eps), _F64: np.float64(eps)}     # the loop's epsilon, in X's type
    halves = Halves.of(ctx)
    wide_scale, wide_b = Wide.of(ctx, 1, halves), Wide.of(ctx, 2, halves)
    plans = {}      # (X, scale, B shapes) -> (axes, count, loop geometry or None) or None: portable

    def plan(key, x):
        axis = norm_axis(ctx, axis_attr, x.ndim)
        n = math.prod(x.shape[axis:])
        try:
            fits = np.broadcast_shapes(*(s for s in key if s is not None)) == x.shape
        except ValueError:
            fits = False
        count = n if n < 2 ** 24 else np.intp(n)             # see _mean_into
        block = x.shape[axis:]
        geometry = None
        if rows_loop is not None and all(s is None or _block_shaped(s, block) for s in key[1:]):
            geometry = (x.size // n if n else 0, n, x.shape[:axis] + (1,) * len(block))
        return remember(plans, key, (tuple(range(axis, x.ndim)), count, geometry) if fits and n and x.size else None)

    def compiled(x, scale, b, geometry, stat):
        rows, n, stat_shape = geometry
        dt = x.dtype
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = np.empty((rows, n), dt)
        stats = np.empty((2, rows), dt)
        if scale.ndim != 1 or not scale.flags.c_contiguous:
            scale = np.ascontiguousarray(scale).reshape(n)
        if b is not None and (b.ndim != 1 or not b.flags.c_contiguous):
            b = np.ascontiguousarray(b).reshape(n)
        x2, shift, eps_t, loop = x.reshape(rows, n), scale if b is None else b, eps_of[dt], rows_of[dt]

        def block(lo, hi):          # rows split across the run's intra-op threads (each row alike)
            if lo == 0 and hi == rows:
                loop(x2, scale, shift, b is not None, eps_t, y, stats)
                return
            part = np.empty((2, hi - lo), dt)
            loop(x2[lo:hi], scale, shift, b is not None, eps_t, y[lo:hi], part)
            stats[:, lo:hi] = part

        parallel_for(block, rows, grain=max(1, ROW_WORK // n), name="layer_norm.rows")
        y = y.reshape(x.shape)
        if only_y:
            return y
        return (y, stats[0].reshape(stat_shape).astype(stat, copy=False) if want_mean else None,
                stats[1].reshape(stat_shape).astype(stat, copy=False) if want_inv else None)

    def run(x, scale, b=None):
        dt = x.dtype
        stat = stat_dtype.get(dt)
        if stat is None:
            if stash == 1 and is_half(dt) and scale.dtype == dt and (b is None or b.dtype == dt):
                r = run(widen(x, halves), wide_scale(scale), wide_b(b))
                return narrow(r, dt, halves) if only_y else (narrow(r[0], dt, halves), r[1], r[2])
            return other(x, scale, b)
        if scale.dtype != dt or (b is not None and b.dtype != dt):
            check(x, scale, b)             # fails: X's own type is one the definition takes
        key = (x.shape, scale.shape, None if b is None else b.shape)
        p = plans[key] if key in plans else plan(key, x)
        if p is None:
            return other(x, scale, b)
        axes, n, geometry = p
        if geometry is not None:
            return compiled(x, scale, b, geometry, stat)
        m = _mean_into(np.add.reduce(x, axis=axes, keepdims=True), n)
        d = np.subtract(x, m)
        v = _mean_into(np.add.reduce(np.multiply(d, d), axis=axes, keepdims=True), n)
        v += eps
        np.sqrt(v, out=v)
        inv = np.divide(1, v, out=v)
        np.multiply(d, inv, out=d)
        np.multiply(d, scale, out=d)
        if b is not None:
            np.add(d, b, out=d)
        if only_y:
            return d
        return (d, (m if m.dtype == stat else m.astype(stat)) if want_mean else None,
                (inv if inv.dtype == stat else inv.astype(stat)) if want_inv else None)

    return run
