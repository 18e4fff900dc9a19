"""QLinearConv (com.microsoft 1): ai.onnx QLinearConv's arithmetic with onnxruntime's
``channels_last`` option (x and y ``(N, ..., C)``; w stays ``(M, C / group, k...)``).

``y = saturate(round((x_scale * w_scale / y_scale) * conv(x - x_zp, w - w_zp) + B') + y_zp)``
(B int32 in units of ``x_scale * w_scale``; ``w_scale`` / ``w_zero_point`` per tensor or per
output channel).  The convolution is the ai.onnx package's portable one (geometry, groups,
``auto_pad``), run in float64 — exact for 8-bit products and their sums — on every backend.
"""

from __future__ import annotations

from onnxkit.plugin import KernelTable, calls_blas

from ._common import DOMAIN, shape_of
from .quantized import _check8, _scalar, requant

KERNELS = KernelTable()


def _per_channel(ctx, xp, v, m: int, nd: int, what: str):
    n = int(xp.reshape(v, (-1,)).shape[0])
    if n == 1:
        return xp.reshape(xp.astype(v, xp.float64), ())
    if n != m:
        ctx.fail(f"{what} has {n} values: one, or one per output channel ({m}), expected")
    return xp.reshape(xp.astype(v, xp.float64), (1, m) + (1,) * nd)


@KERNELS.register("QLinearConv", 1, domain=DOMAIN)
@calls_blas
def qlinear_conv(ctx):
    from onnxkit_default_domain.api import Plans, check_rank, columns, conv_nd, conv_plan

    xp = ctx.xp
    group = int(ctx.attr("group"))
    plans = Plans(ctx, lambda c, xs, ws: conv_plan(c, group, xs, ws))
    channels_last = bool(ctx.attr("channels_last"))

    def run(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, b=None):
        _check8(ctx, x, "x")
        _check8(ctx, w, "w")
        _check8(ctx, y_zp, "y_zero_point")
        if x.ndim < 3:
            ctx.fail(f"x must have rank 3 or more, got shape {shape_of(x)}")
        if channels_last:
            x = xp.permute_dims(x, (0, x.ndim - 1, *range(1, x.ndim - 1)))
        nd = check_rank(ctx, x, w)
        m = int(w.shape[0])
        xf = xp.astype(x, xp.float64) - xp.astype(_scalar(ctx, xp, x_zp, "x_zero_point"), xp.float64)
        wz = _per_channel(ctx, xp, w_zp, m, 0, "w_zero_point")
        wz = xp.reshape(wz, (m,) + (1,) * (w.ndim - 1)) if wz.ndim else wz
        wf = xp.astype(w, xp.float64) - wz
        acc = conv_nd(xp, xf, wf, plans(x, w), columns)
        if b is not None:
            if shape_of(b) != [m]:
                ctx.fail(f"B has shape {shape_of(b)}, [{m}] (one per output channel) expected")
            acc = acc + xp.reshape(xp.astype(b, xp.float64), (1, m) + (1,) * nd)
        sx = xp.astype(_scalar(ctx, xp, x_scale, "x_scale"), xp.float64)
        y = acc * (sx * _per_channel(ctx, xp, w_scale, m, nd, "w_scale"))
        q = requant(ctx, xp, y, _scalar(ctx, xp, y_scale, "y_scale"), _scalar(ctx, xp, y_zp, "y_zero_point"), y_zp)
        return xp.permute_dims(q, (0, *range(2, q.ndim), 1)) if channels_last else q

    return run
