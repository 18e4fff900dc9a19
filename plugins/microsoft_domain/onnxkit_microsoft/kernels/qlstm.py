"""DynamicQuantizeLSTM (com.microsoft 1), what ``onnxruntime.quantization.quantize_dynamic`` writes
for an ai.onnx LSTM.

Its weights are 8-bit and stored transposed: W ``[num_directions, input_size, 4 * hidden_size]``,
R ``[num_directions, hidden_size, 4 * hidden_size]`` (gates i, o, f, c along the last axis), with
``W_scale`` / ``W_zero_point`` (and R's) one value per direction, ``[num_directions]``, or one per
output column, ``[num_directions, 4 * hidden_size]``.  The kernel dequantizes them
(``scale * (q - zero_point)``), brings them to ai.onnx LSTM's ``[num_directions, 4H, K]`` layout
and runs the ai.onnx domain's portable LSTM (every attribute of LSTM-7: direction, activations,
clip, input_forget, peepholes P, sequence_lens, initial states).  onnxruntime also quantizes the
activations (X and each step's H) to uint8 on the fly; the float computation here differs from its
result by that rounding noise, not by more (tested).
"""

from __future__ import annotations

from onnxkit.plugin import KernelTable

from ._common import DOMAIN, shape_of
from .quantized import _check8, _name

KERNELS = KernelTable()


def _dequant_weight(ctx, xp, w, scale, zp, what: str):
    """``[D, K, G]`` 8-bit weights to float32 ``[D, G, K]``."""
    _check8(ctx, w, what)
    if w.ndim != 3:
        ctx.fail(f"{what} must have rank 3 [num_directions, K, 4 * hidden_size], got shape {shape_of(w)}")
    d, _, g = shape_of(w)

    def per(v, name):
        n = int(xp.reshape(v, (-1,)).shape[0])
        if n == d:
            return xp.reshape(v, (d, 1, 1))
        if n == d * g:
            return xp.reshape(v, (d, 1, g))
        ctx.fail(f"{name} has shape {shape_of(v)}: [{d}] or [{d}, {g}] expected")

    if zp.dtype != w.dtype:
        ctx.fail(f"{what}_zero_point has element type {_name(zp)}, {what} {_name(w)}: one type expected")
    f = (xp.astype(w, xp.float32) - xp.astype(per(zp, f"{what}_zero_point"), xp.float32)) * xp.astype(
        per(scale, f"{what}_scale"), xp.float32)
    return xp.permute_dims(f, (0, 2, 1))


@KERNELS.register("DynamicQuantizeLSTM", 1, domain=DOMAIN)
def dynamic_quantize_lstm(ctx):
    from onnxkit_default_domain.api import lstm

    xp = ctx.xp
    layer = lstm(ctx)

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, W_scale=None,
            W_zero_point=None, R_scale=None, R_zero_point=None):
        for v, name in ((W_scale, "W_scale"), (W_zero_point, "W_zero_point"), (R_scale, "R_scale"),
                        (R_zero_point, "R_zero_point")):
            if v is None:
                ctx.fail(f"{name} is required")
        if _name(X) != "float32":
            ctx.fail(f"X has element type {_name(X)}; float32 expected")
        wf = _dequant_weight(ctx, xp, W, W_scale, W_zero_point, "W")
        rf = _dequant_weight(ctx, xp, R, R_scale, R_zero_point, "R")
        return layer(X, wf, rf, B, sequence_lens, initial_h, initial_c, P)

    return run
