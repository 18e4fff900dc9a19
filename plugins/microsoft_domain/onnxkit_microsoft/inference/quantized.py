"""The quantized operators (kernels: ``kernels/quantized.py``): QLinearAdd / QLinearMul give the
broadcast shape in the output zero point's type (A's without one); QLinearGlobalAveragePool X's
shape with extents 1 on the spatial axes; QGemm ``(M, N)``, float without ``y_scale``."""

from __future__ import annotations

from onnxkit.plugin.dtypes import DataType
from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import broadcast, dims_of, elem_of, tensor

from ._util import DOMAIN, definition_keys

FUNCTIONS = FunctionTable(definition_keys, domain=DOMAIN)
FLOAT = int(DataType.FLOAT)


@FUNCTIONS.register(("QLinearAdd", "QLinearMul"))
def _qlinear_binary(ctx):
    a, b = ctx.input_type(0), ctx.input_type(3)
    da, db = dims_of(a), dims_of(b)
    elem = elem_of(ctx.input_type(7)) if ctx.has_input(7) else elem_of(a)
    return [tensor(elem or elem_of(a), None if da is None or db is None else broadcast(ctx, [da, db]))]


@FUNCTIONS.register("QLinearGlobalAveragePool")
def _qlinear_gap(ctx):
    x = ctx.input_type(0)
    d = dims_of(x)
    if d is not None and len(d) >= 3:
        d = [d[0]] + [1] * (len(d) - 2) + [d[-1]] if ctx.attr("channels_last", 0) else d[:2] + [1] * (len(d) - 2)
    return [tensor(elem_of(ctx.input_type(4)) or elem_of(x), d)]


@FUNCTIONS.register("QGemm")
def _qgemm(ctx):
    a, b = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(3))
    m = None if not a or len(a) != 2 else a[0 if not ctx.attr("transA", 0) else 1]
    n = None if not b or len(b) != 2 else b[1 if not ctx.attr("transB", 0) else 0]
    elem = (elem_of(ctx.input_type(8)) or elem_of(ctx.input_type(0))) if ctx.has_input(7) else FLOAT
    return [tensor(elem, [m, n])]
