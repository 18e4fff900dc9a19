"""The fused operators of onnxruntime's graph optimizer: FusedConv, FusedGemm, FusedMatMul,
BiasAdd, BiasGelu, FastGelu, Gelu, QuickGelu, BiasSoftmax (com.microsoft 1).

* FusedConv — ai.onnx Conv (attributes, geometry, groups: the ai.onnx domain's own portable
  convolution), then ``+ Z`` where given, then ``activation`` with ``activation_params``.
* FusedGemm — ai.onnx Gemm (``alpha * A' B' + beta * C``), then ``activation`` with
  ``activation_alpha`` / ``activation_beta`` / ``activation_gamma``.
* FusedMatMul — ``alpha * A' @ B'``: ``transA`` / ``transB`` swap the last two axes;
  ``transBatchA`` / ``transBatchB`` first move axis 0 behind the batch axes (axes 1..r-2), for
  inputs of one rank, at least 3 (onnxruntime refuses others, and so does this kernel).
* Gelu ``0.5 x erfc(-x / sqrt 2)``; BiasGelu the same of ``A + B``; FastGelu the tanh
  approximation of ``X (+ bias)``; QuickGelu ``x sigmoid(alpha x)``.
* BiasAdd ``X + bias + skip``.
* BiasSoftmax — softmax of ``data + bias`` over the axes from ``axis`` on taken together
  (bias broadcast numpy-style; ``is_inner_broadcast`` only says which of the two broadcast
  patterns onnxruntime's fusion matched, and does not change the value).

float16 and bfloat16 are computed in float32 and rounded once.
"""

from __future__ import annotations

import math

from onnxkit.plugin import KernelTable

from ._common import (DOMAIN, activation, cast, check_float, gelu_erf, gelu_tanh, shape_of, sigmoid, softmax,
                      widen)

KERNELS = KernelTable()


@KERNELS.register("FusedConv", 1, domain=DOMAIN)
def fused_conv(ctx):
    from onnxkit_default_domain.api import make_conv

    conv = make_conv(ctx)
    act = activation(ctx, ctx.attr_str("activation", ""), ctx.attr("activation_params") or ())
    xp = ctx.xp

    def run(x, w, b=None, z=None):
        y = conv(x, w, b)
        yw = widen(xp, y)
        if z is not None:
            if shape_of(z) != shape_of(y):
                ctx.fail(f"Z has shape {shape_of(z)}, the convolution's output {shape_of(y)}")
            yw = yw + widen(xp, z)
        return cast(xp, act(xp, yw), x.dtype)

    return run


@KERNELS.register("FusedGemm", 1, domain=DOMAIN)
def fused_gemm(ctx):
    xp = ctx.xp
    alpha, beta = float(ctx.attr("alpha")), float(ctx.attr("beta"))
    ta, tb = bool(ctx.attr("transA")), bool(ctx.attr("transB"))
    act = activation(ctx, ctx.attr_str("activation", ""),
                     [ctx.attr(k) for k in ("activation_alpha", "activation_beta", "activation_gamma")])

    def run(a, b, c=None):
        check_float(ctx, a, "A")
        if a.ndim != 2 or b.ndim != 2:
            ctx.fail(f"A and B must be matrices, got ranks {a.ndim} and {b.ndim}")
        aw, bw = widen(xp, a), widen(xp, b)
        aw = xp.permute_dims(aw, (1, 0)) if ta else aw
        bw = xp.permute_dims(bw, (1, 0)) if tb else bw
        if aw.shape[1] != bw.shape[0]:
            ctx.fail(f"A' {shape_of(aw)} and B' {shape_of(bw)} do not multiply")
        y = xp.matmul(aw, bw)
        if alpha != 1.0:
            y = y * alpha
        if c is not None and beta != 0.0:
            y = y + widen(xp, c) * beta
        return cast(xp, act(xp, y), a.dtype)

    return run


def _batch_first_moved(xp, x):
    """Axis 0 moved behind the batch axes: perm (1, ..., r-2, 0, r-1)."""
    r = x.ndim
    return xp.permute_dims(x, tuple(range(1, r - 1)) + (0, r - 1))


@KERNELS.register("FusedMatMul", 1, domain=DOMAIN)
def fused_matmul(ctx):
    xp = ctx.xp
    alpha = float(ctx.attr("alpha"))
    ta, tb = bool(ctx.attr("transA")), bool(ctx.attr("transB"))
    tba, tbb = bool(ctx.attr("transBatchA")), bool(ctx.attr("transBatchB"))

    def run(a, b):
        check_float(ctx, a, "A")
        if (tba or tbb) and not (a.ndim == b.ndim >= 3):
            ctx.fail(f"transBatchA / transBatchB need A and B of one rank, at least 3 (got {a.ndim} and {b.ndim})")
        aw, bw = widen(xp, a), widen(xp, b)
        if tba:
            aw = _batch_first_moved(xp, aw)
        if tbb:
            bw = _batch_first_moved(xp, bw)
        if ta and aw.ndim >= 2:
            aw = xp.matrix_transpose(aw)
        if tb and bw.ndim >= 2:
            bw = xp.matrix_transpose(bw)
        ka = aw.shape[-1]
        kb = bw.shape[0] if bw.ndim == 1 else bw.shape[-2]
        if ka != kb:
            ctx.fail(f"A' {shape_of(aw)} and B' {shape_of(bw)} do not multiply")
        y = xp.matmul(aw, bw)
        if alpha != 1.0:
            y = y * alpha
        return cast(xp, y, a.dtype)

    return run


def _unary(ctx, fn, *checks):
    xp = ctx.xp

    def run(x, bias=None):
        check_float(ctx, x, "X")
        xw = widen(xp, x)
        if bias is not None:
            xw = xw + widen(xp, bias)
        return cast(xp, fn(xp, xw), x.dtype)

    return run


@KERNELS.register("Gelu", 1, domain=DOMAIN)
def gelu(ctx):
    return _unary(ctx, gelu_erf)


@KERNELS.register("BiasGelu", 1, domain=DOMAIN)
def bias_gelu(ctx):
    run = _unary(ctx, gelu_erf)

    def bias_gelu_run(a, b):
        if b.ndim != 1 or (a.ndim and int(a.shape[-1]) != int(b.shape[0])):
            ctx.fail(f"B must be 1-D with A's last extent, got shapes {shape_of(a)} and {shape_of(b)}")
        return run(a, b)

    return bias_gelu_run


@KERNELS.register("FastGelu", 1, domain=DOMAIN)
def fast_gelu(ctx):
    return _unary(ctx, gelu_tanh)


@KERNELS.register("QuickGelu", 1, domain=DOMAIN)
def quick_gelu(ctx):
    alpha = float(ctx.attr("alpha"))
    return _unary(ctx, lambda xp, x: x * sigmoid(xp, x * alpha))


@KERNELS.register("BiasAdd", 1, domain=DOMAIN)
def bias_add(ctx):
    xp = ctx.xp

    def run(x, bias, skip):
        check_float(ctx, x, "X")
        if x.ndim != 3 or bias.ndim != 1 or int(bias.shape[0]) != int(x.shape[2]) or shape_of(skip) != shape_of(x):
            ctx.fail(f"X (N, S, C), bias (C) and skip (N, S, C) expected, got {shape_of(x)}, {shape_of(bias)}, "
                     f"{shape_of(skip)}")
        return cast(xp, widen(xp, x) + widen(xp, bias) + widen(xp, skip), x.dtype)

    return run


@KERNELS.register("BiasSoftmax", 1, domain=DOMAIN)
def bias_softmax(ctx):
    xp = ctx.xp
    axis_attr = int(ctx.attr("axis"))

    def run(data, bias):
        check_float(ctx, data, "data")
        r = data.ndim
        axis = axis_attr + r if axis_attr < 0 else axis_attr
        if not 0 <= axis < max(r, 1):
            ctx.fail(f"axis {axis_attr} is out of range for data of rank {r}")
        if bias.ndim > r:
            ctx.fail(f"bias (rank {bias.ndim}) has a higher rank than data (rank {r})")
        for db, dd in zip(reversed(shape_of(bias)), reversed(shape_of(data))):
            if db not in (1, dd):
                ctx.fail(f"bias {shape_of(bias)} does not broadcast to data {shape_of(data)}")
        z = widen(xp, data) + widen(xp, bias)
        shape = shape_of(data)
        flat = xp.reshape(z, (math.prod(shape[:axis]), math.prod(shape[axis:])))
        return cast(xp, xp.reshape(softmax(xp, flat, -1), tuple(shape)), data.dtype)

    return run
