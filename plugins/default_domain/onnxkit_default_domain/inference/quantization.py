"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear."""

from __future__ import annotations

from onnxkit.plugin import DataType, FunctionTable
from onnxkit.plugin.inference import FLOAT, dims_of, elem_of, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)
INT32, UINT8 = int(DataType.INT32), int(DataType.UINT8)


# -- quantization ---------------------------------------------------------------------------------

@FUNCTIONS.register("QuantizeLinear")
def _quantize(ctx):
    x = ctx.input_type(0)
    if ctx.has_input(2) and elem_of(ctx.input_type(2)):
        elem = elem_of(ctx.input_type(2))
    elif ctx.has_input(2):
        elem = 0
    else:
        elem = int(ctx.attr("output_dtype", 0) or 0) or UINT8
    return [tensor(elem, dims_of(x))]


@FUNCTIONS.register("DequantizeLinear")
def _dequantize(ctx):
    x = ctx.input_type(0)
    elem = int(ctx.attr("output_dtype", 0) or 0) or elem_of(ctx.input_type(1))
    return [tensor(elem, dims_of(x))]


@FUNCTIONS.register("DynamicQuantizeLinear")
def _dynamic_quantize(ctx):
    return [tensor(UINT8, dims_of(ctx.input_type(0))), tensor(FLOAT, []), tensor(UINT8, [])]
