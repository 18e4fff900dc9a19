"""QAttention (com.microsoft 1): Attention with 8-bit input and weights, what onnxruntime's
dynamic quantizer writes for an Attention node.

``qkv = ((input - input_zero_point) * input_scale) @ ((weight - weight_zero_point) * weight_scale)
+ bias`` — ``input_scale`` one value, ``weight_scale`` / ``weight_zero_point`` one value or one per
column of weight — then com.microsoft Attention's computation (``kernels/attention.py``: heads,
``mask_index``, ``past`` / ``present``, ``unidirectional``, ``scale``, ``mask_filter_value``) in
float32, the output in bias's type.
"""

from __future__ import annotations

from onnxkit.plugin import KernelTable

from ._common import DOMAIN, cast, shape_of
from .quantized import _check8, _scalar

KERNELS = KernelTable()


def _columns(ctx, xp, v, n: int, what: str):
    size = int(xp.reshape(v, (-1,)).shape[0])
    if size == 1:
        return xp.reshape(v, ())
    if size != n:
        ctx.fail(f"{what} has {size} values: one, or one per column of weight ({n}), expected")
    return xp.reshape(v, (1, n))


@KERNELS.register("QAttention", 1, domain=DOMAIN)
def qattention(ctx):
    from .attention import attention

    xp = ctx.xp
    layer = attention(ctx)

    def run(x, weight, bias, input_scale, weight_scale, mask_index=None, input_zp=None, weight_zp=None, past=None):
        _check8(ctx, x, "input")
        _check8(ctx, weight, "weight")
        if weight.ndim != 2:
            ctx.fail(f"weight must be a matrix (D, 3H), got shape {shape_of(weight)}")
        n = int(weight.shape[1])
        xf = xp.astype(x, xp.float32)
        if input_zp is not None:
            xf = xf - xp.astype(_scalar(ctx, xp, input_zp, "input_zero_point"), xp.float32)
        xf = xf * xp.astype(_scalar(ctx, xp, input_scale, "input_scale"), xp.float32)
        wf = xp.astype(weight, xp.float32)
        if weight_zp is not None:
            wf = wf - xp.astype(_columns(ctx, xp, weight_zp, n, "weight_zero_point"), xp.float32)
        wf = wf * xp.astype(_columns(ctx, xp, weight_scale, n, "weight_scale"), xp.float32)
        y, present = layer(xf, wf, xp.astype(bias, xp.float32), mask_index, None if past is None else
                           xp.astype(past, xp.float32))
        return cast(xp, y, bias.dtype), None if present is None else cast(xp, present, bias.dtype)

    return run
