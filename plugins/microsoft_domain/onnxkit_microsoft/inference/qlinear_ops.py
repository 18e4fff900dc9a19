"""Inference of the quantized operators of ``kernels/qlinear_ops.py``: QuantizeLinear gives x's
shape in the zero point's type (uint8 without one); DequantizeLinear x's shape in the scale's type;
the 8-bit elementwise ones X's shape and type; QLinearConcat the concatenated shape; QLinearWhere the
broadcast shape; QLinearAveragePool ai.onnx AveragePool's geometry (channels first or last);
MatMulIntegerToFloat / DynamicQuantizeMatMul the matmul shape (6.6.2 batch broadcast), float."""

from __future__ import annotations

from onnxkit.plugin.dtypes import DataType
from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import broadcast, dims_of, elem_of, normalize_axis, tensor

from ._util import DOMAIN, definition_keys

FUNCTIONS = FunctionTable(definition_keys, domain=DOMAIN)
FLOAT, UINT8 = int(DataType.FLOAT), int(DataType.UINT8)


@FUNCTIONS.register("QuantizeLinear")
def _quantize(ctx):
    elem = elem_of(ctx.input_type(2)) if ctx.has_input(2) else UINT8
    return [tensor(elem or UINT8, dims_of(ctx.input_type(0)))]


@FUNCTIONS.register("DequantizeLinear")
def _dequantize(ctx):
    return [tensor(elem_of(ctx.input_type(1)) or FLOAT, dims_of(ctx.input_type(0)))]


@FUNCTIONS.register(("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"))
def _same(ctx):
    x = ctx.input_type(0)
    return [tensor(elem_of(x), dims_of(x))]


def _matmul_dims(ctx, a, b):
    if a is None or b is None or len(a) < 1 or len(b) < 2:
        return None
    batch = broadcast(ctx, [a[:-2], b[:-2]]) if len(a) > 1 else b[:-2]
    return None if batch is None else list(batch) + ([a[-2]] if len(a) > 1 else []) + [b[-1]]


@FUNCTIONS.register("MatMulIntegerToFloat")
def _mm_to_float(ctx):
    d = _matmul_dims(ctx, dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1)))
    return [tensor(elem_of(ctx.input_type(2)) or FLOAT, d)]


@FUNCTIONS.register("DynamicQuantizeMatMul")
def _dq_matmul(ctx):
    return [tensor(FLOAT, _matmul_dims(ctx, dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))))]


@FUNCTIONS.register("QLinearConcat")
def _concat(ctx):
    elem = elem_of(ctx.input_type(1))
    dims = [dims_of(ctx.input_type(k)) for k in range(2, ctx.num_inputs, 3)]
    if not dims or any(d is None for d in dims) or len({len(d) for d in dims}) != 1 or not dims[0]:
        return [tensor(elem, None)]
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), len(dims[0]))
    out = list(dims[0])
    ext = [d[axis] for d in dims]
    out[axis] = sum(ext) if all(isinstance(e, int) for e in ext) else None
    return [tensor(elem, out)]


@FUNCTIONS.register("QLinearWhere")
def _where(ctx):
    ds = [dims_of(ctx.input_type(k)) for k in (0, 1, 4)]
    return [tensor(elem_of(ctx.input_type(8)) or elem_of(ctx.input_type(1)),
                   None if any(d is None for d in ds) else broadcast(ctx, ds))]


@FUNCTIONS.register("QLinearAveragePool")
def _avg_pool(ctx):
    from onnxkit_default_domain.api import pool_attrs, pool_geometry

    x = ctx.input_type(0)
    xd = dims_of(x)
    if xd is None:
        return [tensor(elem_of(x), None)]
    last = bool(ctx.attr("channels_last", 0))
    spatial = xd[1:-1] if last else xd[2:]
    out = pool_geometry(ctx, spatial, pool_attrs(ctx, len(xd) - 2))[0]
    return [tensor(elem_of(x), [xd[0], *out, xd[-1]] if last else xd[:2] + out)]


@FUNCTIONS.register("DynamicQuantizeLSTM")
def _dq_lstm(ctx):
    """ai.onnx LSTM's shapes (layout 0); hidden_size from R ``[D, H, 4H]`` where not given."""
    xd = dims_of(ctx.input_type(0))
    hidden = ctx.attr("hidden_size")
    if hidden is None:
        rd = dims_of(ctx.input_type(2))
        hidden = rd[1] if rd is not None and len(rd) == 3 else None
    nd = 2 if ctx.attr("direction", "forward") == "bidirectional" else 1
    seq, batch = (xd[0], xd[1]) if xd is not None and len(xd) == 3 else (None, None)
    outs = [tensor(FLOAT, [seq, nd, batch, hidden]), tensor(FLOAT, [nd, batch, hidden]),
            tensor(FLOAT, [nd, batch, hidden])]
    return outs[:ctx.num_outputs]


@FUNCTIONS.register("QLinearConv")
def _qconv(ctx):
    """ai.onnx Conv's output shape (channels first, or last with ``channels_last``), y_zero_point's type."""
    from onnxkit_default_domain.api import GeometryError, window_geometry

    elem = elem_of(ctx.input_type(7))
    xd, wd = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(3))
    if xd is None or wd is None or len(xd) < 3 or len(wd) != len(xd):
        return [tensor(elem, None)]
    last = bool(ctx.attr("channels_last", 0))
    spatial = xd[1:-1] if last else xd[2:]
    try:
        out = window_geometry(spatial, ctx.attr("kernel_shape") or wd[2:], ctx.attr("strides"), ctx.attr("dilations"),
                              ctx.attr("pads"), ctx.attr_str("auto_pad", "NOTSET") if ctx.has_attr("auto_pad")
                              else "NOTSET")[0]
    except GeometryError as exc:
        ctx.fail(f"QLinearConv: {exc}")
    return [tensor(elem, [xd[0], *out, wd[0]] if last else [xd[0], wd[0], *out])]


@FUNCTIONS.register("QAttention")
def _qattention(ctx):
    """Attention's shapes in bias's type: output (B, S, 3H / 3); present (2, B, N, P + S, H / N)."""
    x, w = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    elem = elem_of(ctx.input_type(2)) or FLOAT
    n = int(ctx.attr("num_heads"))
    d = w[1] // 3 if w and len(w) == 2 and isinstance(w[1], int) else None
    b, s = (x[0], x[1]) if x and len(x) == 3 else (None, None)
    out = [tensor(elem, [b, s, d])]
    if ctx.num_outputs > 1:
        past = dims_of(ctx.input_type(8)) if ctx.has_input(8) else [2, b, n, 0, None]
        t = past[3] + s if past and len(past) == 5 and isinstance(past[3], int) and isinstance(s, int) else None
        out.append(tensor(elem, [2, b, n, t, d // n if isinstance(d, int) else None]))
    return out
