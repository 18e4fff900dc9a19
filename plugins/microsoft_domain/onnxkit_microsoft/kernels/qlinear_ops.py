"""More of onnxruntime.quantization's com.microsoft operators (com.microsoft 1): QuantizeLinear,
DequantizeLinear, DynamicQuantizeMatMul, MatMulIntegerToFloat, QLinearSigmoid, QLinearLeakyRelu,
QLinearSoftmax, QLinearConcat, QLinearWhere, QLinearAveragePool.

Each dequantizes its 8-bit operands (``scale * (q - zero_point)``, zero point 0 where absent),
computes in float64 and requantizes with :func:`.quantized.requant`
(``saturate(round_half_even(y / scale) + zero_point)``); onnxruntime's lookup tables and
fixed-point paths may differ by one step on a tie.

* QuantizeLinear / DequantizeLinear — ``y_scale`` / ``x_scale`` one value or one per ``axis``
  entry (default 1); 8-bit types (uint8 / int8) only: a 16-, 4- or 32-bit one is refused by name.
* DynamicQuantizeMatMul — A (float) quantized to uint8 the way DynamicQuantizeLinear does
  (range including 0, scale ``(max - min) / 255``), then ``(A_q - a_zp) @ (B - b_zp) * a_scale *
  b_scale + bias``; ``b_scale`` / ``b_zero_point`` per tensor or per column of B.
* MatMulIntegerToFloat — ``(A - a_zp) @ (B - b_zp) * a_scale * b_scale + bias``, in the scales' type.
* QLinearSigmoid, QLinearLeakyRelu (``alpha``, default 0.01) — elementwise on the dequantized X.
* QLinearSoftmax — softmax of the dequantized X: ``opset`` < 13 over the axes from ``axis`` on
  taken together (default axis 1), else along ``axis`` (default -1).
* QLinearConcat — inputs in triples (tensor, scale, zero point) concatenated along ``axis``.
* QLinearWhere — ``where(condition, X, Y)`` of the dequantized operands, requantized by z's.
* QLinearAveragePool — ai.onnx AveragePool's geometry (the ai.onnx package's portable pool) on the
  dequantized X, ``(N, C, ...)`` or ``(N, ..., C)`` with ``channels_last``.
"""

from __future__ import annotations

from onnxkit.plugin import KernelTable

from ._common import DOMAIN, shape_of, sigmoid, softmax
from .quantized import _RANGES, _check8, _name, _per_column, _scalar, dequant, requant

KERNELS = KernelTable()


def _axis_param(ctx, xp, v, x, axis: int, what: str):
    """``v`` as a scalar, or (one value per ``x`` extent on ``axis``) shaped to broadcast there."""
    n = int(xp.reshape(v, (-1,)).shape[0])
    if v.ndim == 0 or n == 1 and v.ndim <= 1:
        return xp.reshape(v, ())
    if v.ndim != 1 or n != int(x.shape[axis]):
        ctx.fail(f"{what} has shape {shape_of(v)}: one value, or one per entry of axis {axis} "
                 f"({int(x.shape[axis])}), expected")
    shape = [1] * x.ndim
    shape[axis] = n
    return xp.reshape(v, tuple(shape))


def _axis(ctx, x, default=1) -> int:
    axis = int(ctx.attr("axis", default))
    r = max(x.ndim, 1)
    if not -r <= axis < r:
        ctx.fail(f"axis {axis} is out of range for rank {x.ndim}")
    return axis % r


@KERNELS.register("QuantizeLinear", 1, domain=DOMAIN)
def quantize_linear(ctx):
    xp = ctx.xp

    def run(x, y_scale, y_zp=None):
        if y_zp is not None and _name(y_zp) not in _RANGES:
            ctx.fail(f"y_zero_point has element type {_name(y_zp)}; this kernel takes uint8 or int8")
        axis = _axis(ctx, x)
        s = _axis_param(ctx, xp, y_scale, x, axis, "y_scale")
        z = None if y_zp is None else _axis_param(ctx, xp, y_zp, x, axis, "y_zero_point")
        target = y_zp if y_zp is not None else xp.zeros((), dtype=xp.uint8)
        lo, hi = _RANGES[_name(target)]
        r = xp.round(xp.astype(x, xp.float32) / xp.astype(s, xp.float32))
        if z is not None:
            r = r + xp.astype(z, xp.float32)
        return xp.astype(xp.clip(r, lo, hi), target.dtype)

    return run


@KERNELS.register("DequantizeLinear", 1, domain=DOMAIN)
def dequantize_linear(ctx):
    xp = ctx.xp

    def run(x, x_scale, x_zp=None):
        _check8(ctx, x, "x")
        axis = _axis(ctx, x)
        s = _axis_param(ctx, xp, x_scale, x, axis, "x_scale")
        y = xp.astype(x, xp.float32)
        if x_zp is not None:
            y = y - xp.astype(_axis_param(ctx, xp, x_zp, x, axis, "x_zero_point"), xp.float32)
        return xp.astype(y * xp.astype(s, xp.float32), x_scale.dtype)

    return run


def _integer_matmul(ctx, xp, a, a_zp, b, b_zp):
    """``(A - a_zp) @ (B - b_zp)`` in float64 (exact: 8-bit products, sums below 2**53)."""
    _check8(ctx, a, "A")
    _check8(ctx, b, "B")
    if a.ndim < 1 or b.ndim < 2:
        ctx.fail(f"A and B must have ranks >= 1 and >= 2, got shapes {shape_of(a)} and {shape_of(b)}")
    if int(a.shape[-1]) != int(b.shape[-2]):
        ctx.fail(f"A {shape_of(a)} and B {shape_of(b)} do not multiply")
    n = int(b.shape[-1])
    af = xp.astype(a, xp.float64)
    za = _scalar(ctx, xp, a_zp, "a_zero_point")
    if za is not None:
        af = af - xp.astype(za, xp.float64)
    bf = xp.astype(b, xp.float64)
    zb = _per_column(ctx, xp, b_zp, n, "b_zero_point")
    if zb is not None:
        bf = bf - xp.astype(zb, xp.float64)
    try:
        return xp.matmul(af, bf), n
    except (ValueError, RuntimeError) as exc:
        ctx.fail(f"A {shape_of(a)} and B {shape_of(b)} do not multiply: {exc}")


def _bias(ctx, xp, y, bias, n):
    if bias is None:
        return y
    if shape_of(bias) != [n]:
        ctx.fail(f"bias has shape {shape_of(bias)}, [{n}] (one per column of B) expected")
    return y + xp.astype(bias, xp.float64)


@KERNELS.register("MatMulIntegerToFloat", 1, domain=DOMAIN)
def matmul_integer_to_float(ctx):
    xp = ctx.xp

    def run(a, b, a_scale, b_scale, a_zp=None, b_zp=None, bias=None):
        acc, n = _integer_matmul(ctx, xp, a, a_zp, b, b_zp)
        sa = xp.astype(_scalar(ctx, xp, a_scale, "a_scale"), xp.float64)
        y = acc * (sa * xp.astype(_per_column(ctx, xp, b_scale, n, "b_scale"), xp.float64))
        return xp.astype(_bias(ctx, xp, y, bias, n), a_scale.dtype)

    return run


def dynamic_uint8(ctx, xp, x):
    """``(q, scale, zero_point)``: ``x`` (float) quantized to uint8 as DynamicQuantizeLinear does."""
    xf = xp.astype(x, xp.float32)
    zero = xp.zeros((), dtype=xp.float32)
    lo = xp.minimum(xp.min(xf), zero) if xf.size else zero
    hi = xp.maximum(xp.max(xf), zero) if xf.size else zero
    scale = (hi - lo) / 255.0
    safe = xp.where(scale == 0, xp.ones((), dtype=xp.float32), scale)
    zp = xp.clip(xp.round(-lo / safe), 0, 255)
    q = xp.clip(xp.round(xf / safe) + zp, 0, 255)
    return xp.astype(q, xp.uint8), scale, xp.astype(zp, xp.uint8)


@KERNELS.register("DynamicQuantizeMatMul", 1, domain=DOMAIN)
def dynamic_quantize_matmul(ctx):
    xp = ctx.xp

    def run(a, b, b_scale, b_zp=None, bias=None):
        if _name(a) != "float32":
            ctx.fail(f"A has element type {_name(a)}; float32 expected")
        q, sa, za = dynamic_uint8(ctx, xp, a)
        acc, n = _integer_matmul(ctx, xp, q, za, b, b_zp)
        y = acc * (xp.astype(sa, xp.float64) * xp.astype(_per_column(ctx, xp, b_scale, n, "b_scale"), xp.float64))
        return xp.astype(_bias(ctx, xp, y, bias, n), xp.float32)

    return run


def _unary(ctx, fn):
    xp = ctx.xp

    def run(x, x_scale, x_zp, y_scale, y_zp=None):
        d = dequant(ctx, xp, x, _scalar(ctx, xp, x_scale, "X_scale"), _scalar(ctx, xp, x_zp, "X_zero_point"), "X")
        zy = _scalar(ctx, xp, y_zp, "Y_zero_point")
        if zy is not None and zy.dtype != x.dtype:
            ctx.fail(f"Y_zero_point has element type {_name(zy)}, X {_name(x)}: one type expected")
        return requant(ctx, xp, fn(xp, d), _scalar(ctx, xp, y_scale, "Y_scale"), zy, x)

    return run


@KERNELS.register("QLinearSigmoid", 1, domain=DOMAIN)
def qlinear_sigmoid(ctx):
    return _unary(ctx, sigmoid)


@KERNELS.register("QLinearLeakyRelu", 1, domain=DOMAIN)
def qlinear_leaky_relu(ctx):
    alpha = float(ctx.attr("alpha"))
    return _unary(ctx, lambda xp, d: xp.where(d >= 0, d, d * alpha))


@KERNELS.register("QLinearSoftmax", 1, domain=DOMAIN)
def qlinear_softmax(ctx):
    opset = int(ctx.attr("opset", 13))
    default_axis = -1 if opset >= 13 else 1

    def fn_for(x):
        def fn(xp, d):
            axis = _axis(ctx, x, default_axis)
            if opset >= 13:
                return softmax(xp, d, axis)
            lead = shape_of(x)[:axis]
            flat = xp.reshape(d, (*lead, -1)) if d.size else d
            return xp.reshape(softmax(xp, flat, -1), tuple(shape_of(x))) if d.size else d

        return fn

    def run(x, x_scale, x_zp, y_scale, y_zp):
        if x.ndim == 0:
            ctx.fail("X must have rank 1 or more, got a scalar")
        return _unary(ctx, fn_for(x))(x, x_scale, x_zp, y_scale, y_zp)

    return run


@KERNELS.register("QLinearConcat", 1, domain=DOMAIN)
def qlinear_concat(ctx):
    xp = ctx.xp

    def run(y_scale, y_zp, *inputs):
        if not inputs or len(inputs) % 3:
            ctx.fail(f"inputs must come in triples (tensor, scale, zero point), got {len(inputs)}")
        _check8(ctx, y_zp, "Y_zero_point")
        parts = []
        for k in range(0, len(inputs), 3):
            x, s, z = inputs[k:k + 3]
            if x is None or s is None or z is None:
                ctx.fail(f"input triple {k // 3} has a missing entry")
            if x.dtype != y_zp.dtype:
                ctx.fail(f"input {k // 3} has element type {_name(x)}, Y_zero_point {_name(y_zp)}")
            parts.append(dequant(ctx, xp, x, _scalar(ctx, xp, s, f"scale {k // 3}"),
                                 _scalar(ctx, xp, z, f"zero point {k // 3}"), f"input {k // 3}"))
        axis = _axis(ctx, parts[0], 0)
        ranks = {p.ndim for p in parts}
        if len(ranks) != 1:
            ctx.fail(f"inputs of different ranks {sorted(ranks)}")
        try:
            y = xp.concat(parts, axis=axis)
        except (ValueError, RuntimeError) as exc:
            ctx.fail(f"inputs {[shape_of(p) for p in parts]} do not concatenate on axis {axis}: {exc}")
        return requant(ctx, xp, y, _scalar(ctx, xp, y_scale, "Y_scale"), _scalar(ctx, xp, y_zp, "Y_zero_point"),
                       y_zp)

    return run


@KERNELS.register("QLinearWhere", 1, domain=DOMAIN)
def qlinear_where(ctx):
    xp = ctx.xp

    def run(cond, x, x_scale, x_zp, y, y_scale, y_zp, z_scale, z_zp):
        if x.dtype != y.dtype:
            ctx.fail(f"X and Y must have one element type, got {_name(x)} and {_name(y)}")
        dx = dequant(ctx, xp, x, _scalar(ctx, xp, x_scale, "x_scale"), _scalar(ctx, xp, x_zp, "x_zero_point"), "X")
        dy = dequant(ctx, xp, y, _scalar(ctx, xp, y_scale, "y_scale"), _scalar(ctx, xp, y_zp, "y_zero_point"), "Y")
        try:
            d = xp.where(cond, dx, dy)
        except (ValueError, RuntimeError) as exc:
            ctx.fail(f"condition {shape_of(cond)}, X {shape_of(x)} and Y {shape_of(y)} do not broadcast: {exc}")
        return requant(ctx, xp, d, _scalar(ctx, xp, z_scale, "z_scale"), _scalar(ctx, xp, z_zp, "z_zero_point"), x)

    return run


@KERNELS.register("QLinearAveragePool", 1, domain=DOMAIN)
def qlinear_average_pool(ctx):
    import numpy as np
    from onnxkit_default_domain.api import average_divisor, geometry_cache, padded_input, separable

    xp = ctx.xp
    geometry = geometry_cache(ctx)
    channels_last = bool(ctx.attr("channels_last"))
    include_pad = bool(ctx.attr("count_include_pad"))

    def run(x, x_scale, x_zp, y_scale, y_zp=None):
        if x.ndim < 3:
            ctx.fail(f"X must have rank 3 or more, got shape {shape_of(x)}")
        d = dequant(ctx, xp, x, _scalar(ctx, xp, x_scale, "x_scale"), _scalar(ctx, xp, x_zp, "x_zero_point"), "X")
        if channels_last:
            d = xp.permute_dims(d, (0, x.ndim - 1, *range(1, x.ndim - 1)))
        xpad, a, out, begin, end = padded_input(ctx, d, geometry, 0.0)
        total = separable(xp, xpad, a, out, xp.add)
        div = average_divisor(shape_of(d)[2:], a, out, begin, end, include_pad).astype(np.float64)
        div[div == 0] = np.nan   # a window of pads only
        p = total / ctx.from_host(div)
        if channels_last:
            p = xp.permute_dims(p, (0, *range(2, x.ndim), 1))
        return requant(ctx, xp, p, _scalar(ctx, xp, y_scale, "y_scale"), _scalar(ctx, xp, y_zp, "y_zero_point"), x)

    return run
