"""SimplifiedLayerNormalization and LayerNormalization-1: the extension operators this package adds
to ai.onnx (``("", "SimplifiedLayerNormalization", 1)``, ``("", "LayerNormalization", 1)``), where
onnxruntime registers them; ONNX defines neither (its LayerNormalization begins at 17).

LayerNormalization-1 is onnxruntime's contrib definition, the one its graph optimizer's layer-norm
fusion writes into a graph importing ai.onnx below 17: the inputs, outputs and attributes of
ai.onnx LayerNormalization-17, computed by that kernel (``Y = (X - mean) / sqrt(var + epsilon) *
Scale + B`` over the axes from ``axis`` on; Mean and InvStdDev in float for ``stash_type`` 1).

``Y = X / sqrt(mean(X^2 over axes axis..rank-1) + epsilon) * scale`` — layer normalization without
the mean removed and without a bias (the root-mean-square norm onnxruntime's transformers optimizer
fuses for T5).  ``scale`` broadcasts against the normalized axes ``X.shape[axis:]``; Y has
``scale``'s element type.  The optional ``inv_std_var`` is float, X's shape with the normalized
axes of extent 1.  Statistics in float32 (float64 for a float64 X).  ``stash_type`` 1 (float
statistics) only: it is the default and what onnxruntime computes; another value is refused.
"""

from __future__ import annotations

import math

from onnxkit.plugin import KernelTable, declares_output_bytes

from ._common import cast, check_float, shape_of, widen

KERNELS = KernelTable()


def _broadcasts(scale_shape: list, normalized: list) -> bool:
    if len(scale_shape) > len(normalized):
        return False
    return all(s in (1, n) for s, n in zip(reversed(scale_shape), reversed(normalized)))


@KERNELS.register("SimplifiedLayerNormalization", 1, domain="")
def simplified_layer_norm(ctx):
    xp = ctx.xp
    eps = float(ctx.attr("epsilon"))
    axis = int(ctx.attr("axis"))
    stash = int(ctx.attr("stash_type"))
    if stash != 1:
        ctx.fail(f"stash_type {stash} is not supported: onnxkit (like onnxruntime) computes the statistics in "
                 "float (stash_type 1)")

    def run(x, scale):
        check_float(ctx, x, "X")
        check_float(ctx, scale, "scale")
        rank = x.ndim
        a = axis + rank if axis < 0 else axis
        if not 0 <= a < rank:
            ctx.fail(f"axis {axis} is outside [-{rank}, {rank - 1}] for X of shape {shape_of(x)}")
        normalized = shape_of(x)[a:]
        if not _broadcasts(shape_of(scale), normalized):
            ctx.fail(f"scale has shape {shape_of(scale)}; it must broadcast to X's normalized axes {normalized}")
        w = widen(xp, x)
        axes = tuple(range(a, rank))
        inv = 1 / xp.sqrt(xp.mean(w * w, axis=axes, keepdims=True) + eps)
        y = w * inv * cast(xp, scale, w.dtype)
        return cast(xp, y, scale.dtype), cast(xp, inv, xp.float32)

    def size(x, scale):  # Y (X's shape, at most 4 bytes an element: float32 work), a float32 per row
        dims = [int(d) for d in x.shape]
        a = axis + len(dims) if axis < 0 else axis
        return math.prod(dims) * max(scale.dtype.itemsize, 4) + 4 * math.prod(dims[:max(a, 0)])

    return declares_output_bytes(run, size)


@KERNELS.register("LayerNormalization", 1, domain="")
def layer_norm_1(ctx):
    from onnxkit_default_domain.api import layer_norm

    return layer_norm(ctx)
