"""Sampling operators of ai.onnx (every backend): GridSample and AffineGrid (the resize family;
Resize and Upsample are in ``resize.py``).

GridSample-16 takes 4-D input and modes bilinear / nearest / bicubic; from 20 any rank and
the names linear / nearest / cubic (22 adds bfloat16).  Padding zeros / border / reflection,
``align_corners``; nearest rounds half to even.  As in the ONNX reference (and its test
vectors), an out-of-range sampling coordinate is first brought inside (clamped for
``border``, reflected for ``reflection``), then every tap is padded; onnxruntime skips the
first step for cubic + border, so its results differ there.  Float data only: the integer,
bool, string and complex data the schema also lists are refused, naming the type.
Sampling is one gather of the flattened spatial axes per tap combination (2^nd for linear,
4^nd for cubic) and a weighted sum, in float32 (float16, bfloat16) or float64.

AffineGrid-20: 2-D and 3-D; the normalised target coordinates are made on the host and
multiplied by ``theta`` on the backend.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from ._common import device_of

from onnxkit.plugin import KernelTable, arrays, size_guard

from ._common import check_dtype, compute_dtype, shape_of
from .resize import cubic_weights

KERNELS = KernelTable()


def _reflect(xp, x, lo, hi):
    """``x`` reflected into ``[lo, hi]`` (as often as needed)."""
    rng = hi - lo
    if rng <= 0:
        return xp.full_like(x, lo)
    below, above = x < lo, x > hi
    d = xp.where(below, lo - x, xp.where(above, x - hi, xp.zeros_like(x)))
    n = xp.floor(d / rng)
    rem = d - n * rng
    even = (n - 2 * xp.floor(n / 2)) == 0
    lo_side = xp.where(even, lo + rem, hi - rem)
    hi_side = xp.where(even, hi - rem, lo + rem)
    return xp.where(below, lo_side, xp.where(above, hi_side, x))


def _axis_taps(xp, cc, mode):
    """``[(index, weight), ...]`` of one axis at float64 coordinates ``cc``."""
    if mode == "nearest":
        return [(xp.astype(cc, xp.int64), xp.ones_like(cc))]
    f = xp.floor(cc)
    t = cc - f
    f = xp.astype(f, xp.int64)
    if mode == "linear":
        return [(f, 1 - t), (f + 1, t)]
    return [(f + (k - 1), cubic_weights(xp, d, -0.75)) for k, d in enumerate((t + 1, t, 1 - t, 2 - t))]


@KERNELS.register("GridSample", 16, 20, 22)
@size_guard("product")
def grid_sample(ctx):
    xp = ctx.xp
    v = ctx.since_version
    mode = ctx.attr_str("mode")  # the default: "bilinear" in 16, "linear" from 20 (each schema's)
    names = ("bilinear", "nearest", "bicubic") if v < 20 else ("linear", "nearest", "cubic")
    if mode not in names:
        ctx.fail(f"mode {mode!r} is not one of {names} (GridSample-{v})")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding = ctx.attr_str("padding_mode")
    align = bool(ctx.attr("align_corners"))
    if padding not in ("zeros", "border", "reflection"):
        ctx.fail(f"unknown padding_mode {padding!r}")
    floats = ("float16", "float32", "float64") + (("bfloat16",) if v >= 22 else ())

    def run(x, grid):
        check_dtype(ctx, x, floats, "X")
        check_dtype(ctx, grid, floats, "grid")
        nd = x.ndim - 2
        xs, gs = shape_of(x), shape_of(grid)
        if nd < 1 or grid.ndim != x.ndim or gs[0] != xs[0] or gs[-1] != nd:
            ctx.fail(f"grid of shape {gs} does not match X of shape {xs}")
        if v < 20 and nd != 2:
            ctx.fail("GridSample-16 takes 4-D inputs only")
        n, c, dims = xs[0], xs[1], xs[2:]
        ct = compute_dtype(xp, x.dtype)
        gdt = xp.float64 if arrays.dtype_name(grid.dtype) == "float64" else xp.float32
        g = xp.flip(xp.reshape(xp.astype(grid, gdt), (n, -1, nd)), axis=-1)     # (N, Q, nd) in axis order
        q = int(g.shape[1])
        taps, borders = [], []
        for i, size in enumerate(dims):
            vi = g[..., i]
            if align:
                xi = (vi + 1) / 2 * (size - 1)
                lo, hi = 0.0, size - 1.0
            else:
                xi = ((vi + 1) * size - 1) / 2
                lo, hi = -0.5, size - 0.5
            if mode == "nearest":
                xi = xp.round(xi)                                                 # half to even
            if padding == "border":
                xi = xp.where((xi < lo) | (xi > hi), xp.clip(xi, 0.0, float(size - 1)), xi)
            elif padding == "reflection":
                xi = _reflect(xp, xi, lo, hi)
            taps.append(_axis_taps(xp, xp.astype(xi, xp.float64), mode))
            borders.append((lo, hi))
        flat = xp.reshape(xp.astype(x, ct, copy=False), (n, c, -1))
        dev = device_of(x)
        y = xp.zeros((n, c, q), dtype=ct, device=dev)
        strides = [math.prod(dims[i + 1:]) for i in range(nd)]
        if math.prod(dims) == 0:
            return xp.reshape(y, (n, c, *gs[1:-1]))
        for combo in itertools.product(*taps):
            weight = xp.ones((n, q), dtype=xp.float64, device=dev)
            index = xp.zeros((n, q), dtype=xp.int64, device=dev)
            for i, (ti, wi) in enumerate(combo):
                size = dims[i]
                if padding == "zeros":
                    weight = weight * xp.where((ti >= 0) & (ti < size), wi, xp.zeros_like(wi))
                elif padding == "reflection":
                    weight = weight * wi
                    ti = xp.astype(_reflect(xp, xp.astype(ti, xp.float64), *borders[i]), xp.int64)
                else:
                    weight = weight * wi
                index = index + xp.clip(ti, 0, size - 1) * strides[i]
            vals = xp.take_along_axis(flat, xp.broadcast_to(index[:, None, :], (n, c, q)), axis=2)
            y = y + vals * xp.astype(weight, ct)[:, None, :]
        return xp.astype(xp.reshape(y, (n, c, *gs[1:-1])), x.dtype, copy=False)

    return run


def affine_grid_base(spatial, align_corners) -> np.ndarray:
    """AffineGrid's normalised target coordinates, homogeneous, in (x, y[, z]) order (the spatial
    axes reversed): a ``[prod(spatial), nd + 1]`` float64 host array."""
    axes = []
    for L in spatial:
        if align_corners:
            a = np.linspace(-1.0, 1.0, L) if L > 1 else np.array([-1.0])
        else:
            a = (2 * np.arange(L) + 1) / L - 1
        axes.append(a)
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.reshape(-1) for m in mesh[::-1]] + [np.ones(int(np.prod(spatial)))], axis=1)


@KERNELS.register("AffineGrid", 20)
@size_guard("value")
def affine_grid(ctx):
    xp = ctx.xp
    align = bool(ctx.attr("align_corners"))

    def run(theta, size):
        check_dtype(ctx, theta, ("float16", "bfloat16", "float32", "float64"), "theta")
        sz = ctx.ints(size)
        spatial = sz[2:]
        nd = len(spatial)
        if nd not in (2, 3) or shape_of(theta)[1:] != [nd, nd + 1]:
            ctx.fail(f"theta {shape_of(theta)} and size {sz} must describe a 2-D or 3-D affine grid")
        if theta.shape[0] != sz[0]:
            ctx.fail(f"theta has batch {int(theta.shape[0])}, size says {sz[0]}")
        ct = compute_dtype(xp, theta.dtype)
        host = np.float64 if arrays.dtype_name(ct) == "float64" else np.float32
        base = ctx.from_host(affine_grid_base(spatial, align).astype(host))       # (P, nd + 1)
        grid = base @ xp.permute_dims(xp.astype(theta, ct, copy=False), (0, 2, 1))  # (N, P, nd)
        return xp.astype(xp.reshape(grid, (sz[0], *spatial, nd)), theta.dtype, copy=False)

    return run
