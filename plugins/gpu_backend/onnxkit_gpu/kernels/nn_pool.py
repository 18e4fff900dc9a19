"""Pooling operators of ai.onnx on the gpu backend (torch).

Operators and the definitions (since_versions) implemented:

* MaxPool 1, 8, 10, 11, 12, 22 - ``Indices`` output (8+) with ``storage_order`` and ONNX's
  flattened index (``(n * C + c) * prod(spatial) + spatial offset`` in the unpadded input),
  ``ceil_mode`` and ``dilations`` (10+), int8/uint8 inputs (12+), bfloat16 (22), any spatial
  rank.
* AveragePool 1, 7, 10, 11, 19, 22 - ``count_include_pad`` (7+), ``ceil_mode`` (10+),
  ``dilations`` (19+).
* LpPool 1, 2, 11, 18, 22 - ``p`` a float in version 1, an int from 2; ``ceil_mode`` and
  ``dilations`` from 18.
* GlobalAveragePool 1, 22; GlobalMaxPool 1, 22; GlobalLpPool 1, 2, 22.
* MaxUnpool 9, 11, 22 (indices address the unpadded shape implied by the attributes; an
  ``output_shape`` input places that result at the origin of a tensor of that shape, as the
  cpu backend does).
* MaxRoiPool 1, 22 (Caffe ROI pooling: ROI corners rounded half away from zero, floor/ceil
  bins, empty bin = 0).
* RoiAlign 10, 16, 22 (version 10 has no ``coordinate_transformation_mode``: it is
  ``output_half_pixel``; ``avg`` and ``max`` modes as on the cpu backend).  The regions decide
  the bin and sampling-grid shapes, so they are read on the host; the pooling runs on the
  device (``avg``: one separable weighted sum per region).

torch's own pooling differs from ONNX in edge cases (``ceil_mode`` windows, the average
divisor with asymmetric pads, dilated averages), so the output geometry follows the ONNX
rule exactly (:func:`~.nn_conv.conv_geometry`): the input is padded explicitly (with -inf,
the type's minimum or 0), including the tail a ``ceil_mode`` window reaches past the end,
and the windows are then reduced with no further padding.  Windows are reduced one
spatial axis at a time (max and sum are separable), each axis with one strided slice per kernel tap and
an elementwise maximum / add; on CUDA, max values over 1-3 spatial axes use
``F.max_pool{1,2,3}d`` on the padded input instead (faster there, same values).  The
average divisor is the outer product of per-axis counts (pads counted or not, per
``count_include_pad``), worked out on the host from the shapes.  Indices are found
with one compare per kernel offset in row-major offset order (the first maximum wins).
"""

from __future__ import annotations

import itertools

import numpy as np

from onnxkit.runtime import KernelTable
from onnxkit_cpu.kernels.nn_pool import (average_divisor, index_strides, pool_geometry, roi_align_attrs,
                                         roi_align_samples, roi_avg_weights, roi_pool_bins, unpool_shape)

from .nn_conv import check_dtype, check_float, compute_dtype, full_precision, pad_spatial

KERNELS = KernelTable()


def _torch():
    import torch

    return torch


def _prepare(ctx, x, ceil_mode, fill, dilations=True):
    """Geometry of a pool over ``x`` and ``x`` padded with ``fill`` (ceil-mode tail included)."""
    kernel, strides, dil, out, begin, end, tail = pool_geometry(ctx, tuple(x.shape), ceil_mode, dilations)
    xp = pad_spatial(x, begin, [e + t for e, t in zip(end, tail)], fill)
    return xp, kernel, strides, dil, out, begin, end


def _separable(xp, kernel, strides, dil, out, reduce):
    """Reduce windows one spatial axis at a time (``reduce`` is "max" or "sum"), one strided
    slice per kernel tap: elementwise maximum / add of views, fast on every device."""
    torch = _torch()
    if 0 in out or xp.shape[0] == 0 or xp.shape[1] == 0:
        return torch.zeros(tuple(xp.shape[:2]) + tuple(out), dtype=xp.dtype, device=xp.device)
    op = torch.maximum if reduce == "max" else torch.add
    y = xp
    for i in reversed(range(len(kernel))):  # innermost axis first: the largest reduction on contiguous data
        k, s, d, o = kernel[i], strides[i], dil[i], out[i]
        idx = [slice(None)] * y.dim()
        acc = None
        for t in range(k):
            idx[2 + i] = slice(t * d, t * d + (o - 1) * s + 1, s)
            v = y[tuple(idx)]
            if acc is None:
                acc = v
            elif t == 1:
                acc = op(acc, v)          # a fresh tensor: later taps accumulate into it
            else:
                op(acc, v, out=acc)
        y = acc
    return y


def _use_native(x) -> bool:
    """torch's max_pool kernels beat elementwise maxima on CUDA; on the CPU device they do not."""
    return x.device.type == "cuda"


def _native_max(xp, kernel, strides, dil, out):
    import torch.nn.functional as F

    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[len(kernel)]
    y = fn(xp, kernel, strides, 0, dil)
    if list(y.shape[2:]) != list(out):
        y = y[(slice(None), slice(None)) + tuple(slice(0, o) for o in out)]
    return y


# -- MaxPool ------------------------------------------------------------------------------------

@KERNELS.register("MaxPool", 1, 8, 10, 11, 12, 22)
def max_pool(ctx):
    torch = _torch()
    v = ctx.since_version
    ceil_mode = bool(ctx.attr("ceil_mode", 0)) if v >= 10 else False
    storage_order = int(ctx.attr("storage_order", 0)) if v >= 8 else 0
    want_indices = v >= 8 and ctx.output_requested(1)
    allowed = [torch.float16, torch.float32, torch.float64]
    if v >= 12:
        allowed += [torch.int8, torch.uint8]
    if v >= 22:
        allowed.append(torch.bfloat16)
    allowed = tuple(allowed)

    def run(x):
        check_dtype(ctx, x, allowed, "X")
        if x.dtype in (torch.int8, torch.uint8):
            fill = float(torch.iinfo(x.dtype).min)
        else:
            fill = float("-inf")
        # 8-bit integers and the narrow floats are exact in float32
        xc = x if x.dtype in (torch.float32, torch.float64) else x.to(torch.float32)
        xp, kernel, strides, dil, out, begin, _ = _prepare(ctx, xc, ceil_mode, fill, dilations=v >= 10)
        if want_indices:
            y, idx = _max_with_indices(xp, x, kernel, strides, dil, out, begin)
            return y.to(x.dtype), idx
        if _use_native(xp) and len(kernel) <= 3 and 0 not in out and x.shape[0] and x.shape[1]:
            y = _native_max(xp, kernel, strides, dil, out)
        else:
            y = _separable(xp, kernel, strides, dil, out, "max")
        return y.to(x.dtype)

    def _max_with_indices(xp, x, kernel, strides, dil, out, begin):
        nd = len(kernel)
        in_shape = list(x.shape[2:])
        n, c = x.shape[:2]
        dev = x.device
        lead = (slice(None), slice(None))
        sstr = index_strides(in_shape, storage_order)
        if 0 in out or n == 0 or c == 0:
            return (torch.zeros((n, c, *out), dtype=xp.dtype, device=dev),
                    torch.zeros((n, c, *out), dtype=torch.int64, device=dev))
        grids = torch.meshgrid(*(torch.arange(o, dtype=torch.int64, device=dev) * s - b
                                 for o, s, b in zip(out, strides, begin)), indexing="ij")
        base_flat = sum(g * st for g, st in zip(grids, sstr))
        best = best_idx = None
        for offs in itertools.product(*(range(k) for k in kernel)):
            sl = tuple(slice(o * d, o * d + (m - 1) * s + 1, s) for o, d, m, s in zip(offs, dil, out, strides))
            val = xp[lead + sl]
            flat = base_flat + sum(o * d * st for o, d, st in zip(offs, dil, sstr))
            if best is None:
                best = val
                best_idx = flat.expand(val.shape)
            else:
                better = val > best
                best = torch.where(better, val, best)
                best_idx = torch.where(better, flat, best_idx)
        spatial = int(np.prod(in_shape))
        base = (torch.arange(n * c, dtype=torch.int64, device=dev) * spatial).reshape((n, c) + (1,) * nd)
        return best, best_idx + base

    return run


# -- AveragePool / LpPool -----------------------------------------------------------------------

@KERNELS.register("AveragePool", 1, 7, 10, 11, 19, 22)
def average_pool(ctx):
    torch = _torch()
    v = ctx.since_version
    ceil_mode = bool(ctx.attr("ceil_mode", 0)) if v >= 10 else False
    include_pad = bool(ctx.attr("count_include_pad", 0)) if v >= 7 else False
    divisors = {}

    def run(x):
        check_float(ctx, x, "X", bf16=v >= 22)
        ct = compute_dtype(x.dtype)
        xp, kernel, strides, dil, out, begin, end = _prepare(ctx, x.to(ct), ceil_mode, 0.0, dilations=v >= 19)
        y = _separable(xp, kernel, strides, dil, out, "sum")
        key = (tuple(x.shape[2:]), ct, str(x.device))
        div = divisors.get(key)
        if div is None:
            d = average_divisor(list(x.shape[2:]), kernel, strides, dil, out, begin, end, include_pad)
            div = divisors[key] = torch.as_tensor(d, dtype=ct).to(x.device)
        return (y / div).to(x.dtype)

    return run


def _lp_p(ctx):
    return float(ctx.attr("p", 2))      # a FLOAT attribute in version 1, an INT from 2


@KERNELS.register("LpPool", 1, 2, 11, 18, 22)
def lp_pool(ctx):
    v = ctx.since_version
    ceil_mode = bool(ctx.attr("ceil_mode", 0)) if v >= 18 else False
    p = _lp_p(ctx)

    def run(x):
        check_float(ctx, x, "X", bf16=v >= 22)
        ct = compute_dtype(x.dtype)
        xa = x.to(ct).abs().pow(p)
        xp, kernel, strides, dil, out, _, _ = _prepare(ctx, xa, ceil_mode, 0.0, dilations=v >= 18)
        y = _separable(xp, kernel, strides, dil, out, "sum")
        return y.pow(1.0 / p).to(x.dtype)

    return run


# -- global pools -------------------------------------------------------------------------------

def _spatial_axes(ctx, x):
    if x.dim() < 2:
        ctx.fail(f"the input must have rank 2 or more, got {x.dim()}")
    return tuple(range(2, x.dim()))


@KERNELS.register("GlobalAveragePool", 1, 22)
def global_average_pool(ctx):
    bf16 = ctx.since_version >= 22

    def run(x):
        check_float(ctx, x, "X", bf16)
        axes = _spatial_axes(ctx, x)
        xc = x.to(compute_dtype(x.dtype))
        if not axes:
            return x.clone()
        return xc.mean(dim=axes, keepdim=True).to(x.dtype)

    return run


@KERNELS.register("GlobalMaxPool", 1, 22)
def global_max_pool(ctx):
    bf16 = ctx.since_version >= 22

    def run(x):
        check_float(ctx, x, "X", bf16)
        axes = _spatial_axes(ctx, x)
        if not axes:
            return x.clone()
        return x.amax(dim=axes, keepdim=True)

    return run


@KERNELS.register("GlobalLpPool", 1, 2, 22)
def global_lp_pool(ctx):
    p = _lp_p(ctx)
    bf16 = ctx.since_version >= 22

    def run(x):
        check_float(ctx, x, "X", bf16)
        axes = _spatial_axes(ctx, x)
        ct = compute_dtype(x.dtype)
        s = x.to(ct).abs().pow(p)
        if axes:
            s = s.sum(dim=axes, keepdim=True)
        return s.pow(1.0 / p).to(x.dtype)

    return run


# -- MaxUnpool ----------------------------------------------------------------------------------

@KERNELS.register("MaxUnpool", 9, 11, 22)
def max_unpool(ctx):
    torch = _torch()
    bf16 = ctx.since_version >= 22

    def run(x, indices, output_shape=None):
        check_float(ctx, x, "X", bf16)
        check_dtype(ctx, indices, (torch.int64,), "I")
        if x.dim() < 3:
            ctx.fail(f"X must have rank 3 or more, got {x.dim()}")
        inferred = unpool_shape(ctx, tuple(x.shape), tuple(indices.shape))
        total = int(np.prod(inferred))
        flat_i = indices.reshape(-1)
        if flat_i.numel():
            lo, hi = int(flat_i.min().item()), int(flat_i.max().item())
            if lo < 0 or hi >= total:
                ctx.fail(f"an index is outside the unpooled tensor of shape {inferred}")
        y = torch.zeros(total, dtype=x.dtype, device=x.device)
        y[flat_i] = x.reshape(-1)
        y = y.reshape(inferred)
        if output_shape is None:
            return y
        shape = [int(v) for v in output_shape.reshape(-1).tolist()]
        if len(shape) != x.dim():
            ctx.fail(f"output_shape {shape} must have {x.dim()} values")
        res = torch.zeros(shape, dtype=x.dtype, device=x.device)
        sl = tuple(slice(0, min(a, b)) for a, b in zip(shape, inferred))
        res[sl] = y[sl]
        return res

    return run


# -- ROI pools ----------------------------------------------------------------------------------
# The regions are data, but they decide the shapes of the bins and of the sampling grids:
# they are read on the host (one small transfer per call); the pooling runs on the device.

@KERNELS.register("MaxRoiPool", 1, 22)
def max_roi_pool(ctx):
    torch = _torch()
    ph, pw = [int(v) for v in ctx.attr("pooled_shape")]
    scale = float(ctx.attr("spatial_scale", 1.0))
    bf16 = ctx.since_version >= 22

    def run(x, rois):
        check_float(ctx, x, "X", bf16)
        check_dtype(ctx, rois, (x.dtype,), "rois")
        if x.dim() != 4 or rois.dim() != 2 or rois.shape[1] != 5:
            ctx.fail(f"X must be (N, C, H, W) and rois (R, 5), got {tuple(x.shape)} and {tuple(rois.shape)}")
        n, c, h, w = x.shape
        y = torch.zeros((rois.shape[0], c, ph, pw), dtype=x.dtype, device=x.device)
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        for r, roi in enumerate(np.asarray(rois.to(torch.float64).tolist(), dtype=np.float64).reshape(-1, 5)):
            b = int(roi[0])
            if not 0 <= b < n:
                ctx.fail(f"roi {r} names batch {b}, X has {n}")
            hlo, hhi, wlo, whi = roi_pool_bins(roi, scale, ph, pw, h, w)
            cols = torch.zeros((c, h, pw), dtype=x.dtype, device=x.device)
            wempty = whi <= wlo
            for j in range(pw):
                if not wempty[j]:
                    cols[:, :, j] = x[b, :, :, int(wlo[j]):int(whi[j])].amax(dim=2)
            empty_t = torch.as_tensor(wempty, device=x.device)
            for i in range(ph):
                if hhi[i] > hlo[i]:
                    y[r, :, i] = torch.where(empty_t, zero, cols[:, int(hlo[i]):int(hhi[i])].amax(dim=1))
        return y

    return run


@KERNELS.register("RoiAlign", 10, 16, 22)
def roi_align(ctx):
    torch = _torch()
    mode, oh, ow, ratio, scale, half_pixel = roi_align_attrs(ctx)
    bf16 = ctx.since_version >= 22

    def run(x, rois, batch_indices):
        check_float(ctx, x, "X", bf16)
        check_dtype(ctx, rois, (x.dtype,), "rois")
        check_dtype(ctx, batch_indices, (torch.int64,), "batch_indices")
        if x.dim() != 4 or rois.dim() != 2 or rois.shape[1] != 4:
            ctx.fail(f"X must be (N, C, H, W) and rois (R, 4), got {tuple(x.shape)} and {tuple(rois.shape)}")
        bi = [int(v) for v in batch_indices.reshape(-1).tolist()]
        if len(bi) != rois.shape[0]:
            ctx.fail(f"batch_indices has {len(bi)} values for {rois.shape[0]} rois")
        n, c, h, w = x.shape
        ct = compute_dtype(x.dtype)
        dev = x.device
        xc = x.to(ct)
        y = torch.zeros((rois.shape[0], c, oh, ow), dtype=ct, device=dev)
        host_rois = np.asarray(rois.to(torch.float64).tolist(), dtype=np.float64).reshape(-1, 4)
        for r, roi in enumerate(host_rois):
            b = bi[r]
            if not 0 <= b < n:
                ctx.fail(f"batch index {b} of roi {r} is outside X's batch of {n}")
            gh, gw, ydata, xdata = roi_align_samples(roi, scale, half_pixel, oh, ow, ratio, h, w)
            yl, yh, wyl, wyh, vy = ydata
            xl, xh, wxl, wxh, vx = xdata
            img = xc[b]
            if mode == "avg":
                # separable: each output bin is a weighted sum along rows, then along columns
                count = max(gh * gw, 1)
                my, mx = roi_avg_weights(oh, ow, h, w, ydata, xdata)
                myt = torch.as_tensor(my, device=dev).to(ct)
                mxt = torch.as_tensor(mx, device=dev).to(ct)
                with full_precision(img):
                    y[r] = torch.einsum("ph,chw,qw->cpq", myt, img, mxt) / count
            else:
                if gh * gw == 0:
                    continue
                # per sample: the largest weighted corner, then the largest sample of the bin
                valid = vy.reshape(oh, gh, 1, 1) & vx.reshape(1, 1, ow, gw)
                best = None
                for ys, wy in ((yl, wyl), (yh, wyh)):
                    for xs, wx in ((xl, wxl), (xh, wxh)):
                        wgt = np.where(valid, wy.reshape(oh, gh, 1, 1) * wx.reshape(1, 1, ow, gw), 0.0)
                        yy = np.where(valid, ys.reshape(oh, gh, 1, 1), 0)
                        xx = np.where(valid, xs.reshape(1, 1, ow, gw), 0)
                        flat = torch.as_tensor((yy * w + xx).reshape(-1), device=dev)
                        vals = img.reshape(c, -1).index_select(1, flat).reshape(c, oh, gh, ow, gw)
                        vals = vals * torch.as_tensor(wgt, device=dev).to(ct)
                        best = vals if best is None else torch.maximum(best, vals)
                y[r] = best.amax(dim=(2, 4))
        return y.to(x.dtype)

    return run
