"""Convolutions of ai.onnx, for every backend: Conv, ConvInteger, ConvTranspose, DeformConv, Col2Im.

Any number of spatial axes; ``auto_pad`` NOTSET / VALID / SAME_UPPER / SAME_LOWER, explicit
(asymmetric, negative: cropping) ``pads``, ``strides``, ``dilations`` and ``group``
(depthwise included).  The output geometry is the inference functions' own
(:mod:`onnxkit_default_domain.inference.nn_geometry`, through :mod:`.conv_geometry`):
a window one stride too wide gives an empty output, a wider one is an error.  Element types
are those of the definition the node binds to (bfloat16 from the 22 definitions).

Computed as im2col: the padded input's windows, one strided slice per kernel offset, stacked
and multiplied by W in one (batched) matrix product; a 1x1 convolution is a plain product,
a depthwise one a small product per channel.  ConvTranspose is the product of Wᵀ and X
followed by a scatter-add per kernel offset (ConvTranspose's ``output_shape`` /
``output_padding``: :func:`~onnxkit_default_domain.inference.nn_geometry.transpose_geometry`).
ConvInteger subtracts its zero points (per tensor; per output channel for W) and computes
exactly in float64.  DeformConv samples multilinearly (zero outside the image) at offsets
per ``offset_group``, with an optional mask.  Col2Im adds its blocks back (integers exactly).
Narrow floats are computed in float32 and rounded once.  The geometry of each input shape
is worked out once per node.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

from onnxkit.plugin import KernelTable, arrays, calls_blas, size_guard

from ._common import check_dtype, compute_dtype, schema_types, shape_of
from .conv_geometry import (col2im_geometry, conv_geometry, conv_transpose_geometry, device_of, pad_spatial,
                            spatial_attrs, window_slice)

KERNELS = KernelTable()

_LEAD = (slice(None), slice(None))


class ConvPlan(NamedTuple):
    """One convolution's geometry, checked: what :func:`conv_nd` needs (and a ConvTranspose:
    its ``out_pad`` and effective kernel extents ``eff`` too)."""

    n: int
    c: int
    m: int
    group: int
    kernel: tuple
    strides: tuple
    dil: tuple
    begin: tuple
    end: tuple
    out_shape: tuple
    out_pad: tuple = ()
    eff: tuple = ()


def check_rank(ctx, x, w) -> int:
    """The number of spatial axes of X and W (same rank, at least 3); ctx.fail otherwise."""
    if x.ndim < 3 or w.ndim != x.ndim:
        ctx.fail(f"X (rank {x.ndim}) and W (rank {w.ndim}) must have the same rank, at least 3")
    return x.ndim - 2


def conv_plan(ctx, group: int, x_shape, w_shape, auto_pad_override=None) -> ConvPlan:
    """The checked geometry of a convolution of X ``x_shape`` by W ``w_shape`` (ctx.fail
    for channels, groups or a kernel that do not match, or an impossible window)."""
    nd = len(x_shape) - 2
    kernel, strides, dil, pads, auto_pad = spatial_attrs(ctx, nd, w_shape[2:])
    out_shape, begin, end = conv_geometry(ctx, x_shape[2:], kernel, strides, dil, pads,
                                          auto_pad_override or auto_pad)
    n, c = x_shape[:2]
    m = w_shape[0]
    if group <= 0 or c % group or m % group:
        ctx.fail(f"group {group} must divide the input channels {c} and the output channels {m}")
    if w_shape[1] != c // group:
        ctx.fail(f"W has {w_shape[1]} input channels per group, expected {c // group} (X has {c}, group {group})")
    if list(w_shape[2:]) != list(kernel):
        ctx.fail(f"W's kernel {list(w_shape[2:])} differs from kernel_shape {list(kernel)}")
    return ConvPlan(n, c, m, group, *(tuple(v) for v in (kernel, strides, dil, begin, end, out_shape)))


class Plans:
    """The :class:`ConvPlan` of each input shape a node meets, worked out once."""

    def __init__(self, ctx, make):
        self.ctx, self.make, self.known = ctx, make, {}

    def __call__(self, x, w):
        key = (tuple(x.shape), tuple(w.shape))
        plan = self.known.get(key)
        if plan is None:
            if len(self.known) > 64:
                self.known.clear()
            plan = self.known[key] = self.make(self.ctx, shape_of(x), shape_of(w))
        return plan


def columns(xp, xpad, kernel, strides, dil, out_shape):
    """``(N, C, prod(K), *O)``: the windows of the padded input, one strided slice per kernel
    offset (im2col)."""
    taps = [xpad[_LEAD + window_slice(offs, dil, out_shape, strides)]
            for offs in itertools.product(*(range(k) for k in kernel))]
    return xp.stack(taps, axis=2)


def conv_nd(xp, x, w, p: ConvPlan, im2col=columns):
    """The convolution proper (no bias) of arrays already in the compute dtype; ``im2col``
    makes the columns (:func:`columns`' contract: a backend may pass a faster one)."""
    n, c, m, group = p.n, p.c, p.m, p.group
    cg, mg = c // group, m // group
    length, kp = math.prod(p.out_shape), math.prod(p.kernel)
    out_full = (n, m, *p.out_shape)
    if length == 0 or n == 0:
        return xp.zeros(out_full, dtype=x.dtype, device=device_of(x))
    if kp == 1 and not any(p.begin) and not any(p.end):     # 1x1: subsample, then one product
        sub = _LEAD + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(p.out_shape, p.strides))
        y = xp.matmul(xp.reshape(w, (group, mg, cg)), xp.reshape(x[sub], (n, group, cg, length)))
        return xp.reshape(y, out_full)
    cols = im2col(xp, pad_spatial(xp, x, p.begin, p.end), p.kernel, p.strides, p.dil, p.out_shape)
    if cg == 1 and group > 1:                                  # depthwise (channel multiplier mg)
        y = xp.matmul(xp.reshape(w, (c, mg, kp)), xp.reshape(cols, (n, c, kp, length)))
    elif group == 1:
        w2 = xp.reshape(w, (m, cg * kp))
        y = xp.matmul(w2, xp.reshape(cols, (cg * kp, length) if n == 1 else (n, cg * kp, length)))
    else:
        y = xp.matmul(xp.reshape(w, (group, mg, cg * kp)), xp.reshape(cols, (n, group, cg * kp, length)))
    return xp.reshape(y, out_full)


def check_like(ctx, allowed, x, **others) -> None:
    """X of an ``allowed`` type, the others (None: not given) of X's type."""
    check_dtype(ctx, x, allowed, "X")
    same = (arrays.dtype_name(x.dtype),)
    for what, v in others.items():
        if v is not None:
            check_dtype(ctx, v, same, what)


def bias_of(ctx, xp, b, m: int, ct, nd: int):
    """B as ``(1, M, 1...)`` in the compute dtype, or None."""
    if b is None:
        return None
    if math.prod(shape_of(b)) != m:
        ctx.fail(f"B has {math.prod(shape_of(b))} values, expected {m}")
    return xp.reshape(xp.astype(b, ct, copy=False), (1, -1) + (1,) * nd)


def prepare(ctx, xp, allowed, plans, x, w, b) -> tuple:
    """``(spatial axes, plan, compute dtype, bias as (1, M, 1...) or None)`` of a Conv or
    ConvTranspose call, its inputs checked."""
    check_like(ctx, allowed, x, W=w, B=b)
    nd = check_rank(ctx, x, w)
    plan = plans(x, w)
    ct = compute_dtype(xp, x.dtype)
    return nd, plan, ct, bias_of(ctx, xp, b, plan.m, ct, nd)


# -- Conv --------------------------------------------------------------------------------------
def conv_setup(ctx):
    """What a Conv node fixes when planned: ``(allowed types, plans)``; shared with the
    backends' overrides."""
    group = int(ctx.attr("group"))
    return schema_types(ctx, "T"), Plans(ctx, lambda c, xs, ws: conv_plan(c, group, xs, ws))


def add(y, bias):
    """``y + bias`` (a new array)."""
    return y + bias


def make_conv(ctx, im2col=columns, add_bias=add):
    """The node function of a Conv node; a backend's override may pass a faster ``im2col``
    and an ``add_bias(y, bias)`` that adds into ``y`` (the kernel's own product)."""
    xp = ctx.xp
    allowed, plans = conv_setup(ctx)

    def run(x, w, b=None):
        _, plan, ct, bias = prepare(ctx, xp, allowed, plans, x, w, b)
        y = conv_nd(xp, xp.astype(x, ct, copy=False), xp.astype(w, ct, copy=False), plan, im2col)
        if bias is not None:
            y = add_bias(y, bias)
        return xp.astype(y, x.dtype, copy=False)

    return run


@KERNELS.register("Conv", 1, 11, 22)
@calls_blas
def conv(ctx):
    return make_conv(ctx)


# -- ConvInteger -------------------------------------------------------------------------------
@KERNELS.register("ConvInteger", 10)
@calls_blas
def conv_integer(ctx):
    xp = ctx.xp
    group = int(ctx.attr("group"))
    plans = Plans(ctx, lambda c, xs, ws: conv_plan(c, group, xs, ws))
    allowed = {"x": schema_types(ctx, "T1"), "w": schema_types(ctx, "T2")}

    def run(x, w, x_zero_point=None, w_zero_point=None):
        check_dtype(ctx, x, allowed["x"], "x")
        check_dtype(ctx, w, allowed["w"], "w")
        check_rank(ctx, x, w)
        plan = plans(x, w)
        # exact in float64: |products| < 2^16, sums far below 2^53, whatever the order;
        # the zero points apply to the data only: padding contributes zeros after the shift
        xf, wf = xp.astype(x, xp.float64), xp.astype(w, xp.float64)
        if x_zero_point is not None:
            check_dtype(ctx, x_zero_point, (arrays.dtype_name(x.dtype),), "x_zero_point")
            if math.prod(shape_of(x_zero_point)) != 1:
                ctx.fail("x_zero_point must be a scalar")
            xf = xf - xp.reshape(xp.astype(x_zero_point, xp.float64), (-1,))[0]
        if w_zero_point is not None:
            check_dtype(ctx, w_zero_point, (arrays.dtype_name(w.dtype),), "w_zero_point")
            zp = xp.reshape(xp.astype(w_zero_point, xp.float64), (-1,))
            if zp.shape[0] == 1:
                wf = wf - zp[0]
            elif zp.shape[0] == plan.m:
                wf = wf - xp.reshape(zp, (-1,) + (1,) * (w.ndim - 1))
            else:
                ctx.fail(f"w_zero_point has {zp.shape[0]} values, expected 1 or {plan.m}")
        return xp.astype(xp.round(conv_nd(xp, xf, wf, plan)), xp.int32)

    return run


# -- ConvTranspose -----------------------------------------------------------------------------
def conv_transpose_setup(ctx):
    """What a ConvTranspose node fixes when planned: ``(allowed types, plans)``."""
    group = int(ctx.attr("group"))
    out_pad_attr = ctx.attr("output_padding")
    out_shape_attr = ctx.attr("output_shape")

    def make(ctx, x_shape, w_shape):
        nd = len(x_shape) - 2
        kernel, strides, dil, pads, auto_pad = spatial_attrs(ctx, nd, w_shape[2:])
        if list(w_shape[2:]) != list(kernel) or len(strides) != nd or len(dil) != nd:
            ctx.fail(f"kernel_shape/strides/dilations do not match W {list(w_shape)}")
        n, c = x_shape[:2]
        if group <= 0 or c % group or w_shape[0] != c:
            ctx.fail(f"W has {w_shape[0]} input channels, X has {c} (group {group})")
        out_pad, eff, begin, end, final = conv_transpose_geometry(ctx, x_shape[2:], kernel, strides, dil, pads,
                                                                  auto_pad, out_pad_attr, out_shape_attr)
        return ConvPlan(n, c, w_shape[1] * group, group,
                        *(tuple(v) for v in (kernel, strides, dil, begin, end, final, out_pad, eff)))

    return schema_types(ctx, "T"), Plans(ctx, make)


@KERNELS.register("ConvTranspose", 1, 11, 22)
@size_guard("value")
@calls_blas
def conv_transpose(ctx):
    xp = ctx.xp
    allowed, plans = conv_transpose_setup(ctx)

    def run(x, w, b=None):
        nd, p, ct, bias = prepare(ctx, xp, allowed, plans, x, w, b)
        n, m, group = p.n, p.m, p.group
        cg = p.c // group
        in_shape = shape_of(x)[2:]
        xc = xp.reshape(xp.astype(x, ct, copy=False), (n, group, cg, -1))
        wc = xp.reshape(xp.astype(w, ct, copy=False), (group, cg, -1))
        cols = xp.matmul(xp.permute_dims(wc, (0, 2, 1)), xc)            # (N, G, Mg*Kp, L)
        cols = xp.reshape(cols, (n, m, *p.kernel, *in_shape))
        full = [s * (i - 1) + e for s, i, e in zip(p.strides, in_shape, p.eff)]
        lo = [max(0, -bb) for bb in p.begin]                             # room for negative begin pads
        buf_shape = [lo[i] + max(full[i], p.begin[i] + p.out_shape[i]) for i in range(nd)]
        buf = xp.zeros((n, m, *buf_shape), dtype=ct, device=device_of(x))
        for offs in itertools.product(*(range(k) for k in p.kernel)):
            sl = tuple(slice(lo[i] + o * d, lo[i] + o * d + (ii - 1) * s + 1, s)
                       for i, (o, d, ii, s) in enumerate(zip(offs, p.dil, in_shape, p.strides)))
            buf[_LEAD + sl] += cols[_LEAD + offs]
        y = buf[_LEAD + tuple(slice(lo[i] + p.begin[i], lo[i] + p.begin[i] + p.out_shape[i]) for i in range(nd))]
        if bias is not None:
            y = y + bias
        return xp.astype(y, x.dtype)

    return run


# -- DeformConv --------------------------------------------------------------------------------
def _sample(xp, xg, pos, in_shape):
    """Multilinear samples of ``xg`` ``(N, Cg, *I)`` at ``pos`` ``(N, nd, *P)`` -> ``(N, Cg, *P)``;
    zero outside the image."""
    n, cg = shape_of(xg)[:2]
    nd = len(in_shape)
    flat = xp.reshape(xg, (n, cg, -1))
    pshape = shape_of(pos)[2:]
    npos = math.prod(pshape)
    p = xp.reshape(pos, (n, nd, npos))
    base = xp.floor(p)
    frac = p - base
    base = xp.astype(base, xp.int64)
    dev = device_of(xg)
    out = xp.zeros((n, cg, npos), dtype=xg.dtype, device=dev)
    if math.prod(in_shape) == 0:
        return xp.reshape(out, (n, cg, *pshape))
    strides_flat = [math.prod(in_shape[i + 1:]) for i in range(nd)]
    for corner in itertools.product((0, 1), repeat=nd):
        weight = xp.ones((n, npos), dtype=xg.dtype, device=dev)
        idx = xp.zeros((n, npos), dtype=xp.int64, device=dev)
        valid = xp.ones((n, npos), dtype=xp.bool, device=dev)
        for i, cbit in enumerate(corner):
            ci = base[:, i] + cbit
            weight = weight * (frac[:, i] if cbit else 1 - frac[:, i])
            valid = valid & (ci >= 0) & (ci < in_shape[i])
            idx = idx + xp.clip(ci, 0, in_shape[i] - 1) * strides_flat[i]
        weight = xp.where(valid, weight, xp.zeros_like(weight))
        vals = xp.take_along_axis(flat, xp.broadcast_to(idx[:, None, :], (n, cg, npos)), axis=2)
        out = out + vals * weight[:, None, :]
    return xp.reshape(out, (n, cg, *pshape))


@KERNELS.register("DeformConv", 19, 22)
@calls_blas
def deform_conv(ctx):
    xp = ctx.xp
    group = int(ctx.attr("group"))
    offset_group = int(ctx.attr("offset_group"))
    allowed = schema_types(ctx, "T")
    plans = Plans(ctx, lambda c, xs, ws: conv_plan(c, group, xs, ws, auto_pad_override="NOTSET"))

    def run(x, w, offset, b=None, mask=None):
        check_like(ctx, allowed, x, W=w, offset=offset, B=b, mask=mask)
        nd = check_rank(ctx, x, w)
        p = plans(x, w)
        n, c, m = p.n, p.c, p.m
        out_shape = list(p.out_shape)
        kp, length = math.prod(p.kernel), math.prod(out_shape)
        if offset_group <= 0 or c % offset_group:
            ctx.fail(f"offset_group {offset_group} must divide the input channels {c}")
        if tuple(shape_of(offset)) != (n, offset_group * kp * nd, *out_shape):
            ctx.fail(f"offset has shape {shape_of(offset)}, expected {[n, offset_group * kp * nd, *out_shape]}")
        ct = compute_dtype(xp, x.dtype)
        dev = device_of(x)
        bias = bias_of(ctx, xp, b, m, ct, nd)
        xc = xp.astype(x, ct, copy=False)
        off = xp.reshape(xp.astype(offset, ct, copy=False), (n, offset_group, kp, nd, *out_shape))
        if mask is not None:
            if math.prod(shape_of(mask)) != n * offset_group * kp * length:
                ctx.fail(f"mask has shape {shape_of(mask)}, expected {[n, offset_group * kp, *out_shape]}")
            mk = xp.reshape(xp.astype(mask, ct, copy=False), (n, offset_group, kp, *out_shape))
        # the sampling position of output o and kernel tap t: o * stride - begin + t * dilation + offset
        grids = xp.meshgrid(*(xp.astype(xp.arange(o, device=dev), ct) * s - bb
                              for o, s, bb in zip(out_shape, p.strides, p.begin)), indexing="ij")
        base = xp.stack(grids)                                           # (nd, *O)
        taps = list(itertools.product(*(range(k) for k in p.kernel)))
        cpo = c // offset_group
        cols = xp.empty((n, c, kp, *out_shape), dtype=ct, device=dev)
        for g in range(offset_group):
            xg = xc[:, g * cpo:(g + 1) * cpo]
            for t, tap in enumerate(taps):
                shift = xp.reshape(xp.asarray([k * d for k, d in zip(tap, p.dil)], dtype=ct, device=dev),
                                   (1, nd) + (1,) * nd)
                v = _sample(xp, xg, base[None, ...] + shift + off[:, g, t], shape_of(x)[2:])
                if mask is not None:
                    v = v * mk[:, g, t][:, None, ...]
                cols[:, g * cpo:(g + 1) * cpo, t, ...] = v
        cg, mg = c // p.group, m // p.group
        y = xp.matmul(xp.reshape(xp.astype(w, ct, copy=False), (p.group, mg, cg * kp)),
                      xp.reshape(cols, (n, p.group, cg * kp, length)))
        y = xp.reshape(y, (n, m, *out_shape))
        if bias is not None:
            y = y + bias
        return xp.astype(y, x.dtype, copy=False)

    return run


# -- Col2Im ------------------------------------------------------------------------------------
@KERNELS.register("Col2Im", 18)
@size_guard("value")
@calls_blas
def col2im(ctx):
    xp = ctx.xp

    def run(x, image_shape, block_shape):
        if arrays.dtype_name(x.dtype) in ("object", "str"):
            ctx.fail("STRING input is not supported")
        image, block = ctx.ints(image_shape), ctx.ints(block_shape)
        nd = len(image)
        strides, dil, pads, kp, counts = col2im_geometry(ctx, shape_of(x), image, block)
        n, ck = shape_of(x)[:2]
        if arrays.is_bool(x.dtype):
            ct = xp.int64                                                # added, then nonzero -> True
        elif arrays.is_float(x.dtype):
            ct = compute_dtype(xp, x.dtype)
        else:
            ct = x.dtype                                                 # integers and complex add exactly
        cols = xp.reshape(xp.astype(x, ct, copy=False), (n, ck // kp, *block, *counts))
        full = [image[i] + pads[i] + pads[nd + i] for i in range(nd)]
        buf = xp.zeros((n, ck // kp, *full), dtype=ct, device=device_of(x))
        for offs in itertools.product(*(range(k) for k in block)):      # one strided add per block offset
            buf[_LEAD + window_slice(offs, dil, counts, strides)] += cols[_LEAD + offs]
        y = buf[_LEAD + tuple(slice(pads[i], pads[i] + image[i]) for i in range(nd))]
        return xp.astype(y, x.dtype)

    return run
