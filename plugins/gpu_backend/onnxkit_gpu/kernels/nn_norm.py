"""Normalization operators and Dropout of ai.onnx on the gpu backend (torch).

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
  draws uniform(0, 1) per element on the host with numpy - ``RandomState(seed)`` with a
  ``seed``, else a ``default_rng`` seeded from the session's seed, exactly as the cpu backend
  does, so both backends give bit-identical masks - and keeps those >= ratio, scaled by
  1 / (1 - ratio).

Statistics are computed in float32 (or float64 for float64 inputs); narrow floats are
rounded back once, as on the cpu backend.
"""

from __future__ import annotations

import numpy as np

from onnxkit.runtime import KernelTable

from .nn_conv import check_dtype, check_float, compute_dtype

KERNELS = KernelTable()


def _torch():
    import torch

    return torch


def _bshape(nd_total, c_axis_len):
    return (1, c_axis_len) + (1,) * (nd_total - 2)


def _host_scalar(ctx, v, what):
    torch = _torch()
    if isinstance(v, torch.Tensor):
        if v.numel() < 1:
            ctx.fail(f"{what} is empty")
        return v.reshape(-1)[0].item()
    return np.asarray(v).reshape(-1)[0].item()


# -- BatchNormalization -------------------------------------------------------------------------

@KERNELS.register("BatchNormalization", 1, 6, 7, 9, 14, 15)
def batch_norm(ctx):
    torch = _torch()
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
    bf16 = v >= 14

    def params(p, x, name):
        check_float(ctx, p, name, bf16)
        if v < 15:
            check_dtype(ctx, p, (x.dtype,), name)
        ct = compute_dtype(x.dtype)
        p = p.to(ct)
        if spatial:
            if p.numel() != x.shape[1]:
                ctx.fail(f"{name} has {p.numel()} values, X has {x.shape[1]} channels")
            return p.reshape(_bshape(x.dim(), x.shape[1]))
        if p.numel() != int(np.prod(x.shape[1:])):
            ctx.fail(f"{name} has shape {tuple(p.shape)}, expected X.shape[1:] = {tuple(x.shape[1:])} (spatial = 0)")
        return p.reshape((1,) + tuple(x.shape[1:]))

    def run(x, scale, b, mean, var):
        check_float(ctx, x, "X", bf16)
        if x.dim() < 2:
            ctx.fail(f"X must have rank 2 or more, got {x.dim()}")
        ct = compute_dtype(x.dtype)
        xc = x.to(ct)
        s, bb, m, vv = (params(p, x, n) for p, n in ((scale, "scale"), (b, "B"), (mean, "mean"), (var, "var")))
        if v >= 15 and (scale.dtype != b.dtype or mean.dtype != var.dtype):
            ctx.fail("scale and B, and mean and var, must have the same element types")
        if not training:
            inv = s / torch.sqrt(vv + eps)
            y = xc * inv
            y += bb - m * inv
            return y.to(x.dtype)
        axes = (0,) + tuple(range(2, x.dim())) if spatial else (0,)
        bm = xc.mean(dim=axes, keepdim=True)
        bv = ((xc - bm) ** 2).mean(dim=axes, keepdim=True)
        y = (xc - bm) / torch.sqrt(bv + eps) * s + bb
        rm = m * momentum + bm * (1 - momentum)
        rv = vv * momentum + bv * (1 - momentum)
        pshape = tuple(mean.shape)

        def out(a, dt):
            return a.reshape(pshape).to(dt)

        if v >= 14:
            return y.to(x.dtype), out(rm, mean.dtype), out(rv, var.dtype)
        return y.to(x.dtype), out(rm, x.dtype), out(rv, x.dtype), out(bm, x.dtype), out(bv, x.dtype)

    return run


# -- Instance / Layer / Group / RMS normalization -----------------------------------------------

@KERNELS.register("InstanceNormalization", 1, 6, 22)
def instance_norm(ctx):
    torch = _torch()
    eps = float(ctx.attr("epsilon", 1e-5))
    bf16 = ctx.since_version >= 22

    def run(x, scale, b):
        check_float(ctx, x, "input", bf16)
        check_dtype(ctx, scale, (x.dtype,), "scale")
        check_dtype(ctx, b, (x.dtype,), "B")
        if x.dim() < 3:
            ctx.fail(f"input must have rank 3 or more, got {x.dim()}")
        c = x.shape[1]
        if scale.numel() != c or b.numel() != c:
            ctx.fail(f"scale and B must have {c} values")
        ct = compute_dtype(x.dtype)
        xc = x.to(ct)
        axes = tuple(range(2, x.dim()))
        m = xc.mean(dim=axes, keepdim=True)
        d = xc - m
        var = (d * d).mean(dim=axes, keepdim=True)
        bs = _bshape(x.dim(), c)
        y = d / torch.sqrt(var + eps) * scale.to(ct).reshape(bs) + b.to(ct).reshape(bs)
        return y.to(x.dtype)

    return run


def _stash_dtype(ctx, x):
    torch = _torch()
    stash = int(ctx.attr("stash_type", 1))
    if stash == 1:
        return torch.float64 if x.dtype == torch.float64 else torch.float32
    if stash == 11:
        return torch.float64
    return compute_dtype(x.dtype)


def _norm_axis(ctx, x):
    axis = int(ctx.attr("axis", -1))
    if not -x.dim() <= axis < x.dim():
        ctx.fail(f"axis {axis} is out of range for rank {x.dim()}")
    return axis % x.dim()


@KERNELS.register("LayerNormalization", 17)
def layer_norm(ctx):
    torch = _torch()
    eps = float(ctx.attr("epsilon", 1e-5))

    def run(x, scale, b=None):
        check_float(ctx, x, "X")
        check_float(ctx, scale, "Scale")
        axis = _norm_axis(ctx, x)
        ct = _stash_dtype(ctx, x)
        xc = x.to(ct)
        axes = tuple(range(axis, x.dim()))
        m = xc.mean(dim=axes, keepdim=True)
        d = xc - m
        var = (d * d).mean(dim=axes, keepdim=True)
        inv = 1 / torch.sqrt(var + eps)
        y = (d * inv).to(x.dtype).to(compute_dtype(x.dtype))
        y = y * scale.to(y.dtype)
        if b is not None:
            check_float(ctx, b, "B")
            y = y + b.to(y.dtype)
        stat = torch.float32 if int(ctx.attr("stash_type", 1)) == 1 else ct
        return y.to(x.dtype), m.to(stat), inv.to(stat)

    return run


@KERNELS.register("GroupNormalization", 18, 21)
def group_norm(ctx):
    torch = _torch()
    eps = float(ctx.attr("epsilon", 1e-5))
    groups = int(ctx.attr("num_groups"))
    per_group_params = ctx.since_version < 21

    def run(x, scale, bias):
        check_float(ctx, x, "X")
        if x.dim() < 3:
            ctx.fail(f"X must have rank 3 or more, got {x.dim()}")
        n, c = x.shape[:2]
        if groups <= 0 or c % groups:
            ctx.fail(f"num_groups {groups} must divide the channel count {c}")
        ct = _stash_dtype(ctx, x) if not per_group_params else compute_dtype(x.dtype)
        xg = x.to(ct).reshape(n, groups, -1)
        m = xg.mean(dim=2, keepdim=True)
        d = xg - m
        var = (d * d).mean(dim=2, keepdim=True)
        y = (d / torch.sqrt(var + eps)).reshape(x.shape)
        y = y.to(x.dtype).to(compute_dtype(x.dtype))
        want = groups if per_group_params else c
        if scale.numel() != want or bias.numel() != want:
            ctx.fail(f"scale and bias must have {want} values")
        s = scale.reshape(-1).to(y.dtype)
        bb = bias.reshape(-1).to(y.dtype)
        if per_group_params:
            s, bb = s.repeat_interleave(c // groups), bb.repeat_interleave(c // groups)
        bs = _bshape(x.dim(), c)
        return (y * s.reshape(bs) + bb.reshape(bs)).to(x.dtype)

    return run


@KERNELS.register("RMSNormalization", 23)
def rms_norm(ctx):
    torch = _torch()
    eps = float(ctx.attr("epsilon", 1e-5))

    def run(x, scale):
        check_float(ctx, x, "X")
        check_float(ctx, scale, "scale")
        axis = _norm_axis(ctx, x)
        ct = _stash_dtype(ctx, x)
        xc = x.to(ct)
        ms = (xc * xc).mean(dim=tuple(range(axis, x.dim())), keepdim=True)
        y = (xc / torch.sqrt(ms + eps)).to(x.dtype)
        y = y.to(compute_dtype(x.dtype)) * scale.to(compute_dtype(x.dtype))
        return y.to(x.dtype)

    return run


@KERNELS.register("LpNormalization", 1, 22)
def lp_norm(ctx):
    torch = _torch()
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        ctx.fail(f"p must be 1 or 2, got {p}")
    bf16 = ctx.since_version >= 22

    def run(x):
        check_float(ctx, x, "input", bf16)
        axis = _norm_axis(ctx, x)
        ct = compute_dtype(x.dtype)
        xc = x.to(ct)
        if p == 1:
            norm = xc.abs().sum(dim=axis, keepdim=True)
        else:
            norm = torch.sqrt((xc * xc).sum(dim=axis, keepdim=True))
        y = torch.where(norm == 0, torch.zeros((), dtype=ct, device=x.device), xc / norm)
        return y.to(x.dtype)

    return run


@KERNELS.register("LRN", 1, 13)
def lrn(ctx):
    torch = _torch()
    alpha = float(ctx.attr("alpha", 1e-4))
    beta = float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    size = int(ctx.attr("size"))
    if size <= 0:
        ctx.fail(f"size must be positive, got {size}")
    lo = (size - 1) // 2
    bf16 = ctx.since_version >= 13

    def run(x):
        import torch.nn.functional as F

        check_float(ctx, x, "X", bf16)
        if x.dim() < 3:
            ctx.fail(f"X must have rank 3 or more, got {x.dim()}")
        ct = compute_dtype(x.dtype)
        xc = x.to(ct)
        # sum of squares over the channel window [c - lo, c - lo + size - 1]
        c = x.shape[1]
        spec = [0, 0] * (x.dim() - 2) + [lo, size - 1 - lo]
        padded = F.pad(xc * xc, spec)
        ssum = padded[:, 0:c].clone()
        for t in range(1, size):  # one shifted add per tap
            ssum += padded[:, t:t + c]
        d = ssum * (alpha / size) + bias
        if beta == 0.75:
            d = torch.sqrt(d * torch.sqrt(d))
        elif beta != 1.0:
            d = torch.pow(d, beta)
        return (xc / d).to(x.dtype)

    return run


@KERNELS.register("MeanVarianceNormalization", 9, 13)
def mvn(ctx):
    torch = _torch()
    axes = tuple(int(a) for a in ctx.attr("axes", [0, 2, 3]))

    def run(x):
        check_float(ctx, x, "X")
        ax = tuple(sorted({a % x.dim() for a in axes if -x.dim() <= a < x.dim()}))
        if len(ax) != len(set(axes)):
            ctx.fail(f"axes {list(axes)} are out of range for rank {x.dim()}")
        ct = compute_dtype(x.dtype)
        xc = x.to(ct)
        m = xc.mean(dim=ax, keepdim=True)
        var = (xc * xc).mean(dim=ax, keepdim=True) - m * m
        y = (xc - m) / (torch.sqrt(torch.clamp(var, min=0)) + 1e-9)
        return y.to(x.dtype)

    return run


# -- Dropout ------------------------------------------------------------------------------------

@KERNELS.register("Dropout", 1, 6, 7, 10, 12, 13, 22)
def dropout(ctx):
    torch = _torch()
    v = ctx.since_version
    want_mask = ctx.output_requested(1)
    seed = ctx.attr("seed") if v >= 12 else None
    state = {}

    def draw(shape):
        # on the host with numpy, exactly as the cpu backend draws
        if seed is not None:
            return np.random.RandomState(int(seed) & 0xFFFFFFFF).uniform(0, 1.0, shape)
        if "rng" not in state:
            state["rng"] = np.random.default_rng(ctx.seed)
        return state["rng"].uniform(0, 1.0, shape)

    def apply(x, ratio, training):
        check_float(ctx, x, "data")
        mask_dtype = torch.bool if v >= 10 else x.dtype
        if not training or ratio == 0:
            y = x
            mask = torch.ones(x.shape, dtype=mask_dtype, device=x.device) if want_mask else None
        else:
            if not 0 <= ratio < 1:
                ctx.fail(f"ratio must be in [0, 1), got {ratio}")
            keep = torch.from_numpy(draw(tuple(x.shape)) >= ratio).to(x.device)
            ct = compute_dtype(x.dtype)
            y = (x.to(ct) * keep * torch.tensor(1.0 / (1.0 - ratio), dtype=ct, device=x.device)).to(x.dtype)
            mask = keep.to(mask_dtype) if want_mask else None
        return (y, mask) if want_mask else y

    if v < 12:
        ratio = float(ctx.attr("ratio", 0.5))
        training = v < 7 and not ctx.attr("is_test", 0)
        return lambda x: apply(x, ratio, training)

    def run(x, ratio=None, training_mode=None):
        r = 0.5 if ratio is None else float(_host_scalar(ctx, ratio, "ratio"))
        t = False if training_mode is None else bool(_host_scalar(ctx, training_mode, "training_mode"))
        return apply(x, r, t)

    return run

