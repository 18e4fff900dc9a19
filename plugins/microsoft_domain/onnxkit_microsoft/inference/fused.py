"""The fused operators (kernels: ``kernels/fused.py``), the normalizations (``kernels/norm.py``),
the string operators (``kernels/text.py``) and CDist (``kernels/distance.py``).

FusedConv's output is Conv's (the ai.onnx rule); FusedGemm's is Gemm's; FusedMatMul's that of
MatMul of the transposed operands; the activations, BiasAdd and BiasSoftmax keep their first
input's type.  SkipLayerNormalization's statistics are float, with extent 1 on the last axis.
"""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.dtypes import DataType
from onnxkit.plugin.inference import dims_of, elem_of, tensor

from ._util import DOMAIN, definition_keys

FUNCTIONS = FunctionTable(definition_keys, domain=DOMAIN)
FLOAT, INT32, UINT32, STRING = (int(DataType.FLOAT), int(DataType.INT32), int(DataType.UINT32),
                                int(DataType.STRING))


@FUNCTIONS.register("FusedConv")
def _fused_conv(ctx):
    from onnxkit_default_domain.api import conv_like_output as _conv_like

    return [_conv_like(ctx)]


@FUNCTIONS.register("FusedGemm")
def _fused_gemm(ctx):
    from onnxkit_default_domain.api import gemm_dims

    a, b = ctx.input_type(0), ctx.input_type(1)
    c = dims_of(ctx.input_type(2)) if ctx.has_input(2) and float(ctx.attr("beta", 1.0)) != 0.0 else None
    dims = gemm_dims(ctx, dims_of(a), dims_of(b), c, bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0)))
    return [tensor(elem_of(a) or elem_of(b), dims)]


def _moved(dims, trans_batch: bool, trans: bool):
    if dims is None:
        return None
    d = list(dims)
    if trans_batch and len(d) >= 3:
        d = d[1:-1] + [d[0], d[-1]]
    if trans and len(d) >= 2:
        d[-1], d[-2] = d[-2], d[-1]
    return d


@FUNCTIONS.register("FusedMatMul")
def _fused_matmul(ctx):
    from onnxkit_default_domain.api import matmul_dims

    a, b = ctx.input_type(0), ctx.input_type(1)
    da = _moved(dims_of(a), bool(ctx.attr("transBatchA", 0)), bool(ctx.attr("transA", 0)))
    db = _moved(dims_of(b), bool(ctx.attr("transBatchB", 0)), bool(ctx.attr("transB", 0)))
    return [tensor(elem_of(a) or elem_of(b), matmul_dims(ctx, da, db))]


@FUNCTIONS.register(("Gelu", "BiasGelu", "FastGelu", "QuickGelu", "BiasAdd", "BiasSoftmax"))
def _same_as_first(ctx):
    return [ctx.input_type(0)]


def _stat(ctx, x):
    d = dims_of(x)
    return tensor(FLOAT, None if d is None else d[:-1] + [1])


@FUNCTIONS.register(("SkipLayerNormalization", "SkipSimplifiedLayerNormalization"))
def _skip_layer_norm(ctx):
    x = ctx.input_type(0)
    return [x, _stat(ctx, x), _stat(ctx, x), x][:ctx.num_outputs]


@FUNCTIONS.register("EmbedLayerNormalization")
def _embed_layer_norm(ctx):
    ids, word = dims_of(ctx.input_type(0)), ctx.input_type(2)
    wd = dims_of(word)
    h = wd[1] if wd is not None and len(wd) == 2 else None
    out = tensor(elem_of(word), None if ids is None else list(ids) + [h])
    index = tensor(INT32, None if ids is None else [ids[0]])
    return [out, index, out][:ctx.num_outputs]


@FUNCTIONS.register("Tokenizer")
def _tokenizer(ctx):
    d = dims_of(ctx.input_type(0))
    return [tensor(STRING, None if d is None else list(d) + [None])]


@FUNCTIONS.register("MurmurHash3")
def _murmur(ctx):
    elem = UINT32 if int(ctx.attr("positive", 1)) else INT32
    return [tensor(elem, dims_of(ctx.input_type(0)))]


@FUNCTIONS.register("CDist")
def _cdist(ctx):
    a, b = ctx.input_type(0), ctx.input_type(1)
    da, db = dims_of(a), dims_of(b)
    return [tensor(elem_of(a) or elem_of(b), [da[0] if da else None, db[0] if db else None])]
