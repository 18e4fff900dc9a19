"""Normalizations: BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, RMSNormalization (the kernels: ``kernels/norm.py``).

Y has X's type.  BatchNormalization's optional outputs have the type of the statistics they
update: before version 9 the parameters' (input 1), from 9 running_mean / running_var (inputs
3 / 4) and, for the saved statistics of versions 9-13, the parameters'.  LayerNormalization's
Mean and InvStdDev have the ``stash_type`` element type and X's shape with the normalised
axes (``axis`` and after) of extent 1.
"""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import dims_of, elem_of, normalize_axis, same_as_input, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)


@FUNCTIONS.register("BatchNormalization")
def _batch_norm(ctx):
    x = ctx.input_type(0)
    ctx.set_output(0, x)
    for k in range(1, ctx.num_outputs):
        if ctx.since_version < 9:
            src = ctx.input_type(1)
        else:
            src = ctx.input_type(3 if k == 1 else 4) if k <= 2 else ctx.input_type(1)
        ctx.set_output(k, tensor(elem_of(src) or elem_of(x), dims_of(src)))


FUNCTIONS.register("InstanceNormalization")(same_as_input(0))
FUNCTIONS.register("GroupNormalization")(same_as_input(0))
FUNCTIONS.register("RMSNormalization")(same_as_input(0))


@FUNCTIONS.register("LayerNormalization")
def _layer_norm(ctx):
    x = ctx.input_type(0)
    ctx.set_output(0, x)
    xd = dims_of(x)
    stat = int(ctx.attr("stash_type", 1))
    if ctx.num_outputs > 1:
        if xd is None:
            st = tensor(stat, None)
        else:
            axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), len(xd))
            st = tensor(stat, xd[:axis] + [1] * (len(xd) - axis))
        for k in range(1, ctx.num_outputs):
            ctx.set_output(k, st)
