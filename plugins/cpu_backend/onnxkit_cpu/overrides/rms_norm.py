"""cpu fast paths of the root-mean-square norms decoders use: SkipSimplifiedLayerNormalization
(com.microsoft 1) and SimplifiedLayerNormalization (ai.onnx 1, onnxruntime's extension), one
compiled loop (:data:`onnxkit_cpu.compiled.rms_norm.rms_rows`) where the portable bodies make
about eight numpy calls.

SkipSimplifiedLayerNormalization: where the portable kernel's plain-numpy case holds
(``norm.host_f32``: float32 numpy arrays, input 2-D or 3-D, skip of its shape, gamma and bias
vectors of the hidden size) and the arrays are contiguous: the four outputs as the portable
kernel's (Y, a zero mean, the inverse deviation per row, the sum).  SimplifiedLayerNormalization:
a float32 contiguous X of rank >= 1 normalized over its last axis alone, a float32 scale vector
of its extent: Y and the inverse deviation.  Everything else, and a cold first run (the loop
deferred: :mod:`onnxkit_cpu.compiled`), takes the portable kernel.  Results agree with it to
float32 rounding (the sum of squares summed in another order).

Where onnxkit-microsoft is not installed this module registers nothing.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, declares_output_bytes, traits_of

from ..compiled import rms_norm as loops

KERNELS = KernelTable()

try:
    from onnxkit_microsoft.api import norm as portable_skip, simplified_norm as portable_simplified
except ImportError:  # onnxkit-microsoft absent: no com.microsoft operators to serve
    portable_skip = portable_simplified = None

_F32 = np.dtype(np.float32)
_EMPTY = np.zeros(1, np.float32)


def _contiguous(*arrays) -> bool:
    return all(a is None or a.flags.c_contiguous for a in arrays)


if portable_skip is not None:

    @KERNELS.register("SkipSimplifiedLayerNormalization", 1, domain="com.microsoft")
    def skip_simplified_layer_norm(ctx):
        base = portable_skip.skip_simplified_layer_norm(ctx)
        loop = loops.rms_rows.get()
        if loop is None:
            return base
        eps = float(ctx.attr("epsilon"))

        def run(x, skip, gamma, bias=None):
            if portable_skip.HOST_F32 and portable_skip.host_f32(x, skip, gamma, bias) and x.shape[-1] \
                    and x.flags.c_contiguous and skip.flags.c_contiguous and gamma.flags.c_contiguous \
                    and (bias is None or bias.flags.c_contiguous):
                shape = x.shape
                h = shape[-1]
                rows = x.size // h
                y = np.empty(shape, _F32)
                s = np.empty(shape, _F32)
                inv = np.empty(shape[:-1] + (1,), _F32)
                loop(x.reshape(rows, h), skip.reshape(rows, h), _EMPTY if bias is None else bias, gamma, eps, True,
                     bias is not None, y.reshape(rows, h), inv.reshape(rows), s.reshape(rows, h))
                return y, np.zeros(inv.shape, _F32), inv, s
            return base(x, skip, gamma, bias)

        return declares_output_bytes(run, traits_of(base).output_bytes)

    @KERNELS.register("SimplifiedLayerNormalization", 1, domain="")
    def simplified_layer_norm(ctx):
        base = portable_simplified.simplified_layer_norm(ctx)
        loop = loops.rms_rows.get()
        if loop is None:
            return base
        eps = float(ctx.attr("epsilon"))
        axis = int(ctx.attr("axis"))

        def run(x, scale):
            if type(x) is np.ndarray and type(scale) is np.ndarray and x.dtype == _F32 and scale.dtype == _F32 \
                    and x.ndim >= 1 and axis in (-1, x.ndim - 1) and scale.shape == x.shape[-1:] and x.shape[-1] \
                    and _contiguous(x, scale):
                h = x.shape[-1]
                rows = x.size // h
                y = np.empty(x.shape, np.float32)
                inv = np.empty(x.shape[:-1] + (1,), np.float32)
                loop(x.reshape(rows, h), x.reshape(rows, h), _EMPTY, scale, eps, False, False, y.reshape(rows, h),
                     inv.reshape(-1), y.reshape(rows, h))
                return y, inv
            return base(x, scale)

        return declares_output_bytes(run, traits_of(base).output_bytes)
