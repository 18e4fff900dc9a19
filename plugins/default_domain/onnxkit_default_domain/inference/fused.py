"""Inference functions of ai.onnxkit, onnxkit's fused operators (:mod:`onnxkit_default_domain.fused`):
each that of the ai.onnx definition it repeats."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import dims_of, elem_of, elementwise, same_as_input, tensor

from ..fused import FUSED_DOMAIN
from . import attention
from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys, domain=FUSED_DOMAIN)
FUNCTIONS.register("Gelu")(same_as_input(0))
FUNCTIONS.register("HardSwish")(same_as_input(0))
# Attention-2: ai.onnx Attention-23's shapes and types (nan_to_zero changes values only)
FUNCTIONS.register("Attention", 2)(attention.FUNCTIONS[("", "Attention", 23)])


@FUNCTIONS.register("LookupTable", 3)
def _lookup_table(ctx):
    """X's shape, the element type of the body's output (the body inferred on X's type)."""
    x = ctx.input_type(0)
    out = ctx.subgraph_types("body", [x])
    y = out[0] if out else None
    elem = elem_of(y) if y is not None else 0
    if not elem:
        return [None]
    return [tensor(elem, dims_of(x) if x is not None else None)]


@FUNCTIONS.register("Elementwise", 4)
def _elementwise(ctx):
    """The inputs' multidirectional broadcast shape (Clause 10), of the body output's element type
    (the body inferred on the inputs' types)."""
    out = ctx.subgraph_types("body", ctx.input_types())
    elem = elem_of(out[0]) if out and out[0] is not None else 0
    return [elementwise(ctx, elem or None)]
