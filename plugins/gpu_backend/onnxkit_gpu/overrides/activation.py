"""torch's fused routines for activations of ``onnxkit_default_domain.kernels.activation``.

One native call where the portable body takes several: ``torch.sigmoid``,
``torch.special.erfc`` for Gelu 'none' (accurate in the negative tail, as the portable
body), ``torch.softmax`` / ``torch.log_softmax`` for float32/float64 (and bfloat16, computed
in float32).  float16 Softmax/LogSoftmax keep the portable step-by-step float16 body; the
attributes, the type rules and the axis handling are the portable family's.
"""

from __future__ import annotations

import math

from onnxkit.plugin import KernelTable, arrays
from onnxkit_default_domain.api import activation as portable
from onnxkit_default_domain.api import FUSED_DOMAIN

KERNELS = KernelTable()


@KERNELS.register("Sigmoid", *portable.versions("Sigmoid"))
def sigmoid(ctx):
    import torch

    return portable.in_float(ctx.xp, torch.sigmoid)


@KERNELS.register("Gelu", 1, domain=FUSED_DOMAIN)     # ai.onnxkit Gelu-1 is ai.onnx Gelu-20
@KERNELS.register("Gelu", *portable.versions("Gelu"))
def gelu(ctx):
    import torch

    xp = ctx.xp
    if portable.gelu_mode(ctx) == "tanh":
        return portable.in_float(xp, portable.gelu(ctx, xp))
    inv = -1.0 / math.sqrt(2.0)
    return portable.in_float(xp, lambda x: torch.special.erfc(x * inv) * x * 0.5)


def _normalizing(ctx, fused, body):
    """``fused(x, dim)`` for every type but float16, which runs the portable ``body``."""
    xp = ctx.xp

    def run(x, axis):
        return body(xp, x, axis) if arrays.dtype_name(x.dtype) == "float16" else fused(x, axis)
    return portable.normalizer(ctx, portable.in_float(xp, run, native16=True))


@KERNELS.register("Softmax", *portable.versions("Softmax"))
def softmax(ctx):
    import torch

    return _normalizing(ctx, torch.softmax, portable.softmax)


@KERNELS.register("LogSoftmax", *portable.versions("LogSoftmax"))
def log_softmax(ctx):
    import torch

    return _normalizing(ctx, torch.log_softmax, portable.log_softmax)
