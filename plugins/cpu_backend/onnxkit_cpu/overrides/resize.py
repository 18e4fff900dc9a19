"""Resize (ai.onnx 10, 11, 13, 18, 19) on the cpu backend: the portable family's geometry run
as compiled passes over a (planes, H, W) view (:mod:`onnxkit_cpu.compiled.resize`).

The portable kernel (kernels/resize.py) resamples axis by axis with one ``take`` per tap and a
weighted sum, rebuilding its host-side geometry every call; here the attributes
(``resize_attrs``), the extents (``resize_geometry``, the function shape inference shares), the
axes resized (``resized_axes``) and each axis' taps and weights (``axis_taps``: every mode,
coordinate transformation, nearest rounding, cubic coefficient, antialias and exclude_outside)
are the portable family's, decided once per input key (X's shape and type, the values of roi,
scales and sizes) and kept; a run is one compiled pass per resized axis into arrays made here.
Taken where compiled loops are on, X is float32 or float64 and not empty, only the last two
axes are resized (NCHW images, NCL signals) and no output takes the extrapolation value
(tf_crop_and_resize outside the image); everything else, and every error, is the portable
kernel's.  The results are bit-identical to the portable kernel's (the loop module's docstring).
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit.plugin import parallel_for, splits_across_threads
from onnxkit_cpu.compiled.resize import resize_loops
from onnxkit_cpu.overrides._plans import remember
from onnxkit_default_domain.api import resize as portable

KERNELS = KernelTable()
splits_across_threads(("", "Resize"))
#: output elements worth a block of planes on an intra-op thread of its own
#: (:func:`onnxkit.runtime.threads.parallel_for`)
PLANE_WORK = 32768
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _taps(pick, idx, coeffs, dtype):
    """``(idx, w)`` from ``axis_taps``: (T, n) C-contiguous uint64 indices (non-negative: the
    compiled loops index without a wraparound test) and weights of X's type; a nearest-like
    axis is ``(pick, None)``: one ``take`` along H, the compiled pick along W (uint64)."""
    if pick is not None:
        return pick, None, np.ascontiguousarray(pick, dtype=np.uint64)
    return np.ascontiguousarray(idx, dtype=np.uint64), np.ascontiguousarray(coeffs, dtype=dtype), None


def _key_of(a):
    return None if a is None else (a.dtype.str, a.shape, a.tobytes())


@KERNELS.register("Resize", 10, 11, 13, 18, 19)
def resize(ctx):
    v = ctx.since_version
    fallback = portable.resize(ctx)
    loops = resize_loops()
    if loops is None:
        return fallback
    rows, cols, pick_cols = loops
    opts = portable.resize_attrs(ctx)
    axes_attr, policy = opts.pop("axes"), opts.pop("policy")
    plans: dict = {}

    def plan(x, roi, scales, sizes):
        """``(planes shape, output shape, H taps or None, W taps or None)``, or False."""
        full_scales, full_sizes, full_roi = portable.resize_geometry(ctx, axes_attr, policy, x, roi, scales, sizes)
        if x.dtype not in _FLOATS or x.ndim == 0 or x.size == 0 or \
                any(c is None or c <= 0 for c in full_scales) or any(n is None or n < 0 for n in full_sizes):
            return False                    # the portable kernel runs it, or names the error
        shape = list(x.shape)
        axes = portable.resized_axes(ctx, shape, full_scales, full_sizes, opts["coord_mode"], full_roi)
        if not axes or any(a < x.ndim - 2 or n == 0 for a, _, n, _ in axes):
            return False
        taps = {}
        for axis, scale, n, axis_roi in axes:
            pick, idx, coeffs, extrap = portable.axis_taps(opts["rule"], opts["coord_mode"], shape[axis], n, scale,
                                                           axis_roi, opts["exclude_outside"])
            if extrap is not None:
                return False
            taps[axis - x.ndim] = _taps(pick, idx, coeffs, x.dtype)
        planes = (math.prod(shape[:-2]), shape[-2] if x.ndim > 1 else 1, shape[-1])
        out = list(full_sizes)
        return planes, tuple(out), taps.get(-2), taps.get(-1)

    def run(x, roi=None, scales=None, sizes=None):
        args = (None, roi, None) if v == 10 else (roi, scales, sizes)
        key = (x.shape, x.dtype) + tuple(_key_of(a) for a in args)
        p = plans.get(key)
        if p is None:
            p = remember(plans, key, plan(x, *args))
        if p is False:
            return fallback(x, roi, scales, sizes)
        planes, out_shape, h, w = p
        source = np.ascontiguousarray(x).reshape(planes)
        y = np.empty(out_shape, x.dtype)        # the output owns its memory: no copy by the runtime
        mid = None if h is None else y.reshape(planes[0], -1, planes[2]) if w is None else \
            np.empty((planes[0], h[0].shape[-1], planes[2]), x.dtype)

        def block(lo, hi):      # planes split across the run's intra-op threads (each plane alike)
            data = source[lo:hi]
            if h is not None:
                t = mid[lo:hi]
                if h[1] is None:
                    np.take(data, h[0], axis=1, out=t, mode="clip")   # in range: clip is unbuffered
                else:
                    rows(data, h[0], h[1], t)
                data = t
            if w is not None:
                t = y.reshape(planes[0], planes[1] if h is None else h[0].shape[-1], -1)[lo:hi]
                if w[1] is None:
                    pick_cols(data, w[2], t)
                else:
                    cols(data, w[0], w[1], t)

        parallel_for(block, planes[0], grain=max(1, PLANE_WORK // max(1, y.size // planes[0])), name="resize.planes")
        return y

    return run
