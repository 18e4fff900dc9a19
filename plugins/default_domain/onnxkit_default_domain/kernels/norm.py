"""Normalizations and Dropout of ai.onnx (every backend): BatchNormalization,
InstanceNormalization, LayerNormalization, GroupNormalization, RMSNormalization,
LpNormalization, LRN, MeanVarianceNormalization, Dropout.

Element types are checked against the definition's type constraints.  Statistics are computed
in float32 (float64 for float64 inputs; LayerNormalization, GroupNormalization from 21 and
RMSNormalization in their ``stash_type``); narrow floats are rounded back once.

Version rules.  BatchNormalization's mode is the host's rule, the one the optimizer's folds read
(:func:`onnxkit.plugin.batch_norm_mode`): before 7 training when ``is_test`` is 0, from 7 to 13
when an output after Y is named, from 14 when ``training_mode`` is 1; ``spatial`` 0 (before 9)
keeps statistics and parameters per activation (shape X[1:]).  Training normalises with the batch statistics (biased variance)
and updates running = input * momentum + batch * (1 - momentum); before 14 the outputs are
(Y, mean, var, saved_mean, saved_var), the running statistics in mean / var and the batch
ones in the saved outputs.  GroupNormalization's scale and bias are per group in 18, per
channel from 21.  MeanVarianceNormalization is (X - mean) / (sqrt(var) + 1e-9), as its function
body.  Dropout is the identity with a mask of ones in inference (mask of type T before 10,
bool from 10; ``is_test`` before 7, the ``ratio`` / ``training_mode`` inputs from 12); in
training it draws uniform(0, 1) per element on the host with numpy - ``RandomState(seed)``
with a ``seed``, as the ONNX test generator does, else a ``default_rng`` of the session's
seed - so every backend gives the same mask, keeps those >= ratio and scales them by
1 / (1 - ratio).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from onnxkit.plugin import KernelTable, arrays, nondeterministic
from onnxkit.plugin import batch_norm_mode as _batch_norm_mode

from ._common import as_dtype, compute_dtype, device_of, input_type_checker, norm_axis, scalar_int, shape_of, size_of
from .pool import fold_taps

KERNELS = KernelTable()


def _bshape(rank, c):
    """The shape broadcasting a per-channel vector of ``c`` values over a rank-``rank`` X."""
    return (1, c) + (1,) * (rank - 2)


def _const(xp, value, like):
    """A 0-d array ``value`` of ``like``'s dtype, on its device."""
    return xp.asarray(value, dtype=like.dtype, device=device_of(like))


def stash_dtype(ctx, xp, dtype):
    """The dtype statistics are computed in under ``stash_type`` (1: float32, or float64 for a
    float64 input; 11: float64; else the compute dtype)."""
    stash = int(ctx.attr("stash_type", 1))
    if stash == 1:
        return xp.float64 if arrays.dtype_name(dtype) == "float64" else xp.float32
    if stash == 11:
        return xp.float64
    return compute_dtype(xp, dtype)


def _moments(xp, xc, axes):
    """``(mean, x - mean, biased variance)`` over ``axes`` (kept as extents 1)."""
    m = xp.mean(xc, axis=axes, keepdims=True)
    d = xc - m
    return m, d, xp.mean(d * d, axis=axes, keepdims=True)


# -- BatchNormalization -------------------------------------------------------------------------

def batch_norm_mode(ctx):
    """``(training, spatial)`` of a BatchNormalization node: the host's rule
    (:func:`onnxkit.plugin.batch_norm_mode`, which the optimizer's folds read too)."""
    return _batch_norm_mode(ctx.since_version, ctx.attributes, ctx.node.output)


def scale_shift(x, inv, shift):
    """``x * inv + shift`` (inference BatchNormalization; a backend may compute it in place)."""
    return x * inv + shift


def batch_norm_kernel(ctx, affine=scale_shift):
    """BatchNormalization's node function; ``affine(xc, inv, shift)`` computes inference's
    ``xc * inv + shift`` (``inv = scale / sqrt(var + epsilon)``, ``shift = B - mean * inv``)."""
    xp = ctx.xp
    v = ctx.since_version
    eps = float(ctx.attr("epsilon"))
    momentum = float(ctx.attr("momentum"))
    training, spatial = batch_norm_mode(ctx)
    check = input_type_checker(ctx)

    def params(x, ct, *values):
        """The four parameters in ``ct``, shaped to broadcast over X; ctx.fail for a wrong size."""
        shape = _bshape(x.ndim, int(x.shape[1])) if spatial else (1,) + tuple(x.shape[1:])
        want = math.prod(shape)
        for p, name in zip(values, ("scale", "B", "mean", "var")):
            if size_of(p) != want:
                ctx.fail(f"{name} has shape {shape_of(p)}, expected {want} values "
                         + (f"(X has {want} channels)" if spatial else "(X.shape[1:], spatial = 0)"))
        return [xp.reshape(as_dtype(xp, p, ct), shape) for p in values]

    def run(x, scale, b, mean, var):
        check(x, scale, b, mean, var)
        if x.ndim < 2:
            ctx.fail(f"X must have rank 2 or more, got {x.ndim}")
        ct = compute_dtype(xp, x.dtype)
        xc = as_dtype(xp, x, ct)
        s, bb, m, vv = params(x, ct, scale, b, mean, var)
        if not training:
            inv = s / xp.sqrt(vv + eps)
            return as_dtype(xp, affine(xc, inv, bb - m * inv), x.dtype)
        axes = (0,) + tuple(range(2, x.ndim)) if spatial else (0,)
        bm, d, bv = _moments(xp, xc, axes)
        y = d / xp.sqrt(bv + eps) * s + bb
        rm = m * momentum + bm * (1 - momentum)
        rv = vv * momentum + bv * (1 - momentum)
        pshape = tuple(mean.shape)

        def out(a, dt):
            return as_dtype(xp, xp.reshape(a, pshape), dt)

        if v >= 14:
            return as_dtype(xp, y, x.dtype), out(rm, mean.dtype), out(rv, var.dtype)
        return (as_dtype(xp, y, x.dtype), out(rm, x.dtype), out(rv, x.dtype), out(bm, x.dtype),
                out(bv, x.dtype))

    return run


@KERNELS.register("BatchNormalization", 1, 6, 7, 9, 14, 15)
def batch_norm(ctx):
    return batch_norm_kernel(ctx)


# -- Instance / Layer / Group / RMS normalization -----------------------------------------------

@KERNELS.register("InstanceNormalization", 1, 6, 22)
def instance_norm(ctx):
    xp = ctx.xp
    eps = float(ctx.attr("epsilon"))
    check = input_type_checker(ctx)

    def run(x, scale, b):
        check(x, scale, b)
        if x.ndim < 3:
            ctx.fail(f"input must have rank 3 or more, got {x.ndim}")
        c = int(x.shape[1])
        if size_of(scale) != c or size_of(b) != c:
            ctx.fail(f"scale and B must have {c} values")
        ct = compute_dtype(xp, x.dtype)
        _, d, var = _moments(xp, as_dtype(xp, x, ct), tuple(range(2, x.ndim)))
        bs = _bshape(x.ndim, c)
        y = d / xp.sqrt(var + eps) * xp.reshape(as_dtype(xp, scale, ct), bs) + xp.reshape(as_dtype(xp, b, ct), bs)
        return as_dtype(xp, y, x.dtype)

    return run


@KERNELS.register("LayerNormalization", 17)
def layer_norm(ctx):
    xp = ctx.xp
    eps = float(ctx.attr("epsilon"))
    axis_attr = int(ctx.attr("axis"))
    stat_float32 = int(ctx.attr("stash_type")) == 1
    check = input_type_checker(ctx)

    def run(x, scale, b=None):
        check(x, scale, b)
        axis = norm_axis(ctx, axis_attr, x.ndim)
        st = stash_dtype(ctx, xp, x.dtype)
        m, d, var = _moments(xp, as_dtype(xp, x, st), tuple(range(axis, x.ndim)))
        inv = 1 / xp.sqrt(var + eps)
        ct = compute_dtype(xp, x.dtype)
        y = as_dtype(xp, as_dtype(xp, d * inv, x.dtype), ct)   # rounded to X's type first, as the reference
        y = y * as_dtype(xp, scale, ct)
        if b is not None:
            y = y + as_dtype(xp, b, ct)
        stat = xp.float32 if stat_float32 else st
        return as_dtype(xp, y, x.dtype), as_dtype(xp, m, stat), as_dtype(xp, inv, stat)

    return run


@KERNELS.register("GroupNormalization", 18, 21)
def group_norm(ctx):
    xp = ctx.xp
    eps = float(ctx.attr("epsilon"))
    groups = int(ctx.attr("num_groups"))
    per_group_params = ctx.since_version < 21
    check = input_type_checker(ctx)

    def run(x, scale, bias):
        check(x, scale, bias)
        if x.ndim < 3:
            ctx.fail(f"X must have rank 3 or more, got {x.ndim}")
        n, c = int(x.shape[0]), int(x.shape[1])
        if groups <= 0 or c % groups:
            ctx.fail(f"num_groups {groups} must divide the channel count {c}")
        want = groups if per_group_params else c
        if size_of(scale) != want or size_of(bias) != want:
            ctx.fail(f"scale and bias must have {want} values")
        st = compute_dtype(xp, x.dtype) if per_group_params else stash_dtype(ctx, xp, x.dtype)
        _, d, var = _moments(xp, xp.reshape(as_dtype(xp, x, st), (n, groups, -1)), (2,))
        ct = compute_dtype(xp, x.dtype)
        y = as_dtype(xp, as_dtype(xp, xp.reshape(d / xp.sqrt(var + eps), tuple(x.shape)), x.dtype), ct)
        s, bb = (xp.reshape(as_dtype(xp, p, ct), (-1,)) for p in (scale, bias))
        if per_group_params:   # one value per group: repeated over its channels
            s, bb = (xp.reshape(xp.broadcast_to(xp.reshape(p, (groups, 1)), (groups, c // groups)), (c,))
                     for p in (s, bb))
        bs = _bshape(x.ndim, c)
        return as_dtype(xp, y * xp.reshape(s, bs) + xp.reshape(bb, bs), x.dtype)

    return run


@KERNELS.register("RMSNormalization", 23)
def rms_norm(ctx):
    xp = ctx.xp
    eps = float(ctx.attr("epsilon"))
    axis_attr = int(ctx.attr("axis"))
    check = input_type_checker(ctx)

    def run(x, scale):
        check(x, scale)
        axis = norm_axis(ctx, axis_attr, x.ndim)
        xc = as_dtype(xp, x, stash_dtype(ctx, xp, x.dtype))
        ms = xp.mean(xc * xc, axis=tuple(range(axis, x.ndim)), keepdims=True)
        ct = compute_dtype(xp, x.dtype)
        y = as_dtype(xp, as_dtype(xp, xc / xp.sqrt(ms + eps), x.dtype), ct)
        return as_dtype(xp, y * as_dtype(xp, scale, ct), x.dtype)

    return run


# -- LpNormalization / LRN / MeanVarianceNormalization ------------------------------------------

@KERNELS.register("LpNormalization", 1, 22)
def lp_norm(ctx):
    xp = ctx.xp
    p = int(ctx.attr("p"))
    if p not in (1, 2):
        ctx.fail(f"p must be 1 or 2, got {p}")
    axis_attr = int(ctx.attr("axis"))
    check = input_type_checker(ctx)

    def run(x):
        check(x)
        axis = norm_axis(ctx, axis_attr, x.ndim)
        xc = as_dtype(xp, x, compute_dtype(xp, x.dtype))
        if p == 1:
            norm = xp.sum(xp.abs(xc), axis=axis, keepdims=True)
        else:
            norm = xp.sqrt(xp.sum(xc * xc, axis=axis, keepdims=True))
        zero = norm == 0          # a zero norm gives 0 (the divisor made 1 there: no warning)
        y = xp.where(zero, _const(xp, 0, xc), xc / xp.where(zero, _const(xp, 1, norm), norm))
        return as_dtype(xp, y, x.dtype)

    return run


def lrn_base(xp, xc, size, lo, scale, bias):
    """``bias + scale * (the sum of squares of xc over the channel window [c - lo, c - lo + size
    - 1])``: LRN's denominator before the power, one shifted add per tap (a backend may compute
    it in place)."""
    c = int(xc.shape[1])
    padded = xp.zeros((xc.shape[0], c + size - 1) + tuple(xc.shape[2:]), dtype=xc.dtype,
                      device=device_of(xc))
    padded[:, lo:lo + c, ...] = xc * xc
    return fold_taps(xp.add, [padded[:, t:t + c, ...] for t in range(size)]) * scale + bias


def lrn_kernel(ctx, base=lrn_base, divide=operator.truediv):
    """LRN's node function; ``base`` computes its denominator before the power (:func:`lrn_base`),
    ``divide(xc, d)`` the quotient (a backend may write it into ``d``, an array of the kernel's)."""
    xp = ctx.xp
    alpha = float(ctx.attr("alpha"))
    beta = float(ctx.attr("beta"))
    bias = float(ctx.attr("bias"))
    size = int(ctx.attr("size"))
    if size <= 0:
        ctx.fail(f"size must be positive, got {size}")
    check = input_type_checker(ctx)

    def run(x):
        check(x)
        if x.ndim < 3:
            ctx.fail(f"X must have rank 3 or more, got {x.ndim}")
        xc = as_dtype(xp, x, compute_dtype(xp, x.dtype))
        d = base(xp, xc, size, (size - 1) // 2, alpha / size, bias)
        if beta == 0.75:
            d = xp.sqrt(d * xp.sqrt(d))
        elif beta != 1.0:
            d = d ** beta
        return as_dtype(xp, divide(xc, d), x.dtype)

    return run


@KERNELS.register("LRN", 1, 13)
def lrn(ctx):
    return lrn_kernel(ctx)


@KERNELS.register("MeanVarianceNormalization", 9, 13)
def mvn(ctx):
    xp = ctx.xp
    axes_attr = [int(a) for a in ctx.attr("axes")]
    check = input_type_checker(ctx)

    def run(x):
        check(x)
        ax = tuple(sorted({norm_axis(ctx, a, x.ndim, "axes") for a in axes_attr}))   # a repeat is harmless
        xc = as_dtype(xp, x, compute_dtype(xp, x.dtype))
        m = xp.mean(xc, axis=ax, keepdims=True)
        var = xp.mean(xc * xc, axis=ax, keepdims=True) - m * m
        # the function body's epsilon is a constant of x's type: 1e-9 is 0 in float16, so a constant
        # slice gives 0 / 0 = NaN there, as the body (and onnxruntime) computes
        eps = float(as_dtype(xp, xp.asarray(1e-9), x.dtype))
        with np.errstate(invalid="ignore", divide="ignore"):
            y = (xc - m) / (xp.sqrt(xp.clip(var, min=0)) + eps)
        return as_dtype(xp, y, x.dtype)

    return run


# -- Dropout ------------------------------------------------------------------------------------

@KERNELS.register("Dropout", 1, 6, 7, 10, 12, 13, 22)
@nondeterministic
def dropout(ctx):
    xp = ctx.xp
    v = ctx.since_version
    want_mask = ctx.output_requested(1)
    seed = ctx.attr("seed") if v >= 12 else None
    check = input_type_checker(ctx)
    state = {}

    def draw(shape):
        """uniform(0, 1) per element, on the host (module docstring)."""
        if seed is not None:
            return np.random.RandomState(int(seed) & 0xFFFFFFFF).uniform(0, 1.0, shape)
        if "rng" not in state:
            state["rng"] = np.random.default_rng(ctx.seed)
        return state["rng"].uniform(0, 1.0, shape)

    def apply(x, ratio, training):
        mask_dtype = xp.bool if v >= 10 else x.dtype
        dev = device_of(x)
        if not training or ratio == 0:
            y = x
            mask = xp.ones(tuple(x.shape), dtype=mask_dtype, device=dev) if want_mask else None
        else:
            if not 0 <= ratio < 1:
                ctx.fail(f"ratio must be in [0, 1), got {ratio}")
            keep = ctx.from_host(draw(tuple(int(d) for d in x.shape)) >= ratio)
            ct = compute_dtype(xp, x.dtype)
            y = as_dtype(xp, xp.astype(keep, ct) * as_dtype(xp, x, ct) * (1.0 / (1.0 - ratio)), x.dtype)
            mask = xp.astype(keep, mask_dtype) if want_mask else None
        return (y, mask) if want_mask else y

    if v < 12:
        ratio = float(ctx.attr("ratio", 0.5))
        training = v < 7 and not ctx.attr("is_test", 0)

        def run_attrs(x):
            check(x)
            return apply(x, ratio, training)

        return run_attrs

    def run(x, ratio=None, training_mode=None):
        check(x, ratio, training_mode)
        r = 0.5 if ratio is None else float(_scalar(ctx, ratio, "ratio"))
        t = False if training_mode is None else bool(scalar_int(ctx, training_mode, "training_mode"))
        return apply(x, r, t)

    return run


def _scalar(ctx, value, what):
    """The one element of a tensor as a Python number; ctx.fail if it has not one."""
    a = ctx.to_host(value)
    if a.size != 1:
        ctx.fail(f"{what} must hold exactly one value, got shape {list(a.shape)}")
    return a.reshape(-1)[0].item()
