"""Activations and other shape-preserving operators of one tensor input."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import constraint_type, dims_of, elem_of, same_as_input, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)

FUNCTIONS.register(("Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "HardSigmoid", "Tanh", "Softplus", "Softsign",
                     "ThresholdedRelu", "Celu", "Gelu", "Mish", "HardSwish", "Swish", "Shrink", "Softmax", "LogSoftmax",
                     "Hardmax", "LRN", "LpNormalization", "MeanVarianceNormalization", "CumSum", "CumProd", "Trilu",
                     "ReverseSequence"))(same_as_input(0))


@FUNCTIONS.register("PRelu")
def _prelu(ctx):
    # the slope broadcasts to X (unidirectionally from 7 on): the output has X's type
    return [ctx.input_type(0)]


@FUNCTIONS.register("Dropout")
def _dropout(ctx):
    t = ctx.input_type(0)
    ctx.set_output(0, t)
    if ctx.num_outputs > 1:
        mt = constraint_type(ctx, 1)
        e = elem_of(mt) or (elem_of(t) if ctx.since_version < 10 else 0)
        ctx.set_output(1, tensor(e, dims_of(t)))
