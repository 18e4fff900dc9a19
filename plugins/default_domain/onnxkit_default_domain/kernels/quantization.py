"""Linear quantization of ai.onnx: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
QLinearMatMul and QLinearConv.

QuantizeLinear and DequantizeLinear quantize per tensor (10), per axis (13 on), with
``saturate`` and the 8-bit float types from 19, blocked quantization, ``output_dtype`` and the
16- and 4-bit integers from 21, ``precision`` and FLOAT4E2M1 from 23, FLOAT8E8M0 scales from
24, the 2-bit integers from 25 and the 6-bit floats from 28 (DequantizeLinear's
``output_dtype`` from 23).  QLinearMatMul-21 adds FLOAT16/BFLOAT16 scales and FLOAT8 operands.
Each definition accepts only the element types its own version lists (an older definition does
not quantize to a type introduced later).

Integer results are rounded half to even and saturated to the type's range in the backend's
namespace (``xp.round``, ``xp.clip``), so the int8/uint8/int16/int32 paths run on every backend
with the float types it has.  Conversions to the 8/6/4-bit floats go through
:func:`onnxkit.narrow.convert` (round to nearest even, saturation per ``saturate``) on the host:
a backend without those types (the gpu backend) runs such nodes on its cpu fallback, decided by
element type when the session is planned.  QLinearConv is host_only (numpy im2col).

Choices where the specification is silent: a NaN quotient quantizes to an integer type as 0
before the zero point is added; DynamicQuantizeLinear of an input whose adjusted range is empty
(all zeros) gives ``y_scale = 1/255`` (as the ONNX reference implementation does).
"""

from __future__ import annotations

import numpy as np
from ._common import device_of

from onnxkit.plugin import DataType, KernelTable, arrays, calls_blas, element_type, from_numpy_dtype, size_guard
from onnxkit.plugin.narrow import convert

from ._common import norm_axis, shape_of, size_of

KERNELS = KernelTable()

D = DataType
INT_RANGES = {
    D.UINT8: (0, 255), D.INT8: (-128, 127), D.UINT16: (0, 65535), D.INT16: (-32768, 32767),
    D.UINT4: (0, 15), D.INT4: (-8, 7), D.UINT2: (0, 3), D.INT2: (-2, 1),
}
_FP8 = {D.FLOAT8E4M3FN, D.FLOAT8E4M3FNUZ, D.FLOAT8E5M2, D.FLOAT8E5M2FNUZ}

#: Quantized element types each definition of QuantizeLinear/DequantizeLinear accepts.
_Q_TYPES = {10: {D.UINT8, D.INT8}}
_Q_TYPES[13] = _Q_TYPES[10]
_Q_TYPES[19] = _Q_TYPES[13] | _FP8
_Q_TYPES[21] = _Q_TYPES[19] | {D.UINT16, D.INT16, D.UINT4, D.INT4}
_Q_TYPES[23] = _Q_TYPES[21] | {D.FLOAT4E2M1}
_Q_TYPES[24] = _Q_TYPES[23]
_Q_TYPES[25] = _Q_TYPES[24] | {D.UINT2, D.INT2}
_Q_TYPES[28] = _Q_TYPES[25] | {D.FLOAT6E2M3, D.FLOAT6E3M2}
_DQ_EXTRA = {D.INT32}  # DequantizeLinear also takes int32 (zero point 0)


def tag_of(x) -> DataType:
    """The element type tag of a backend array (numpy, ml_dtypes or torch dtype)."""
    dt = x.dtype if isinstance(x.dtype, np.dtype) else np.dtype(arrays.dtype_name(x.dtype))
    return from_numpy_dtype(dt).tag


def _host_any_nonzero(xp, z) -> bool:
    return bool(xp.any(z != 0))


def expand_param(ctx, p, shape, axis: int, block: int, name: str, per_axis: bool = True):
    """``p`` (scale or zero point) reshaped / repeated so that it broadcasts to ``shape``."""
    xp = ctx.xp
    pshape = shape_of(p)
    if not pshape:
        return p
    if size_of(p) == 1 and block <= 0:
        return xp.reshape(p, ())
    rank = len(shape)
    if rank == 0:
        ctx.fail(f"{name} of shape {pshape} cannot apply to a scalar input")
    if block <= 0:
        if not per_axis:
            ctx.fail(f"{name} must be a scalar at this version (per-tensor quantization only)")
        # a rank-1 input has a single axis: the (default) axis attribute is not consulted
        a = 0 if rank == 1 else norm_axis(ctx, axis, rank)
        if len(pshape) != 1 or pshape[0] != shape[a]:
            ctx.fail(f"{name} of shape {pshape} is neither a scalar nor a 1-D tensor of length "
                     f"{shape[a]} (the input's axis {a}); blocked quantization needs block_size > 0")
        dims = [1] * rank
        dims[a] = shape[a]
        return xp.reshape(p, tuple(dims))
    a = norm_axis(ctx, axis, rank)
    want = list(shape)
    want[a] = -(-shape[a] // block)
    if pshape != want:
        ctx.fail(f"{name} of shape {pshape} does not fit blocked quantization of an input of shape "
                 f"{list(shape)} with axis {a} and block_size {block} (expected {want})")
    return xp.repeat(p, block, axis=a)[tuple(slice(0, n) for n in shape)]


def compute_dtype(xp, dtype):
    """The dtype arithmetic is done in for a scale/precision element type: float16, bfloat16,
    float32, float64 as they are; float32 for FLOAT8E8M0 scales (powers of two) and int32 ones."""
    return dtype if arrays.dtype_name(dtype) in ("float16", "bfloat16", "float32", "float64") else xp.float32


def _scalar_like(xp, value, x):
    """``value`` as a 0-d array of ``x``'s dtype on ``x``'s device."""
    return xp.asarray(value, dtype=x.dtype, device=device_of(x))


def to_quantized(ctx, q, tag: DataType, zp, saturate: bool):
    """``q`` (x / scale, in the computation precision) + zero point, rounded half to even and
    saturated into ``tag``: in the namespace for the integer types the backend has, on the host
    (:func:`onnxkit.narrow.convert`) for the others."""
    xp = ctx.xp
    if tag in INT_RANGES:  # (the 4- and 2-bit ones only on a backend that has them: numpy + ml_dtypes)
        lo, hi = INT_RANGES[tag]
        work = xp.float64 if arrays.dtype_name(q.dtype) == "float64" else xp.float32
        r = xp.round(xp.astype(q, work, copy=False))
        zw = None if zp is None else xp.astype(zp, work)
        if zw is not None:
            r = r + zw
        r = xp.clip(r, lo, hi)
        nan = xp.isnan(r)
        if bool(xp.any(nan)):
            r = xp.where(nan, _scalar_like(xp, 0, r) if zw is None else zw, r)
        return xp.astype(xp.astype(r, xp.int32), ctx.dtype(element_type(tag).dtype))
    y = q
    if zp is not None:
        z = xp.astype(zp, xp.float32)
        if _host_any_nonzero(xp, z):
            y = xp.astype(q, xp.float32) + z
    return ctx.from_host(convert(ctx.to_host(y), tag, saturate=saturate))


# ---------------------------------------------------------------------------- QuantizeLinear

@KERNELS.register("QuantizeLinear", 10, 13, 19, 21, 23, 24, 25, 28)
def quantize_linear(ctx):
    xp = ctx.xp
    v = ctx.since_version
    axis = int(ctx.attr("axis", 1)) if v >= 13 else 1
    saturate = bool(ctx.attr("saturate", 1)) if v >= 19 else True
    block = int(ctx.attr("block_size", 0)) if v >= 21 else 0
    out_tag = int(ctx.attr("output_dtype", 0)) if v >= 21 else 0
    precision = int(ctx.attr("precision", 0)) if v >= 23 else 0
    allowed = _Q_TYPES[v]
    if block < 0:
        ctx.fail(f"block_size must be >= 0, got {block}")
    cdt_fixed = compute_dtype(xp, ctx.dtype(element_type(precision).dtype)) if precision else None

    def fn(x, y_scale, y_zero_point=None):
        tag = D(out_tag) if out_tag else D.UINT8
        if y_zero_point is not None:
            zt = tag_of(y_zero_point)
            if out_tag and zt != out_tag:
                ctx.fail(f"output_dtype {element_type(out_tag).name} differs from the zero point's type {zt.name}")
            tag = zt
        if tag not in allowed:
            ctx.fail(f"QuantizeLinear-{v} does not quantize to {element_type(tag).name}")
        if not (arrays.is_float(x.dtype) or arrays.is_integer(x.dtype)):
            ctx.fail(f"x has unsupported element type {arrays.dtype_name(x.dtype)}")
        shape = shape_of(x)
        s = expand_param(ctx, y_scale, shape, axis, block, "y_scale", per_axis=v >= 13)
        z = None if y_zero_point is None else expand_param(ctx, y_zero_point, shape, axis, block,
                                                            "y_zero_point", per_axis=v >= 13)
        if z is not None and shape_of(z) != shape_of(s):
            ctx.fail(f"y_scale and y_zero_point have different shapes {shape_of(y_scale)} / "
                     f"{shape_of(y_zero_point)}")
        cdt = cdt_fixed or compute_dtype(xp, s.dtype)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            q = xp.astype(x, cdt, copy=False) / xp.astype(s, cdt, copy=False)
            return to_quantized(ctx, xp.asarray(q), tag, z, saturate)

    return fn


# -------------------------------------------------------------------------- DequantizeLinear

@KERNELS.register("DequantizeLinear", 10, 13, 19, 21, 23, 24, 25, 28)
def dequantize_linear(ctx):
    xp = ctx.xp
    v = ctx.since_version
    axis = int(ctx.attr("axis", 1)) if v >= 13 else 1
    block = int(ctx.attr("block_size", 0)) if v >= 21 else 0
    out_tag = int(ctx.attr("output_dtype", 0)) if v >= 23 else 0
    allowed = _Q_TYPES[v] | _DQ_EXTRA
    if block < 0:
        ctx.fail(f"block_size must be >= 0, got {block}")
    out_fixed = ctx.dtype(element_type(out_tag).dtype) if out_tag else None

    def fn(x, x_scale, x_zero_point=None):
        tag = tag_of(x)
        if tag not in allowed:
            ctx.fail(f"DequantizeLinear-{v} does not dequantize {element_type(tag).name}")
        if x_zero_point is not None and tag_of(x_zero_point) != tag:
            ctx.fail(f"x_zero_point has type {tag_of(x_zero_point).name} but x has {tag.name}")
        out = out_fixed
        if out is None:
            out = x_scale.dtype
            if arrays.dtype_name(out) == "float8_e8m0fnu":
                ctx.fail("a FLOAT8E8M0 x_scale needs the output_dtype attribute")
        shape = shape_of(x)
        s = expand_param(ctx, x_scale, shape, axis, block, "x_scale", per_axis=v >= 13)
        z = None if x_zero_point is None else expand_param(ctx, x_zero_point, shape, axis, block,
                                                            "x_zero_point", per_axis=v >= 13)
        work = xp.float64 if tag == D.INT32 else xp.float32
        if z is not None and tag == D.INT32:
            d = xp.astype(xp.astype(x, xp.int64) - xp.astype(z, xp.int64), work)
        else:
            d = xp.astype(x, work)
            if z is not None:
                zf = xp.astype(z, work)
                if _host_any_nonzero(xp, zf):
                    d = d - zf
        with np.errstate(over="ignore", invalid="ignore"):
            y = d * xp.astype(s, work)
        return xp.astype(y, out, copy=False)

    return fn


# --------------------------------------------------------------------- DynamicQuantizeLinear

@KERNELS.register("DynamicQuantizeLinear", 11)
def dynamic_quantize_linear(ctx):
    xp = ctx.xp

    def fn(x):
        x = xp.astype(x, xp.float32, copy=False)
        if size_of(x) == 0:
            ctx.fail("DynamicQuantizeLinear needs a non-empty input (its range is undefined)")
        # the range and the scale are host scalars, computed in float32 as the definition says
        hi = np.float32(max(0.0, float(xp.max(x))))
        lo = np.float32(min(0.0, float(xp.min(x))))
        rng = np.float32(1.0) if hi == lo else np.float32(hi - lo)
        scale = np.float32(rng / np.float32(255))
        zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255)).astype(np.float32)
        q = xp.round(x / _scalar_like(xp, scale, x)) + _scalar_like(xp, zp, x)
        y = xp.astype(xp.clip(q, 0, 255), xp.uint8)
        return y, ctx.from_host(np.array(scale, dtype=np.float32)), ctx.from_host(np.array(zp, dtype=np.uint8))

    return fn


# ----------------------------------------------------------------------------- QLinearMatMul

def requantize(ctx, acc, multiplier, y_zero_point, out_tag, allowed):
    """acc * multiplier + zero point, rounded (ties to even) and saturated into ``out_tag``."""
    xp = ctx.xp
    if out_tag not in allowed:
        ctx.fail(f"unsupported output type {element_type(out_tag).name}")
    r = acc * xp.astype(multiplier, xp.float64)
    if out_tag in INT_RANGES:
        if y_zero_point is not None:
            r = r + xp.astype(y_zero_point, xp.float64)
        lo, hi = INT_RANGES[out_tag]
        return xp.astype(xp.clip(xp.round(r), lo, hi), ctx.dtype(element_type(out_tag).dtype))
    return to_quantized(ctx, r, out_tag, y_zero_point, True)


def row_param(xp, p, x, row_axis):
    """A per-row 1-D parameter of ``x`` (M elements) reshaped to broadcast over rows."""
    n = size_of(p)
    if row_axis is not None and p.ndim == 1 and n > 1 and x.ndim >= 2 and n == int(x.shape[row_axis]):
        return xp.reshape(p, (-1, 1))
    return p


def centered(xp, x, zp, row_axis=None):
    """``x - zp`` as float64 (exact for 8-bit operands).  A 1-D zero point of a per-row
    quantized left operand applies along ``row_axis``."""
    xf = xp.astype(x, xp.float64)
    if zp is None:
        return xf
    z = row_param(xp, xp.astype(zp, xp.float64), x, row_axis)
    if _host_any_nonzero(xp, z):
        xf = xf - z
    return xf


_QMM_TYPES = {10: {D.INT8, D.UINT8}, 21: {D.INT8, D.UINT8} | _FP8}


@KERNELS.register("QLinearMatMul", 10, 21)
@size_guard("product")
@calls_blas
def qlinear_matmul(ctx):
    xp = ctx.xp
    allowed = _QMM_TYPES[ctx.since_version]

    def fn(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
        for name, t in (("a", a), ("b", b), ("y_zero_point", y_zero_point)):
            if t is not None and tag_of(t) not in allowed:
                ctx.fail(f"{name} has unsupported type {tag_of(t).name}")
        if a.ndim == 0 or b.ndim == 0:
            ctx.fail("QLinearMatMul needs operands of rank >= 1")
        sa, sb = shape_of(a), shape_of(b)
        if sa[-1] != sb[0 if len(sb) == 1 else -2]:
            ctx.fail(f"shapes {sa} and {sb} cannot be multiplied: their contracted extents differ")
        A = centered(xp, a, a_zero_point, row_axis=-2)
        B = centered(xp, b, b_zero_point)
        try:
            acc = xp.matmul(A, B)
        except (ValueError, RuntimeError) as exc:
            ctx.fail(f"shapes {sa} and {sb} cannot be multiplied: {exc}")
        a_s = row_param(xp, a_scale, a, -2)
        # the scale ratio in the scales' own precision (as the reference implementation does)
        mult = xp.asarray(a_s * b_scale / y_scale)
        out_tag = tag_of(y_zero_point) if y_zero_point is not None else tag_of(a)
        return requantize(ctx, acc, mult, y_zero_point, out_tag, allowed)

    return fn


# ------------------------------------------------------------------------------ QLinearConv

def conv_geometry(ctx, in_spatial, kernel, strides, dilations, pads, auto_pad):
    """Output spatial shape and the (begin..., end...) pads of a convolution (Conv's rules)."""
    n = len(in_spatial)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-in_spatial[i] // strides[i]) for i in range(n)]
        begin, end = [], []
        for i in range(n):
            total = max(0, (out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in_spatial[i])
            small, big = total // 2, total - total // 2
            b, e = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
            begin.append(b)
            end.append(e)
        return out, begin + end
    if auto_pad == "VALID":
        pads = [0] * (2 * n)
    elif auto_pad != "NOTSET":
        ctx.fail(f"unknown auto_pad {auto_pad!r}")
    out = []
    for i in range(n):
        span = in_spatial[i] + pads[i] + pads[i + n] - (kernel[i] - 1) * dilations[i] - 1
        if span < 0:
            ctx.fail(f"kernel {kernel} (dilations {dilations}) larger than the padded input {in_spatial}")
        out.append(span // strides[i] + 1)
    return out, list(pads)


def conv_nd(x, w, group, strides, dilations, pads, out_spatial):
    """Convolution of float numpy arrays x (N, C, *S) and w (M, C/group, *K) by im2col + BLAS:
    one strided slice per kernel offset, one matmul per group."""
    n_batch, c = x.shape[:2]
    m = w.shape[0]
    kernel = w.shape[2:]
    nd = len(kernel)
    if any(pads):
        x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    k_total = int(np.prod(kernel)) if nd else 1
    p_total = int(np.prod(out_spatial)) if nd else 1
    cols = np.empty((n_batch, c, k_total, p_total), dtype=x.dtype)
    for k_index, offs in enumerate(np.ndindex(*kernel)):
        sl = tuple(slice(offs[i] * dilations[i], offs[i] * dilations[i] + strides[i] * (out_spatial[i] - 1) + 1,
                         strides[i]) for i in range(nd))
        cols[:, :, k_index, :] = x[(slice(None), slice(None)) + sl].reshape(n_batch, c, p_total)
    cg, mg = c // group, m // group
    y = np.empty((n_batch, m, p_total), dtype=x.dtype)
    for g in range(group):
        wg = w[g * mg:(g + 1) * mg].reshape(mg, cg * k_total)
        cg_cols = cols[:, g * cg:(g + 1) * cg].reshape(n_batch, cg * k_total, p_total)
        y[:, g * mg:(g + 1) * mg] = np.matmul(wg, cg_cols)
    return y.reshape((n_batch, m) + tuple(out_spatial))


def conv_attributes(ctx, w_shape, spatial_rank):
    kernel = list(ctx.attr("kernel_shape") or w_shape[2:])
    strides = list(ctx.attr("strides") or [1] * spatial_rank)
    dilations = list(ctx.attr("dilations") or [1] * spatial_rank)
    pads = list(ctx.attr("pads") or [0] * (2 * spatial_rank))
    if len(kernel) != spatial_rank or len(strides) != spatial_rank or len(dilations) != spatial_rank \
            or len(pads) != 2 * spatial_rank:
        ctx.fail(f"kernel_shape/strides/dilations/pads do not match {spatial_rank} spatial dimensions")
    if list(kernel) != list(w_shape[2:]):
        ctx.fail(f"kernel_shape {kernel} differs from the weight's spatial shape {list(w_shape[2:])}")
    return kernel, strides, dilations, pads


@KERNELS.register("QLinearConv", 10, host_only=True)
@calls_blas
def qlinear_conv(ctx):
    xp = ctx.xp   # numpy (host_only): the im2col convolution needs numpy's strided slices
    group = int(ctx.attr("group"))
    auto_pad = ctx.attr_str("auto_pad")
    allowed = {D.INT8, D.UINT8}

    def fn(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None):
        for name, t in (("x", x), ("w", w), ("y_zero_point", y_zero_point)):
            if tag_of(t) not in allowed:
                ctx.fail(f"{name} has unsupported type {tag_of(t).name}")
        if x.ndim < 3 or w.ndim != x.ndim:
            ctx.fail(f"x {list(x.shape)} and w {list(w.shape)} must have the same rank >= 3")
        c, m = x.shape[1], w.shape[0]
        if group <= 0 or c % group or m % group or w.shape[1] != c // group:
            ctx.fail(f"channels {c} / weight {list(w.shape)} do not fit group {group}")
        nd = x.ndim - 2
        kernel, strides, dilations, pads = conv_attributes(ctx, w.shape, nd)
        out_spatial, pads = conv_geometry(ctx, x.shape[2:], kernel, strides, dilations, pads, auto_pad)
        X = centered(xp, x, x_zero_point)
        wz = None if w_zero_point is None else np.asarray(w_zero_point)
        if wz is not None and wz.ndim == 1 and wz.size == m and m > 1:
            wz = wz.reshape((m,) + (1,) * (w.ndim - 1))
        W = centered(xp, w, wz)
        acc = conv_nd(X, W, group, strides, dilations, pads, out_spatial)
        if B is not None:
            acc += np.asarray(B).astype(np.float64).reshape((1, m) + (1,) * nd)
        ws = np.asarray(w_scale)
        if ws.size > 1:
            if ws.ndim != 1 or ws.size != m:
                ctx.fail(f"w_scale of shape {list(ws.shape)} must be a scalar or hold one value per output channel")
            ws = ws.reshape((1, m) + (1,) * nd)
        mult = np.asarray(x_scale * ws / y_scale, dtype=np.float32)
        return requantize(ctx, acc, mult, y_zero_point, tag_of(y_zero_point), allowed)

    return fn
