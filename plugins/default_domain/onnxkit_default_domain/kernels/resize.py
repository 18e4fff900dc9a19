"""Resizing operators of ai.onnx (every backend): Resize and Upsample.

Resize-10 and every Upsample follow the Upsample rule: asymmetric coordinates, nearest takes
floor when an axis grows and ceil when it shrinks, or linear (Upsample's ``bilinear``).
Resize-11 brings roi / scales / sizes, every ``coordinate_transformation_mode`` of its time
(``tf_half_pixel_for_nn`` included, gone again in 13), ``nearest_mode``, ``cubic_coeff_a``,
``exclude_outside`` and ``extrapolation_value``; 13 makes roi and scales optional; 18 adds
``axes``, ``antialias`` and ``keep_aspect_ratio_policy``; 19 ``half_pixel_symmetric``.
Upsample takes ``height_scale`` / ``width_scale`` on NCHW (1), a ``scales`` attribute (7) or
input (9; deprecated at 10 and still evaluated, Clause 14.5).  ``pytorch_half_pixel`` maps a
length-1 output to source 0, as the definition writes (the ONNX reference uses -0.5).

The output extents and scales come from
:func:`onnxkit_default_domain.inference.resize.resize_extents`, the function shape inference
uses, so the two cannot disagree.  Interpolation is separable: for each resized axis the
source taps and their weights are worked out on the host from the extents and scales alone
(numpy, cached per geometry: an exact source coordinate takes ratio 1 on its left neighbour
pair, taps are clamped to the edge, antialias widens the kernel by 1/scale when
downsampling); the backend then does one ``take`` per tap along that axis and a weighted sum
(one ``take`` for nearest).  Floats compute in float32 (float16, bfloat16) or float64;
integers and booleans in float64, integer outputs rounded half to even and saturated.  Complex
and string data are refused.
"""

from __future__ import annotations

import functools

import numpy as np
from ._common import device_of

from onnxkit.plugin import KernelTable, arrays, size_guard

from ..inference.resize import resize_extents
from ._common import compute_dtype, norm_axes, shape_of, size_of

KERNELS = KernelTable()

COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize", "tf_half_pixel_for_nn")
#: The nearest_mode values (the last, "simple", is Upsample's and Resize-10's own rule).
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


# -- per-axis weight rules: host numpy, each a hashable function of (ratios, scale) ---------------
@functools.lru_cache(maxsize=None)
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
        else:  # "simple", Upsample / Resize-10: floor growing, ceil shrinking
            up = scale >= 1
            c = np.hstack([np.full_like(r, up, bool), np.full_like(r, not up, bool)])
        c = c.astype(np.float64)
        c[r[:, 0] == 1] = (0.0, 1.0)
        return c

    return coeffs


def _linear(r, scale):
    return np.stack([1 - r, r], axis=1)


def cubic_weights(xp, x, a):
    """The cubic convolution kernel with coefficient ``a`` at distances ``x`` (any namespace:
    numpy on the host for Resize, the backend's for GridSample)."""
    x = xp.abs(x)
    x2, x3 = x * x, x * x * x
    near = (a + 2) * x3 - (a + 3) * x2 + 1
    far = a * x3 - 5 * a * x2 + 8 * a * x - 4 * a
    return xp.where(x <= 1, near, xp.where(x < 2, far, xp.zeros_like(x)))


@functools.lru_cache(maxsize=None)
def _cubic_rule(a):
    def coeffs(r, scale):
        return cubic_weights(np, np.stack([r + 1, r, 1 - r, 2 - r], axis=1), a)

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
        c = cubic_weights(np, s * (taps[None, :] - r[:, None]), a)
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
    else:  # half_pixel_symmetric
        offset = in_len / 2 * (1 - out_len / out_f)
        x = offset + (y + 0.5) / scale - 0.5
    return x, extrap


@functools.lru_cache(maxsize=512)
def axis_taps(rule, coord_mode, in_len, out_len, scale, roi, exclude_outside):
    """How one axis of ``in_len`` is resampled to ``out_len`` (> 0): ``(pick, idx, coeffs,
    extrap)`` host arrays, cached per geometry (never written to).  ``pick`` (out_len,): the one
    source index per output of a nearest-like rule (else None); else ``idx`` / ``coeffs``
    (taps, out_len): the source index and weight of each tap; ``extrap``: the outputs to set
    to the extrapolation value (tf_crop_and_resize), or None when there are none."""
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
        start = np.where(x - base <= 0.5, base - (n - 1) // 2, base - (n - 1) // 2 + 1)
    idx = start.astype(np.int64)[:, None] + np.arange(n)[None, :]
    if exclude_outside:
        coeffs = np.where((idx < 0) | (idx >= in_len), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    idx = np.clip(idx, 0, in_len - 1)
    if extrap is not None and not extrap.any():
        extrap = None
    if n == 2 and np.all(coeffs[:, 0] * coeffs[:, 1] == 0):      # nearest: one tap per output
        return np.where(coeffs[:, 0] != 0, idx[:, 0], idx[:, 1]), None, None, extrap
    return None, np.ascontiguousarray(idx.T), np.ascontiguousarray(coeffs.T), extrap


# -- attributes ----------------------------------------------------------------------------------
def resize_rule(ctx, mode, coord_mode, nearest_mode, cubic_a, antialias):
    """The per-axis weight rule of ``mode``; ctx.fail for an unknown mode, nearest_mode or
    coordinate_transformation_mode."""
    if mode not in ("nearest", "linear", "cubic"):
        ctx.fail(f"attribute mode is {mode!r}, not one of nearest, linear, cubic")
    if nearest_mode not in NEAREST_MODES:
        ctx.fail(f"attribute nearest_mode is {nearest_mode!r}, not one of {', '.join(NEAREST_MODES[:-1])}")
    if coord_mode not in COORD_MODES:
        ctx.fail(f"attribute coordinate_transformation_mode is {coord_mode!r}, not one this operator defines")
    if mode == "nearest":
        return _nearest_rule(nearest_mode)
    if mode == "linear":
        return _linear_aa if antialias else _linear
    return _cubic_aa_rule(cubic_a) if antialias else _cubic_rule(cubic_a)


def resize_attrs(ctx) -> dict:
    """Resize's attributes, typed and checked for the node's definition: the keyword options of
    :func:`resample` plus ``axes`` (None before 18) and ``policy``."""
    v = ctx.since_version
    mode = ctx.attr_str("mode")
    opts = dict(coord_mode="asymmetric", nearest_mode="simple", cubic_a=-0.75, exclude_outside=False,
                extrapolation=0.0, antialias=False)
    if v > 10:
        opts.update(coord_mode=ctx.attr_str("coordinate_transformation_mode", "half_pixel"),
                    nearest_mode=ctx.attr_str("nearest_mode", "round_prefer_floor"),
                    cubic_a=float(ctx.attr("cubic_coeff_a", -0.75)),
                    exclude_outside=bool(ctx.attr("exclude_outside", 0)),
                    extrapolation=float(ctx.attr("extrapolation_value", 0.0)))
        if opts["nearest_mode"] == "simple":
            ctx.fail("attribute nearest_mode 'simple' is not defined")
    base = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"}
    allowed = {11: base | {"tf_half_pixel_for_nn"}, 13: base, 18: base, 19: base | {"half_pixel_symmetric"}}.get(v)
    if allowed is not None and opts["coord_mode"] not in allowed:
        ctx.fail(f"attribute coordinate_transformation_mode is {opts['coord_mode']!r}, not defined in Resize-{v}")
    policy = "stretch"
    if v >= 18:
        opts["antialias"] = bool(ctx.attr("antialias", 0))
        policy = ctx.attr_str("keep_aspect_ratio_policy", "stretch")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            ctx.fail(f"attribute keep_aspect_ratio_policy is {policy!r}, not stretch, not_larger or not_smaller")
    rule = resize_rule(ctx, mode, opts["coord_mode"], opts["nearest_mode"], opts["cubic_a"], opts["antialias"])
    axes = ctx.attr("axes") if v >= 18 else None
    return dict(opts, rule=rule, axes=None if not axes else [int(a) for a in axes], policy=policy)


def upsample_mode(ctx) -> str:
    """Upsample's ``mode`` as Resize names it."""
    mode = ctx.attr_str("mode")
    mode = "linear" if mode == "bilinear" else mode
    if mode not in ("nearest", "linear"):
        ctx.fail(f"attribute mode is {mode!r}, not nearest, linear or bilinear")
    return mode


# -- resampling ----------------------------------------------------------------------------------
def _resize_axis(ctx, data, axis, scale, out_len, rule, coord_mode, roi, exclude_outside, extrapolation):
    xp = ctx.xp
    shape = shape_of(data)
    in_len = shape[axis]
    if out_len == 0 or size_of(data) == 0:
        if in_len == 0 and out_len > 0 and all(d for i, d in enumerate(shape) if i != axis):
            ctx.fail(f"cannot resize an empty axis {axis} to {out_len}")
        shape[axis] = out_len
        return xp.zeros(tuple(shape), dtype=data.dtype, device=device_of(data))
    pick, idx, coeffs, extrap = axis_taps(rule, coord_mode, in_len, out_len, scale, roi, exclude_outside)
    if pick is not None:
        res = xp.take(data, ctx.from_host(pick), axis=axis)
    else:
        bshape = (out_len,) + (1,) * (len(shape) - 1 - axis)    # a weight per output along ``axis``
        host = np.float64 if arrays.dtype_name(data.dtype) == "float64" else np.float32
        res = None
        for t in range(idx.shape[0]):
            weight = ctx.from_host(coeffs[t].astype(host).reshape(bshape))
            term = xp.take(data, ctx.from_host(idx[t]), axis=axis) * weight
            if res is None:
                res = term
            else:
                res += term              # an array this kernel made
    if extrap is not None:
        mask = ctx.from_host(extrap.reshape((out_len,) + (1,) * (len(shape) - 1 - axis)))
        res = xp.where(mask, xp.asarray(extrapolation, dtype=res.dtype, device=device_of(res)), res)
    return res


def resized_axes(ctx, shape, scales, sizes, coord_mode, roi) -> list:
    """``[(axis, scale, out_len, axis_roi)]``: the axes :func:`resample` resizes, in order (an
    axis whose size and scale stay, and whose roi is whole under tf_crop_and_resize, is kept);
    ctx.fail where tf_crop_and_resize has no roi."""
    r, out = len(shape), []
    for axis in range(r):
        axis_roi = None if roi is None else (float(roi[axis]), float(roi[r + axis]))
        if sizes[axis] == shape[axis] and np.isclose(scales[axis], 1.0) and \
                (axis_roi is None or coord_mode != "tf_crop_and_resize" or axis_roi == (0.0, 1.0)):
            continue
        if coord_mode == "tf_crop_and_resize" and axis_roi is None:
            ctx.fail("tf_crop_and_resize needs roi")
        out.append((axis, float(scales[axis]), int(sizes[axis]), axis_roi))
    return out


def resample(ctx, x, scales, sizes, *, rule, coord_mode, nearest_mode="simple", cubic_a=-0.75,
             exclude_outside=False, extrapolation=0.0, antialias=False, roi=None):
    """``x`` resampled to ``sizes`` by ``scales`` (full-rank lists from ``resize_extents``) with
    the weight ``rule``; ``roi`` full-rank (starts then ends) or None.  ctx.fail for a scale
    that is not positive, a negative size, complex or string data."""
    xp = ctx.xp
    if any(s is None or s <= 0 for s in scales):
        ctx.fail(f"scales must be positive, got {list(scales)}")
    if any(s is None or s < 0 for s in sizes):
        ctx.fail(f"sizes must not be negative, got {list(sizes)}")
    dt = x.dtype
    if arrays.is_complex(dt) or not (arrays.is_float(dt) or arrays.is_integer(dt) or arrays.is_bool(dt)):
        ctx.fail(f"element type {arrays.dtype_name(dt)} cannot be interpolated")
    exact = arrays.is_integer(dt) or arrays.is_bool(dt)
    data = xp.astype(x, xp.float64 if exact else compute_dtype(xp, dt), copy=False)
    for axis, scale, out_len, axis_roi in resized_axes(ctx, shape_of(x), scales, sizes, coord_mode, roi):
        data = _resize_axis(ctx, data, axis, scale, out_len, rule, coord_mode, axis_roi, exclude_outside, extrapolation)
    if arrays.is_integer(dt):
        info = xp.iinfo(dt)
        return xp.astype(xp.clip(xp.round(data), float(info.min), float(info.max)), dt)
    return xp.astype(data, dt, copy=False)


def _host_values(ctx, v, dtype):
    """An optional small input (roi, scales, sizes) as a host list; None when absent or empty."""
    if v is None or size_of(v) == 0:
        return None
    return ctx.to_host(v).astype(dtype).reshape(-1).tolist()


def resize_geometry(ctx, axes_attr, policy, x, roi, scales, sizes):
    """``(full scales, full sizes, full roi or None)`` of one Resize call from its inputs (roi,
    scales, sizes as given, absent ones None) and its ``axes`` attribute and aspect policy;
    ctx.fail for the inputs' errors (both or neither of scales and sizes, wrong counts)."""
    shape = shape_of(x)
    r = len(shape)
    axes = list(range(r)) if axes_attr is None else norm_axes(ctx, axes_attr, r)
    roi, scales, sizes = (_host_values(ctx, a, t) for a, t in ((roi, np.float64), (scales, np.float32),
                                                                (sizes, np.int64)))
    if sizes is not None and scales is not None:
        ctx.fail("only one of scales and sizes may be given")
    if sizes is None and scales is None:
        ctx.fail("one of scales and sizes must be given")
    given = ("sizes", sizes) if sizes is not None else ("scales", scales)
    if len(given[1]) != len(axes):
        ctx.fail(f"{given[0]} has {len(given[1])} values, expected {len(axes)}")
    full_roi = None
    if roi is not None:
        if len(roi) != 2 * len(axes):
            ctx.fail(f"roi has {len(roi)} values, expected {2 * len(axes)}")
        full_roi = [0.0] * r + [1.0] * r
        for i, a in enumerate(axes):
            full_roi[a], full_roi[r + a] = roi[i], roi[len(axes) + i]
    full_scales, full_sizes = resize_extents(shape, axes, scales=scales, sizes=sizes, policy=policy)
    return full_scales, full_sizes, full_roi


@KERNELS.register("Resize", 10, 11, 13, 18, 19)
@size_guard("value")
def resize(ctx):
    v = ctx.since_version
    opts = resize_attrs(ctx)
    axes_attr, policy = opts.pop("axes"), opts.pop("policy")

    def run(x, roi=None, scales=None, sizes=None):
        if v == 10:
            roi, scales, sizes = None, roi, None
        full_scales, full_sizes, full_roi = resize_geometry(ctx, axes_attr, policy, x, roi, scales, sizes)
        return resample(ctx, x, full_scales, full_sizes, roi=full_roi, **opts)

    return run


@KERNELS.register("Upsample", 1, 7, 9, 10)
@size_guard("value")
def upsample(ctx):
    v = ctx.since_version
    rule = resize_rule(ctx, upsample_mode(ctx), "asymmetric", "simple", -0.75, False)

    def go(x, scales):
        if len(scales) != x.ndim:
            ctx.fail(f"scales has {len(scales)} values for rank {x.ndim}")
        shape = shape_of(x)
        full_scales, sizes = resize_extents(shape, range(len(shape)), scales=scales)
        return resample(ctx, x, full_scales, sizes, rule=rule, coord_mode="asymmetric")

    if v == 1:
        hs, ws = float(ctx.attr("height_scale")), float(ctx.attr("width_scale"))

        def run1(x):
            if x.ndim != 4:
                ctx.fail("Upsample-1 needs a 4-D input")
            return go(x, [1.0, 1.0, hs, ws])

        return run1
    if v == 7:
        sc = [float(s) for s in ctx.attr("scales")]
        return lambda x: go(x, sc)
    return lambda x, scales: go(x, _host_values(ctx, scales, np.float32) or [])
