"""Neural-network operators: MatMul, Gemm, Conv / ConvTranspose / pooling, normalizations,
recurrent layers, attention, resizing, quantization, losses, Einsum, signal operators."""

from __future__ import annotations

import math

import numpy as np

from onnxkit.dtypes import DataType
from onnxkit.inference.common import (
    FLOAT, INT64, broadcast, check_equal, dims_of, elem_of, int_list, normalize_axis, same_as_input,
    scalar, shape_input, tensor, unify,
)

from ._util import register, rule

FUNCTIONS: dict = {}
INT32, UINT8 = int(DataType.INT32), int(DataType.UINT8)


# -- matrix products ------------------------------------------------------------------------------

def matmul_dims(ctx, a, b):
    if a is None or b is None:
        return None
    if not a or not b:
        ctx.fail("MatMul: inputs must have rank >= 1")
    a1, b1 = len(a) == 1, len(b) == 1
    a = [1] + a if a1 else a
    b = b + [1] if b1 else b
    check_equal(ctx, a[-1], b[-2], "MatMul: inner extents differ")
    batch = broadcast(ctx, [a[:-2], b[:-2]])
    out = batch + ([] if a1 else [a[-2]]) + ([] if b1 else [b[-1]])
    return out


@rule(FUNCTIONS, "MatMul")
def _matmul(ctx):
    a, b = ctx.input_type(0), ctx.input_type(1)
    return [tensor(elem_of(a) or elem_of(b), matmul_dims(ctx, dims_of(a), dims_of(b)))]


@rule(FUNCTIONS, "MatMulInteger")
def _matmul_integer(ctx):
    return [tensor(INT32, matmul_dims(ctx, dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))))]


@rule(FUNCTIONS, "QLinearMatMul")
def _qlinear_matmul(ctx):
    return [tensor(elem_of(ctx.input_type(7)), matmul_dims(ctx, dims_of(ctx.input_type(0)), dims_of(ctx.input_type(3))))]


@rule(FUNCTIONS, "Gemm")
def _gemm(ctx):
    a, b = ctx.input_type(0), ctx.input_type(1)
    elem = elem_of(a) or elem_of(b)
    da, db = dims_of(a), dims_of(b)
    m = n = None
    if da is not None:
        if len(da) != 2:
            return [tensor(elem, [None, None])]
        m = da[1] if ctx.attr("transA", 0) else da[0]
    if db is not None:
        if len(db) != 2:
            return [tensor(elem, [None, None])]
        n = db[0] if ctx.attr("transB", 0) else db[1]
    return [tensor(elem, [m, n])]


# -- convolution and pooling ----------------------------------------------------------------------

def _spatial(ctx, in_dims, kernel, strides, dilations, pads, auto_pad, ceil_mode=False):
    n = len(in_dims)
    strides = list(strides) if strides else [1] * n
    dilations = list(dilations) if dilations else [1] * n
    out = []
    for k in range(n):
        d = in_dims[k]
        if not isinstance(d, int) or kernel is None or not isinstance(kernel[k], int):
            out.append(None)
            continue
        s, dil = strides[k], dilations[k]
        ek = (kernel[k] - 1) * dil + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-d // s))
            continue
        if auto_pad == "VALID":
            pb = pe = 0
        else:
            pb, pe = (pads[k], pads[k + n]) if pads else (0, 0)
        total = d + pb + pe - ek
        if ceil_mode:
            o = -(-total // s) + 1
            if (o - 1) * s >= d + pb:
                o -= 1
        else:
            o = total // s + 1
        out.append(max(o, 0) if total >= 0 or ceil_mode else None)
    return out


def _conv_like(ctx, x_index=0, w_index=1, out_elem=None):
    x, w = ctx.input_type(x_index), ctx.input_type(w_index)
    elem = out_elem if out_elem is not None else (elem_of(x) or elem_of(w))
    xd, wd = dims_of(x), dims_of(w)
    if xd is None:
        return tensor(elem, None if wd is None else [None] * len(wd))
    if len(xd) < 2:
        ctx.fail(f"{ctx.op_type}: input must have rank >= 2")
    n = len(xd) - 2
    kernel = ctx.attr("kernel_shape")
    kernel = list(kernel) if kernel else (wd[2:] if wd is not None and len(wd) == n + 2 else None)
    m = wd[0] if wd is not None and wd else None
    sp = _spatial(ctx, xd[2:], kernel, ctx.attr("strides"), ctx.attr("dilations"), ctx.attr("pads"),
                  ctx.attr("auto_pad", "NOTSET"))
    return tensor(elem, [xd[0], m] + sp)


@rule(FUNCTIONS, "Conv")
def _conv(ctx):
    return [_conv_like(ctx)]


@rule(FUNCTIONS, "ConvInteger")
def _conv_integer(ctx):
    return [_conv_like(ctx, 0, 1, INT32)]


@rule(FUNCTIONS, "QLinearConv")
def _qlinear_conv(ctx):
    return [_conv_like(ctx, 0, 3, elem_of(ctx.input_type(7)))]


@rule(FUNCTIONS, "DeformConv")
def _deform_conv(ctx):
    return [_conv_like(ctx)]


@rule(FUNCTIONS, "ConvTranspose")
def _conv_transpose(ctx):
    x, w = ctx.input_type(0), ctx.input_type(1)
    elem = elem_of(x) or elem_of(w)
    xd, wd = dims_of(x), dims_of(w)
    if xd is None:
        return [tensor(elem, None)]
    n = len(xd) - 2
    group = int(ctx.attr("group", 1))
    c = wd[1] * group if wd is not None and len(wd) > 1 and isinstance(wd[1], int) else None
    kernel = ctx.attr("kernel_shape")
    kernel = list(kernel) if kernel else (wd[2:] if wd is not None and len(wd) == n + 2 else None)
    output_shape = ctx.attr("output_shape")
    if output_shape:
        return [tensor(elem, [xd[0], c] + [int(v) for v in output_shape[-n:]])]
    strides = list(ctx.attr("strides") or [1] * n)
    dil = list(ctx.attr("dilations") or [1] * n)
    opad = list(ctx.attr("output_padding") or [0] * n)
    pads = list(ctx.attr("pads") or [0] * (2 * n))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    sp = []
    for k in range(n):
        d = xd[2 + k]
        if not isinstance(d, int) or kernel is None or not isinstance(kernel[k], int):
            sp.append(None)
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            sp.append(d * strides[k])
        else:
            pb, pe = (0, 0) if auto_pad == "VALID" else (pads[k], pads[k + n])
            sp.append(strides[k] * (d - 1) + opad[k] + (kernel[k] - 1) * dil[k] + 1 - pb - pe)
    return [tensor(elem, [xd[0], c] + sp)]


@rule(FUNCTIONS, "MaxPool AveragePool LpPool")
def _pool(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    if xd is None:
        outs = [tensor(elem_of(x), None), tensor(INT64, None)]
        return outs[:ctx.num_outputs]
    kernel = ctx.attr("kernel_shape")
    sp = _spatial(ctx, xd[2:], list(kernel) if kernel else None, ctx.attr("strides"), ctx.attr("dilations"),
                  ctx.attr("pads"), ctx.attr("auto_pad", "NOTSET"), bool(ctx.attr("ceil_mode", 0)))
    out = xd[:2] + sp
    return [tensor(elem_of(x), out), tensor(INT64, out)][:ctx.num_outputs]


@rule(FUNCTIONS, "GlobalAveragePool GlobalMaxPool GlobalLpPool")
def _global_pool(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    return [tensor(elem_of(x), None if xd is None else xd[:2] + [1] * (len(xd) - 2))]


@rule(FUNCTIONS, "MaxRoiPool")
def _max_roi_pool(ctx):
    xd, rd = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    pooled = [int(v) for v in ctx.attr("pooled_shape")]
    return [tensor(elem_of(ctx.input_type(0)), [rd[0] if rd else None, xd[1] if xd else None] + pooled)]


@rule(FUNCTIONS, "RoiAlign")
def _roi_align(ctx):
    xd, rd = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    return [tensor(elem_of(ctx.input_type(0)), [rd[0] if rd else None, xd[1] if xd and len(xd) > 1 else None,
                                                int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))])]


@rule(FUNCTIONS, "MaxUnpool")
def _max_unpool(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    if ctx.has_input(2):
        s = shape_input(ctx, 2)
        return [tensor(elem_of(x), s if s is not None else (None if xd is None else [None] * len(xd)))]
    if xd is None:
        return [tensor(elem_of(x), None)]
    n = len(xd) - 2
    kernel = list(ctx.attr("kernel_shape"))
    strides = list(ctx.attr("strides") or [1] * n)
    pads = list(ctx.attr("pads") or [0] * (2 * n))
    sp = [(d - 1) * strides[k] + kernel[k] - pads[k] - pads[k + n] if isinstance(d, int) else None
          for k, d in enumerate(xd[2:])]
    return [tensor(elem_of(x), xd[:2] + sp)]


# -- normalization --------------------------------------------------------------------------------

@rule(FUNCTIONS, "BatchNormalization")
def _batch_norm(ctx):
    x = ctx.input_type(0)
    ctx.set_output(0, x)
    for k in range(1, ctx.num_outputs):
        if ctx.since_version < 9:
            src = ctx.input_type(1)
        else:
            src = ctx.input_type(3 if k == 1 else 4) if k <= 2 else ctx.input_type(1)
        ctx.set_output(k, tensor(elem_of(src) or elem_of(x), dims_of(src)))


register(FUNCTIONS, "InstanceNormalization GroupNormalization RMSNormalization RotaryEmbedding", same_as_input(0))


@rule(FUNCTIONS, "LayerNormalization")
def _layer_norm(ctx):
    x = ctx.input_type(0)
    ctx.set_output(0, x)
    xd = dims_of(x)
    stat = int(ctx.attr("stash_type", 1))
    if ctx.num_outputs > 1:
        if xd is None:
            st = tensor(stat, None)
        else:
            axis = normalize_axis(ctx, int(ctx.attr("axis", -1)), len(xd))
            st = tensor(stat, xd[:axis] + [1] * (len(xd) - axis))
        for k in range(1, ctx.num_outputs):
            ctx.set_output(k, st)


# -- recurrent layers -----------------------------------------------------------------------------

@rule(FUNCTIONS, "RNN GRU LSTM")
def _rnn(ctx):
    x = ctx.input_type(0)
    elem = elem_of(x)
    xd = dims_of(x)
    hidden = ctx.attr("hidden_size")
    hidden = int(hidden) if hidden is not None else None
    if hidden is None:
        rd = dims_of(ctx.input_type(2))
        hidden = rd[2] if rd is not None and len(rd) == 3 else None
    nd = 2 if ctx.attr("direction", "forward") == "bidirectional" else 1
    layout = int(ctx.attr("layout", 0)) if ctx.since_version >= 14 else 0
    if xd is not None and len(xd) == 3:
        seq, batch = (xd[1], xd[0]) if layout else (xd[0], xd[1])
    else:
        seq = batch = None
    if layout:
        y, yh = [batch, seq, nd, hidden], [batch, nd, hidden]
    else:
        y, yh = [seq, nd, batch, hidden], [nd, batch, hidden]
    outs = [tensor(elem, y), tensor(elem, yh), tensor(elem, yh)]
    return outs[:ctx.num_outputs]


# -- attention ------------------------------------------------------------------------------------

@rule(FUNCTIONS, "Attention")
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


# -- resizing, sampling ---------------------------------------------------------------------------

def _scaled(dims, scales):
    return [int(math.floor(d * s)) if isinstance(d, int) else (d if s == 1 else None) for d, s in zip(dims, scales)]


@rule(FUNCTIONS, "Resize", 10, 10)
def _resize_10(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    scales = ctx.constant(1)
    if xd is None or scales is None or scales.size != len(xd):
        return [tensor(elem_of(x), None if xd is None else [None] * len(xd))]
    return [tensor(elem_of(x), _scaled(xd, [float(s) for s in scales.reshape(-1)]))]


@rule(FUNCTIONS, "Resize", 11)
def _resize(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    elem = elem_of(x)
    if xd is None:
        return [tensor(elem, None)]
    r = len(xd)
    axes = ctx.attr("axes")
    axes = list(range(r)) if not axes else [normalize_axis(ctx, a, r) for a in axes]
    unknown = tensor(elem, [xd[k] if k not in axes else None for k in range(r)])
    sizes = int_list(ctx, 3) if ctx.has_input(3) else None
    scales_c = ctx.constant(2) if ctx.has_input(2) else None
    if scales_c is not None and scales_c.size == 0:
        scales_c = None
    if ctx.has_input(3) and sizes is None and (scales_c is None):
        return [unknown]
    out = list(xd)
    if sizes is not None and len(sizes) == len(axes):
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for a, s in zip(axes, sizes):
                out[a] = s
        else:
            if not all(isinstance(xd[a], int) and xd[a] > 0 for a in axes):
                return [unknown]
            ratios = [s / xd[a] for a, s in zip(axes, sizes)]
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                out[a] = int(math.floor(scale * xd[a] + 0.5))
        return [tensor(elem, out)]
    if scales_c is not None and scales_c.size == len(axes):
        for a, s in zip(axes, scales_c.reshape(-1).tolist()):
            d = xd[a]
            out[a] = int(math.floor(d * s)) if isinstance(d, int) else (d if s == 1 else None)
        return [tensor(elem, out)]
    return [unknown]


@rule(FUNCTIONS, "Upsample")
def _upsample(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    if xd is None:
        return [tensor(elem_of(x), None)]
    if ctx.since_version >= 9:
        c = ctx.constant(1)
        scales = None if c is None else [float(s) for s in c.reshape(-1)]
    elif ctx.since_version >= 7:
        scales = ctx.attr("scales")
    else:
        scales = [1.0, 1.0, float(ctx.attr("height_scale")), float(ctx.attr("width_scale"))] if len(xd) == 4 else None
    if scales is None or len(scales) != len(xd):
        return [tensor(elem_of(x), [None] * len(xd))]
    return [tensor(elem_of(x), _scaled(xd, scales))]


@rule(FUNCTIONS, "GridSample")
def _grid_sample(ctx):
    xd, gd = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    elem = elem_of(ctx.input_type(0))
    if xd is None and gd is None:
        return [tensor(elem, None)]
    n = unify(xd[0] if xd else None, gd[0] if gd else None)
    c = xd[1] if xd is not None and len(xd) > 1 else None
    sp = gd[1:-1] if gd is not None else [None] * (len(xd) - 2)
    return [tensor(elem, [n, c] + sp)]


@rule(FUNCTIONS, "AffineGrid")
def _affine_grid(ctx):
    elem = elem_of(ctx.input_type(0))
    size = int_list(ctx, 1)
    if size is None:
        sd = dims_of(ctx.input_type(1))
        if sd is not None and sd[0] in (4, 5):
            return [tensor(elem, [None] * (sd[0]))]
        return [tensor(elem, None)]
    sp = size[2:]
    return [tensor(elem, [size[0]] + sp + [len(sp)])]


@rule(FUNCTIONS, "Col2Im")
def _col2im(ctx):
    xd = dims_of(ctx.input_type(0))
    elem = elem_of(ctx.input_type(0))
    image, block = int_list(ctx, 1), int_list(ctx, 2)
    n = xd[0] if xd else None
    c = None
    if xd is not None and len(xd) == 3 and isinstance(xd[1], int) and block and all(b > 0 for b in block):
        p = int(np.prod(block))
        c = xd[1] // p if xd[1] % p == 0 else None
    if image is None:
        rd = dims_of(ctx.input_type(1))
        return [tensor(elem, None if rd is None or not isinstance(rd[0], int) else [n, c] + [None] * rd[0])]
    return [tensor(elem, [n, c] + image)]


# -- quantization ---------------------------------------------------------------------------------

@rule(FUNCTIONS, "QuantizeLinear")
def _quantize(ctx):
    x = ctx.input_type(0)
    if ctx.has_input(2) and elem_of(ctx.input_type(2)):
        elem = elem_of(ctx.input_type(2))
    elif ctx.has_input(2):
        elem = 0
    else:
        elem = int(ctx.attr("output_dtype", 0) or 0) or UINT8
    return [tensor(elem, dims_of(x))]


@rule(FUNCTIONS, "DequantizeLinear")
def _dequantize(ctx):
    x = ctx.input_type(0)
    elem = int(ctx.attr("output_dtype", 0) or 0) or elem_of(ctx.input_type(1))
    return [tensor(elem, dims_of(x))]


@rule(FUNCTIONS, "DynamicQuantizeLinear")
def _dynamic_quantize(ctx):
    return [tensor(UINT8, dims_of(ctx.input_type(0))), tensor(FLOAT, []), tensor(UINT8, [])]


# -- losses ---------------------------------------------------------------------------------------

@rule(FUNCTIONS, "NegativeLogLikelihoodLoss")
def _nll(ctx):
    elem = elem_of(ctx.input_type(0))
    if ctx.attr("reduction", "mean") != "none":
        return [tensor(elem, [])]
    return [tensor(elem, dims_of(ctx.input_type(1)))]


@rule(FUNCTIONS, "SoftmaxCrossEntropyLoss")
def _sce(ctx):
    s = ctx.input_type(0)
    elem = elem_of(s)
    loss = tensor(elem, []) if ctx.attr("reduction", "mean") != "none" else tensor(elem, dims_of(ctx.input_type(1)))
    return [loss, tensor(elem, dims_of(s))][:ctx.num_outputs]


# -- Einsum ---------------------------------------------------------------------------------------

@rule(FUNCTIONS, "Einsum")
def _einsum(ctx):
    eq = ctx.attr("equation", "").replace(" ", "")
    types = [ctx.input_type(i) for i in range(ctx.num_inputs)]
    elem = next((elem_of(t) for t in types if elem_of(t)), 0)
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(types):
        ctx.fail(f"Einsum: equation {eq!r} has {len(terms)} operands, the node {len(types)}")
    letters: dict = {}
    ell_shapes = []
    for term, t in zip(terms, types):
        d = dims_of(t)
        if d is None:
            if arrow and "..." not in eq:
                return [tensor(elem, [None] * len(rhs))]
            return [tensor(elem, None)]
        n_letters = len(term.replace("...", ""))
        if "..." in term:
            n_ell = len(d) - n_letters
            if n_ell < 0:
                ctx.fail(f"Einsum: term {term!r} does not fit rank {len(d)}")
            before, _, after = term.partition("...")
            ell_shapes.append(d[len(before):len(before) + n_ell])
            pairs = list(zip(before, d[:len(before)])) + list(zip(after, d[len(before) + n_ell:]))
        else:
            if n_letters != len(d):
                ctx.fail(f"Einsum: term {term!r} does not fit rank {len(d)}")
            pairs = list(zip(term, d))
        for ch, e in pairs:
            letters.setdefault(ch, []).append(e)
    ell = broadcast(ctx, ell_shapes) if ell_shapes else []

    def extent(ch):
        vals = letters.get(ch, [])
        big = [v for v in vals if v != 1]
        if not big:
            return 1 if vals else None
        return unify(*big) if len({v for v in big if isinstance(v, int)}) <= 1 else None

    if arrow:
        out = []
        before, dots, after = rhs.partition("...")
        out = [extent(ch) for ch in before] + (list(ell) if dots else []) + [extent(ch) for ch in after]
    else:
        counts = {}
        for ch in lhs.replace("...", "").replace(",", ""):
            counts[ch] = counts.get(ch, 0) + 1
        out = list(ell) + [extent(ch) for ch in sorted(c for c, n in counts.items() if n == 1)]
    return [tensor(elem, out)]


# -- signal, misc ---------------------------------------------------------------------------------

@rule(FUNCTIONS, "DFT")
def _dft(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    elem = elem_of(x)
    if xd is None:
        return [tensor(elem, None)]
    r = len(xd)
    onesided, inverse = bool(ctx.attr("onesided", 0)), bool(ctx.attr("inverse", 0))
    last = 1 if (onesided and inverse) else 2
    length = None
    if ctx.has_input(1):
        length = scalar(ctx, 1)
        if length is None:
            return [tensor(elem, [None] * (r - 1) + [last])]
        length = int(length)
    axis = None
    if ctx.since_version >= 20:
        if ctx.has_input(2):
            a = scalar(ctx, 2)
            axis = None if a is None else int(a)
        else:
            axis = -2
    else:
        axis = int(ctx.attr("axis", 1))
    if axis is None:
        if not onesided and length is None:
            return [tensor(elem, xd[:-1] + [2])]  # every axis keeps its extent
        return [tensor(elem, [None] * (r - 1) + [last])]
    axis = normalize_axis(ctx, axis, r)
    if axis == r - 1:
        ctx.fail("DFT: the axis cannot be the last one")
    out = list(xd)
    out[-1] = last
    n = xd[axis] if length is None else length
    if onesided and inverse:
        n = length if length is not None else (2 * (xd[axis] - 1) if isinstance(xd[axis], int) else None)
    elif onesided:
        n = n // 2 + 1 if isinstance(n, int) else None
    out[axis] = n
    return [tensor(elem, out)]


@rule(FUNCTIONS, "STFT")
def _stft(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    elem = elem_of(x)
    step = scalar(ctx, 1)
    length = scalar(ctx, 3) if ctx.has_input(3) else None
    if length is None and ctx.has_input(2):
        wd = dims_of(ctx.input_type(2))
        length = wd[0] if wd is not None and len(wd) == 1 and isinstance(wd[0], int) else None
    batch = xd[0] if xd else None
    frames = bins = None
    if xd is not None and len(xd) >= 2 and isinstance(xd[1], int) and step is not None and length is not None:
        frames = (xd[1] - int(length)) // int(step) + 1
    if length is not None:
        bins = int(length) // 2 + 1 if ctx.attr("onesided", 1) else int(length)
    return [tensor(elem, [batch, frames, bins, 2])]


@rule(FUNCTIONS, "Det")
def _det(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    return [tensor(elem_of(x), None if xd is None else xd[:-2])]


@rule(FUNCTIONS, "NonMaxSuppression")
def _nms(ctx):
    return [tensor(INT64, [None, 3])]


@rule(FUNCTIONS, "TfIdfVectorizer")
def _tfidf(ctx):
    xd = dims_of(ctx.input_type(0))
    idx = ctx.attr("ngram_indexes")
    n = max(idx) + 1 if idx else None
    if xd is None:
        return [tensor(FLOAT, None)]
    return [tensor(FLOAT, [n] if len(xd) <= 1 else [xd[0], n])]


@rule(FUNCTIONS, "ImageDecoder")
def _image_decoder(ctx):
    fmt = ctx.attr("pixel_format", "RGB")
    return [tensor(UINT8, [None, None, 1 if fmt == "Grayscale" else 3])]


@rule(FUNCTIONS, "BitCast")
def _bitcast(ctx):
    from onnxkit.dtypes import ELEMENT_TYPES

    x = ctx.input_type(0)
    to = int(ctx.attr("to"))
    a, b = ELEMENT_TYPES.get(elem_of(x)), ELEMENT_TYPES.get(to)
    if a is not None and b is not None and a.bits != b.bits:
        ctx.fail(f"BitCast: {a.name} has {a.bits} bits, {b.name} {b.bits}; the widths must be equal")
    return [tensor(to, dims_of(x))]  # the same shape as the input


@rule(FUNCTIONS, "CausalConvWithState")
def _causal_conv(ctx):
    x = ctx.input_type(0)
    xd, wd = dims_of(x), dims_of(ctx.input_type(1))
    state = None
    if xd is not None and len(xd) >= 2:
        k = wd[-1] if wd is not None and wd and isinstance(wd[-1], int) else None
        state = xd[:2] + [None if k is None else k - 1] * (len(xd) - 2)
    outs = [x, tensor(elem_of(x), state)]
    return outs[:ctx.num_outputs]


@rule(FUNCTIONS, "LinearAttention")
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


@rule(FUNCTIONS, "FlexAttention", domain="ai.onnx.preview")
def _flex_attention(ctx):
    q, v = ctx.input_type(0), ctx.input_type(2)
    qd, vd = dims_of(q), dims_of(v)
    if qd is None or len(qd) != 4:
        return [tensor(elem_of(q), None)]
    return [tensor(elem_of(q), qd[:3] + [vd[3] if vd is not None and len(vd) == 4 else None])]
