"""The quantized operators onnxruntime.quantization's QOperator format writes: QLinearAdd,
QLinearMul, QLinearGlobalAveragePool, QGemm (com.microsoft 1).

Each dequantizes its 8-bit operands (``scale * (q - zero_point)``, zero point 0 where absent),
computes in float64 — exact for the 8-bit products and sums — and requantizes:
``saturate(round_half_even(y / y_scale) + y_zero_point)`` into the output zero point's type
(the first input's for QLinearAdd / QLinearMul / QLinearGlobalAveragePool).

* QLinearAdd / QLinearMul — A and B broadcast (6.6.2); scales and zero points are scalars.
* QLinearGlobalAveragePool — the mean over the spatial axes of X ``(N, C, ...)``, or of
  ``(N, ..., C)`` with ``channels_last``; the spatial extents become 1.
* QGemm — ``alpha * ((A' - a_zp)(B' - b_zp) + C)`` (C int32, in units of ``a_scale * b_scale``;
  ``alpha`` scales it too, as onnxruntime computes) with ``b_scale`` / ``b_zero_point`` per tensor
  or per column of B' (N values); without
  ``y_scale`` the float result is returned (float32).
"""

from __future__ import annotations

from onnxkit.plugin import KernelTable

from ._common import DOMAIN, shape_of

KERNELS = KernelTable()
_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


def _name(x) -> str:
    from onnxkit.plugin import arrays

    return arrays.dtype_name(x.dtype)


def _check8(ctx, x, what):
    if _name(x) not in _RANGES:
        ctx.fail(f"{what} has element type {_name(x)}; uint8 or int8 expected")


def _scalar(ctx, xp, v, what):
    if v is None:
        return None
    if int(xp.reshape(v, (-1,)).shape[0]) != 1:
        ctx.fail(f"{what} must hold one value, got shape {shape_of(v)}")
    return xp.reshape(v, ())


def dequant(ctx, xp, q, scale, zp, what: str):
    """``scale * (q - zp)`` as float64."""
    _check8(ctx, q, what)
    y = xp.astype(q, xp.float64)
    if zp is not None:
        y = y - xp.astype(zp, xp.float64)
    return y * xp.astype(scale, xp.float64)


def requant(ctx, xp, y, scale, zp, like):
    """``saturate(round(y / scale) + zp)`` in ``zp``'s type (``like``'s without a zero point)."""
    target = zp if zp is not None else like
    lo, hi = _RANGES[_name(target)]
    r = xp.round(y / xp.astype(scale, xp.float64))
    if zp is not None:
        r = r + xp.astype(zp, xp.float64)
    return xp.astype(xp.clip(r, lo, hi), target.dtype)


def _binary(ctx, combine):
    xp = ctx.xp

    def run(a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None):
        if b.dtype != a.dtype:
            ctx.fail(f"A and B must have one element type, got {_name(a)} and {_name(b)}")
        sa, sb, sc = (_scalar(ctx, xp, v, w) for v, w in ((a_scale, "A_scale"), (b_scale, "B_scale"),
                                                          (c_scale, "C_scale")))
        za, zb, zc = (_scalar(ctx, xp, v, w) for v, w in ((a_zp, "A_zero_point"), (b_zp, "B_zero_point"),
                                                          (c_zp, "C_zero_point")))
        try:
            y = combine(dequant(ctx, xp, a, sa, za, "A"), dequant(ctx, xp, b, sb, zb, "B"))
        except (ValueError, RuntimeError) as exc:
            ctx.fail(f"A {shape_of(a)} and B {shape_of(b)} do not broadcast: {exc}")
        return requant(ctx, xp, y, sc, zc, a)

    return run


@KERNELS.register("QLinearAdd", 1, domain=DOMAIN)
def qlinear_add(ctx):
    return _binary(ctx, lambda a, b: a + b)


@KERNELS.register("QLinearMul", 1, domain=DOMAIN)
def qlinear_mul(ctx):
    return _binary(ctx, lambda a, b: a * b)


@KERNELS.register("QLinearGlobalAveragePool", 1, domain=DOMAIN)
def qlinear_global_average_pool(ctx):
    xp = ctx.xp
    channels_last = bool(ctx.attr("channels_last"))

    def run(x, x_scale, x_zp, y_scale, y_zp):
        if x.ndim < 3:
            ctx.fail(f"X must have rank 3 or more, got shape {shape_of(x)}")
        axes = tuple(range(1, x.ndim - 1)) if channels_last else tuple(range(2, x.ndim))
        d = dequant(ctx, xp, x, _scalar(ctx, xp, x_scale, "x_scale"), _scalar(ctx, xp, x_zp, "x_zero_point"), "X")
        m = xp.mean(d, axis=axes, keepdims=True)
        return requant(ctx, xp, m, _scalar(ctx, xp, y_scale, "y_scale"), _scalar(ctx, xp, y_zp, "y_zero_point"), x)

    return run


def _per_column(ctx, xp, v, n: int, what: str):
    """``v`` (a zero point or scale of B: one value, or one per column of B's ``n``) as a 0-d or
    ``(n,)`` array that broadcasts against a ``(..., n)`` product; None stays None."""
    if v is None:
        return None
    size = int(xp.reshape(v, (-1,)).shape[0])
    if size == 1:
        return xp.reshape(v, ())
    if size != n:
        ctx.fail(f"{what} has {size} values: one, or one per column of B ({n}), expected")
    return xp.reshape(v, (n,))


@KERNELS.register("QGemm", 1, domain=DOMAIN)
def qgemm(ctx):
    xp = ctx.xp
    alpha = float(ctx.attr("alpha"))
    ta, tb = bool(ctx.attr("transA")), bool(ctx.attr("transB"))

    def run(a, a_scale, a_zp, b, b_scale, b_zp=None, c=None, y_scale=None, y_zp=None):
        _check8(ctx, a, "A")
        _check8(ctx, b, "B")
        if a.ndim != 2 or b.ndim != 2:
            ctx.fail(f"A and B must be matrices, got shapes {shape_of(a)} and {shape_of(b)}")
        af, bf = xp.astype(a, xp.float64), xp.astype(b, xp.float64)
        af = xp.permute_dims(af, (1, 0)) if ta else af
        bf = xp.permute_dims(bf, (1, 0)) if tb else bf
        if int(af.shape[1]) != int(bf.shape[0]):
            ctx.fail(f"A' {shape_of(af)} and B' {shape_of(bf)} do not multiply")
        n = int(bf.shape[1])
        za = _scalar(ctx, xp, a_zp, "a_zero_point")
        if za is not None:
            af = af - xp.astype(za, xp.float64)
        zb = _per_column(ctx, xp, b_zp, n, "b_zero_point")
        if zb is not None:
            bf = bf - xp.astype(zb, xp.float64)
        acc = xp.matmul(af, bf)
        if c is not None:
            acc = acc + xp.astype(c, xp.float64)
        acc = acc * alpha
        sb = _per_column(ctx, xp, b_scale, n, "b_scale")
        y = acc * xp.astype(_scalar(ctx, xp, a_scale, "a_scale"), xp.float64) * xp.astype(sb, xp.float64)
        if y_scale is None:
            return xp.astype(y, xp.float32)
        return requant(ctx, xp, y, _scalar(ctx, xp, y_scale, "y_scale"), _scalar(ctx, xp, y_zp, "y_zero_point"), a)

    return run
