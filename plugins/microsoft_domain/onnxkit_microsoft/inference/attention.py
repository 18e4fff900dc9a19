"""The attention operators (kernels: ``kernels/attention.py``, ``kernels/gqa.py``) and MatMulNBits
(``kernels/nbits.py``).

Attention's output is ``(B, S, v_hidden)`` and ``present`` ``(2, B, N, P+S, H)``;
MultiHeadAttention's ``(B, S, v_hidden)``, ``(B, N, P+L, H)`` presents and ``(B, N, S, P+L)`` qk;
DecoderMaskedMultiHeadAttention's the query's, its presents the past's; RotaryEmbedding keeps
its input's type; GroupQueryAttention's output is ``(B, S, num_heads * H)`` (``H`` the query's hidden
size over ``num_heads``, or over ``num_heads + 2 kv_num_heads`` for packed QKV: key absent), its
presents ``(B, kv_num_heads, ?, H)`` in the past's type and head extent (``H/2`` for a 4-bit
cache; the length, ``max(total_sequence_length, past length)`` or a window's capacity, is a
run-time value) and ``output_qk`` ``(B, num_heads, S, ?)``; MatMulNBits
gives A's shape with the last extent N.
"""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import dims_of, elem_of, tensor

from ._util import DOMAIN, definition_keys

FUNCTIONS = FunctionTable(definition_keys, domain=DOMAIN)


def _add(a, b):
    return a + b if isinstance(a, int) and isinstance(b, int) else None


@FUNCTIONS.register("Attention")
def _attention(ctx):
    x, w = ctx.input_type(0), ctx.input_type(1)
    xd, wd = dims_of(x), dims_of(w)
    n = int(ctx.attr("num_heads"))
    sizes = list(ctx.attr("qkv_hidden_sizes") or ())
    dv = sizes[2] if len(sizes) == 3 else (wd[1] // 3 if wd and isinstance(wd[1], int) else None)
    dq = sizes[0] if len(sizes) == 3 else dv
    b, s = (xd[0], xd[1]) if xd and len(xd) == 3 else (None, None)
    out = [tensor(elem_of(x), [b, s, dv])]
    if ctx.num_outputs > 1:
        past = dims_of(ctx.input_type(4)) if ctx.has_input(4) else [2, b, n, 0, None]
        t = _add(past[3], s) if past and len(past) == 5 else None
        out.append(tensor(elem_of(x), [2, b, n, t, dq // n if isinstance(dq, int) else None]))
    return out


@FUNCTIONS.register("MultiHeadAttention")
def _mha(ctx):
    q, k, v = ctx.input_type(0), ctx.input_type(1), ctx.input_type(2)
    qd, kd, vd = dims_of(q), dims_of(k), dims_of(v)
    n = int(ctx.attr("num_heads"))
    dv = vd[2] if vd and len(vd) == 3 else (vd[1] * vd[3] if vd and len(vd) == 4 and all(isinstance(e, int)
                                                                                       for e in (vd[1], vd[3])) else None)
    out = [tensor(elem_of(q), [qd[0], qd[1], dv] if qd and len(qd) == 3 else None)]
    p = dims_of(ctx.input_type(6)) if ctx.has_input(6) else None
    plen = p[2] if p and len(p) == 4 else (0 if not ctx.has_input(6) else None)
    b = qd[0] if qd else None
    t = None
    if ctx.num_outputs > 1:
        if kd and len(kd) == 4:  # (B, N, L, H) keys: a past goes before them too
            t = _add(plen, kd[2])
            tk, tv = [kd[0], kd[1], t, kd[3]], [vd[0], vd[1], t, vd[3]] if vd and len(vd) == 4 else None
        else:
            l_ = kd[1] if kd and len(kd) == 3 else None
            hk = kd[2] // n if kd and len(kd) == 3 and isinstance(kd[2], int) else None
            hv = dv // n if isinstance(dv, int) else None
            t = _add(plen, l_)
            tk, tv = [b, n, t, hk], [b, n, t, hv]
        out += [tensor(elem_of(q), tk), tensor(elem_of(q), tv)]
    if ctx.num_outputs > 3:  # qk: the scores (B, N, S, T)
        out.append(tensor(elem_of(q), [b, n, qd[1] if qd and len(qd) == 3 else None, t]))
    return out[:ctx.num_outputs]


@FUNCTIONS.register("DecoderMaskedMultiHeadAttention")
def _dmmha(ctx):
    """The query's shape; presents the past's (the shared cache)."""
    q = ctx.input_type(0)
    out = [tensor(elem_of(q), dims_of(q))]
    if ctx.num_outputs > 1:
        past = ctx.input_type(5) if ctx.has_input(5) else None
        out += [tensor(elem_of(q), dims_of(past) if past is not None else None)] * 2
    return out[:min(ctx.num_outputs, 3)]


@FUNCTIONS.register("RotaryEmbedding")
def _rotary(ctx):
    return [ctx.input_type(0)]


@FUNCTIONS.register("GroupQueryAttention")
def _gqa(ctx):
    q = ctx.input_type(0)
    qd = dims_of(q)
    n, nkv = int(ctx.attr("num_heads")), int(ctx.attr("kv_num_heads"))
    packed = not ctx.has_input(1)
    b, s, h = None, None, None
    if qd and len(qd) == 3:
        b, s, d = qd
        if isinstance(d, int):
            h = d // (n + 2 * nkv) if packed else d // n
    pd = dims_of(ctx.input_type(3)) if ctx.has_input(3) else None
    out = [tensor(elem_of(q), [b, s, n * h if isinstance(h, int) else None] if qd else None)]
    if ctx.num_outputs > 1:
        cache = elem_of(ctx.input_type(3)) if ctx.has_input(3) else elem_of(q)
        hc = pd[3] if pd and len(pd) == 4 else h  # the past's: H, or H/2 for a 4-bit cache
        out += [tensor(cache, [b, nkv, None, hc]), tensor(cache, [b, nkv, None, hc])]
    if ctx.num_outputs > 3:
        out.append(tensor(elem_of(q), [b, n, s, None]))
    return out[:ctx.num_outputs]


@FUNCTIONS.register("MatMulNBits")
def _matmul_nbits(ctx):
    a = ctx.input_type(0)
    ad = dims_of(a)
    return [tensor(elem_of(a), None if ad is None else list(ad[:-1]) + [int(ctx.attr("N"))])]
