"""Model families of the cpu backend's fast paths (plugins/cpu_backend/onnxkit_cpu/overrides and
compiled): Conv (grouped, depthwise, strided, dilated, padded, auto_pad, 1-3 spatial dims),
pools, activations, normalizations, RNN/GRU/LSTM, broadcasting elementwise operators over
element types, ranks 0-5, extents 0 and 1 and NaN/inf; Resize (every mode and coordinate mode)
and attention over long sequences."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP

from .build import NP, Builder
from .common import chance, pick, shape, value_spec


def conv(b: Builder) -> None:
    b.opset = pick(b, [11, 13, 17])
    elem = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.7, 0.2, 0.1])
    dtype = NP[elem]
    nd = int(pick(b, [1, 2, 2, 3]))
    group = int(pick(b, [1, 1, 2, 3]))
    depthwise = chance(b, 0.3)
    cin = group * int(pick(b, [1, 2])) if not depthwise else group
    m = group * int(pick(b, [1, 2]))
    if depthwise:
        b.tags.append("depthwise")
    ks = [int(pick(b, [1, 2, 3])) for _ in range(nd)]
    strides = [int(pick(b, [1, 1, 2])) for _ in range(nd)]
    dil = [int(pick(b, [1, 1, 2])) for _ in range(nd)]
    attrs = {"group": group, "kernel_shape": ks, "strides": strides, "dilations": dil}
    pad_mode = pick(b, ["none", "pads", "SAME_UPPER", "SAME_LOWER", "VALID"])
    if pad_mode == "pads":
        attrs["pads"] = [int(pick(b, [0, 1, 2])) for _ in range(2 * nd)]
    elif pad_mode != "none":
        attrs["auto_pad"] = pad_mode
    spatial = [int(pick(b, [4, 5, 7])) for _ in range(nd)]
    sym = [b.dim((s, s + 1)) if chance(b, 0.3) else s for s in spatial]
    x = b.input(elem, [pick(b, [1, 2, b.dim((1, 2))]), cin] + sym, value_spec(b, elem, 0.1))
    w = (b.rng.standard_normal((m, cin // group) + tuple(ks)) * 0.5).astype(dtype)
    wn = b.input(elem, list(w.shape)) if chance(b, 0.2) else b.const(w, "init")
    ins = [x, wn]
    if chance(b, 0.5):
        ins.append(b.const(b.rng.standard_normal(m).astype(dtype), "init"))
    y = b.node("Conv", ins, **attrs)
    if chance(b, 0.4):
        act = pick(b, ["Relu", "Sigmoid", "LeakyRelu", "Clip"])
        if act == "Clip" and elem != TP.FLOAT:
            # a Clip without bounds clips to the type's limits (Part 2); a float64 model is checked on its
            # float32 copy, whose limits are float32's (-inf there, -3.4e38 from the copy's Clip)
            act = "Relu"
        y = b.node(act, [y])
    b.output(y)


def pool(b: Builder) -> None:
    b.opset = pick(b, [11, 12, 18, 19])
    elem = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.7, 0.2, 0.1])
    nd = int(pick(b, [1, 2, 2, 3]))
    op = pick(b, ["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool"])
    base = [int(pick(b, [3, 4, 6])) for _ in range(nd)]
    spatial = [b.dim((s, s + 1)) if chance(b, 0.3) else s for s in base]
    spec = value_spec(b, elem, 0.15)
    if op in ("MaxPool", "GlobalMaxPool") and spec.get("special"):
        spec["special"] = "inf"     # NaN in a max: onnxruntime skips it, numpy propagates; Part 2 says nothing
    x = b.input(elem, [pick(b, [1, 2]), int(pick(b, [1, 3]))] + spatial, spec)
    attrs = {}
    if not op.startswith("Global"):
        ks = [int(pick(b, [1, 2, 3])) for _ in range(nd)]
        attrs = {"kernel_shape": ks, "strides": [int(pick(b, [1, 2])) for _ in range(nd)]}
        if chance(b, 0.4):
            attrs["pads"] = [int(pick(b, [0, 1])) for _ in range(2 * nd)]
            for i, k in enumerate(ks):     # a pad must be smaller than the kernel
                attrs["pads"][i] = min(attrs["pads"][i], k - 1)
                attrs["pads"][i + nd] = min(attrs["pads"][i + nd], k - 1)
        elif chance(b, 0.3):
            attrs["auto_pad"] = pick(b, ["SAME_UPPER", "SAME_LOWER", "VALID"])
        if op == "AveragePool" and chance(b, 0.5):
            attrs["count_include_pad"] = 1
        if op in ("MaxPool", "AveragePool") and chance(b, 0.3) and "auto_pad" not in attrs:
            attrs["ceil_mode"] = 1
        if op in ("MaxPool", "AveragePool") and chance(b, 0.15):
            # one window over the whole input (and its near misses: one short of it, or two windows)
            ks = [s + int(pick(b, [-1, 0, 1, 3, 50])) for s in base]
            attrs["kernel_shape"] = ks
            attrs["strides"] = [k if chance(b, 0.8) else 1 for k in ks]
            attrs.pop("auto_pad", None)
            if "pads" in attrs:
                attrs["pads"] = [min(p, k - 1) for p, k in zip(attrs["pads"], ks + ks)]
            if chance(b, 0.6):
                attrs["ceil_mode"] = 1
            b.tags.append("pool:whole")
        if op == "MaxPool" and chance(b, 0.3) and "pool:whole" not in b.tags \
                and not str(attrs.get("auto_pad", "")).startswith("SAME"):   # see exclusions: SAME + dilations
            attrs["dilations"] = [int(pick(b, [1, 2])) for _ in range(nd)]
        if op == "LpPool":
            attrs["p"] = int(pick(b, [1, 2, 3]))
            attrs.pop("ceil_mode", None)
            if b.opset < 18:
                attrs.pop("dilations", None)
    b.output(b.node(op, [x], **attrs))


ACTIVATIONS = ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "Softplus", "Softsign", "HardSigmoid",
               "HardSwish", "Gelu", "Erf", "Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Mish", "ThresholdedRelu",
               "Celu", "Softmax", "LogSoftmax", "Hardmax", "PRelu", "Clip", "Sin", "Cos", "Floor", "Ceil", "Round",
               "Sign", "IsNaN", "IsInf")


def activation(b: Builder) -> None:
    op = pick(b, list(ACTIVATIONS))
    b.opset = 20 if op in ("Gelu", "IsInf") else pick(b, [13, 17, 18])    # IsInf-20: float16 too
    elem = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.6, 0.25, 0.15])
    if op in ("Celu",):
        elem = TP.FLOAT
    rank = int(b.rng.integers(0 if op not in ("Softmax", "LogSoftmax", "Hardmax", "PRelu") else 1, 6))
    x = b.input(elem, shape(b, rank), value_spec(b, elem, 0.3))
    ins, attrs = [x], {}
    if op == "PRelu":
        ins.append(b.const((b.rng.standard_normal(1) * 0.3).astype(NP[elem]), "init"))
    if op == "Clip":
        ins += [b.const(np.array(-1.0, NP[elem])), b.const(np.array(1.5, NP[elem]))][:int(pick(b, [0, 1, 2]))]
    if op in ("Softmax", "LogSoftmax", "Hardmax"):
        attrs["axis"] = int(b.rng.integers(-rank, rank))
    if op == "Gelu" and chance(b, 0.5):
        attrs["approximate"] = "tanh"
    if op == "LeakyRelu" and chance(b, 0.5):
        attrs["alpha"] = 0.2
    b.output(b.node(op, ins, **attrs))


def norm(b: Builder) -> None:
    op = pick(b, ["LayerNormalization", "InstanceNormalization", "GroupNormalization", "BatchNormalization",
                  "LpNormalization", "MeanVarianceNormalization"])
    b.opset = 21 if op == "GroupNormalization" else pick(b, [17, 18])
    elem = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.7, 0.2, 0.1])
    dtype = NP[elem]
    rank = int(pick(b, [3, 4, 5]) if op in ("InstanceNormalization", "GroupNormalization") else
               pick(b, [2, 3, 4, 5]) if op != "LayerNormalization" else pick(b, [1, 2, 3, 4]))
    c = int(pick(b, [1, 2, 4]))
    dims = [pick(b, [1, 2, b.dim((2, 1))]), c] + shape(b, rank - 2, 0.4, (1, 3, 4), False)
    if op == "LayerNormalization" and rank == 1:
        dims = [c]
    x = b.input(elem, dims[:rank], value_spec(b, elem, 0.05))
    if op == "LayerNormalization":
        axis = int(b.rng.integers(-rank, rank))
        tail = dims[:rank][axis:]
        if any(isinstance(d, str) for d in tail):
            axis, tail = rank - 1, dims[rank - 1:rank]
            if isinstance(tail[0], str):
                axis, tail = 1, [c] + dims[2:rank] if rank > 1 else [c]
                if any(isinstance(d, str) for d in tail):
                    b.output(b.node("Relu", [x]))
                    return
        sc = b.const(b.rng.uniform(0.5, 2, tail).astype(dtype), "init")
        ins = [x, sc] + ([b.const(b.rng.standard_normal(tail).astype(dtype), "init")] if chance(b, 0.5) else [])
        b.output(b.node(op, ins, axis=axis, epsilon=float(pick(b, [1e-5, 1e-2]))))
    elif op == "InstanceNormalization":
        b.output(b.node(op, [x, b.const(b.rng.uniform(0.5, 2, c).astype(dtype), "init"),
                             b.const(b.rng.standard_normal(c).astype(dtype), "init")]))
    elif op == "GroupNormalization":
        g = int(pick(b, [n for n in (1, 2, 4) if c % n == 0]))
        b.output(b.node(op, [x, b.const(b.rng.uniform(0.5, 2, c).astype(dtype), "init"),
                             b.const(b.rng.standard_normal(c).astype(dtype), "init")], num_groups=g))
    elif op == "BatchNormalization":
        params = [b.rng.uniform(0.5, 2, c), b.rng.standard_normal(c), b.rng.standard_normal(c), b.rng.uniform(0.5, 2, c)]
        b.output(b.node(op, [x] + [b.const(p.astype(dtype), "init") for p in params]))
    elif op == "LpNormalization":
        b.output(b.node(op, [x], axis=int(b.rng.integers(-rank, rank)), p=int(pick(b, [1, 2]))))
    else:
        b.output(b.node(op, [x], axes=sorted({int(a) for a in b.rng.integers(0, rank, 2)})))


def rnn(b: Builder) -> None:
    op = pick(b, ["RNN", "GRU", "LSTM"])
    b.opset = pick(b, [14, 17])
    elem = TP.FLOAT          # onnxruntime has no double RNN kernels: its oracle would be missing
    dtype = NP[elem]
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    hidden, inp = int(pick(b, [1, 2, 3])), int(pick(b, [1, 2, 3]))
    direction = pick(b, ["forward", "reverse", "bidirectional"])
    dirs = 2 if direction == "bidirectional" else 1
    layout = 0               # onnxruntime refuses layout 1 (batch-first)
    seq, batch = pick(b, [1, 3, b.dim((3, 1))]), pick(b, [1, 2, b.dim((2, 1))])
    x = b.input(elem, [seq, batch, inp] if layout == 0 else [batch, seq, inp], value_spec(b, elem, 0.0))
    w = b.const((b.rng.standard_normal((dirs, gates * hidden, inp)) * 0.5).astype(dtype), "init")
    r = b.const((b.rng.standard_normal((dirs, gates * hidden, hidden)) * 0.5).astype(dtype), "init")
    ins = [x, w, r]
    if chance(b, 0.6):
        ins.append(b.const((b.rng.standard_normal((dirs, 2 * gates * hidden)) * 0.3).astype(dtype), "init"))
    attrs = {"hidden_size": hidden, "direction": direction, "layout": layout}
    if op == "GRU" and chance(b, 0.5):
        attrs["linear_before_reset"] = 1
    if op == "RNN" and chance(b, 0.3):
        attrs["activations"] = ["Relu"] * dirs
    if chance(b, 0.2):
        attrs["clip"] = 1.0
    outs = b.node(op, ins, n_out=3 if op == "LSTM" else 2, **attrs)
    for o in outs[:2] if chance(b, 0.7) else outs:
        b.output(o)


_BINARY = {"Add": "num", "Sub": "num", "Mul": "num", "Div": "num", "Pow": "float", "Max": "num", "Min": "num",
           "Mod": "int", "Equal": "cmp", "Less": "cmp", "Greater": "cmp", "LessOrEqual": "cmp",
           "And": "bool", "Or": "bool", "Xor": "bool", "BitShift": "uint", "Where": "where", "Sum": "num",
           "Mean": "float"}
_BINARY["Sum"] = "float"     # Sum-13: floating-point types only


def elementwise(b: Builder) -> None:
    b.opset = pick(b, [13, 17, 18])
    op = pick(b, list(_BINARY))
    kind = _BINARY[op]
    elems = {"num": [TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.INT32, TP.INT64], "float": [TP.FLOAT, TP.DOUBLE, TP.FLOAT16],
             "int": [TP.INT32, TP.INT64], "cmp": [TP.FLOAT, TP.INT64, TP.INT32, TP.DOUBLE],
             "bool": [TP.BOOL], "uint": [TP.UINT8], "where": [TP.FLOAT, TP.INT64, TP.BOOL, TP.DOUBLE]}[kind]
    elem = pick(b, elems)
    rank = int(b.rng.integers(0, 6))
    full = shape(b, rank, 0.5, (1, 2, 3))
    shapes = []
    for _ in range(3 if op == "Where" else 2):    # each operand: a suffix of the full shape, some dims 1
        r = int(b.rng.integers(0, rank + 1))
        sub = full[rank - r:]
        shapes.append([1 if chance(b, 0.3) else d for d in sub])
    spec = value_spec(b, elem, 0.25)
    if elem in (TP.INT32, TP.INT64) and op in ("Div", "Mod"):
        spec = {"kind": "i", "lo": -7, "hi": 7, "nonzero": True}
    if op == "Pow":
        spec = {"kind": "f", "lo": -2, "hi": 2, "special": spec["special"]}
    if op == "BitShift":
        spec = {"kind": "i", "lo": 0, "hi": 7}
    ins = []
    for i, shp in enumerate(shapes):
        if op == "Where" and i == 0:
            ins.append(b.input(TP.BOOL, shp, {"kind": "b"}))
        elif chance(b, 0.2) and i > 0:
            value = np.zeros([d if isinstance(d, int) else 1 for d in shp], NP[elem])
            ins.append(b.const(value + (NP[elem](1) if elem != TP.BOOL else True)))
        else:
            ins.append(b.input(elem, shp, spec))
    attrs = {}
    if op == "Mod":
        attrs["fmod"] = int(pick(b, [0, 1]))
    if op == "BitShift":
        attrs["direction"] = pick(b, ["LEFT", "RIGHT"])
    y = b.node(op, ins, **attrs)
    if chance(b, 0.3) and kind in ("num", "float"):
        y = b.node(pick(b, ["Relu", "Neg", "Abs"] if elem in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16) else ["Neg", "Abs"]), [y])
    b.output(y)


RESIZE_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric")


def resize(b: Builder) -> None:
    """Resize on the last one or two axes (the cpu override's fast path) or others (its portable
    fallback): every mode, coordinate mode and nearest rounding, scales or sizes, cubic's
    coefficient and exclude_outside, antialias when shrinking."""
    b.opset = pick(b, [13, 18, 19])
    elem = pick(b, [TP.FLOAT, TP.DOUBLE], [0.8, 0.2])
    rank = int(pick(b, [3, 4, 4]))
    dims = [int(pick(b, [1, 2])), int(pick(b, [1, 3]))] + [int(pick(b, [1, 4, 5, 6])) for _ in range(rank - 2)]
    mode = pick(b, ["nearest", "linear", "cubic"])
    # tf_crop_and_resize is not generated: the portable kernel differs from onnxruntime and the
    # reference on cropped axes (reported in issue 32's note; the override takes it only where
    # no output extrapolates, bit-identical to the portable kernel: test_resize_fast.py)
    coord = pick(b, list(RESIZE_COORDS[:5] if b.opset == 19 else RESIZE_COORDS[:4]))
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    if mode == "nearest":
        attrs["nearest_mode"] = pick(b, ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
    if mode == "cubic" and chance(b, 0.3):
        attrs["cubic_coeff_a"] = -0.5
    if mode == "cubic" and chance(b, 0.3):
        attrs["exclude_outside"] = 1
    axes = list(range(rank - 2, rank)) if chance(b, 0.8) else [1]
    factors = [float(pick(b, [0.5, 1.0, 2.0, 3.0, 1.5])) for _ in axes]
    if b.opset >= 18 and mode != "nearest" and chance(b, 0.25):
        attrs["antialias"] = 1
        factors = [min(f, 0.5) for f in factors]
    full = [1.0] * rank
    for a, f in zip(axes, factors):
        full[a] = f
    roi = ""
    x = b.input(elem, dims, value_spec(b, elem, 0.0))   # NaN/inf: taps of weight 0 differ (report)
    if chance(b, 0.5):
        ins = [x, roi, b.const(np.array(full, np.float32), "init")]
    else:
        sizes = [max(1, int(d * f)) for d, f in zip(dims, full)]
        ins = [x, roi, "", b.const(np.array(sizes, np.int64), "init")]
    b.output(b.node("Resize", ins, **attrs))


def attention_long(b: Builder) -> None:
    """The attention pattern over long sequences (>= 4,096 scores a head: the cpu override's
    blocked body), odd lengths, masks with -inf rows, guarded or not (the optimizer fuses it)."""
    b.opset = 17
    elem = pick(b, [TP.FLOAT, TP.DOUBLE], [0.8, 0.2])
    lead = [int(pick(b, [1, 2])), int(pick(b, [1, 2, 3]))]
    s, skv = int(pick(b, [64, 97, 130])), int(pick(b, [64, 101, 257]))
    d = int(pick(b, [4, 8, 16]))
    guarded = chance(b, 0.6)
    q = b.input(elem, lead + [s, d], {"kind": "f", "lo": -1, "hi": 1, "special": chance(b, 0.1) and guarded})
    k = b.input(elem, lead + [skv, d], {"kind": "f", "lo": -1, "hi": 1})
    v = b.input(elem, lead + [skv, d], {"kind": "f", "lo": -2, "hi": 2})
    f = np.array(1 / np.sqrt(np.sqrt(d)), NP[elem])
    kt = b.node("Mul", [b.node("Transpose", [k], perm=[0, 1, 3, 2]), b.const(f, "init")])
    scores = b.node("MatMul", [b.node("Mul", [q, b.const(f, "init")]), kt])
    if chance(b, 0.6):
        mshape = pick(b, [[lead[0], 1, s, skv], [s, skv], [skv]])
        mask = b.input(elem, mshape, {"kind": "f", "choices": [0.0, 0.0, 0.0, -np.inf, -1.0]})
        scores = b.node("Add", [scores, mask])
    p = b.node("Softmax", [scores], axis=-1)
    if guarded:
        p = b.node("Where", [b.node("IsNaN", [p]), b.const(np.array(0.0, NP[elem]), "init"), p])
    b.output(b.node("MatMul", [p, v]))


FAMILIES = {"conv": conv, "pool": pool, "activation": activation, "norm": norm, "rnn": rnn,
            "elementwise": elementwise, "resize": resize, "attention_long": attention_long}
