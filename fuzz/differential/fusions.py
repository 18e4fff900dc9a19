"""Model families of the fusion passes: gelu (erf and tanh forms, every product order), hardswish,
attention, elementwise (regions of float32 elementwise nodes).  Each family builds the pattern onnxkit rewrites, with near misses planted at random
(constants off by 1e-3 or of rank 5, intermediates read elsewhere, other axes, negative scales,
other ranks) and records them in ``Builder.tags``."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto as TP

from .build import NP, Builder
from .common import binary, chance, float_type, leak, pick, scalar, shape, source, value_spec


def _gelu_tail(b: Builder, x: str, f: str, elem: int) -> tuple:
    """``0.5 * x * (1 + f)`` in one of the exporters' three product orders; (output, intermediates)."""
    one_plus = binary(b, "Add", f, scalar(b, 1.0, elem, "gelu-one"))
    order = pick(b, ["x*(1+f)*0.5", "(0.5*x)*(1+f)", "x*((1+f)*0.5)"])
    b.tags.append(order)
    if order == "x*(1+f)*0.5":
        m = binary(b, "Mul", one_plus, x)
        return binary(b, "Mul", m, scalar(b, 0.5, elem, "gelu-half")), [one_plus, m]
    if order == "(0.5*x)*(1+f)":
        h = binary(b, "Mul", x, scalar(b, 0.5, elem, "gelu-half"))
        return binary(b, "Mul", h, one_plus), [one_plus, h]
    k = binary(b, "Mul", one_plus, scalar(b, 0.5, elem, "gelu-half"))
    return binary(b, "Mul", k, x), [one_plus, k]


def gelu_erf(b: Builder) -> None:
    elem = float_type(b)
    x = source(b, elem, shape(b, int(b.rng.integers(0, 6))))
    if chance(b, 0.5):
        scaled = b.node("Div", [x, scalar(b, math.sqrt(2.0), elem, "gelu-sqrt2")])
    else:
        scaled = binary(b, "Mul", x, scalar(b, 1 / math.sqrt(2.0), elem, "gelu-rsqrt2"))
    e = b.node("Erf", [scaled])
    y, mids = _gelu_tail(b, x, e, elem)
    leak(b, [scaled, e] + mids, "gelu")
    b.output(y)


def _cubic(b: Builder, x: str, elem: int) -> tuple:
    k = scalar(b, 0.044715, elem, "gelu-cubic")
    form = pick(b, ["pow", "xxx*k", "x*(x*(k*x))", "(k*x)*(x*x)"])
    b.tags.append(form)
    if form == "pow":
        p = b.node("Pow", [x, scalar(b, 3.0, elem, "gelu-pow3")])
        return binary(b, "Mul", p, k), [p]
    if form == "xxx*k":
        xx = binary(b, "Mul", x, x)
        xxx = binary(b, "Mul", xx, x)
        return binary(b, "Mul", xxx, k), [xx, xxx]
    if form == "x*(x*(k*x))":
        kx = binary(b, "Mul", x, k)
        xkx = binary(b, "Mul", kx, x)
        return binary(b, "Mul", xkx, x), [kx, xkx]
    kx = binary(b, "Mul", x, k)
    xx = binary(b, "Mul", x, x)
    return binary(b, "Mul", kx, xx), [kx, xx]


def gelu_tanh(b: Builder) -> None:
    elem = float_type(b)
    x = source(b, elem, shape(b, int(b.rng.integers(0, 6))))
    cubic, mids = _cubic(b, x, elem)
    inner = binary(b, "Add", x, cubic)
    s = binary(b, "Mul", inner, scalar(b, math.sqrt(2 / math.pi), elem, "gelu-tanhscale"))
    t = b.node("Tanh", [s])
    y, tail = _gelu_tail(b, x, t, elem)
    leak(b, mids + [inner, s, t] + tail, "gelu")
    b.output(y)


def hardswish(b: Builder) -> None:
    b.opset = pick(b, [10, 13, 14, 17, 21])
    b.ir_version = 7 if b.opset >= 12 else 6
    elem = float_type(b) if b.opset >= 13 else pick(b, [TP.FLOAT, TP.DOUBLE])
    x = source(b, elem, shape(b, int(b.rng.integers(0, 6))))
    a = binary(b, "Add", x, scalar(b, 3.0, elem, "hs-three"))
    if b.opset >= 11:    # Clip's bounds are scalars (a rank-5 one would make the model invalid)
        lo = b.const(np.array(0.0 if not chance(b, 0.08) else 1e-3, NP[elem]))
        hi = b.const(np.array(6.0 if not chance(b, 0.08) else 6.006, NP[elem]))
        clip = b.node("Clip", [a, lo, hi])
    else:
        hi = 6.0 if not chance(b, 0.1) else 6.006
        clip = b.node("Clip", [a], min=0.0, max=hi)
        if hi != 6.0:
            b.tags.append("hs-attr:value")
    if chance(b, 0.5):
        six = b.node("Div", [clip, scalar(b, 6.0, elem, "hs-six")]) if chance(b, 0.5) else \
            binary(b, "Mul", clip, scalar(b, 1 / 6, elem, "hs-sixth"))
        y = binary(b, "Mul", six, x)
        mids = [a, clip, six]
    else:
        m = binary(b, "Mul", clip, x)
        y = b.node("Div", [m, scalar(b, 6.0, elem, "hs-six")]) if chance(b, 0.5) else \
            binary(b, "Mul", m, scalar(b, 1 / 6, elem, "hs-sixth"))
        mids = [a, clip, m]
    leak(b, mids, "hs")
    b.output(y)


def attention(b: Builder) -> None:
    b.opset = pick(b, [11, 13, 17, 21, 23])
    b.ir_version = 8 if b.opset < 21 else 10
    elem = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.6, 0.25, 0.15])
    rank = 4 if not chance(b, 0.1) else pick(b, [3, 5])
    if rank != 4:
        b.tags.append(f"att-rank{rank}")
    lead = shape(b, rank - 2, symbolic=0.5, fixed=(1, 2))
    s, skv = shape(b, 2, symbolic=0.6, fixed=(1, 2, 3))
    d, dv = (int(pick(b, [1, 2, 4])) for _ in range(2))
    guarded = chance(b, 0.5)
    # NaN and infinities in Q, guarded or not (a row of -inf scores gives NaN unguarded, fused or not)
    q = b.input(elem, lead + [s, d], {"kind": "f", "lo": -2, "hi": 2, "special": chance(b, 0.15)})
    if chance(b, 0.6):
        k = b.input(elem, lead + [skv, d], {"kind": "f", "lo": -2, "hi": 2})
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        kt = b.node("Transpose", [k], perm=perm)
    else:
        kt = b.input(elem, lead + [d, skv], {"kind": "f", "lo": -2, "hi": 2})
    v = b.input(elem, lead + [skv, dv], {"kind": "f", "lo": -2, "hi": 2})
    mids = []

    def factor(tag):
        value = float(pick(b, [1 / math.sqrt(math.sqrt(d)), 0.5, 2.0, 0.125]))
        if chance(b, 0.08):
            value = -value
            b.tags.append(f"{tag}:negative")
        return scalar(b, value, elem, tag, miss=0.06)
    if chance(b, 0.4):
        q = binary(b, "Mul", q, factor("att-qscale"))
        mids.append(q)
    if chance(b, 0.4):
        kt = binary(b, "Mul", kt, factor("att-kscale"))
        mids.append(kt)
    scores = b.node("MatMul", [q, kt])
    mids.append(scores)
    r = b.rng.random()
    if r < 0.3:
        scores = binary(b, "Mul", scores, factor("att-scale"))
        mids.append(scores)
    elif r < 0.6:
        scores = b.node("Div", [scores, factor("att-div")])
        mids.append(scores)
    if chance(b, 0.5):
        mshape = pick(b, [[s, skv], [1, 1, s, skv][-rank:], [lead[0]] + [1] * (rank - 2) + [skv], [skv]])
        mask = b.input(elem, mshape, {"kind": "f", "choices": [0.0, 0.0, 0.0, -np.inf, -1.0]})
        scores = binary(b, "Add", scores, mask)
        mids.append(scores)
        b.tags.append("att-mask")
    axis = -1
    if chance(b, 0.1):
        axis = pick(b, [rank - 2, 1, 0])
        b.tags.append(f"att-axis{axis}")
    attrs = {} if (axis == -1 and b.opset >= 13 and chance(b, 0.5)) else {"axis": axis if axis != -1 else rank - 1}
    if b.opset < 13 and "axis" not in attrs:
        attrs = {} if chance(b, 0.3) else {"axis": rank - 1}
        if not attrs:
            b.tags.append("att-axis-default-opset11")
    p = b.node("Softmax", [scores], **attrs)
    if guarded:
        nan = b.node("IsNaN", [p])
        p = b.node("Where", [nan, scalar(b, 0.0, elem, "att-zero", miss=0.05), p])
        b.tags.append("att-guard")
    mids.append(p)
    y = b.node("MatMul", [p, v])
    leak(b, mids, "att", 0.08)
    b.output(y)


#: the elementwise family's steps: unary operators, and binary ones reading a new operand
_UNARY = ["Neg", "Abs", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh"]
_BINARY = ["Add", "Sub", "Mul", "Div"]


def _operand(b: Builder, elem: int, shp: list) -> str:
    """A new operand of a region step, broadcasting to ``shp`` as the fusion's layouts do (full,
    scalar, last-axis vector, per-row; an input or a constant), or as a near miss on another axis."""
    rank = len(shp)
    layout = pick(b, ["full", "scalar", "vector", "row", "other-axis"], [0.3, 0.25, 0.2, 0.15, 0.1])
    if layout == "other-axis" and rank < 2:
        layout = "full"
    b.tags.append(f"ew-{layout}")
    if layout == "full":
        target = list(shp)[int(b.rng.integers(0, rank)) if chance(b, 0.2) else 0:]   # sometimes of lower rank
    elif layout == "scalar":
        target = pick(b, [[], [1], [1] * rank])
    elif layout == "vector":
        target = [shp[-1]] if chance(b, 0.5) else [1] * (rank - 1) + [shp[-1]]
    elif layout == "row":
        target = list(shp[:-1]) + [1]
    else:
        target = [1] + list(shp[1:]) if rank >= 2 and chance(b, 0.5) else list(shp[:-2]) + [1, shp[-1]]
    if all(isinstance(d, int) for d in target) and chance(b, 0.5):
        return b.const(b.rng.uniform(0.5, 2.0, size=target).astype(NP[elem]))
    return b.input(elem, target, value_spec(b, elem))


def elementwise(b: Builder) -> None:
    """A chain of elementwise steps from one input, each unary or reading a new operand of some
    layout or an earlier value; near misses: a float64 / float16 chain, a step through float64
    (Cast there and back), a Pow by 1.5, an intermediate read elsewhere (leak), a lone step."""
    elem = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.85, 0.1, 0.05])
    shp = shape(b, int(b.rng.integers(1, 5)))
    x = source(b, elem, shp)
    values, mids = [x], []
    for _ in range(int(b.rng.integers(1, 8))):
        r = b.rng.random()
        if r < 0.35:
            v = b.node(pick(b, _UNARY), [values[-1]])
        elif r < 0.45:
            e = pick(b, [2.0, 3.0, 0.5, 1.5], [0.3, 0.3, 0.3, 0.1])
            b.tags.append(f"ew-pow{e}")
            v = b.node("Pow", [values[-1], b.const(np.array(e, dtype=NP[elem]))])
        elif r < 0.5 and elem == TP.FLOAT:
            b.tags.append("ew-float64-step")
            wide = b.node("Cast", [values[-1]], to=TP.DOUBLE)
            v = b.node("Cast", [b.node("Sqrt", [b.node("Abs", [wide])])], to=TP.FLOAT)
        else:
            other = _operand(b, elem, shp) if chance(b, 0.7) else pick(b, values)
            v = binary(b, pick(b, _BINARY), values[-1], other)
        mids.append(values[-1])
        values.append(v)
    leak(b, mids[1:], "ew", 0.15)
    b.output(values[-1])


FAMILIES = {"gelu_erf": gelu_erf, "gelu_tanh": gelu_tanh, "hardswish": hardswish, "attention": attention,
            "elementwise_region": elementwise}
