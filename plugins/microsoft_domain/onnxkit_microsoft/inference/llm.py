"""The LLM operators (kernels: ``kernels/llm_quant.py``, ``kernels/moe.py``,
``kernels/sparse_attention.py``, ``kernels/sparse_matmul.py``).

GatherBlockQuantized: data's shape with gather_axis replaced by the indices' shape (uint8 data
with ``bits`` < 8: the last extent times ``8 / bits``), in scales' type.  MatMulBnb4: A's shape
with the last extent N.  MoE / QMoE: the input's type and shape.  SparseAttention: the output
``(B, S, num_heads * head_size)`` in the query's type and the presents the past's type and shape
(their buffer is the past's).  SparseToDenseMatMul: ``(M, N)`` of op(A) @ op(B), in B's type.
"""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.dtypes import DataType
from onnxkit.plugin.inference import dims_of, elem_of, tensor

from ._util import DOMAIN, definition_keys

FUNCTIONS = FunctionTable(definition_keys, domain=DOMAIN)
UINT8 = int(DataType.UINT8)


@FUNCTIONS.register("GatherBlockQuantized")
def _gather_block_quantized(ctx):
    data, idx = ctx.input_type(0), ctx.input_type(1)
    dd, di = dims_of(data), dims_of(idx)
    elem = elem_of(ctx.input_type(2))
    if dd is None or di is None or not dd:
        return [tensor(elem, None)]
    axis = int(ctx.attr("gather_axis", 0))
    axis = axis + len(dd) if axis < 0 else axis
    if not 0 <= axis < len(dd):
        return [tensor(elem, None)]
    out = list(dd[:axis]) + list(di) + list(dd[axis + 1:])
    bits = int(ctx.attr("bits", 4))
    if elem_of(data) == UINT8 and bits in (2, 4) and out:
        last = out[-1]
        out[-1] = last * (8 // bits) if isinstance(last, int) else None
    return [tensor(elem, out)]


@FUNCTIONS.register("MatMulBnb4")
def _matmul_bnb4(ctx):
    a = ctx.input_type(0)
    ad = dims_of(a)
    return [tensor(elem_of(a), None if ad is None else list(ad[:-1]) + [int(ctx.attr("N"))])]


@FUNCTIONS.register(("MoE", "QMoE"))
def _moe(ctx):
    x = ctx.input_type(0)
    return [tensor(elem_of(x), dims_of(x))]


@FUNCTIONS.register("SparseAttention")
def _sparse_attention(ctx):
    q, pk, pv = ctx.input_type(0), ctx.input_type(3), ctx.input_type(4)
    dq = dims_of(q)
    out = None
    if dq is not None and len(dq) == 3:
        hidden = dq[2]
        if not ctx.has_input(1):  # packed QKV: hidden = (num_heads + 2 kv_num_heads) head_size
            n, nkv = int(ctx.attr("num_heads")), int(ctx.attr("kv_num_heads"))
            hidden = hidden // (n + 2 * nkv) * n if isinstance(hidden, int) else None
        out = [dq[0], dq[1], hidden]
    return [tensor(elem_of(q), out), tensor(elem_of(pk) or elem_of(q), dims_of(pk)),
            tensor(elem_of(pv) or elem_of(q), dims_of(pv))]


@FUNCTIONS.register("SparseToDenseMatMul")
def _sparse_to_dense_matmul(ctx):
    a, b = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    m = None if not a or len(a) != 2 else a[1 if ctx.attr("transA", 0) else 0]
    n = None if not b or len(b) != 2 else b[0 if ctx.attr("transB", 0) else 1]
    return [tensor(elem_of(ctx.input_type(1)), [m, n])]
