"""Pooling operators of ai.onnx.

Operators and the definitions (since_versions) implemented:

* MaxPool 1, 8, 10, 11, 12, 22 - ``Indices`` output (8+) with ``storage_order``,
  ``ceil_mode`` and ``dilations`` (10+), integer inputs (12+), any spatial rank.
* AveragePool 1, 7, 10, 11, 19, 22 - ``count_include_pad`` (7+), ``ceil_mode`` (10+),
  ``dilations`` (19+).
* LpPool 1, 2, 11, 18, 22 - ``p`` a float in version 1, an int from 2; ``ceil_mode`` and
  ``dilations`` from 18.
* GlobalAveragePool 1, 22; GlobalMaxPool 1, 22; GlobalLpPool 1, 2, 22.
* MaxUnpool 9, 11, 22 (indices address the unpadded shape implied by the attributes; an
  ``output_shape`` input places that result at the origin of a tensor of that shape, as the
  ONNX reference does).
* MaxRoiPool 1, 22 (Caffe ROI pooling: ROI corners rounded half away from zero, floor/ceil bins, empty bin = 0).
* RoiAlign 10, 16, 22 (version 10 has no ``coordinate_transformation_mode``: it is
  ``output_half_pixel``; ``avg`` and ``max`` modes as in the reference implementation).

Windows are reduced one spatial axis at a time (max and sum are separable), each axis with
one strided slice per kernel tap; the average divisor is the outer product of per-axis counts.
"""

from __future__ import annotations

import itertools

import numpy as np

from onnxkit.runtime import KernelTable

from .nn_conv import compute_dtype, conv_geometry, pad_spatial, spatial_attrs, window_slice

KERNELS = KernelTable()


def _pool_axis(x, axis, k, s, d, out, op):
    """Reduce ``x`` along ``axis`` with windows of ``k`` taps (stride ``s``, dilation ``d``)."""
    idx = [slice(None)] * x.ndim
    acc = None
    for t in range(k):
        idx[axis] = slice(t * d, t * d + (out - 1) * s + 1, s)
        v = x[tuple(idx)]
        if acc is None:
            acc = v.copy()
        else:
            op(acc, v, out=acc)
    return acc


def pool_geometry(ctx, shape, ceil_mode, dilations=True):
    """Geometry of a pool over an input of ``shape`` (host arithmetic on the attributes):
    ``kernel, strides, dilations, out, begin, end, tail`` - ``tail`` is how far past
    ``end`` a ``ceil_mode`` window reaches.  ``dilations=False`` ignores the attribute."""
    nd = len(shape) - 2
    if nd < 1:
        ctx.fail(f"the input must have rank 3 or more, got {len(shape)}")
    kernel, strides, dil, pads, auto_pad = spatial_attrs(ctx, nd)
    if kernel is None:
        ctx.fail("kernel_shape is required")
    if not dilations:
        dil = [1] * nd
    in_shape = list(shape[2:])
    out, begin, end = conv_geometry(ctx, in_shape, kernel, strides, dil, pads, auto_pad, ceil_mode)
    tail = [max(0, (o - 1) * s + (k - 1) * dd + 1 - (i + b + e))
            for o, s, k, dd, i, b, e in zip(out, strides, kernel, dil, in_shape, begin, end)]
    return kernel, strides, dil, out, begin, end, tail


def _prepare(ctx, x, ceil_mode, fill):
    """Geometry of a pool over ``x`` and ``x`` padded with ``fill`` (ceil-mode tail included)."""
    kernel, strides, dil, out, begin, end, tail = pool_geometry(ctx, x.shape, ceil_mode)
    xp = pad_spatial(x, begin, [e + t for e, t in zip(end, tail)], fill)
    return xp, kernel, strides, dil, out, begin, end


def _separable(xp, kernel, strides, dil, out, op):
    y = xp
    for i in range(len(kernel)):
        if 0 in out:
            return np.zeros(xp.shape[:2] + tuple(out), dtype=xp.dtype)
        y = _pool_axis(y, 2 + i, kernel[i], strides[i], dil[i], out[i], op)
    return y


def _lowest(dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) or dtype.kind == "V" else np.iinfo(dtype).min


def index_strides(in_shape, storage_order):
    """Element strides of MaxPool's flattened spatial index (row-major, or column-major for
    ``storage_order`` 1)."""
    nd = len(in_shape)
    if storage_order == 1:
        return [int(np.prod(in_shape[:i])) for i in range(nd)]
    return [int(np.prod(in_shape[i + 1:])) for i in range(nd)]


# -- MaxPool ------------------------------------------------------------------------------------

@KERNELS.register("MaxPool", 1, 8, 10, 11, 12, 22)
def max_pool(ctx):
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    storage_order = int(ctx.attr("storage_order", 0))
    want_indices = ctx.since_version >= 8 and ctx.output_requested(1)

    def run(x):
        narrow = x.dtype.kind == "V" or x.dtype == np.float16 or x.dtype.kind not in "fiu"
        xc = x.astype(np.float32) if narrow else x
        xp, kernel, strides, dil, out, begin, _ = _prepare(ctx, xc, ceil_mode, _lowest(xc.dtype))
        if not want_indices:
            return _separable(xp, kernel, strides, dil, out, np.maximum).astype(x.dtype, copy=False)
        return _max_with_indices(xp, x, kernel, strides, dil, out, begin)

    def _max_with_indices(xp, x, kernel, strides, dil, out, begin):
        nd = len(kernel)
        in_shape = x.shape[2:]
        n, c = x.shape[:2]
        lead = (slice(None), slice(None))
        best = None
        best_idx = np.zeros((n, c, *out), dtype=np.int64)
        sstr = index_strides(in_shape, storage_order)
        grids = np.meshgrid(*(np.arange(o) * s - b for o, s, b in zip(out, strides, begin)), indexing="ij")
        for offs in itertools.product(*(range(k) for k in kernel)):
            v = xp[lead + window_slice(offs, dil, out, strides)]
            flat = sum((g + o * d) * st for g, o, d, st in zip(grids, offs, dil, sstr))
            if best is None:
                best = v.copy()
                best_idx[...] = flat
            else:
                better = v > best
                np.copyto(best, v, where=better)
                np.copyto(best_idx, np.broadcast_to(flat, best_idx.shape), where=better)
        spatial = int(np.prod(in_shape))
        base = (np.arange(n * c, dtype=np.int64) * spatial).reshape((n, c) + (1,) * nd)
        return best.astype(x.dtype, copy=False), best_idx + base

    return run


# -- AveragePool / LpPool -----------------------------------------------------------------------

def _counts(in_len, k, s, d, out, begin, end, include_pad):
    """Per-axis number of window taps counted by the average."""
    o = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - begin
    lo, hi = (-begin, in_len + end) if include_pad else (0, in_len)
    return ((o >= lo) & (o < hi)).sum(axis=1)


def average_divisor(in_shape, kernel, strides, dil, out, begin, end, include_pad):
    """The average's divisor over the output's spatial shape (float64): the outer product of
    the per-axis counts."""
    div = np.ones((), dtype=np.float64)
    for i, (k, s, d, o) in enumerate(zip(kernel, strides, dil, out)):
        cnt = _counts(in_shape[i], k, s, d, o, begin[i], end[i], include_pad)
        div = np.multiply.outer(div, cnt)
    return div


@KERNELS.register("AveragePool", 1, 7, 10, 11, 19, 22)
def average_pool(ctx):
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    include_pad = bool(ctx.attr("count_include_pad", 0))

    def run(x):
        ct = compute_dtype(x.dtype)
        xp, kernel, strides, dil, out, begin, end = _prepare(ctx, x.astype(ct, copy=False), ceil_mode, 0)
        y = _separable(xp, kernel, strides, dil, out, np.add)
        div = average_divisor(x.shape[2:], kernel, strides, dil, out, begin, end, include_pad)
        with np.errstate(invalid="ignore", divide="ignore"):
            y = y / div.astype(ct)
        return y.astype(x.dtype, copy=False)

    return run


def _lp_order(ctx) -> float:
    """Attribute ``p`` of LpPool / GlobalLpPool: the order of the Lp norm, a finite number above 0."""
    p = float(ctx.attr("p", 2))
    if not (0 < p < float("inf")):
        ctx.fail(f"attribute p is {p}; the order of an Lp norm must be a finite number greater than 0")
    return p


@KERNELS.register("LpPool", 1, 2, 11, 18, 22)
def lp_pool(ctx):
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    p = _lp_order(ctx)

    def run(x):
        ct = compute_dtype(x.dtype)
        xa = np.abs(x.astype(ct, copy=False)) ** ct.type(p)
        xp, kernel, strides, dil, out, _, _ = _prepare(ctx, xa, ceil_mode, 0)
        y = _separable(xp, kernel, strides, dil, out, np.add)
        return (y ** ct.type(1.0 / p)).astype(x.dtype, copy=False)

    return run


# -- global pools -------------------------------------------------------------------------------

def _spatial_axes(ctx, x):
    if x.ndim < 2:
        ctx.fail(f"the input must have rank 2 or more, got {x.ndim}")
    return tuple(range(2, x.ndim))


@KERNELS.register("GlobalAveragePool", 1, 22)
def global_average_pool(ctx):
    def run(x):
        ct = compute_dtype(x.dtype)
        return x.astype(ct, copy=False).mean(axis=_spatial_axes(ctx, x), keepdims=True).astype(x.dtype, copy=False)

    return run


@KERNELS.register("GlobalMaxPool", 1, 22)
def global_max_pool(ctx):
    def run(x):
        ct = compute_dtype(x.dtype)
        return x.astype(ct, copy=False).max(axis=_spatial_axes(ctx, x), keepdims=True).astype(x.dtype, copy=False)

    return run


@KERNELS.register("GlobalLpPool", 1, 2, 22)
def global_lp_pool(ctx):
    p = _lp_order(ctx)

    def run(x):
        ct = compute_dtype(x.dtype)
        s = (np.abs(x.astype(ct, copy=False)) ** ct.type(p)).sum(axis=_spatial_axes(ctx, x), keepdims=True)
        return (s ** ct.type(1.0 / p)).astype(x.dtype, copy=False)

    return run


# -- MaxUnpool ----------------------------------------------------------------------------------

def unpool_shape(ctx, x_shape, i_shape):
    """MaxUnpool's unpadded output shape, from the attributes and ``X``'s shape (``I``'s must match)."""
    nd = len(x_shape) - 2
    kernel, strides, _, pads, _ = spatial_attrs(ctx, nd)
    if kernel is None or len(kernel) != nd:
        ctx.fail(f"kernel_shape must have {nd} values")
    pads = pads or [0] * (2 * nd)
    if len(pads) != 2 * nd or len(strides) != nd:
        ctx.fail("pads/strides do not match the input rank")
    if i_shape != x_shape:
        ctx.fail(f"I has shape {i_shape}, X has {x_shape}")
    return list(x_shape[:2]) + [(x_shape[2 + i] - 1) * strides[i] - pads[i] - pads[nd + i] + kernel[i]
                                for i in range(nd)]


@KERNELS.register("MaxUnpool", 9, 11, 22)
def max_unpool(ctx):
    def run(x, indices, output_shape=None):
        inferred = unpool_shape(ctx, x.shape, indices.shape)
        total = int(np.prod(inferred))
        flat_i = indices.reshape(-1).astype(np.int64)
        if flat_i.size and (flat_i.min() < 0 or flat_i.max() >= total):
            ctx.fail(f"an index is outside the unpooled tensor of shape {inferred}")
        y = np.zeros(total, dtype=x.dtype)
        y[flat_i] = x.reshape(-1)
        y = y.reshape(inferred)
        if output_shape is None:
            return y
        shape = [int(v) for v in np.asarray(output_shape).reshape(-1)]
        if len(shape) != x.ndim:
            ctx.fail(f"output_shape {shape} must have {x.ndim} values")
        res = np.zeros(shape, dtype=x.dtype)
        sl = tuple(slice(0, min(a, b)) for a, b in zip(shape, inferred))
        res[sl] = y[sl]
        return res

    return run


# -- ROI pools ----------------------------------------------------------------------------------

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
    x1, y1, x2, y2 = (int(np.sign(v) * np.floor(abs(v * scale) + 0.5)) for v in roi[1:])  # half away from 0
    hlo, hhi = _roi_bins(y1, max(y2 - y1 + 1, 1), ph, h)
    wlo, whi = _roi_bins(x1, max(x2 - x1 + 1, 1), pw, w)
    return hlo, hhi, wlo, whi


@KERNELS.register("MaxRoiPool", 1, 22)
def max_roi_pool(ctx):
    ph, pw = [int(v) for v in ctx.attr("pooled_shape")]
    scale = float(ctx.attr("spatial_scale", 1.0))

    def run(x, rois):
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
            ctx.fail(f"X must be (N, C, H, W) and rois (R, 5), got {x.shape} and {rois.shape}")
        n, c, h, w = x.shape
        y = np.zeros((rois.shape[0], c, ph, pw), dtype=x.dtype)
        for r, roi in enumerate(np.asarray(rois, dtype=np.float64)):
            b = int(roi[0])
            if not 0 <= b < n:
                ctx.fail(f"roi {r} names batch {b}, X has {n}")
            hlo, hhi, wlo, whi = roi_pool_bins(roi, scale, ph, pw, h, w)
            cols = np.zeros((c, h, pw), dtype=x.dtype)
            wempty = whi <= wlo
            for j in range(pw):
                if not wempty[j]:
                    cols[:, :, j] = x[b, :, :, wlo[j]:whi[j]].max(axis=2)
            for i in range(ph):
                if hhi[i] > hlo[i]:
                    y[r, :, i] = np.where(wempty, 0, cols[:, hlo[i]:hhi[i]].max(axis=1))
        return y

    return run


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
    spatial_scale, half_pixel``."""
    mode = (ctx.attr_str("mode", "avg") or "avg").lower()
    oh, ow = int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))
    ratio = int(ctx.attr("sampling_ratio", 0))
    scale = float(ctx.attr("spatial_scale", 1.0))
    ctm = ctx.attr_str("coordinate_transformation_mode", "half_pixel") if ctx.since_version >= 16 else "output_half_pixel"
    half_pixel = ctm == "half_pixel"
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
    return mode, oh, ow, ratio, scale, half_pixel


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
    """RoiAlign ``avg``'s separable weights (float64): ``my`` (oh, h) and ``mx`` (ow, w), the
    bilinear weights of a bin's samples summed per row / column."""
    my = np.zeros((oh, h))
    mx = np.zeros((ow, w))
    for arr, (lo, hi, wl, wh, v) in ((my, ydata), (mx, xdata)):
        rows = np.broadcast_to(np.arange(arr.shape[0])[:, None], lo.shape)
        np.add.at(arr, (rows, lo), np.where(v, wl, 0.0))
        np.add.at(arr, (rows, hi), np.where(v, wh, 0.0))
    return my, mx


@KERNELS.register("RoiAlign", 10, 16, 22)
def roi_align(ctx):
    mode, oh, ow, ratio, scale, half_pixel = roi_align_attrs(ctx)

    def run(x, rois, batch_indices):
        if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4:
            ctx.fail(f"X must be (N, C, H, W) and rois (R, 4), got {x.shape} and {rois.shape}")
        bi = np.asarray(batch_indices).reshape(-1).astype(np.int64)
        if bi.size != rois.shape[0]:
            ctx.fail(f"batch_indices has {bi.size} values for {rois.shape[0]} rois")
        n, c, h, w = x.shape
        ct = compute_dtype(x.dtype)
        xc = x.astype(ct, copy=False)
        y = np.zeros((rois.shape[0], c, oh, ow), dtype=ct)
        for r, roi in enumerate(np.asarray(rois, dtype=np.float64)):
            b = int(bi[r])
            if not 0 <= b < n:
                ctx.fail(f"batch index {b} of roi {r} is outside X's batch of {n}")
            gh, gw, ydata, xdata = roi_align_samples(roi, scale, half_pixel, oh, ow, ratio, h, w)
            yl, yh, wyl, wyh, vy = ydata
            xl, xh, wxl, wxh, vx = xdata
            img = xc[b]
            if mode == "avg":
                count = max(gh * gw, 1)
                my, mx = roi_avg_weights(oh, ow, h, w, ydata, xdata)
                y[r] = np.einsum("ph,chw,qw->cpq", my.astype(ct), img, mx.astype(ct)) / ct.type(count)
            else:
                # per sample: the largest weighted corner, then the largest sample of the bin
                ys = (yl.reshape(oh, gh, 1, 1), yh.reshape(oh, gh, 1, 1))
                wy = (wyl.reshape(oh, gh, 1, 1), wyh.reshape(oh, gh, 1, 1))
                xs = (xl.reshape(1, 1, ow, gw), xh.reshape(1, 1, ow, gw))
                wx = (wxl.reshape(1, 1, ow, gw), wxh.reshape(1, 1, ow, gw))
                valid = vy.reshape(oh, gh, 1, 1) & vx.reshape(1, 1, ow, gw)
                best = None
                for a in (0, 1):
                    for bb in (0, 1):
                        wgt = np.where(valid, wy[a] * wx[bb], 0.0).astype(ct)
                        yy = np.where(valid, ys[a], 0)
                        xx = np.where(valid, xs[bb], 0)
                        v = img[:, yy, xx] * wgt
                        best = v if best is None else np.maximum(best, v)
                if gh * gw == 0:
                    continue
                y[r] = best.max(axis=(2, 4))
        return y.astype(x.dtype, copy=False)

    return run
