"""ai.onnx.preview.training: Adagrad, Adam, Momentum (outputs typed as the tensors they update)."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable

from ._util import definition_keys

DOMAIN = "ai.onnx.preview.training"
FUNCTIONS = FunctionTable(definition_keys, domain=DOMAIN)


@FUNCTIONS.register(("Adagrad", "Adam", "Momentum"))
def _optimizer(ctx):
    # inputs R, T, X1..Xn, G1..Gn, (V1..Vn | H1..Hn) [, H1..Hn for Adam]; outputs X'.., then the states
    groups = 4 if ctx.op_type == "Adam" else 3
    n = (ctx.num_inputs - 2) // groups
    out = []
    for k in range(ctx.num_outputs):
        out.append(ctx.input_type(2 + k) if k < n else ctx.input_type(2 + n + k))
    return out


@FUNCTIONS.register("Gradient")
def _gradient(ctx):
    # the gradients have the types of the values named by ``xs``, which the node's inputs
    # do not carry: unknown (9.4)
    return [None] * ctx.num_outputs
