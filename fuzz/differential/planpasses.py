"""Model families of the plan passes: onehot, epilogue (Conv + Relu / Add / Add + Relu / Sum /
Clip / Add + Clip) and
specialize (Shape/Size arithmetic, If on a folded condition, Shape -> Identity/Cast as outputs),
with their near misses."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP
from onnx import helper

from .build import NP, Builder
from .common import binary, chance, leak, pick, shape, value_spec


def onehot(b: Builder) -> None:
    b.opset = pick(b, [11, 13, 17])
    ids_t = pick(b, [TP.INT64, TP.INT32])
    k, n = int(pick(b, [1, 3, 5])), int(pick(b, [1, 2, 4]))
    last = 1 if not chance(b, 0.15) else k
    if last != 1:
        b.tags.append("oh:last-extent")
    lead = shape(b, int(pick(b, [0, 1, 2])), 0.5, (1, 2, 3))
    ids = b.input(ids_t, lead + [last], {"kind": "i", "lo": -2, "hi": k + 1})
    iota = np.arange(k)
    if chance(b, 0.12):
        iota = pick(b, [iota + 1, iota[::-1].copy()])
        b.tags.append("oh:iota")
    iota = iota.reshape((1,) * int(pick(b, [0, 1, 2])) + (k,)).astype(NP[ids_t])
    eq = binary(b, "Equal", ids, b.const(iota))
    to = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16])
    c = b.node("Cast", [eq], to=to)
    w = b.rng.standard_normal((k, n)).astype(NP[to])
    if chance(b, 0.1):
        w.reshape(-1)[0] = pick(b, [np.inf, np.nan, -0.0])
        b.tags.append("oh:w-special")
    if chance(b, 0.08):
        wname = b.input(to, [k, n])
        b.tags.append("oh:w-input")
    else:
        wname = b.const(w, "init")
    y = b.node("MatMul", [c, wname])
    leak(b, [eq, c], "oh", 0.1)
    b.output(y)


def epilogue(b: Builder) -> None:
    b.opset = pick(b, [7, 11, 13, 17])
    elem = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.7, 0.2, 0.1])
    dtype = NP[elem]
    rank = int(pick(b, [3, 4, 4, 5]))
    c, m = int(pick(b, [1, 2, 3])), int(pick(b, [1, 2, 4]))
    spatial = shape(b, rank - 2, 0.4, (3, 4, 5), False)
    x = b.input(elem, [pick(b, [1, 2, b.dim((2, 1))]), c] + spatial, value_spec(b, elem, 0.1))
    k = int(pick(b, [1, 2, 3]))
    group = 1
    if c == m and c > 1 and chance(b, 0.3):
        group = c
    w = (b.rng.standard_normal((m, c // group) + (k,) * (rank - 2)) * 0.5).astype(dtype)
    if chance(b, 0.15):
        wn = b.input(elem, list(w.shape))
        b.tags.append("ep:w-input")
    else:
        wn = b.const(w, "init")
    ins = [x, wn] + ([b.const(b.rng.standard_normal(m).astype(dtype), "init")] if chance(b, 0.5) else [])
    attrs = {"group": group}
    if chance(b, 0.3):
        attrs["pads"] = [k // 2] * (2 * (rank - 2))
    y = b.node("Conv", ins, **attrs)
    mids = [y]
    form = pick(b, ["Relu", "Add", "Add+Relu", "Sum", "Sum+Relu", "Add(y,y)", "Clip", "Add+Clip"])
    b.tags.append(f"ep:{form}")
    if form.startswith(("Add", "Sum")):
        if form == "Add(y,y)":
            y = b.node("Add", [y, y])
        else:
            other_shape = pick(b, ["same", "(1,M,1..)", "scalar", "bigger"]) if form.startswith("Add") else "same"
            if other_shape == "same":
                # the Conv's output shape: a second Conv of the same input
                other = b.node("Conv", [x, b.const(w, "init")], **attrs)
            elif other_shape == "(1,M,1..)":
                other = b.input(elem, [1, m] + [1] * (rank - 2))
            elif other_shape == "scalar":
                other = b.const(np.array(0.5, dtype))
            else:
                other = b.input(elem, [2, 1, m] + [1] * (rank - 2))
                b.tags.append("ep:broadcast-up")
            y = binary(b, "Add" if form.startswith("Add") else "Sum", y, other)
        mids.append(y)
    if form.endswith("Relu"):
        y = b.node("Relu", [y])
    if form.endswith("Clip"):
        y = _clip(b, y, elem)
    leak(b, mids, "ep", 0.1)
    b.output(y)


def _clip(b: Builder, y: str, elem: int) -> str:
    """A Clip of ``y`` (tagged ``ep:clip-*``): bounds 0/6, random, lo > hi, only min, only max,
    none; Clip-6 attributes before opset 11, else constant inputs (initializers or Constant
    nodes, shape [] or [1]) and the near miss of a bound that is a graph input (not folded)."""
    dtype = NP[elem]
    kinds = ["0/6", "random", "lo>hi", "min", "max", "none"]
    if elem != TP.FLOAT:
        # an absent bound is the type's limit (Part 2: onnxkit clips float16's +-inf to +-65504,
        # float64's to +-1.8e308), which the oracles do not give there: onnxruntime's Clip-11
        # float16 and onnx.reference keep +-inf, the float32 copy run for a float64 Conv clips
        # to float32's limits.  Both bounds given: the same everywhere
        kinds = kinds[:3]
    kind = pick(b, kinds)
    lo, hi = {"0/6": (0.0, 6.0), "lo>hi": (1.0, -0.5), "min": (-0.25, None), "max": (None, 0.75),
              "none": (None, None)}.get(kind, tuple(np.round(np.sort(b.rng.standard_normal(2)) * 2, 3)))
    b.tags.append(f"ep:clip-{kind}")
    if b.opset < 11:
        attrs = {k: float(v) for k, v in (("min", lo), ("max", hi)) if v is not None}
        return b.node("Clip", [y], **attrs)
    names = []
    for v in (lo, hi):
        if v is None:
            names.append("")
        elif chance(b, 0.1):
            names.append(b.input(elem, [], {"kind": "f", "lo": -1.0, "hi": 7.0, "special": False}, base="bound"))
            b.tags.append("ep:clip-input-bound")
        else:
            names.append(b.const(np.array(v, dtype).reshape(pick(b, [(), (1,)]))))
    while names and not names[-1]:
        names.pop()
    return b.node("Clip", [y] + names)


def _branch(name: str, nodes, outputs) -> object:
    return helper.make_graph(nodes, name, [], outputs)


def specialize(b: Builder) -> None:
    b.opset = pick(b, [13, 15, 17])
    elem = pick(b, [TP.FLOAT, TP.INT64])
    rank = int(pick(b, [1, 2, 3]))
    xs = shape(b, rank, 0.8, (1, 2, 3))
    if form_if := chance(b, 0.2):
        xs[-1] = b.dim((1, 2))
    x = b.input(elem, xs, value_spec(b, elem))
    form = "if" if form_if else pick(b, ["reshape-chain", "shape-out", "size-out", "constantofshape", "range", "expand"])
    b.tags.append(f"sp:{form}")
    s = b.node("Shape", [x])
    if form == "reshape-chain":
        g = b.node("Gather", [s, b.const(np.array(0, np.int64))], axis=0)
        u = b.node("Unsqueeze", [g, b.const(np.array([0], np.int64))])
        target = b.node("Concat", [u, b.const(np.array([-1], np.int64))], axis=0)
        b.output(b.node("Reshape", [x, target]))
        if chance(b, 0.3):
            b.output(target)
    elif form == "shape-out":
        if b.opset >= 15 and chance(b, 0.3):
            b.nodes[-1].attribute.extend([helper.make_attribute("start", int(pick(b, [0, -1, 1])))])
        out = b.node(pick(b, ["Identity", "Cast"]), [s], **({"to": TP.INT64} if b.nodes and False else {}))
        if b.nodes[-1].op_type == "Cast":
            b.nodes[-1].attribute.extend([helper.make_attribute("to", pick(b, [TP.INT64, TP.INT32, TP.FLOAT]))])
        b.output(out)
        if chance(b, 0.5):
            b.output(s)
    elif form == "size-out":
        z = b.node("Size", [x])
        b.output(b.node("Cast", [z], to=pick(b, [TP.INT64, TP.FLOAT])) if chance(b, 0.5) else b.node("Identity", [z]))
        b.output(b.node("Mul", [z, b.const(np.array(2, np.int64))]))
    elif form == "if":
        g = b.node("Gather", [s, b.const(np.array(-1, np.int64))], axis=0)
        cond = b.node("Equal", [g, b.const(np.array(1, np.int64))])
        then_out = helper.make_tensor_value_info("t_out", elem, None)
        else_out = helper.make_tensor_value_info("e_out", elem, None)
        then_g = _branch("then", [helper.make_node("Squeeze", [x, b.const(np.array([-1], np.int64), "init")],
                                                   ["t_out"])], [then_out])
        else_g = _branch("else", [helper.make_node("Identity", [x], ["e_out"])], [else_out])
        b.output(b.node("If", [cond], then_branch=then_g, else_branch=else_g))
    elif form == "constantofshape":
        v = helper.make_tensor("v", TP.FLOAT, [1], [1.5])
        b.output(b.node("ConstantOfShape", [s], value=v))
    elif form == "range":
        g = b.node("Gather", [s, b.const(np.array(0, np.int64))], axis=0)
        b.output(b.node("Range", [b.const(np.array(0, np.int64)), g, b.const(np.array(1, np.int64))]))
    else:
        e = b.node("Expand", [b.const(np.array([1], NP[elem])), s])
        b.output(b.node("Add", [e, x]))
    leak(b, [s], "sp", 0.15)


FAMILIES = {"onehot": onehot, "epilogue": epilogue, "specialize": specialize}
