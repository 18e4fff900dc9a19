"""ai.onnx.preview.training: Adagrad, Adam, Momentum (outputs typed as the tensors they update)."""

from __future__ import annotations

from ._util import rule

FUNCTIONS: dict = {}
DOMAIN = "ai.onnx.preview.training"


@rule(FUNCTIONS, ("Adagrad", "Adam", "Momentum"), domain=DOMAIN)
def _optimizer(ctx):
    # inputs R, T, X1..Xn, G1..Gn, (V1..Vn | H1..Hn) [, H1..Hn for Adam]; outputs X'.., then the states
    groups = 4 if ctx.op_type == "Adam" else 3
    n = (ctx.num_inputs - 2) // groups
    out = []
    for k in range(ctx.num_outputs):
        out.append(ctx.input_type(2 + k) if k < n else ctx.input_type(2 + n + k))
    return out


@rule(FUNCTIONS, "Gradient", domain=DOMAIN)
def _gradient(ctx):
    # the gradients have the types of the values named by ``xs``, which the node's inputs
    # do not carry: unknown (9.4)
    return [None] * ctx.num_outputs
