"""Neural-network operators: MatMul, Gemm, Conv / ConvTranspose, RotaryEmbedding, recurrent layers,
losses, Einsum (pooling: ``pool.py``; normalizations: ``norm.py``)."""

from __future__ import annotations

from onnxkit.plugin import DataType, FunctionTable
from onnxkit.plugin.inference import broadcast, check_equal, dims_of, elem_of, same_as_input, tensor, unify

from ._util import definition_keys
from .nn_geometry import GeometryError, transpose_geometry, window_geometry

FUNCTIONS = FunctionTable(definition_keys)
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


@FUNCTIONS.register("MatMul")
def _matmul(ctx):
    a, b = ctx.input_type(0), ctx.input_type(1)
    return [tensor(elem_of(a) or elem_of(b), matmul_dims(ctx, dims_of(a), dims_of(b)))]


@FUNCTIONS.register("MatMulInteger")
def _matmul_integer(ctx):
    return [tensor(INT32, matmul_dims(ctx, dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))))]


@FUNCTIONS.register("QLinearMatMul")
def _qlinear_matmul(ctx):
    return [tensor(elem_of(ctx.input_type(7)), matmul_dims(ctx, dims_of(ctx.input_type(0)), dims_of(ctx.input_type(3))))]


def gemm_dims(ctx, a, b, c=None, trans_a=False, trans_b=False, strict_c=False):
    """``[M, N]``, the output extents of Gemm over the extents of A, B and C (each a list of
    ``int | str | None``, or None when unknown); the kernels use it too.  A and B must be
    2-D with equal inner extents; C must broadcast to ``(M, N)`` (be exactly that shape when
    ``strict_c``: Gemm before 7 without ``broadcast``)."""
    m = n = None
    inner = []
    for dims, what, trans in ((a, "A", trans_a), (b, "B", trans_b)):
        if dims is None:
            inner.append(None)
            continue
        if len(dims) != 2:
            ctx.fail(f"Gemm: {what} must be 2-D, got shape {list(dims)}")
        outer_i, inner_i = (1, 0) if trans else (0, 1)
        if what == "B":
            outer_i, inner_i = inner_i, outer_i
        inner.append(dims[inner_i])
        if what == "A":
            m = dims[outer_i]
        else:
            n = dims[outer_i]
    check_equal(ctx, inner[0], inner[1], "Gemm: the inner extents of A' and B' differ")
    if c is not None:
        if strict_c:
            if len(c) != 2 or any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(c, (m, n))):
                ctx.fail(f"Gemm: C has shape {list(c)}; with broadcast = 0 it must be {[m, n]}")
        elif len(c) > 2 or any(isinstance(x, int) and isinstance(y, int) and x not in (1, y)
                               for x, y in zip(reversed(c), (n, m))):
            ctx.fail(f"Gemm: C of shape {list(c)} does not broadcast to {[m, n]}")
    return [m, n]


@FUNCTIONS.register("Gemm")
def _gemm(ctx):
    a, b = ctx.input_type(0), ctx.input_type(1)
    c = dims_of(ctx.input_type(2)) if ctx.has_input(2) and float(ctx.attr("beta", 1.0)) != 0.0 else None
    strict_c = ctx.since_version < 7 and not ctx.attr("broadcast", 0)
    dims = gemm_dims(ctx, dims_of(a), dims_of(b), c, bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0)),
                     strict_c)
    return [tensor(elem_of(a) or elem_of(b), dims)]


# -- convolution and pooling ----------------------------------------------------------------------

def _spatial(ctx, in_dims, kernel, strides, dilations, pads, auto_pad, ceil_mode=False):
    """The output extents of a sliding window (:func:`.nn_geometry.window_geometry`, which the
    kernels use too); an impossible geometry is reported."""
    try:
        return window_geometry(in_dims, kernel, strides, dilations, pads, auto_pad, ceil_mode)[0]
    except GeometryError as exc:
        ctx.fail(f"{ctx.op_type}: {exc}")


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


@FUNCTIONS.register("Conv")
def _conv(ctx):
    return [_conv_like(ctx)]


@FUNCTIONS.register("ConvInteger")
def _conv_integer(ctx):
    return [_conv_like(ctx, 0, 1, INT32)]


@FUNCTIONS.register("QLinearConv")
def _qlinear_conv(ctx):
    return [_conv_like(ctx, 0, 3, elem_of(ctx.input_type(7)))]


@FUNCTIONS.register("DeformConv")
def _deform_conv(ctx):
    return [_conv_like(ctx)]


@FUNCTIONS.register("ConvTranspose")
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
    try:
        sp = transpose_geometry(xd[2:], kernel, ctx.attr("strides"), ctx.attr("dilations"), ctx.attr("pads"),
                                ctx.attr("auto_pad", "NOTSET"), ctx.attr("output_padding"),
                                ctx.attr("output_shape"))[3]
    except GeometryError as exc:
        ctx.fail(f"ConvTranspose: {exc}")
    return [tensor(elem, [xd[0], c] + sp)]


# -- normalization ----------------------------------------------------------------------------

FUNCTIONS.register("RotaryEmbedding")(same_as_input(0))


# -- recurrent layers -----------------------------------------------------------------------------

@FUNCTIONS.register("RNN")
@FUNCTIONS.register("GRU")
@FUNCTIONS.register("LSTM")
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


# -- losses ---------------------------------------------------------------------------------------

@FUNCTIONS.register("NegativeLogLikelihoodLoss")
def _nll(ctx):
    elem = elem_of(ctx.input_type(0))
    if ctx.attr("reduction", "mean") != "none":
        return [tensor(elem, [])]
    return [tensor(elem, dims_of(ctx.input_type(1)))]


@FUNCTIONS.register("SoftmaxCrossEntropyLoss")
def _sce(ctx):
    s = ctx.input_type(0)
    elem = elem_of(s)
    loss = tensor(elem, []) if ctx.attr("reduction", "mean") != "none" else tensor(elem, dims_of(ctx.input_type(1)))
    return [loss, tensor(elem, dims_of(s))][:ctx.num_outputs]


# -- Einsum ---------------------------------------------------------------------------------------

@FUNCTIONS.register("Einsum")
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
