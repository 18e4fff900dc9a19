"""Convolutions of ai.onnx.

Operators and the definitions (since_versions) implemented:

* Conv 1, 11, 22 - 1-D/2-D/3-D (any rank), ``auto_pad`` NOTSET/VALID/SAME_UPPER/SAME_LOWER,
  ``pads``, ``strides``, ``dilations``, ``group`` (depthwise included).
* ConvTranspose 1, 11, 22 - ``output_shape``, ``output_padding``, ``auto_pad``, groups.
* ConvInteger 10 - uint8/int8 with zero points, int32 output.
* DeformConv 19, 22 - offsets (``offset_group``), optional mask and bias, any rank
  (multilinear sampling, zero outside the image).
* Col2Im 18.

Implementation: im2col is one copy of a strided window view of the padded input, then one
(batched) matrix product through numpy's BLAS; 1x1 convolutions are a plain matrix product,
depthwise convolutions one small product per channel.  The geometry of each (shape,
attributes) combination is worked out once and cached.  ConvTranspose is a matrix
product followed by a col2im scatter-add per kernel offset.  Narrow floats (float16,
bfloat16) are computed in float32 and rounded once at the end.

The geometry helpers (:func:`conv_geometry`, :func:`spatial_attrs`) are shared with the
pooling kernels of ``nn_pool``.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from onnxkit.runtime import KernelTable

KERNELS = KernelTable()

_WIDE = (np.float32, np.float64)


def compute_dtype(dtype) -> np.dtype:
    """The dtype arithmetic is done in: float32/float64 as is, anything else in float32."""
    dtype = np.dtype(dtype)
    return dtype if dtype.type in _WIDE else np.dtype(np.float32)


def spatial_attrs(ctx, nd, kernel=None):
    """``(kernel_shape, strides, dilations, pads or None, auto_pad)`` for ``nd`` spatial dims."""
    ks = ctx.attr("kernel_shape")
    kernel = list(ks) if ks else (list(kernel) if kernel is not None else None)
    strides = list(ctx.attr("strides") or [1] * nd)
    dil = ctx.attr("dilations")
    dil = list(dil) if dil else [1] * nd
    pads = ctx.attr("pads")
    pads = list(pads) if pads else None
    auto_pad = ctx.attr_str("auto_pad", "NOTSET") or "NOTSET"
    return kernel, strides, dil, pads, auto_pad


def conv_geometry(ctx, in_shape, kernel, strides, dil, pads, auto_pad, ceil_mode=False):
    """Output extents and ``(begin, end)`` pads of a sliding window (Conv and the pools).

    ``ceil_mode`` follows the rule of ONNX/PyTorch: the output count is rounded up, but the
    last window must start inside the input or its begin padding.
    """
    nd = len(in_shape)
    if len(kernel) != nd or len(strides) != nd or len(dil) != nd:
        ctx.fail(f"kernel_shape/strides/dilations must have {nd} values, got {kernel}, {strides}, {dil}")
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dil) or any(k <= 0 for k in kernel):
        ctx.fail(f"kernel_shape, strides and dilations must be positive, got {kernel}, {strides}, {dil}")
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    begin, end, out = [0] * nd, [0] * nd, [0] * nd
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for i in range(nd):
            out[i] = -(-in_shape[i] // strides[i])
            total = max(0, (out[i] - 1) * strides[i] + eff[i] - in_shape[i])
            small, big = total // 2, total - total // 2
            begin[i], end[i] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        return out, begin, end
    if auto_pad == "VALID":
        pads, ceil_mode = None, False      # the VALID output count does not depend on ceil_mode
    elif auto_pad != "NOTSET":
        ctx.fail(f"unknown auto_pad {auto_pad!r}")
    if pads is not None:
        if len(pads) != 2 * nd:
            ctx.fail(f"pads must have {2 * nd} values, got {pads}")
        begin, end = list(pads[:nd]), list(pads[nd:])
    for i in range(nd):
        span = in_shape[i] + begin[i] + end[i] - eff[i]
        if ceil_mode:
            o = -(-span // strides[i]) + 1
            if (o - 1) * strides[i] >= in_shape[i] + begin[i]:
                o -= 1
        else:
            o = span // strides[i] + 1
        out[i] = max(o, 0)
    return out, begin, end


def pad_spatial(x, begin, end, value=0):
    """``x`` with its spatial axes (2..) padded by ``begin``/``end`` (negative pads crop)."""
    if not any(begin) and not any(end):
        return x
    nd = x.ndim - 2
    crop = tuple(slice(max(0, -b), x.shape[2 + i] - max(0, -e)) for i, (b, e) in enumerate(zip(begin, end)))
    x = x[(slice(None), slice(None)) + crop]
    begin = [max(0, b) for b in begin]
    end = [max(0, e) for e in end]
    shape = x.shape[:2] + tuple(x.shape[2 + i] + begin[i] + end[i] for i in range(nd))
    out = np.full(shape, value, dtype=x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(begin, x.shape[2:]))] = x
    return out


def window_slice(offs, dil, out_shape, strides):
    """The strided slices of a padded input read by kernel offset ``offs``."""
    return tuple(slice(o * d, o * d + (n - 1) * s + 1, s) for o, d, n, s in zip(offs, dil, out_shape, strides))


def conv_nd(ctx, x, w, kernel, strides, dil, begin, end, out_shape, group):
    """The convolution proper on arrays already in the compute dtype (no bias)."""
    c, m = x.shape[1], w.shape[0]
    if group <= 0 or c % group or m % group:
        ctx.fail(f"group {group} must divide the input channels {c} and the output channels {m}")
    if w.shape[1] != c // group:
        ctx.fail(f"W has {w.shape[1]} input channels per group, expected {c // group} (X has {c}, group {group})")
    if list(w.shape[2:]) != list(kernel):
        ctx.fail(f"W's kernel {list(w.shape[2:])} differs from kernel_shape {list(kernel)}")
    plan = _conv_plan(x.shape, m, group, tuple(kernel), tuple(strides), tuple(dil), tuple(begin), tuple(end),
                      tuple(out_shape))
    return plan(x, w)


def window_view(xp, kernel, strides, dil, out_shape):
    """``(N, C, *K, *O)``: a read-only strided view of the windows of the padded input ``xp``
    (element ``[n, c, k..., o...]`` is ``xp[n, c, o*s + k*d ...]``); copying it is im2col."""
    sp = xp.strides[2:]
    return np.lib.stride_tricks.as_strided(
        xp, xp.shape[:2] + tuple(kernel) + tuple(out_shape),
        xp.strides[:2] + tuple(d * st for d, st in zip(dil, sp)) + tuple(s * st for s, st in zip(strides, sp)),
        writeable=False)


@functools.lru_cache(maxsize=1024)
def _conv_plan(x_shape, m, group, kernel, strides, dil, begin, end, out_shape):
    """How to compute one convolution geometry, worked out once."""
    n, c = x_shape[:2]
    cg, mg = c // group, m // group
    length = math.prod(out_shape)
    kp = math.prod(kernel)
    out_full = (n, m, *out_shape)
    if length == 0 or n == 0:
        return lambda x, w: np.zeros(out_full, dtype=x.dtype)
    if kp == 1 and not any(begin) and not any(end):
        # 1x1: subsample, then a matrix product
        sub = (slice(None), slice(None)) + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out_shape, strides))

        def one_by_one(x, w):
            xs = x[sub].reshape(n, group, cg, length)
            y = np.matmul(w.reshape(group, mg, cg), xs)
            return y.reshape(out_full)

        return one_by_one

    def columns(x):
        return np.ascontiguousarray(window_view(pad_spatial(x, begin, end), kernel, strides, dil, out_shape))

    if cg == 1 and group > 1:
        # depthwise (channel multiplier mg): one small product per input channel
        def depthwise(x, w):
            cols = columns(x).reshape(n, c, kp, length)
            return np.matmul(w.reshape(c, mg, kp), cols).reshape(out_full)

        return depthwise

    def im2col(x, w):
        cols = columns(x)
        if group == 1:
            if n == 1:
                y = w.reshape(m, cg * kp) @ cols.reshape(cg * kp, length)
            else:
                y = np.matmul(w.reshape(m, cg * kp), cols.reshape(n, cg * kp, length))
        else:
            y = np.matmul(w.reshape(group, mg, cg * kp), cols.reshape(n, group, cg * kp, length))
        return y.reshape(out_full)

    return im2col


def _check_rank(ctx, x, w):
    if x.ndim < 3 or w.ndim != x.ndim:
        ctx.fail(f"X (rank {x.ndim}) and W (rank {w.ndim}) must have the same rank, at least 3")


@KERNELS.register("Conv", 1, 11, 22)
def conv(ctx):
    group = int(ctx.attr("group", 1))

    def run(x, w, b=None):
        _check_rank(ctx, x, w)
        nd = x.ndim - 2
        kernel, strides, dil, pads, auto_pad = spatial_attrs(ctx, nd, w.shape[2:])
        out_shape, begin, end = conv_geometry(ctx, x.shape[2:], kernel, strides, dil, pads, auto_pad)
        ct = compute_dtype(x.dtype)
        y = conv_nd(ctx, x.astype(ct, copy=False), w.astype(ct, copy=False), kernel, strides, dil, begin, end,
                    out_shape, group)
        if b is not None:
            if b.size != w.shape[0]:
                ctx.fail(f"B has {b.size} values, expected {w.shape[0]}")
            y += b.astype(ct, copy=False).reshape((1, -1) + (1,) * nd)
        return y.astype(x.dtype, copy=False)

    return run


@KERNELS.register("ConvInteger", 10)
def conv_integer(ctx):
    group = int(ctx.attr("group", 1))

    def run(x, w, x_zero_point=None, w_zero_point=None):
        _check_rank(ctx, x, w)
        nd = x.ndim - 2
        kernel, strides, dil, pads, auto_pad = spatial_attrs(ctx, nd, w.shape[2:])
        out_shape, begin, end = conv_geometry(ctx, x.shape[2:], kernel, strides, dil, pads, auto_pad)
        # exact in float64: |products| < 2^16, sums far below 2^53
        xf = x.astype(np.float64)
        if x_zero_point is not None:
            if x_zero_point.size != 1:
                ctx.fail("x_zero_point must be a scalar")
            xf -= float(x_zero_point.reshape(-1)[0])
        wf = w.astype(np.float64)
        if w_zero_point is not None:
            zp = w_zero_point.astype(np.float64).reshape(-1)
            if zp.size == 1:
                wf -= zp[0]
            elif zp.size == w.shape[0]:
                wf -= zp.reshape((-1,) + (1,) * (w.ndim - 1))
            else:
                ctx.fail(f"w_zero_point has {zp.size} values, expected 1 or {w.shape[0]}")
        y = conv_nd(ctx, xf, wf, kernel, strides, dil, begin, end, out_shape, group)
        return np.rint(y).astype(np.int32)

    return run


# -- ConvTranspose ------------------------------------------------------------------------------

def col2im_add(cols, kernel, strides, dil, in_shape, full_shape):
    """Scatter-add ``cols`` ``(N, C, *K, *I)`` into ``(N, C, *full_shape)`` (one add per offset)."""
    n, c = cols.shape[:2]
    out = np.zeros((n, c, *full_shape), dtype=cols.dtype)
    lead = (slice(None), slice(None))
    for offs in itertools.product(*(range(k) for k in kernel)):
        out[lead + window_slice(offs, dil, in_shape, strides)] += cols[lead + offs]
    return out


def conv_transpose_geometry(ctx, in_shape, kernel, strides, dil, pads, auto_pad, out_pad_attr, out_shape_attr):
    """``(output_padding, effective kernel extents, begin, end, output extents)`` of a
    ConvTranspose over spatial extents ``in_shape``.  Host-side arithmetic only: the gpu
    backend uses it too."""
    nd = len(in_shape)
    in_shape = list(in_shape)
    out_pad = list(out_pad_attr) if out_pad_attr else [0] * nd
    if len(out_pad) != nd:
        ctx.fail(f"output_padding must have {nd} values, got {out_pad}")
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    natural = [s * (i - 1) + op + e for s, i, op, e in zip(strides, in_shape, out_pad, eff)]
    if out_shape_attr:
        target = list(out_shape_attr)[-nd:]
        if len(target) != nd:
            ctx.fail(f"output_shape must have {nd} spatial values, got {list(out_shape_attr)}")
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = [i * s for i, s in zip(in_shape, strides)]
    else:
        target = None
    if target is not None:
        begin, end = [], []
        for i in range(nd):
            total = natural[i] - target[i]
            small, big = total // 2, total - total // 2
            bb, ee = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
            begin.append(bb)
            end.append(ee)
    elif pads is not None and auto_pad == "NOTSET":
        if len(pads) != 2 * nd:
            ctx.fail(f"pads must have {2 * nd} values, got {pads}")
        begin, end = list(pads[:nd]), list(pads[nd:])
    else:
        begin, end = [0] * nd, [0] * nd
    final = [natural[i] - begin[i] - end[i] for i in range(nd)]
    if any(f < 0 for f in final):
        ctx.fail(f"the output shape {final} would be negative")
    return out_pad, eff, begin, end, final


@KERNELS.register("ConvTranspose", 1, 11, 22)
def conv_transpose(ctx):
    group = int(ctx.attr("group", 1))
    out_pad_attr = ctx.attr("output_padding")
    out_shape_attr = ctx.attr("output_shape")

    def run(x, w, b=None):
        _check_rank(ctx, x, w)
        nd = x.ndim - 2
        kernel, strides, dil, pads, auto_pad = spatial_attrs(ctx, nd, w.shape[2:])
        if list(w.shape[2:]) != list(kernel) or len(strides) != nd or len(dil) != nd:
            ctx.fail(f"kernel_shape/strides/dilations do not match W {list(w.shape)}")
        n, c = x.shape[:2]
        if group <= 0 or c % group or w.shape[0] != c:
            ctx.fail(f"W has {w.shape[0]} input channels, X has {c} (group {group})")
        cg, mg = c // group, w.shape[1]
        m = mg * group
        in_shape = list(x.shape[2:])
        out_pad, eff, begin, end, final = conv_transpose_geometry(ctx, in_shape, kernel, strides, dil, pads, auto_pad,
                                                                  out_pad_attr, out_shape_attr)
        ct = compute_dtype(x.dtype)
        xc = x.astype(ct, copy=False).reshape(n, group, cg, -1)
        wc = w.astype(ct, copy=False).reshape(group, cg, -1)
        cols = np.matmul(np.swapaxes(wc, 1, 2), xc)            # (N, G, Mg*Kp, L)
        cols = cols.reshape(n, m, *kernel, *in_shape)
        full = [s * (i - 1) + e for s, i, e in zip(strides, in_shape, eff)]
        lo = [max(0, -bb) for bb in begin]                      # room for negative begin pads
        buf_shape = [lo[i] + max(full[i], begin[i] + final[i]) for i in range(nd)]
        buf = np.zeros((n, m, *buf_shape), dtype=ct)
        lead = (slice(None), slice(None))
        for offs in itertools.product(*(range(k) for k in kernel)):
            sl = tuple(slice(lo[i] + o * d, lo[i] + o * d + (ii - 1) * s + 1, s)
                       for i, (o, d, ii, s) in enumerate(zip(offs, dil, in_shape, strides)))
            buf[lead + sl] += cols[lead + offs]
        y = buf[lead + tuple(slice(lo[i] + begin[i], lo[i] + begin[i] + final[i]) for i in range(nd))]
        if b is not None:
            if b.size != m:
                ctx.fail(f"B has {b.size} values, expected {m}")
            y = y + b.astype(ct, copy=False).reshape((1, -1) + (1,) * nd)
        return np.ascontiguousarray(y).astype(x.dtype, copy=False)

    return run


# -- DeformConv ---------------------------------------------------------------------------------

def _sample(xg, pos, in_shape):
    """Multilinear samples of ``xg`` ``(N, Cg, *I)`` at ``pos`` ``(N, nd, *P)`` -> ``(N, Cg, *P)``;
    zero outside the image."""
    n, cg = xg.shape[:2]
    nd = len(in_shape)
    flat = xg.reshape(n, cg, -1)
    pshape = pos.shape[2:]
    npos = int(np.prod(pshape))
    p = pos.reshape(n, nd, npos)
    base = np.floor(p)
    frac = p - base
    base = base.astype(np.int64)
    out = np.zeros((n, cg, npos), dtype=xg.dtype)
    strides_flat = [int(np.prod(in_shape[i + 1:])) for i in range(nd)]
    for corner in itertools.product((0, 1), repeat=nd):
        weight = np.ones((n, npos), dtype=xg.dtype)
        idx = np.zeros((n, npos), dtype=np.int64)
        valid = np.ones((n, npos), dtype=bool)
        for i, cbit in enumerate(corner):
            ci = base[:, i] + cbit
            weight = weight * (frac[:, i] if cbit else 1 - frac[:, i])
            valid &= (ci >= 0) & (ci < in_shape[i])
            idx += np.clip(ci, 0, in_shape[i] - 1) * strides_flat[i]
        weight = np.where(valid, weight, 0).astype(xg.dtype)
        vals = np.take_along_axis(flat, np.broadcast_to(idx[:, None, :], (n, cg, npos)), axis=2)
        out += vals * weight[:, None, :]
    return out.reshape(n, cg, *pshape)


@KERNELS.register("DeformConv", 19, 22)
def deform_conv(ctx):
    group = int(ctx.attr("group", 1))
    offset_group = int(ctx.attr("offset_group", 1))

    def run(x, w, offset, b=None, mask=None):
        _check_rank(ctx, x, w)
        nd = x.ndim - 2
        kernel, strides, dil, pads, _ = spatial_attrs(ctx, nd, w.shape[2:])
        out_shape, begin, _ = conv_geometry(ctx, x.shape[2:], kernel, strides, dil, pads, "NOTSET")
        n, c = x.shape[:2]
        m = w.shape[0]
        kp = int(np.prod(kernel))
        if offset_group <= 0 or c % offset_group:
            ctx.fail(f"offset_group {offset_group} must divide the input channels {c}")
        if offset.shape != (n, offset_group * kp * nd, *out_shape):
            ctx.fail(f"offset has shape {offset.shape}, expected {(n, offset_group * kp * nd, *out_shape)}")
        ct = compute_dtype(x.dtype)
        xc = x.astype(ct, copy=False)
        off = offset.astype(ct, copy=False).reshape(n, offset_group, kp, nd, *out_shape)
        if mask is not None:
            if mask.size != n * offset_group * kp * int(np.prod(out_shape)):
                ctx.fail(f"mask has shape {mask.shape}, expected {(n, offset_group * kp, *out_shape)}")
            mk = mask.astype(ct, copy=False).reshape(n, offset_group, kp, *out_shape)
        # sampling positions of every kernel offset: (Kp, nd, *O)
        grids = np.meshgrid(*(np.arange(o) * s - bb for o, s, bb in zip(out_shape, strides, begin)), indexing="ij")
        base = np.stack(grids)                                   # (nd, *O)
        taps = np.array(list(itertools.product(*(range(k) for k in kernel))), dtype=ct) * np.array(dil, dtype=ct)
        cpo = c // offset_group
        cols = np.empty((n, c, kp, *out_shape), dtype=ct)
        for g in range(offset_group):
            xg = xc[:, g * cpo:(g + 1) * cpo]
            for t in range(kp):
                pos = base[None] + taps[t].reshape((1, nd) + (1,) * nd) + off[:, g, t]
                v = _sample(xg, pos, list(x.shape[2:]))
                if mask is not None:
                    v = v * mk[:, g, t][:, None]
                cols[:, g * cpo:(g + 1) * cpo, t] = v
        cg, mg = c // group, m // group
        if c % group or m % group or w.shape[1] != cg:
            ctx.fail(f"W {list(w.shape)} does not match X channels {c} with group {group}")
        length = int(np.prod(out_shape))
        y = np.matmul(w.astype(ct, copy=False).reshape(group, mg, cg * kp), cols.reshape(n, group, cg * kp, length))
        y = y.reshape(n, m, *out_shape)
        if b is not None:
            y = y + b.astype(ct, copy=False).reshape((1, -1) + (1,) * nd)
        return y.astype(x.dtype, copy=False)

    return run


# -- Col2Im -------------------------------------------------------------------------------------

def col2im_geometry(ctx, x_shape, image, block):
    """Col2Im's geometry (host arithmetic on the shapes and attributes): ``strides,
    dilations, pads, prod(block), counts`` - the blocks along each image axis."""
    nd = len(image)
    if len(block) != nd:
        ctx.fail(f"image_shape {image} and block_shape {block} differ in length")
    strides = list(ctx.attr("strides") or [1] * nd)
    dil = list(ctx.attr("dilations") or [1] * nd)
    pads = list(ctx.attr("pads") or [0] * (2 * nd))
    if len(strides) != nd or len(dil) != nd or len(pads) != 2 * nd:
        ctx.fail("strides/dilations/pads do not match image_shape")
    if len(x_shape) != 3:
        ctx.fail(f"input must have rank 3, got {len(x_shape)}")
    n, ck, length = x_shape
    kp = int(np.prod(block))
    if kp == 0 or ck % kp:
        ctx.fail(f"input dimension 1 ({ck}) is not a multiple of prod(block_shape) ({kp})")
    counts = [(image[i] + pads[i] + pads[nd + i] - ((block[i] - 1) * dil[i] + 1)) // strides[i] + 1
              for i in range(nd)]
    if int(np.prod(counts)) != length:
        ctx.fail(f"input dimension 2 ({length}) differs from the number of blocks {counts}")
    return strides, dil, pads, kp, counts


@KERNELS.register("Col2Im", 18)
def col2im(ctx):
    def run(x, image_shape, block_shape):
        image = [int(v) for v in np.asarray(image_shape).reshape(-1)]
        block = [int(v) for v in np.asarray(block_shape).reshape(-1)]
        nd = len(image)
        strides, dil, pads, kp, counts = col2im_geometry(ctx, x.shape, image, block)
        n, ck = x.shape[:2]
        ct = compute_dtype(x.dtype)
        cols = x.astype(ct, copy=False).reshape(n, ck // kp, *block, *counts)
        full = [image[i] + pads[i] + pads[nd + i] for i in range(nd)]
        buf = col2im_add(cols, block, strides, dil, counts, full)
        y = buf[(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + image[i]) for i in range(nd))]
        return np.ascontiguousarray(y).astype(x.dtype, copy=False)

    return run
