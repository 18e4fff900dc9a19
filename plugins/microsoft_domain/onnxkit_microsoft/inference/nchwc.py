"""Inference of com.microsoft.nchwc, onnxruntime's NCHWc layout operators (kernels:
``kernels/nchwc.py``, whose docstring states the layout).  Every output is float32 and rank 4.

* ReorderInput: (N, Cp, H, W), Cp the channels rounded up to the block size (of this machine,
  :func:`~onnxkit_microsoft.kernels.nchwc.block_size`); the channels are X's axis 3 with
  ``channels_last``.
* ReorderOutput: (N, channels, H, W), or (N, H, W, channels) with ``channels_last``.
* Conv: ai.onnx Conv's rule on the (N, Cp, H, W) input and the (Op, I, kH, kW) filter.
* MaxPool / AveragePool: ai.onnx's rule; GlobalMaxPool / GlobalAveragePool: (N, Cp, 1, 1).
* Upsample: (N, Cp, H * scales[2], W * scales[3]).
"""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import FLOAT, dims_of, tensor

from ._util import definition_keys

DOMAIN = "com.microsoft.nchwc"
FUNCTIONS = FunctionTable(definition_keys, domain=DOMAIN)


def _dims(ctx):
    d = dims_of(ctx.input_type(0))
    return None if d is None or len(d) != 4 else list(d)


@FUNCTIONS.register("ReorderInput")
def _reorder_input(ctx):
    from ..kernels.nchwc import block_size, padded

    d = _dims(ctx)
    if d is None:
        return [tensor(FLOAT, [None] * 4)]
    if int(ctx.attr("channels_last", 0)):
        d = [d[0], d[3], d[1], d[2]]
    c = d[1]
    return [tensor(FLOAT, [d[0], padded(c, block_size()) if isinstance(c, int) else None, d[2], d[3]])]


@FUNCTIONS.register("ReorderOutput")
def _reorder_output(ctx):
    d = _dims(ctx) or [None] * 4
    c = ctx.attr("channels")
    c = int(c) if c is not None else None
    if int(ctx.attr("channels_last", 0)):
        return [tensor(FLOAT, [d[0], d[2], d[3], c])]
    return [tensor(FLOAT, [d[0], c, d[2], d[3]])]


@FUNCTIONS.register("Conv")
def _conv(ctx):
    from onnxkit_default_domain.api import conv_like_output

    return [conv_like_output(ctx)]


@FUNCTIONS.register(("MaxPool", "AveragePool"))
def _pool(ctx):
    from onnxkit_default_domain.api import pool_attrs, pool_geometry

    d = _dims(ctx)
    if d is None:
        return [tensor(FLOAT, [None] * 4)]
    out, _, _, _ = pool_geometry(ctx, d[2:], pool_attrs(ctx, 2))
    return [tensor(FLOAT, d[:2] + list(out))]


@FUNCTIONS.register(("GlobalMaxPool", "GlobalAveragePool"))
def _global_pool(ctx):
    d = _dims(ctx) or [None] * 4
    return [tensor(FLOAT, d[:2] + [1, 1])]


@FUNCTIONS.register("Upsample")
def _upsample(ctx):
    d = _dims(ctx) or [None] * 4
    s = [int(v) for v in (ctx.attr("scales") or ())]
    if len(s) != 4:
        ctx.fail(f"scales must hold 4 integers, got {s}")
    return [tensor(FLOAT, [d[0], d[1]] + [v * k if isinstance(v, int) else None for v, k in zip(d[2:], s[2:])])]
