"""MaxUnpool and the region pools of ai.onnx, MaxRoiPool and RoiAlign (every backend).

MaxUnpool scatters X to the flat positions of its indices in the unpadded shape implied by
the attributes (:func:`~onnxkit_default_domain.inference.pool.unpool_extents`, the one
inference uses); an ``output_shape`` input places that result at the origin of a tensor of
that shape, as the ONNX reference does.  Indices outside the unpooled tensor are refused.

The regions are data, but they decide the shapes of the bins and of the sampling grids: they
are read on the host (one small transfer per call) and the bins worked out there; the pooling
runs in the backend's namespace.  MaxRoiPool is Caffe's ROI pooling (corners scaled and rounded
half away from zero, floor / ceil bins clipped to the image, an empty bin gives 0).  RoiAlign
samples bilinearly (``avg``: one separable weighted sum per region, two matrix products;
``max``: the largest weighted corner of each sample, then the largest sample of the bin, as
the reference implementation does); version 10 has no ``coordinate_transformation_mode``: it
is ``output_half_pixel``.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, arrays, size_guard

from ..inference.pool import attr_text, declared_attr, pool_attrs, unpool_extents
from ._common import device_of
from ._common import as_dtype, compute_dtype, input_type_checker

KERNELS = KernelTable()


# -- MaxUnpool ----------------------------------------------------------------------------------

@KERNELS.register("MaxUnpool", 9, 11, 22)
@size_guard("value")
def max_unpool(ctx):
    xp = ctx.xp
    check = input_type_checker(ctx)

    def run(x, indices, output_shape=None):
        check(x, indices, output_shape)
        if x.ndim < 3:
            ctx.fail(f"X must have rank 3 or more, got {x.ndim}")
        if tuple(indices.shape) != tuple(x.shape):
            ctx.fail(f"I has shape {list(indices.shape)}, X has {list(x.shape)}")
        inferred = unpool_extents(ctx, [int(d) for d in x.shape], pool_attrs(ctx, x.ndim - 2))
        total = int(np.prod(inferred, dtype=np.int64))
        flat_i = xp.reshape(as_dtype(xp, indices, xp.int64), (-1,))
        if flat_i.shape[0]:
            lo, hi = ctx.ints(xp.stack([xp.min(flat_i), xp.max(flat_i)]))
            if lo < 0 or hi >= total:
                ctx.fail(f"an index is outside the unpooled tensor of shape {inferred}")
        dev = device_of(x)
        y = xp.zeros(total, dtype=x.dtype, device=dev)
        y[flat_i] = xp.reshape(x, (-1,))
        y = xp.reshape(y, tuple(inferred))
        if output_shape is None:
            return y
        shape = ctx.ints(output_shape)
        if len(shape) != x.ndim or any(d < 0 for d in shape):
            ctx.fail(f"output_shape {shape} must have {x.ndim} non-negative values")
        res = xp.zeros(tuple(shape), dtype=x.dtype, device=dev)
        sl = tuple(slice(0, min(a, b)) for a, b in zip(shape, inferred))
        res[sl] = y[sl]
        return res

    return run


# -- MaxRoiPool ---------------------------------------------------------------------------------

def _roi_bins(start, size, count, limit):
    b = size / count
    i = np.arange(count)
    lo = np.clip(np.floor(i * b).astype(np.int64) + start, 0, limit)
    hi = np.clip(np.ceil((i + 1) * b).astype(np.int64) + start, 0, limit)
    return lo, hi


def roi_pool_bins(roi, scale, ph, pw, h, w):
    """MaxRoiPool's bins for one region ``(batch, x1, y1, x2, y2)`` (host float64): the corners
    scaled and rounded half away from zero, then floor/ceil bins clipped to the image:
    ``hlo, hhi, wlo, whi``."""
    x1, y1, x2, y2 = (int(np.sign(v) * np.floor(abs(v * scale) + 0.5)) for v in roi[1:])
    hlo, hhi = _roi_bins(y1, max(y2 - y1 + 1, 1), ph, h)
    wlo, whi = _roi_bins(x1, max(x2 - x1 + 1, 1), pw, w)
    return hlo, hhi, wlo, whi


def _host_rois(ctx, rois, width):
    """The regions as a host float64 array ``(R, width)``."""
    return ctx.to_host(rois).astype(np.float64).reshape(-1, width)


@KERNELS.register("MaxRoiPool", 1, 22)
def max_roi_pool(ctx):
    xp = ctx.xp
    shape = ctx.attr("pooled_shape")
    if not shape or len(shape) != 2 or any(int(v) < 1 for v in shape):
        ctx.fail(f"pooled_shape must be two positive extents, got {None if shape is None else list(shape)}")
    ph, pw = (int(v) for v in shape)
    scale = float(ctx.attr("spatial_scale"))
    check = input_type_checker(ctx)

    def run(x, rois):
        check(x, rois)
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
            ctx.fail(f"X must be (N, C, H, W) and rois (R, 5), got {list(x.shape)} and {list(rois.shape)}")
        n, c, h, w = (int(d) for d in x.shape)
        dev = device_of(x)
        zero = xp.zeros((c,), dtype=x.dtype, device=dev)
        regions = []
        for r, roi in enumerate(_host_rois(ctx, rois, 5)):
            b = int(roi[0])
            if not 0 <= b < n:
                ctx.fail(f"roi {r} names batch {b}, X has {n}")
            hlo, hhi, wlo, whi = roi_pool_bins(roi, scale, ph, pw, h, w)
            # per column bin, the maximum over its columns; then per row bin over its rows
            cols = [xp.max(x[b, :, :, int(wlo[j]):int(whi[j])], axis=2) if whi[j] > wlo[j] else None
                    for j in range(pw)]
            rows = []
            for i in range(ph):
                lo, hi = int(hlo[i]), int(hhi[i])
                rows.append(xp.stack([zero if col is None or hi <= lo else xp.max(col[:, lo:hi], axis=1)
                                      for col in cols], axis=1))
            regions.append(xp.stack(rows, axis=1))
        if not regions:
            return xp.zeros((0, c, ph, pw), dtype=x.dtype, device=dev)
        return xp.stack(regions)

    return run


# -- RoiAlign -----------------------------------------------------------------------------------

def _roi_axis(start, bin_size, pooled, grid, size):
    """Per-sample bilinear data along one axis: (low, high, w_low, w_high, valid), (pooled, grid)."""
    pos = start + np.arange(pooled)[:, None] * bin_size + (np.arange(grid)[None, :] + 0.5) * bin_size / grid
    valid = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    clamp = low >= size - 1
    low = np.where(clamp, size - 1, low)
    high = np.where(clamp, size - 1, low + 1)
    pos = np.where(clamp, low.astype(np.float64), pos)
    frac = pos - low
    return low, high, 1.0 - frac, frac, valid


def roi_align_attrs(ctx):
    """RoiAlign's attributes: ``mode, output_height, output_width, sampling_ratio,
    spatial_scale, half_pixel``; ctx.fail for a value outside its domain."""
    mode = attr_text(ctx, "mode", "avg").lower()
    oh, ow = int(ctx.attr("output_height")), int(ctx.attr("output_width"))
    ratio = int(ctx.attr("sampling_ratio"))
    scale = float(ctx.attr("spatial_scale"))
    ctm = attr_text(ctx, "coordinate_transformation_mode", "half_pixel")
    ctm = ctm if declared_attr(ctx, "coordinate_transformation_mode", None) is not None else "output_half_pixel"
    if ctm not in ("half_pixel", "output_half_pixel"):
        ctx.fail(f"attribute coordinate_transformation_mode is {ctm!r}, not half_pixel or output_half_pixel")
    if mode not in ("avg", "max"):
        ctx.fail(f"attribute mode is {mode!r}, not avg or max")
    for name, v in (("output_height", oh), ("output_width", ow)):
        if v < 1:
            ctx.fail(f"attribute {name} is {v}; an output extent must be at least 1")
    if ratio < 0:
        ctx.fail(f"attribute sampling_ratio is {ratio}; it must be 0 (adaptive) or positive")
    if not np.isfinite(scale):
        ctx.fail(f"attribute spatial_scale is {scale}; it must be finite")
    return mode, oh, ow, ratio, scale, ctm == "half_pixel"


def roi_align_samples(roi, scale, half_pixel, oh, ow, ratio, h, w):
    """The sampling grid of one region ``(x1, y1, x2, y2)`` (host float64): ``gh, gw`` samples
    per bin and :func:`_roi_axis` data along y and along x."""
    off = 0.5 if half_pixel else 0.0
    sw, sh, ew, eh = roi * scale - off
    rw, rh = ew - sw, eh - sh
    if not half_pixel:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    gh = ratio if ratio > 0 else int(np.ceil(rh / oh))
    gw = ratio if ratio > 0 else int(np.ceil(rw / ow))
    return gh, gw, _roi_axis(sh, rh / oh, oh, gh, h), _roi_axis(sw, rw / ow, ow, gw, w)


def roi_avg_weights(oh, ow, h, w, ydata, xdata):
    """RoiAlign ``avg``'s separable weights (host float64): ``my`` (oh, h) and ``mx`` (ow, w),
    the bilinear weights of a bin's samples summed per row / column."""
    my = np.zeros((oh, h))
    mx = np.zeros((ow, w))
    for arr, (lo, hi, wl, wh, v) in ((my, ydata), (mx, xdata)):
        rows = np.broadcast_to(np.arange(arr.shape[0])[:, None], lo.shape)
        np.add.at(arr, (rows, lo), np.where(v, wl, 0.0))
        np.add.at(arr, (rows, hi), np.where(v, wh, 0.0))
    return my, mx


def roi_max_gather(oh, ow, w, gh, gw, ydata, xdata):
    """RoiAlign ``max``'s four corners per sample (host): ``(flat index into H*W, weight)``
    pairs, each of shape ``(oh * gh * ow * gw,)`` (invalid samples: index 0, weight 0)."""
    yl, yh, wyl, wyh, vy = ydata
    xl, xh, wxl, wxh, vx = xdata
    valid = vy.reshape(oh, gh, 1, 1) & vx.reshape(1, 1, ow, gw)
    out = []
    for ys, wy in ((yl, wyl), (yh, wyh)):
        for xs, wx in ((xl, wxl), (xh, wxh)):
            wgt = np.where(valid, wy.reshape(oh, gh, 1, 1) * wx.reshape(1, 1, ow, gw), 0.0)
            flat = np.where(valid, ys.reshape(oh, gh, 1, 1) * w + xs.reshape(1, 1, ow, gw), 0)
            out.append((flat.reshape(-1), wgt.reshape(-1)))
    return out


@KERNELS.register("RoiAlign", 10, 16, 22)
@size_guard("value")
def roi_align(ctx):
    xp = ctx.xp
    mode, oh, ow, ratio, scale, half_pixel = roi_align_attrs(ctx)
    check = input_type_checker(ctx)

    def run(x, rois, batch_indices):
        check(x, rois, batch_indices)
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4:
            ctx.fail(f"X must be (N, C, H, W) and rois (R, 4), got {list(x.shape)} and {list(rois.shape)}")
        bi = ctx.ints(batch_indices)
        if len(bi) != rois.shape[0]:
            ctx.fail(f"batch_indices has {len(bi)} values for {rois.shape[0]} rois")
        n, c, h, w = (int(d) for d in x.shape)
        ct = compute_dtype(xp, x.dtype)
        cname = arrays.dtype_name(ct)
        dev = device_of(x)
        xc = as_dtype(xp, x, ct)
        regions = []
        for r, roi in enumerate(_host_rois(ctx, rois, 4)):
            b = bi[r]
            if not 0 <= b < n:
                ctx.fail(f"batch index {b} of roi {r} is outside X's batch of {n}")
            gh, gw, ydata, xdata = roi_align_samples(roi, scale, half_pixel, oh, ow, ratio, h, w)
            img = xc[b]
            if gh * gw == 0:
                regions.append(xp.zeros((c, oh, ow), dtype=ct, device=dev))
            elif mode == "avg":
                my, mx = roi_avg_weights(oh, ow, h, w, ydata, xdata)
                my = ctx.from_host((my / (gh * gw)).astype(cname))
                mx = ctx.from_host(np.ascontiguousarray(mx.T).astype(cname))
                regions.append(xp.matmul(xp.matmul(my, img), mx))        # (oh, h) @ (c, h, w) @ (w, ow)
            else:
                flat_img = xp.reshape(img, (c, h * w))
                best = None
                for flat, wgt in roi_max_gather(oh, ow, w, gh, gw, ydata, xdata):
                    vals = xp.take(flat_img, ctx.from_host(flat), axis=1) * ctx.from_host(wgt.astype(cname))
                    best = vals if best is None else xp.maximum(best, vals)
                regions.append(xp.max(xp.reshape(best, (c, oh, gh, ow, gw)), axis=(2, 4)))
        if not regions:
            return xp.zeros((0, c, oh, ow), dtype=x.dtype, device=dev)
        return as_dtype(xp, xp.stack(regions), x.dtype)

    return run
