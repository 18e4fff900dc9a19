"""Resampling operators of ai.onnx: Resize, Upsample, GridSample, AffineGrid.

Operators and the definitions (since_versions) implemented:

* Resize 10 (the Upsample rule: asymmetric coordinates; nearest takes floor when an axis
  grows and ceil when it shrinks; linear), 11 (roi, scales, sizes; every
  ``coordinate_transformation_mode`` of the time, ``tf_half_pixel_for_nn`` included,
  ``nearest_mode``, ``cubic_coeff_a``, ``exclude_outside``, ``extrapolation_value``),
  13 (roi/scales optional; ``tf_half_pixel_for_nn`` gone), 18 (``axes``, ``antialias``,
  ``keep_aspect_ratio_policy``), 19 (``half_pixel_symmetric``).  ``pytorch_half_pixel`` maps
  a length-1 output to source 0, as the definition writes (the ONNX reference uses -0.5).
  Output extents from ``scales`` are floor(scale * input) whatever the roi, as the ONNX
  reference and onnxruntime compute them (the text of 13+ also multiplies by roi_end -
  roi_start for tf_crop_and_resize).
* Upsample 1 (``height_scale``/``width_scale``, nearest/bilinear on NCHW), 7 (``scales``
  attribute), 9, 10 (``scales`` input; deprecated at 10 and still evaluated, Clause 14.5).
  Same rule as Resize 10.
* GridSample 16 (bilinear/nearest/bicubic, 4-D), 20, 22 (linear/nearest/cubic, any rank);
  zeros/border/reflection padding, ``align_corners``; nearest rounds half to even.  As in the
  ONNX reference (and its test vectors), an out-of-range sampling coordinate is first brought
  inside (clamped for ``border``, reflected for ``reflection``), then every tap is padded;
  onnxruntime skips the first step for cubic + border, so its results differ there.
* AffineGrid 20 (2-D and 3-D).

Interpolation is separable: one pass per resized axis, each a gather of a fixed number of
taps per output position and a weighted sum (taps and weights follow the ONNX reference:
an exact source coordinate takes ratio 1 on its left neighbour pair, taps are clamped to the
edge, antialias widens the kernel by 1/scale when downsampling).  Integer outputs are
rounded half to even and saturated.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from onnxkit.runtime import KernelTable

from .nn_conv import compute_dtype

KERNELS = KernelTable()

COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize", "tf_half_pixel_for_nn")


# -- per-axis coefficient rules -----------------------------------------------------------------

#: The nearest_mode values (the last, "simple", is Upsample's and Resize-10's own rule).
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


@functools.lru_cache(maxsize=None)   # one rule object per mode: hashable, cacheable
def _nearest_rule(mode):
    def coeffs(r, scale):
        r = r[:, None]
        if mode == "round_prefer_floor":
            c = np.hstack([r <= 0.5, r > 0.5])
        elif mode == "round_prefer_ceil":
            c = np.hstack([r < 0.5, r >= 0.5])
        elif mode == "floor":
            c = np.hstack([np.ones_like(r, bool), np.zeros_like(r, bool)])
        elif mode == "ceil":
            c = np.hstack([np.zeros_like(r, bool), np.ones_like(r, bool)])
        elif mode == "simple":  # Upsample / Resize-10: floor growing, ceil shrinking
            up = scale >= 1
            c = np.hstack([np.full_like(r, up, bool), np.full_like(r, not up, bool)])
        else:
            raise ValueError(mode)
        c = c.astype(np.float64)
        c[r[:, 0] == 1] = (0.0, 1.0)
        return c

    return coeffs


def _linear(r, scale):
    return np.stack([1 - r, r], axis=1)


def _cubic_kernel(x, a):
    x = np.abs(x)
    x2, x3 = x * x, x * x * x
    near = (a + 2) * x3 - (a + 3) * x2 + 1
    far = a * x3 - 5 * a * x2 + 8 * a * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


@functools.lru_cache(maxsize=None)
def _cubic_rule(a):
    def coeffs(r, scale):
        return _cubic_kernel(np.stack([r + 1, r, 1 - r, 2 - r], axis=1), a)

    return coeffs


def _linear_aa(r, scale):
    s = min(scale, 1.0)
    start = int(np.floor(-1 / s) + 1)
    taps = np.arange(start, 2 - start)
    c = np.clip(1 - np.abs((taps[None, :] - r[:, None]) * s), 0, 1)
    return c / c.sum(axis=1, keepdims=True)


@functools.lru_cache(maxsize=None)
def _cubic_aa_rule(a):
    def coeffs(r, scale):
        s = min(scale, 1.0)
        start = int(np.floor(-2 / s) + 1)
        taps = np.arange(start, 2 - start)
        c = _cubic_kernel(s * (taps[None, :] - r[:, None]), a)
        return c / c.sum(axis=1, keepdims=True)

    return coeffs


def _source_coords(mode, out_len, in_len, scale, roi):
    y = np.arange(out_len, dtype=np.float64)
    out_f = scale * in_len
    extrap = None
    if mode == "align_corners":
        x = np.zeros(out_len) if out_f == 1 else y * (in_len - 1) / (out_f - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_crop_and_resize":
        lo, hi = roi
        x = np.full(out_len, (hi - lo) * (in_len - 1) / 2) if out_f == 1 else y * (hi - lo) * (in_len - 1) / (out_f - 1)
        x = x + lo * (in_len - 1)
        extrap = (x < 0) | (x > in_len - 1)
    elif mode == "pytorch_half_pixel":
        x = np.zeros(out_len) if out_len == 1 else (y + 0.5) / scale - 0.5
    elif mode == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    elif mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / out_f)
        x = offset + (y + 0.5) / scale - 0.5
    else:
        raise ValueError(mode)
    return x, extrap


def axis_taps(rule, coord_mode, in_len, out_len, scale, roi, exclude_outside):
    """How one axis of ``in_len`` is resampled to ``out_len`` (> 0): ``(pick, idx, coeffs,
    extrap)``, ``pick`` (out_len,) the one source index per output of a nearest-like rule (else
    None), else ``idx``/``coeffs`` (out_len, taps) the source taps and their weights;
    ``extrap``: the outputs to set to the extrapolation value (tf_crop_and_resize), or None.
    Host-side numpy on the shapes and scales alone: the gpu backend uses it too."""
    x, extrap = _source_coords(coord_mode, out_len, in_len, scale, roi)
    base = np.floor(x)
    exact = x == base
    ratio = np.where(exact, 1.0, x - base)
    coeffs = rule(ratio, scale)
    n = coeffs.shape[1]
    # the n taps nearest to x (ties to the smaller index)
    if n % 2 == 0:
        start = np.where(exact, base - n // 2, base - n // 2 + 1)
    else:
        frac = x - base
        start = np.where(frac <= 0.5, base - (n - 1) // 2, base - (n - 1) // 2 + 1)
    idx = start.astype(np.int64)[:, None] + np.arange(n)[None, :]
    if exclude_outside:
        coeffs = np.where((idx < 0) | (idx >= in_len), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    idx = np.clip(idx, 0, in_len - 1)
    if n == 2 and np.all(coeffs[:, 0] * coeffs[:, 1] == 0):
        # nearest: one tap per output position
        return np.where(coeffs[:, 0] != 0, idx[:, 0], idx[:, 1]), None, None, extrap
    return None, idx, coeffs, extrap


def _resize_axis(data, axis, scale, out_len, rule, coord_mode, roi, exclude_outside, extrapolation):
    in_len = data.shape[axis]
    if out_len == 0:
        shape = list(data.shape)
        shape[axis] = 0
        return np.empty(shape, dtype=data.dtype)
    pick, idx, coeffs, extrap = axis_taps(rule, coord_mode, in_len, out_len, scale, roi, exclude_outside)
    moved = np.moveaxis(data, axis, -1)
    if pick is not None:
        res = moved[..., pick].astype(data.dtype, copy=False)
    else:
        res = np.zeros(moved.shape[:-1] + (out_len,), dtype=data.dtype)
        for t in range(idx.shape[1]):
            res += moved[..., idx[:, t]] * coeffs[:, t].astype(data.dtype)
    if extrap is not None and extrap.any():
        res[..., extrap] = extrapolation
    return np.moveaxis(res, -1, axis)


def resize_extents(ctx, shape, scales, sizes, policy="stretch", axes=None):
    """``(scales, sizes)``, both full-rank, of Resize of an input of extents ``shape`` given
    ``sizes`` or ``scales`` (one of them None) and ``keep_aspect_ratio_policy`` over ``axes``;
    ctx.fail unless every scale is positive.  Host-side: the gpu backend uses it too."""
    shape = list(shape)
    r = len(shape)
    if sizes is not None:
        scales = [sizes[i] / shape[i] if shape[i] else 1.0 for i in range(r)]
        if policy != "stretch":
            axes = list(range(r)) if axes is None else axes
            pick = min if policy == "not_larger" else max
            s = pick(scales[i] for i in axes)
            scales = [s if i in axes else 1.0 for i in range(r)]
            sizes = [int(s * shape[i] + 0.5) if i in axes else shape[i] for i in range(r)]
    else:
        sizes = [int(np.floor(np.float64(s) * n)) for s, n in zip(scales, shape)]
    if any(s <= 0 for s in scales):
        ctx.fail(f"scales must be positive, got {list(scales)}")
    return scales, sizes


def resize_rule(ctx, mode, coord_mode, nearest_mode, cubic_a, antialias):
    """The per-axis weight rule of ``mode`` (a hashable function of (ratios, scale)); ctx.fail
    for an unknown mode or coordinate_transformation_mode."""
    if mode == "nearest":
        if nearest_mode not in NEAREST_MODES:
            ctx.fail(f"attribute nearest_mode is {nearest_mode!r}, not one of {', '.join(NEAREST_MODES[:-1])}")
        rule = _nearest_rule(nearest_mode)
    elif mode == "linear":
        rule = _linear_aa if antialias else _linear
    elif mode == "cubic":
        rule = _cubic_aa_rule(cubic_a) if antialias else _cubic_rule(cubic_a)
    else:
        ctx.fail(f"attribute mode is {mode!r}, not one of nearest, linear, cubic")
    if coord_mode not in COORD_MODES:
        ctx.fail(f"attribute coordinate_transformation_mode is {coord_mode!r}, not one this operator defines")
    return rule


def resize_steps(ctx, shape, scales, sizes, coord_mode, roi):
    """``(axis, scale, size, axis_roi)`` of each axis that Resize changes, in order."""
    r = len(shape)
    for axis in range(r):
        axis_roi = None if roi is None else (float(roi[axis]), float(roi[r + axis]))
        if sizes[axis] == shape[axis] and np.isclose(scales[axis], 1.0) and \
                (axis_roi is None or coord_mode != "tf_crop_and_resize" or axis_roi == (0.0, 1.0)):
            continue
        if coord_mode == "tf_crop_and_resize" and axis_roi is None:
            ctx.fail("tf_crop_and_resize needs roi")
        yield axis, float(scales[axis]), int(sizes[axis]), axis_roi


def interpolate(ctx, x, scales, sizes, *, mode, coord_mode="half_pixel", nearest_mode="round_prefer_floor",
                cubic_a=-0.75, exclude_outside=False, extrapolation=0.0, antialias=False, roi=None,
                policy="stretch", axes=None):
    """Resize ``x`` to ``sizes`` or by ``scales`` (both full-rank lists, one of them None);
    ``axes``: the axes ``keep_aspect_ratio_policy`` applies to (default all)."""
    scales, sizes = resize_extents(ctx, x.shape, scales, sizes, policy, axes)
    rule = resize_rule(ctx, mode, coord_mode, nearest_mode, cubic_a, antialias)
    if x.dtype.kind in "iu" or x.dtype == np.bool_:
        data = x.astype(np.float64)
    else:
        data = x.astype(compute_dtype(x.dtype), copy=False)
    for axis, scale, size, axis_roi in resize_steps(ctx, x.shape, scales, sizes, coord_mode, roi):
        data = _resize_axis(data, axis, scale, size, rule, coord_mode, axis_roi, exclude_outside, extrapolation)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return np.clip(np.rint(data), info.min, info.max).astype(x.dtype)
    return data.astype(x.dtype, copy=False)


def _given(v):
    return v is not None and np.asarray(v).size > 0


def resize_attrs(ctx):
    """Resize's attributes: the keyword options of :func:`interpolate` and the ``axes``
    attribute (None before 18)."""
    v = ctx.since_version
    mode = ctx.attr_str("mode", "nearest")
    if v == 10:
        opts = dict(mode=mode, coord_mode="asymmetric", nearest_mode="simple")
    else:
        opts = dict(mode=mode, coord_mode=ctx.attr_str("coordinate_transformation_mode", "half_pixel"),
                    nearest_mode=ctx.attr_str("nearest_mode", "round_prefer_floor"),
                    cubic_a=float(ctx.attr("cubic_coeff_a", -0.75)),
                    exclude_outside=bool(ctx.attr("exclude_outside", 0)),
                    extrapolation=float(ctx.attr("extrapolation_value", 0.0)))
    base = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"}
    allowed = {11: base | {"tf_half_pixel_for_nn"}, 13: base, 18: base, 19: base | {"half_pixel_symmetric"}}.get(v)
    if allowed is not None and opts["coord_mode"] not in allowed:
        ctx.fail(f"attribute coordinate_transformation_mode is {opts['coord_mode']!r}, not defined in Resize-{v}")
    if v >= 18:
        opts.update(antialias=bool(ctx.attr("antialias", 0)),
                    policy=ctx.attr_str("keep_aspect_ratio_policy", "stretch"))
        if opts["policy"] not in ("stretch", "not_larger", "not_smaller"):
            ctx.fail(f"attribute keep_aspect_ratio_policy is {opts['policy']!r}, not stretch, not_larger or not_smaller")
    axes_attr = ctx.attr("axes") if v >= 18 else None
    if mode not in ("nearest", "linear", "cubic"):
        ctx.fail(f"attribute mode is {mode!r}, not one of nearest, linear, cubic")
    return opts, axes_attr


def resize_targets(ctx, shape, axes_attr, roi, scales, sizes):
    """Resize's inputs over ``axes`` widened to full rank for :func:`interpolate`:
    ``scales, sizes, roi, axes``.  ``roi``, ``scales`` and ``sizes`` are host sequences, None
    where the input is not given."""
    r = len(shape)
    axes = list(range(r)) if not axes_attr else [int(a) % r for a in axes_attr]
    if axes_attr and (len(set(axes)) != len(axes) or any(not -r <= int(a) < r for a in axes_attr)):
        ctx.fail(f"axes {list(axes_attr)} are invalid for rank {r}")
    k = len(axes)
    full_scales = full_sizes = full_roi = None
    if sizes is not None:
        if scales is not None:
            ctx.fail("only one of scales and sizes may be given")
        if len(sizes) != k:
            ctx.fail(f"sizes has {len(sizes)} values, expected {k}")
        full_sizes = list(shape)
        for a, s in zip(axes, sizes):
            full_sizes[a] = s
    elif scales is not None:
        if len(scales) != k:
            ctx.fail(f"scales has {len(scales)} values, expected {k}")
        full_scales = [1.0] * r
        for a, s in zip(axes, scales):
            full_scales[a] = s
    else:
        ctx.fail("one of scales and sizes must be given")
    if roi is not None:
        if len(roi) != 2 * k:
            ctx.fail(f"roi has {len(roi)} values, expected {2 * k}")
        full_roi = [0.0] * r + [1.0] * r
        for i, a in enumerate(axes):
            full_roi[a], full_roi[r + a] = roi[i], roi[k + i]
    return full_scales, full_sizes, full_roi, axes


@KERNELS.register("Resize", 10, 11, 13, 18, 19)
def resize(ctx):
    v = ctx.since_version
    opts, axes_attr = resize_attrs(ctx)

    def run(x, roi=None, scales=None, sizes=None):
        if v == 10:
            roi, scales, sizes = None, roi, None
        full_scales, full_sizes, full_roi, axes = resize_targets(
            ctx, x.shape, axes_attr,
            np.asarray(roi, dtype=np.float64).reshape(-1) if _given(roi) else None,
            [float(s) for s in np.asarray(scales, dtype=np.float32).reshape(-1)] if _given(scales) else None,
            [int(s) for s in np.asarray(sizes).reshape(-1)] if _given(sizes) else None)
        return interpolate(ctx, x, full_scales, full_sizes, roi=full_roi, axes=axes, **opts)

    return run


def upsample_mode(ctx):
    """Upsample's ``mode`` as :func:`interpolate` names it."""
    mode = ctx.attr_str("mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    if mode not in ("nearest", "linear"):
        ctx.fail(f"attribute mode is {mode!r}, not nearest, linear or bilinear")
    return mode


@KERNELS.register("Upsample", 1, 7, 9, 10)
def upsample(ctx):
    v = ctx.since_version
    mode = upsample_mode(ctx)

    def go(x, scales):
        if len(scales) != x.ndim:
            ctx.fail(f"scales has {len(scales)} values for rank {x.ndim}")
        return interpolate(ctx, x, scales, None, mode=mode, coord_mode="asymmetric", nearest_mode="simple")

    if v == 1:
        hs, ws = float(ctx.attr("height_scale")), float(ctx.attr("width_scale"))
        return lambda x: go(x, [1.0, 1.0, hs, ws]) if x.ndim == 4 else ctx.fail("Upsample-1 needs a 4-D input")
    if v == 7:
        sc = [float(s) for s in ctx.attr("scales")]
        return lambda x: go(x, sc)
    return lambda x, scales: go(x, [float(s) for s in np.asarray(scales, dtype=np.float32).reshape(-1)])


# -- GridSample ---------------------------------------------------------------------------------

def _reflect(x, lo, hi):
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, np.where(above, x - hi, 0))
    n = np.floor(d / rng)
    rem = d - n * rng
    even = n % 2 == 0
    lo_side = np.where(even, lo + rem, hi - rem)
    hi_side = np.where(even, hi - rem, lo + rem)
    return np.where(below, lo_side, np.where(above, hi_side, x))


@KERNELS.register("GridSample", 16, 20, 22)
def grid_sample(ctx):
    mode = ctx.attr_str("mode", "linear")
    names = ("bilinear", "nearest", "bicubic") if ctx.since_version < 20 else ("linear", "nearest", "cubic")
    if mode not in names:
        ctx.fail(f"mode {mode!r} is not one of {names} (GridSample-{ctx.since_version})")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding = ctx.attr_str("padding_mode", "zeros")
    align = bool(ctx.attr("align_corners", 0))
    if mode not in ("linear", "nearest", "cubic") or padding not in ("zeros", "border", "reflection"):
        ctx.fail(f"unknown mode {mode!r} or padding_mode {padding!r}")

    def run(x, grid):
        nd = x.ndim - 2
        n, c = x.shape[:2]
        if grid.ndim != x.ndim or grid.shape[0] != n or grid.shape[-1] != nd:
            ctx.fail(f"grid of shape {grid.shape} does not match X of shape {x.shape}")
        if ctx.since_version < 20 and nd != 2:
            ctx.fail("GridSample-16 takes 4-D inputs only")
        dims = list(x.shape[2:])
        out = grid.shape[1:-1]
        ct = compute_dtype(x.dtype)
        gdt = np.float32 if grid.dtype != np.float64 else np.float64
        g = grid.astype(gdt).reshape(n, -1, nd)[..., ::-1]           # (N, Q, nd) in axis order
        coords, borders = [], []
        for i, size in enumerate(dims):
            v = g[..., i]
            if align:
                xi = (v + gdt(1)) / gdt(2) * gdt(size - 1)
                lo, hi = 0.0, size - 1.0
            else:
                xi = ((v + gdt(1)) * gdt(size) - gdt(1)) / gdt(2)
                lo, hi = -0.5, size - 0.5
            if mode == "nearest":
                xi = np.rint(xi)
            if padding == "border":
                xi = np.where((xi < lo) | (xi > hi), np.clip(xi, 0, size - 1), xi)
            elif padding == "reflection":
                xi = _reflect(xi, lo, hi)
            coords.append(xi.astype(np.float64))
            borders.append((lo, hi))
        if mode == "nearest":
            taps = [[(np.asarray(cc).astype(np.int64), np.ones_like(cc))] for cc in coords]
        else:
            taps = []
            for cc in coords:
                f = np.floor(cc)
                t = cc - f
                f = f.astype(np.int64)
                if mode == "linear":
                    taps.append([(f, 1 - t), (f + 1, t)])
                else:
                    w = _cubic_kernel(np.stack([t + 1, t, 1 - t, 2 - t]), -0.75)
                    taps.append([(f + k - 1, w[k]) for k in range(4)])
        flat = x.astype(ct, copy=False).reshape(n, c, -1)
        q = g.shape[1]
        y = np.zeros((n, c, q), dtype=ct)
        sstr = [int(np.prod(dims[i + 1:])) for i in range(nd)]
        for combo in itertools.product(*taps):
            weight = np.ones((n, q))
            index = np.zeros((n, q), dtype=np.int64)
            for i, (ti, wi) in enumerate(combo):
                size = dims[i]
                if padding == "zeros":
                    weight = weight * np.where((ti >= 0) & (ti < size), wi, 0.0)
                    ti = np.clip(ti, 0, size - 1)
                elif padding == "border":
                    weight = weight * wi
                    ti = np.clip(ti, 0, size - 1)
                else:
                    weight = weight * wi
                    ti = np.clip(_reflect(ti.astype(np.float64), *borders[i]).astype(np.int64), 0, size - 1)
                index += ti * sstr[i]
            vals = np.take_along_axis(flat, np.broadcast_to(index[:, None, :], (n, c, q)), axis=2)
            y += vals * weight[:, None, :].astype(ct)
        return y.reshape(n, c, *out).astype(x.dtype, copy=False)

    return run


def affine_grid_base(spatial, align_corners) -> np.ndarray:
    """AffineGrid's normalised target coordinates, homogeneous, in (x, y[, z]) order (the spatial
    axes reversed): a ``[prod(spatial), nd + 1]`` float64 array."""
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
def affine_grid(ctx):
    align = bool(ctx.attr("align_corners", 0))

    def run(theta, size):
        sz = [int(s) for s in np.asarray(size).reshape(-1)]
        spatial = sz[2:]
        nd = len(spatial)
        if nd not in (2, 3) or theta.shape[1:] != (nd, nd + 1):
            ctx.fail(f"theta {theta.shape} and size {sz} must describe a 2-D or 3-D affine grid")
        if theta.shape[0] != sz[0]:
            ctx.fail(f"theta has batch {theta.shape[0]}, size says {sz[0]}")
        ct = compute_dtype(theta.dtype)
        base = affine_grid_base(spatial, align)
        grid = np.einsum("pk,njk->npj", base.astype(ct), theta.astype(ct, copy=False))
        return grid.reshape(sz[0], *spatial, nd).astype(theta.dtype, copy=False)

    return run
