"""Resampling operators of ai.onnx on the gpu backend (torch): Resize, Upsample, GridSample, AffineGrid.

Operators and the definitions (since_versions) implemented:

* Resize 10 (the Upsample rule: asymmetric coordinates; nearest takes floor when an axis
  grows and ceil when it shrinks; linear), 11 (roi, scales, sizes; every
  ``coordinate_transformation_mode`` of the time, ``tf_half_pixel_for_nn`` included,
  ``nearest_mode``, ``cubic_coeff_a``, ``exclude_outside``, ``extrapolation_value``),
  13 (roi/scales optional; ``tf_half_pixel_for_nn`` gone), 18 (``axes``, ``antialias``,
  ``keep_aspect_ratio_policy``), 19 (``half_pixel_symmetric``).  ``pytorch_half_pixel`` maps
  a length-1 output to source 0, as the definition writes.  Output extents from ``scales``
  are floor(scale * input) whatever the roi (as the cpu backend, the ONNX reference and
  onnxruntime compute them).
* Upsample 1 (``height_scale``/``width_scale``, nearest/bilinear on NCHW), 7 (``scales``
  attribute), 9, 10 (``scales`` input).  Same rule as Resize 10.
* GridSample 16 (bilinear/nearest/bicubic, 4-D), 20, 22 (linear/nearest/cubic, any rank);
  zeros/border/reflection padding, ``align_corners``; nearest rounds half to even; an
  out-of-range coordinate is first brought inside (clamped for ``border``, reflected for
  ``reflection``), then every tap is padded - the cpu backend's rule.  Float data only (the
  integer, bool, string and complex data the schema also lists are refused).
* AffineGrid 20 (2-D and 3-D).

``torch.nn.functional.interpolate`` matches ONNX only for some modes and differs in edge
cases (its nearest rule, its own scale-to-coordinate arithmetic, no cubic ``a`` parameter,
no ``exclude_outside`` or roi), so it is not used.  Instead every mode is computed exactly:
interpolation is separable, and for each resized axis the source taps and their weights
are worked out on the host from the shapes and scales alone (numpy, cached per geometry;
the same rules as the cpu backend: an exact source coordinate takes ratio 1 on its left
neighbour pair, taps are clamped to the edge, antialias widens the kernel by 1/scale when
downsampling).  On the device each axis is then one ``index_select`` per tap and a weighted
sum (one ``index_select`` for nearest).  Integer outputs are rounded half to even and
saturated; complex inputs are refused.
"""

from __future__ import annotations

import functools

import numpy as np

from onnxkit_cpu.kernels.resize import (affine_grid_base, axis_taps, resize_attrs, resize_extents, resize_rule, resize_steps,
                                        resize_targets, upsample_mode)

from onnxkit.runtime import KernelTable

from .nn_conv import check_dtype, compute_dtype, full_precision

KERNELS = KernelTable()



def _torch():
    import torch

    return torch


# -- per-axis taps and weights: the cpu backend's host-side numpy, cached per geometry ---------

@functools.lru_cache(maxsize=512)
def _axis_plan(rule, coord_mode, in_len, out_len, scale, roi, exclude_outside):
    """:func:`onnxkit_cpu.kernels.resize.axis_taps`, with ``extrap`` None when no output needs it."""
    pick, idx, coeffs, extrap = axis_taps(rule, coord_mode, in_len, out_len, scale, roi, exclude_outside)
    if extrap is not None and not extrap.any():
        extrap = None
    return pick, idx, coeffs, extrap


def _resize_axis(data, axis, scale, out_len, rule, coord_mode, roi, exclude_outside, extrapolation):
    torch = _torch()
    in_len = data.shape[axis]
    if out_len == 0 or in_len == 0 or data.numel() == 0:
        shape = list(data.shape)
        shape[axis] = out_len
        if in_len == 0 and out_len > 0 and data.numel() == 0 and 0 not in shape:
            raise ValueError(f"cannot resize an empty axis {axis} to {out_len}")
        return torch.zeros(shape, dtype=data.dtype, device=data.device)
    pick, idx, coeffs, extrap = _axis_plan(rule, coord_mode, in_len, out_len, scale, roi, exclude_outside)
    dev = data.device
    moved = data.movedim(axis, -1)
    if pick is not None:
        res = moved.index_select(-1, torch.as_tensor(pick, device=dev))
    else:
        it = torch.as_tensor(idx, device=dev)
        ct = torch.as_tensor(coeffs, device=dev).to(data.dtype)
        res = torch.zeros(moved.shape[:-1] + (out_len,), dtype=data.dtype, device=dev)
        for t in range(idx.shape[1]):
            res += moved.index_select(-1, it[:, t]) * ct[:, t]
    if extrap is not None:
        mask = torch.as_tensor(extrap, device=dev)
        res = torch.where(mask, torch.tensor(extrapolation, dtype=res.dtype, device=dev), res)
    return res.movedim(-1, axis)


def interpolate(ctx, x, scales, sizes, *, mode, coord_mode="half_pixel", nearest_mode="round_prefer_floor",
                cubic_a=-0.75, exclude_outside=False, extrapolation=0.0, antialias=False, roi=None,
                policy="stretch", axes=None):
    """Resize ``x`` to ``sizes`` or by ``scales`` (both full-rank lists, one of them None);
    ``axes``: the axes ``keep_aspect_ratio_policy`` applies to (default all)."""
    torch = _torch()
    shape = list(x.shape)
    scales, sizes = resize_extents(ctx, shape, scales, sizes, policy, axes)
    if any(s < 0 for s in sizes):
        ctx.fail(f"sizes must not be negative, got {list(sizes)}")
    rule = resize_rule(ctx, mode, coord_mode, nearest_mode, cubic_a, antialias)
    is_int = not x.dtype.is_floating_point
    data = x.to(torch.float64) if is_int else x.to(compute_dtype(x.dtype))
    for axis, scale, size, axis_roi in resize_steps(ctx, shape, scales, sizes, coord_mode, roi):
        try:
            data = _resize_axis(data, axis, scale, size, rule, coord_mode, axis_roi, exclude_outside,
                                float(extrapolation))
        except ValueError as exc:
            ctx.fail(str(exc))
    if x.dtype == torch.bool:
        return data.to(torch.bool)
    if is_int:
        info = torch.iinfo(x.dtype)
        return torch.clamp(torch.round(data), info.min, info.max).to(x.dtype)
    return data.to(x.dtype)


def _given(v):
    return v is not None and v.numel() > 0


def _values(t, dtype):
    """A small shape/scale input as a host list (the one place a value must be known on the host)."""
    return t.reshape(-1).to(dtype).tolist()


def _data_types():
    torch = _torch()
    return (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
            torch.int32, torch.int64, torch.bool)


@KERNELS.register("Resize", 10, 11, 13, 18, 19)
def resize(ctx):
    torch = _torch()
    v = ctx.since_version
    if v != 10:
        nearest_mode = ctx.attr_str("nearest_mode", "round_prefer_floor")
        if nearest_mode not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
            ctx.fail(f"unknown nearest_mode {nearest_mode!r}")
    opts, axes_attr = resize_attrs(ctx)

    def run(x, roi=None, scales=None, sizes=None):
        check_dtype(ctx, x, _data_types(), "X")
        if v == 10:
            roi, scales, sizes = None, roi, None
        full_scales, full_sizes, full_roi, axes = resize_targets(
            ctx, list(x.shape), axes_attr,
            _values(roi, torch.float64) if _given(roi) else None,
            _values(scales, torch.float32) if _given(scales) else None,
            [int(s) for s in _values(sizes, torch.int64)] if _given(sizes) else None)
        return interpolate(ctx, x, full_scales, full_sizes, roi=full_roi, axes=axes, **opts)

    return run


@KERNELS.register("Upsample", 1, 7, 9, 10)
def upsample(ctx):
    torch = _torch()
    v = ctx.since_version
    mode = upsample_mode(ctx)

    def go(x, scales):
        check_dtype(ctx, x, _data_types(), "X")
        if len(scales) != x.dim():
            ctx.fail(f"scales has {len(scales)} values for rank {x.dim()}")
        return interpolate(ctx, x, scales, None, mode=mode, coord_mode="asymmetric", nearest_mode="simple")

    if v == 1:
        hs, ws = float(ctx.attr("height_scale")), float(ctx.attr("width_scale"))

        def run1(x):
            if x.dim() != 4:
                ctx.fail("Upsample-1 needs a 4-D input")
            return go(x, [1.0, 1.0, hs, ws])

        return run1
    if v == 7:
        sc = [float(s) for s in ctx.attr("scales")]
        return lambda x: go(x, sc)
    return lambda x, scales: go(x, _values(scales, torch.float32))


# -- GridSample --------------------------------------------------------------------------------

def _reflect(x, lo, hi):
    """``x`` reflected into ``[lo, hi]`` (as often as needed)."""
    torch = _torch()
    rng = hi - lo
    if rng <= 0:
        return torch.full_like(x, lo)
    below, above = x < lo, x > hi
    d = torch.where(below, lo - x, torch.where(above, x - hi, torch.zeros_like(x)))
    n = torch.floor(d / rng)
    rem = d - n * rng
    even = torch.remainder(n, 2) == 0
    lo_side = torch.where(even, lo + rem, hi - rem)
    hi_side = torch.where(even, hi - rem, lo + rem)
    return torch.where(below, lo_side, torch.where(above, hi_side, x))


def _cubic_weights(t, a=-0.75):
    """The 4 cubic-convolution weights of fraction ``t`` (taps -1, 0, 1, 2)."""
    torch = _torch()
    out = []
    for x in (t + 1, t, 1 - t, 2 - t):
        x = x.abs()
        x2, x3 = x * x, x * x * x
        near = (a + 2) * x3 - (a + 3) * x2 + 1
        far = a * x3 - 5 * a * x2 + 8 * a * x - 4 * a
        out.append(torch.where(x <= 1, near, torch.where(x < 2, far, torch.zeros_like(x))))
    return out


@KERNELS.register("GridSample", 16, 20, 22)
def grid_sample(ctx):
    import itertools

    torch = _torch()
    v = ctx.since_version
    mode = ctx.attr_str("mode", "linear")
    names = ("bilinear", "nearest", "bicubic") if v < 20 else ("linear", "nearest", "cubic")
    if mode not in names:
        ctx.fail(f"mode {mode!r} is not one of {names} (GridSample-{v})")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding = ctx.attr_str("padding_mode", "zeros")
    align = bool(ctx.attr("align_corners", 0))
    if padding not in ("zeros", "border", "reflection"):
        ctx.fail(f"unknown padding_mode {padding!r}")
    bf16 = v >= 22
    data_types = (torch.float16, torch.float32, torch.float64) + ((torch.bfloat16,) if bf16 else ())

    def run(x, grid):
        check_dtype(ctx, x, data_types, "X")
        check_dtype(ctx, grid, data_types, "grid")
        nd = x.dim() - 2
        n, c = x.shape[:2]
        if nd < 1 or grid.dim() != x.dim() or grid.shape[0] != n or grid.shape[-1] != nd:
            ctx.fail(f"grid of shape {tuple(grid.shape)} does not match X of shape {tuple(x.shape)}")
        if v < 20 and nd != 2:
            ctx.fail("GridSample-16 takes 4-D inputs only")
        dims = list(x.shape[2:])
        out = tuple(grid.shape[1:-1])
        ct = compute_dtype(x.dtype)
        gdt = torch.float64 if grid.dtype == torch.float64 else torch.float32
        g = grid.to(gdt).reshape(n, -1, nd).flip(-1)                # (N, Q, nd) in axis order
        coords, borders = [], []
        for i, size in enumerate(dims):
            vi = g[..., i]
            if align:
                xi = (vi + 1) / 2 * (size - 1)
                lo, hi = 0.0, size - 1.0
            else:
                xi = ((vi + 1) * size - 1) / 2
                lo, hi = -0.5, size - 0.5
            if mode == "nearest":
                xi = torch.round(xi)                                  # half to even
            if padding == "border":
                xi = torch.where((xi < lo) | (xi > hi), torch.clamp(xi, 0, size - 1), xi)
            elif padding == "reflection":
                xi = _reflect(xi, lo, hi)
            coords.append(xi.to(torch.float64))
            borders.append((lo, hi))
        if mode == "nearest":
            taps = [[(cc.to(torch.int64), torch.ones_like(cc))] for cc in coords]
        else:
            taps = []
            for cc in coords:
                f = torch.floor(cc)
                t = cc - f
                f = f.to(torch.int64)
                if mode == "linear":
                    taps.append([(f, 1 - t), (f + 1, t)])
                else:
                    w = _cubic_weights(t)
                    taps.append([(f + k - 1, w[k]) for k in range(4)])
        flat = x.to(ct).reshape(n, c, -1)
        q = g.shape[1]
        y = torch.zeros((n, c, q), dtype=ct, device=x.device)
        sstr = [int(np.prod(dims[i + 1:])) for i in range(nd)]
        for combo in itertools.product(*taps):
            weight = torch.ones((n, q), dtype=torch.float64, device=x.device)
            index = torch.zeros((n, q), dtype=torch.int64, device=x.device)
            for i, (ti, wi) in enumerate(combo):
                size = dims[i]
                if padding == "zeros":
                    weight = weight * torch.where((ti >= 0) & (ti < size), wi, torch.zeros_like(wi))
                    ti = torch.clamp(ti, 0, size - 1)
                elif padding == "border":
                    weight = weight * wi
                    ti = torch.clamp(ti, 0, size - 1)
                else:
                    weight = weight * wi
                    ti = torch.clamp(_reflect(ti.to(torch.float64), *borders[i]).to(torch.int64), 0, size - 1)
                index = index + ti * sstr[i]
            if flat.shape[2] == 0:
                continue
            vals = torch.gather(flat, 2, index[:, None, :].expand(n, c, q))
            y += vals * weight[:, None, :].to(ct)
        return y.reshape(n, c, *out).to(x.dtype)

    return run


@KERNELS.register("AffineGrid", 20)
def affine_grid(ctx):
    torch = _torch()
    align = bool(ctx.attr("align_corners", 0))

    def run(theta, size):
        check_dtype(ctx, theta, (torch.float16, torch.bfloat16, torch.float32, torch.float64), "theta")
        sz = [int(s) for s in size.reshape(-1).tolist()]
        spatial = sz[2:]
        nd = len(spatial)
        if nd not in (2, 3) or tuple(theta.shape[1:]) != (nd, nd + 1):
            ctx.fail(f"theta {tuple(theta.shape)} and size {sz} must describe a 2-D or 3-D affine grid")
        if theta.shape[0] != sz[0]:
            ctx.fail(f"theta has batch {theta.shape[0]}, size says {sz[0]}")
        ct = compute_dtype(theta.dtype)
        base = affine_grid_base(spatial, align)  # host constants
        bt = torch.as_tensor(base).to(device=theta.device, dtype=ct)
        with full_precision(bt):
            grid = torch.einsum("pk,njk->npj", bt, theta.to(ct))
        return grid.reshape(sz[0], *spatial, nd).to(theta.dtype)

    return run
