"""Attention-family operators: Attention, CausalConvWithState, LinearAttention, and
ai.onnx.preview's FlexAttention."""

from __future__ import annotations

from onnxkit.plugin import DataType, FunctionTable
from onnxkit.plugin.inference import dims_of, elem_of, tensor, unify

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)
INT32, UINT8 = int(DataType.INT32), int(DataType.UINT8)


# -- attention ------------------------------------------------------------------------------------

@FUNCTIONS.register("Attention")
def _attention(ctx):
    q, k, v = (ctx.input_type(i) for i in range(3))
    qd, kd, vd = dims_of(q), dims_of(k), dims_of(v)
    elem_q, elem_v = elem_of(q), elem_of(v)
    qh, kvh = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    y = present_k = present_v = qk = None
    if qd is not None and len(qd) == 4:
        b, heads, qs = qd[0], qd[1], qd[2]
        vh = vd[3] if vd is not None and len(vd) == 4 else None
        y = [b, heads, qs, vh]
        kvs = kd[2] if kd is not None and len(kd) == 4 else None
        kvheads = kd[1] if kd is not None and len(kd) == 4 else None
    elif qd is not None and len(qd) == 3:
        b, qs = qd[0], qd[1]
        heads = int(qh) if qh is not None else None
        vh = None
        if vd is not None and len(vd) == 3 and kvh and isinstance(vd[2], int) and vd[2] % int(kvh) == 0:
            vh = vd[2] // int(kvh)
        elif vd is not None and len(vd) == 4:
            vh = vd[3]
        y = [b, qs, heads * vh if isinstance(heads, int) and isinstance(vh, int) else None]
        kvs = kd[1] if kd is not None and len(kd) == 3 else (kd[2] if kd is not None and len(kd) == 4 else None)
        kvheads = int(kvh) if kvh is not None else None
    else:
        b = heads = qs = kvs = kvheads = vh = None
    total = kvs
    pk = dims_of(ctx.input_type(4)) if ctx.has_input(4) else None
    if ctx.has_input(4):
        total = pk[2] + kvs if pk is not None and len(pk) == 4 and isinstance(pk[2], int) and isinstance(kvs, int) \
            else None
    kh = None
    if kd is not None and len(kd) == 4:
        kh = kd[3]
    elif kd is not None and len(kd) == 3 and kvh and isinstance(kd[2], int) and kd[2] % int(kvh) == 0:
        kh = kd[2] // int(kvh)
    present_k = [b, kvheads, total, kh]
    present_v = [b, kvheads, total, vh]
    qk = [b, heads, qs, total]
    outs = [tensor(elem_q, y), tensor(elem_q, present_k), tensor(elem_v, present_v), tensor(elem_q, qk)]
    return outs[:ctx.num_outputs]


@FUNCTIONS.register("CausalConvWithState")
def _causal_conv(ctx):
    x = ctx.input_type(0)
    xd, wd = dims_of(x), dims_of(ctx.input_type(1))
    state = None
    if xd is not None and len(xd) >= 2:
        k = wd[-1] if wd is not None and wd and isinstance(wd[-1], int) else None
        state = xd[:2] + [None if k is None else k - 1] * (len(xd) - 2)
    outs = [x, tensor(elem_of(x), state)]
    return outs[:ctx.num_outputs]


@FUNCTIONS.register("LinearAttention")
def _linear_attention(ctx):
    q, k, v = (ctx.input_type(i) for i in range(3))
    qd, kd, vd = dims_of(q), dims_of(k), dims_of(v)
    hq, hkv = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    dk = dv = None
    if kd is not None and len(kd) == 3 and hkv and isinstance(kd[2], int) and kd[2] % int(hkv) == 0:
        dk = kd[2] // int(hkv)
    if vd is not None and len(vd) == 3 and hkv and isinstance(vd[2], int) and vd[2] % int(hkv) == 0:
        dv = vd[2] // int(hkv)
    y = None
    if qd is not None and len(qd) == 3:
        y = [qd[0], qd[1], int(hq) * dv if hq and dv is not None else None]
    b = unify(qd[0] if qd else None, kd[0] if kd else None)
    past = ctx.input_type(3) if ctx.has_input(3) else None
    state = tensor(elem_of(past) or elem_of(q), [b, int(hkv) if hkv else None, dk, dv])
    return [tensor(elem_of(q), y), state][:ctx.num_outputs]


@FUNCTIONS.register("FlexAttention", domain="ai.onnx.preview")
def _flex_attention(ctx):
    q, v = ctx.input_type(0), ctx.input_type(2)
    qd, vd = dims_of(q), dims_of(v)
    if qd is None or len(qd) != 4:
        return [tensor(elem_of(q), None)]
    return [tensor(elem_of(q), qd[:3] + [vd[3] if vd is not None and len(vd) == 4 else None])]
