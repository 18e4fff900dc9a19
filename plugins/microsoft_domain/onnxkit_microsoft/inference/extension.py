"""Inference of the extension operators ai.onnx SimplifiedLayerNormalization-1 and
LayerNormalization-1 (kernels: ``kernels/simplified_norm.py``).  SimplifiedLayerNormalization: Y
has X's shape and scale's element type; inv_std_var is float, X's shape with extent 1 on the
normalized axes (unknown where X's rank is).  LayerNormalization-1: below."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import FLOAT, dims_of, elem_of, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)   # ai.onnx: the extension's domain


@FUNCTIONS.register("SimplifiedLayerNormalization")
def _simplified_layer_norm(ctx):
    x, scale = ctx.input_type(0), ctx.input_type(1)
    d = dims_of(x)
    inv = None
    if d is not None:
        axis = int(ctx.attr("axis", -1))
        a = axis + len(d) if axis < 0 else axis
        if 0 <= a < len(d):
            inv = list(d[:a]) + [1] * (len(d) - a)
    return [tensor(elem_of(scale), d), tensor(FLOAT, inv)][:ctx.num_outputs]



@FUNCTIONS.register("LayerNormalization", last=1)
def _layer_norm_1(ctx):
    """onnxruntime's LayerNormalization-1 (ai.onnx below 17): Y has X's type and shape; Mean and
    InvStdDev X's shape with extent 1 on the normalized axes, float for ``stash_type`` 1 (else X's type)."""
    x = ctx.input_type(0)
    d = dims_of(x)
    stat = None
    if d is not None:
        axis = int(ctx.attr("axis", -1))
        a = axis + len(d) if axis < 0 else axis
        if 0 <= a < len(d):
            stat = list(d[:a]) + [1] * (len(d) - a)
    stat_elem = FLOAT if int(ctx.attr("stash_type", 1)) == 1 else elem_of(x)
    return [tensor(elem_of(x), d), tensor(stat_elem, stat), tensor(stat_elem, stat)][:ctx.num_outputs]
