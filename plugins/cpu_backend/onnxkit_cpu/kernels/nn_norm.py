"""Normalization operators and Dropout of ai.onnx.

Operators and the definitions (since_versions) implemented:

* BatchNormalization 1, 6 (``is_test``: nonzero = inference; 0 with more than one output
  = training; ``spatial``), 7 (``spatial``; training iff more than one output), 9 (as 7,
  per-channel), 14, 15 (``training_mode`` attribute; outputs Y, running_mean, running_var).
  Training: batch statistics (biased variance) normalise Y; running = input * momentum +
  batch * (1 - momentum).  Old forms output (Y, mean, var, saved_mean, saved_var) with
  the running statistics in mean/var and the batch statistics in saved_mean/saved_var.
  ``spatial = 0`` (versions 1-7): statistics and parameters per activation, shape X[1:].
* InstanceNormalization 1 (``consumed_inputs`` ignored), 6, 22.
* LayerNormalization 17 (Mean / InvStdDev outputs in the stash type).
* GroupNormalization 18 (scale/bias per group), 21 (per channel, ``stash_type``).
* RMSNormalization 23.
* LpNormalization 1, 22 (p = 1 or 2; a zero norm gives 0).
* LRN 1, 13.
* MeanVarianceNormalization 9, 13 ((X - mean) / (sqrt(var) + 1e-9), as its function body).
* Dropout 1, 6 (``is_test``), 7, 10 (inference: identity, mask of ones; mask type T in 1-7,
  bool from 10), 12, 13, 22 (``ratio`` / ``training_mode`` inputs, ``seed``).  Training
  draws uniform(0, 1) per element and keeps those >= ratio, scaled by 1 / (1 - ratio); with
  a ``seed`` the draw is numpy's ``RandomState(seed)``, as the ONNX test generator does.

Statistics are computed in float32 (or float64 for float64 inputs); narrow floats are
rounded back once.
"""

from __future__ import annotations

import numpy as np

from onnxkit.runtime import KernelTable

from .nn_conv import compute_dtype

KERNELS = KernelTable()


def _bshape(nd_total, c_axis_len):
    return (1, c_axis_len) + (1,) * (nd_total - 2)


# -- BatchNormalization -------------------------------------------------------------------------

@KERNELS.register("BatchNormalization", 1, 6, 7, 9, 14, 15)
def batch_norm(ctx):
    v = ctx.since_version
    eps = float(ctx.attr("epsilon", 1e-5))
    momentum = float(ctx.attr("momentum", 0.9))
    spatial = int(ctx.attr("spatial", 1)) if v < 9 else 1
    if v >= 14:
        training = bool(ctx.attr("training_mode", 0))
    elif v >= 7:
        training = ctx.num_outputs > 1
    else:
        training = not ctx.attr("is_test", 0) and ctx.num_outputs > 1

    def params(p, x, name):
        ct = compute_dtype(x.dtype)
        p = p.astype(ct, copy=False)
        if spatial:
            if p.size != x.shape[1]:
                ctx.fail(f"{name} has {p.size} values, X has {x.shape[1]} channels")
            return p.reshape(_bshape(x.ndim, x.shape[1]))
        if p.size != int(np.prod(x.shape[1:])):
            ctx.fail(f"{name} has shape {p.shape}, expected X.shape[1:] = {x.shape[1:]} (spatial = 0)")
        return p.reshape((1,) + x.shape[1:])

    def run(x, scale, b, mean, var):
        if x.ndim < 2:
            ctx.fail(f"X must have rank 2 or more, got {x.ndim}")
        ct = compute_dtype(x.dtype)
        xc = x.astype(ct, copy=False)
        s, bb, m, vv = (params(p, x, n) for p, n in ((scale, "scale"), (b, "B"), (mean, "mean"), (var, "var")))
        if not training:
            inv = s / np.sqrt(vv + ct.type(eps))
            y = np.multiply(xc, inv)
            y += bb - m * inv
            return y.astype(x.dtype, copy=False)
        axes = (0,) + tuple(range(2, x.ndim)) if spatial else (0,)
        bm = xc.mean(axis=axes, keepdims=True)
        bv = ((xc - bm) ** 2).mean(axis=axes, keepdims=True)
        y = (xc - bm) / np.sqrt(bv + ct.type(eps)) * s + bb
        rm = m * ct.type(momentum) + bm * ct.type(1 - momentum)
        rv = vv * ct.type(momentum) + bv * ct.type(1 - momentum)
        pshape = mean.shape

        def out(a, dt):
            return a.reshape(pshape).astype(dt, copy=False)

        if v >= 14:
            return y.astype(x.dtype, copy=False), out(rm, mean.dtype), out(rv, var.dtype)
        return (y.astype(x.dtype, copy=False), out(rm, x.dtype), out(rv, x.dtype), out(bm, x.dtype),
                out(bv, x.dtype))

    return run


# -- Instance / Layer / Group / RMS normalization -----------------------------------------------

@KERNELS.register("InstanceNormalization", 1, 6, 22)
def instance_norm(ctx):
    eps = float(ctx.attr("epsilon", 1e-5))

    def run(x, scale, b):
        if x.ndim < 3:
            ctx.fail(f"input must have rank 3 or more, got {x.ndim}")
        c = x.shape[1]
        if scale.size != c or b.size != c:
            ctx.fail(f"scale and B must have {c} values")
        ct = compute_dtype(x.dtype)
        xc = x.astype(ct, copy=False)
        axes = tuple(range(2, x.ndim))
        m = xc.mean(axis=axes, keepdims=True)
        d = xc - m
        var = (d * d).mean(axis=axes, keepdims=True)
        bs = _bshape(x.ndim, c)
        y = d / np.sqrt(var + ct.type(eps)) * scale.astype(ct).reshape(bs) + b.astype(ct).reshape(bs)
        return y.astype(x.dtype, copy=False)

    return run


def _stash_dtype(ctx, x):
    stash = int(ctx.attr("stash_type", 1))
    if stash == 1:
        return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    if stash == 11:
        return np.dtype(np.float64)
    return compute_dtype(x.dtype)


def _norm_axis(ctx, x):
    axis = int(ctx.attr("axis", -1))
    if not -x.ndim <= axis < x.ndim:
        ctx.fail(f"axis {axis} is out of range for rank {x.ndim}")
    return axis % x.ndim


@KERNELS.register("LayerNormalization", 17)
def layer_norm(ctx):
    eps = float(ctx.attr("epsilon", 1e-5))

    def run(x, scale, b=None):
        axis = _norm_axis(ctx, x)
        ct = _stash_dtype(ctx, x)
        xc = x.astype(ct, copy=False)
        axes = tuple(range(axis, x.ndim))
        m = xc.mean(axis=axes, keepdims=True)
        d = xc - m
        var = (d * d).mean(axis=axes, keepdims=True)
        inv = 1 / np.sqrt(var + ct.type(eps))
        y = d * inv
        y = y.astype(x.dtype, copy=False).astype(compute_dtype(x.dtype), copy=False)
        y = y * scale.astype(y.dtype, copy=False)
        if b is not None:
            y = y + b.astype(y.dtype, copy=False)
        stat = np.dtype(np.float32) if int(ctx.attr("stash_type", 1)) == 1 else ct
        return y.astype(x.dtype, copy=False), m.astype(stat), inv.astype(stat)

    return run


@KERNELS.register("GroupNormalization", 18, 21)
def group_norm(ctx):
    eps = float(ctx.attr("epsilon", 1e-5))
    groups = int(ctx.attr("num_groups"))
    per_group_params = ctx.since_version < 21

    def run(x, scale, bias):
        if x.ndim < 3:
            ctx.fail(f"X must have rank 3 or more, got {x.ndim}")
        n, c = x.shape[:2]
        if groups <= 0 or c % groups:
            ctx.fail(f"num_groups {groups} must divide the channel count {c}")
        ct = _stash_dtype(ctx, x) if not per_group_params else compute_dtype(x.dtype)
        xg = x.astype(ct, copy=False).reshape(n, groups, -1)
        m = xg.mean(axis=2, keepdims=True)
        d = xg - m
        var = (d * d).mean(axis=2, keepdims=True)
        y = (d / np.sqrt(var + ct.type(eps))).reshape(x.shape)
        y = y.astype(x.dtype, copy=False).astype(compute_dtype(x.dtype), copy=False)
        want = groups if per_group_params else c
        if scale.size != want or bias.size != want:
            ctx.fail(f"scale and bias must have {want} values")
        s = scale.astype(y.dtype)
        bb = bias.astype(y.dtype)
        if per_group_params:
            s, bb = np.repeat(s, c // groups), np.repeat(bb, c // groups)
        bs = _bshape(x.ndim, c)
        return (y * s.reshape(bs) + bb.reshape(bs)).astype(x.dtype, copy=False)

    return run


@KERNELS.register("RMSNormalization", 23)
def rms_norm(ctx):
    eps = float(ctx.attr("epsilon", 1e-5))

    def run(x, scale):
        axis = _norm_axis(ctx, x)
        ct = _stash_dtype(ctx, x)
        xc = x.astype(ct, copy=False)
        ms = (xc * xc).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
        y = (xc / np.sqrt(ms + ct.type(eps))).astype(x.dtype, copy=False)
        y = y.astype(compute_dtype(x.dtype), copy=False) * scale.astype(compute_dtype(x.dtype), copy=False)
        return y.astype(x.dtype, copy=False)

    return run


@KERNELS.register("LpNormalization", 1, 22)
def lp_norm(ctx):
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        ctx.fail(f"p must be 1 or 2, got {p}")

    def run(x):
        axis = _norm_axis(ctx, x)
        ct = compute_dtype(x.dtype)
        xc = x.astype(ct, copy=False)
        if p == 1:
            norm = np.abs(xc).sum(axis=axis, keepdims=True)
        else:
            norm = np.sqrt((xc * xc).sum(axis=axis, keepdims=True))
        with np.errstate(invalid="ignore", divide="ignore"):
            y = np.where(norm == 0, ct.type(0), xc / norm)
        return y.astype(x.dtype, copy=False)

    return run


@KERNELS.register("LRN", 1, 13)
def lrn(ctx):
    alpha = float(ctx.attr("alpha", 1e-4))
    beta = float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    size = int(ctx.attr("size"))
    if size <= 0:
        ctx.fail(f"size must be positive, got {size}")
    lo = (size - 1) // 2

    def run(x):
        if x.ndim < 3:
            ctx.fail(f"X must have rank 3 or more, got {x.ndim}")
        ct = compute_dtype(x.dtype)
        xc = x.astype(ct, copy=False)
        c = x.shape[1]
        # sum of squares over the channel window [c - lo, c - lo + size - 1], one shifted add per tap
        padded = np.zeros((x.shape[0], c + size - 1) + x.shape[2:], dtype=ct)
        np.multiply(xc, xc, out=padded[:, lo:lo + c])
        ssum = padded[:, 0:c].copy()
        for t in range(1, size):
            ssum += padded[:, t:t + c]
        d = ssum
        d *= ct.type(alpha / size)
        d += ct.type(bias)
        if beta == 0.75:
            d = np.sqrt(d * np.sqrt(d))
        elif beta != 1.0:
            d = np.power(d, ct.type(beta))
        y = np.divide(xc, d, out=d)
        return y.astype(x.dtype, copy=False)

    return run


@KERNELS.register("MeanVarianceNormalization", 9, 13)
def mvn(ctx):
    axes = tuple(int(a) for a in ctx.attr("axes", [0, 2, 3]))

    def run(x):
        ax = tuple(sorted({a % x.ndim for a in axes if -x.ndim <= a < x.ndim}))
        if len(ax) != len(set(axes)):
            ctx.fail(f"axes {list(axes)} are out of range for rank {x.ndim}")
        ct = compute_dtype(x.dtype)
        xc = x.astype(ct, copy=False)
        m = xc.mean(axis=ax, keepdims=True)
        var = (xc * xc).mean(axis=ax, keepdims=True) - m * m
        y = (xc - m) / (np.sqrt(np.maximum(var, 0)) + ct.type(1e-9))
        return y.astype(x.dtype, copy=False)

    return run


# -- Dropout ------------------------------------------------------------------------------------

@KERNELS.register("Dropout", 1, 6, 7, 10, 12, 13, 22)
def dropout(ctx):
    v = ctx.since_version
    want_mask = ctx.output_requested(1)
    seed = ctx.attr("seed") if v >= 12 else None
    state = {}

    def draw(shape):
        if seed is not None:
            return np.random.RandomState(int(seed) & 0xFFFFFFFF).uniform(0, 1.0, shape)
        if "rng" not in state:
            state["rng"] = np.random.default_rng(ctx.seed)
        return state["rng"].uniform(0, 1.0, shape)

    def apply(x, ratio, training):
        mask_dtype = np.bool_ if v >= 10 else x.dtype
        if not training or ratio == 0:
            y = x
            mask = np.ones(x.shape, dtype=mask_dtype)
        else:
            if not 0 <= ratio < 1:
                ctx.fail(f"ratio must be in [0, 1), got {ratio}")
            keep = draw(x.shape) >= ratio
            ct = compute_dtype(x.dtype)
            y = (keep * x.astype(ct, copy=False) * ct.type(1.0 / (1.0 - ratio))).astype(x.dtype, copy=False)
            mask = keep.astype(mask_dtype)
        return (y, mask) if want_mask else y

    if v < 12:
        ratio = float(ctx.attr("ratio", 0.5))
        training = v < 7 and not ctx.attr("is_test", 0)
        return lambda x: apply(x, ratio, training)

    def run(x, ratio=None, training_mode=None):
        r = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0])
        t = False if training_mode is None else bool(np.asarray(training_mode).reshape(-1)[0])
        return apply(x, r, t)

    return run
