"""Model families of the exact graph passes: channel_affine, conv_bn, pad_conv, matmul_add, transpose, reshape,
cast, identity/Dropout — with their near misses (per-channel constants on the wrong axis or of
rank 5, shared weights, training-mode BatchNormalization, ranks other than 2 behind a stale
value_info, a graph output in the middle, ``0`` in a Reshape shape) and IR < 4 models whose
initializers are inputs too and are fed overrides."""

from __future__ import annotations

import numpy as np
from onnx import AttributeProto, helper
from onnx import TensorProto as TP

from .build import NP, Builder
from .common import binary, chance, leak, pick, shape, value_spec


def _legacy(b: Builder) -> bool:
    """Make the model IR 3 (every initializer also a graph input) now and then."""
    if chance(b, 0.25):
        b.ir_version = 3
        b.tags.append("ir3")
        return True
    return False


def _init_input(b: Builder, value: np.ndarray, override: bool, base: str = "p") -> str:
    """A constant initializer; under IR 3 also listed as a graph input, maybe fed an override."""
    n = b.const(value, "init", base)
    if b.ir_version < 4:
        b.inputs.append(helper.make_tensor_value_info(n, int(b.inits[-1].data_type), list(value.shape)))
        if override and chance(b, 0.5):
            b.overrides[n] = {"kind": "f", "lo": 0.5, "hi": 2.0}
            b.tags.append("override")
    return n


def _conv(b: Builder, x: str, c: int, m: int, rank: int, dtype, legacy: bool) -> str:
    k = int(pick(b, [1, 2, 3]))
    w = (b.rng.standard_normal((m, c) + (k,) * (rank - 2)) * 0.5).astype(dtype)
    ins = [x, _init_input(b, w, legacy, "w")]
    if chance(b, 0.6):
        ins.append(_init_input(b, b.rng.standard_normal(m).astype(dtype), legacy, "bias"))
    pads = [k // 2] * (2 * (rank - 2)) if chance(b, 0.5) or k > 1 else [0] * (2 * (rank - 2))
    return b.node("Conv", ins, pads=pads)


def _bn(b: Builder, x: str, m: int, dtype, legacy: bool, training: bool = False) -> str:
    scale = b.rng.uniform(0.5, 2, m).astype(dtype)
    bias = b.rng.standard_normal(m).astype(dtype)
    mean = b.rng.standard_normal(m).astype(dtype)
    var = b.rng.uniform(0.5, 2, m).astype(dtype)
    zero_var = dtype != np.float16 and not training and chance(b, 0.06)
    if zero_var:
        # a zero variance and a zero epsilon: scale / sqrt(var + eps) infinite (+-inf or NaN unfused;
        # the folds must then decline); not float16, where onnxruntime's BatchNormalization is off
        # Part 2's formula, which onnxkit gives, near a zero variance (epsilon 1e-12: -1.082e4 for -1.023e4)
        var[(b.rng.random(m) < 0.5) | (np.arange(m) == 0)] = 0
        b.tags.append("bn:zero-var")
    ins = [x] + [_init_input(b, v, legacy, n) for v, n in ((scale, "s"), (bias, "b"), (mean, "mu"), (var, "var"))]
    attrs = {"epsilon": float(pick(b, [1e-5, 1e-3, 0.1]))}
    if zero_var:
        attrs["epsilon"] = 0.0
    if training:
        attrs["training_mode"] = 1
        return b.node("BatchNormalization", ins, n_out=3, **attrs)[0]
    return b.node("BatchNormalization", ins, **attrs)


def channel_affine(b: Builder) -> None:
    legacy = _legacy(b)
    if legacy:
        b.opset = 8
    dtype_tag = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.6, 0.3, 0.1])
    dtype = NP[dtype_tag]
    rank = int(pick(b, [3, 4, 4, 5]))
    c, m = int(pick(b, [1, 2, 3])), int(pick(b, [1, 2, 3, 4]))
    producer = pick(b, ["Conv", "BatchNormalization"])
    spatial = shape(b, rank - 2, symbolic=0.4, fixed=(3, 4), zero_ok=False)
    wrong_axis = chance(b, 0.12)
    if wrong_axis:
        spatial[-1] = m          # a last-axis vector of length C broadcasts legally: the wrong axis
        b.tags.append("ca:last-axis")
    x = b.input(dtype_tag, [pick(b, [1, 2, b.dim((2, 1))])] + [c if producer == "Conv" else m] + spatial,
                value_spec(b, dtype_tag, 0.05))
    y = _conv(b, x, c, m, rank, dtype, legacy) if producer == "Conv" else _bn(b, x, m, dtype, legacy)
    mids = [y]

    def per_channel(tag):
        form = pick(b, ["(C,1..)", "(1,C,1..)", "scalar", "[1]", "rank5", "last-axis", "unsqueeze", "reshape"])
        if wrong_axis:
            form = "last-axis"
        vec = b.rng.uniform(0.5, 2, m).astype(dtype)
        if tag == "ca-mul" and dtype != np.float16 and chance(b, 0.05):
            vec[0] = pick(b, [np.inf, -np.inf])     # an infinite scale: the fold must decline
            b.tags.append(f"{tag}:inf")
        if form in ("rank5", "last-axis", "scalar", "[1]"):
            b.tags.append(f"{tag}:{form}")
        if form == "(C,1..)":
            return _init_input(b, vec.reshape((m,) + (1,) * (rank - 2)), legacy)
        if form == "(1,C,1..)":
            return _init_input(b, vec.reshape((1, m) + (1,) * (rank - 2)), legacy)
        if form == "scalar":
            return _init_input(b, vec[:1].reshape(()), legacy)
        if form == "[1]":
            return _init_input(b, vec[:1], legacy)
        if form == "rank5":
            return _init_input(b, vec[:1].reshape((1,) * max(5, rank + 1)), legacy)
        if form == "last-axis":
            return _init_input(b, vec, legacy)
        if form == "unsqueeze" and not legacy:
            src = b.const(vec)
            axes = list(range(1, rank - 1))
            if b.opset >= 13:
                return b.node("Unsqueeze", [src, b.const(np.array(axes, np.int64))])
            return b.node("Unsqueeze", [src], axes=axes)
        src = b.const(vec)
        return b.node("Reshape", [src, b.const(np.array([m] + [1] * (rank - 2), np.int64))])
    if chance(b, 0.8):
        y = binary(b, "Mul", y, per_channel("ca-mul"))
        mids.append(y)
    if chance(b, 0.7):
        y = binary(b, "Add", y, per_channel("ca-add"))
    leak(b, mids, "ca", 0.1)
    b.output(y)


def conv_bn(b: Builder) -> None:
    legacy = _legacy(b)
    b.opset = 8 if legacy else pick(b, [9, 13, 15, 17])
    dtype_tag = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.6, 0.3, 0.1])
    dtype = NP[dtype_tag]
    rank = int(pick(b, [3, 4, 5], [0.3, 0.5, 0.2]))
    c, m = int(pick(b, [1, 2, 3])), int(pick(b, [1, 2, 4]))
    x = b.input(dtype_tag, [pick(b, [1, 2, b.dim((2, 1))]), c] + shape(b, rank - 2, 0.4, (3, 4), False),
                value_spec(b, dtype_tag, 0.05))
    y = _conv(b, x, c, m, rank, dtype, legacy)
    if chance(b, 0.1) and not legacy:                  # the weights also read by another Conv
        conv = b.nodes[-1]
        b.output(b.node("Conv", [x, conv.input[1]]))
        b.tags.append("cbn:shared-w")
    training = b.opset >= 14 and chance(b, 0.1)
    if training:
        b.tags.append("cbn:training")
    leak(b, [y], "cbn", 0.08)
    b.output(_bn(b, y, m, dtype, legacy, training))


def pad_conv(b: Builder) -> None:
    """A Pad then a Conv; near misses: a non-zero or negative-zero value, reflect/edge modes, a pad
    on the batch or channel axis, a crop, the padded value read elsewhere, pads fed, Pad-18's axes,
    a Conv with auto_pad."""
    legacy = _legacy(b)
    b.opset = 9 if legacy else pick(b, [9, 11, 13, 18, 19])
    elem = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16], [0.6, 0.3, 0.1])
    dtype = NP[elem]
    rank = int(pick(b, [3, 4, 4, 5], [0.2, 0.5, 0.1, 0.2]))
    c, m = int(pick(b, [1, 2, 3])), int(pick(b, [1, 2, 4]))
    spatial = shape(b, rank - 2, 0.3, (3, 4, 5), False)
    x = b.input(elem, [pick(b, [1, 2, b.dim((2, 1))]), c] + spatial, value_spec(b, elem, 0.1))
    pads = [0, 0] + [int(pick(b, [0, 1, 2])) for _ in range(rank - 2)] + [0, 0] + \
        [int(pick(b, [0, 1, 2])) for _ in range(rank - 2)]
    cin = c
    form = pick(b, ["plain", "value", "mode", "channel", "batch", "crop"], [0.55, 0.1, 0.1, 0.1, 0.05, 0.1])
    attrs, value = {}, None
    if form == "value":
        value = float(pick(b, [0.5, -0.0, 0.0]))
    elif form == "mode":
        attrs["mode"] = pick(b, ["reflect", "edge"])
        pads = [min(p, 1) for p in pads]             # reflect needs pads below the extent
    elif form == "channel":
        pads[1] = 1
        cin = c + 1
    elif form == "batch":
        pads[rank] = 1
    elif form == "crop":
        pads[2] = -1 if not isinstance(spatial[0], str) and spatial[0] > 1 else 0
    b.tags.append(f"pc:{form}")
    if b.opset < 11:
        if value is not None:
            attrs["value"] = value
        p = b.node("Pad", [x], pads=pads, **attrs)
    else:
        ins = [x]
        if chance(b, 0.06):
            ins.append(b.input(TP.INT64, [len(pads)], {"kind": "i", "lo": 0, "hi": 1}))
            b.tags.append("pc:pads-fed")
        elif chance(b, 0.3):            # as torch writes it: Concat, Reshape, Transpose, Reshape, Cast
            half = len(pads) // 2
            head = b.const(np.array(pads, np.int64).reshape(2, half).T.reshape(-1))   # (begin, end) pairs
            if chance(b, 0.1):
                head = b.node("Add", [head, b.input(TP.INT64, [1], {"kind": "i", "lo": 0, "hi": 0})])
                b.tags.append("pc:chain-fed")
            pairs = b.node("Reshape", [head, b.const(np.array([-1, 2], np.int64))])
            flat = b.node("Reshape", [b.node("Transpose", [pairs], perm=[1, 0]), b.const(np.array([-1], np.int64))])
            ins.append(b.node("Cast", [flat], to=TP.INT64))
            b.tags.append("pc:chain")
        else:
            ins.append(_init_input(b, np.array(pads, np.int64), False, "pads"))
        if value is not None or chance(b, 0.2):
            ins.append(b.const(np.array(0.0 if value is None else value, dtype)))
        if b.opset >= 18 and chance(b, 0.1):
            if len(ins) == 2:
                ins.append("")
            ins.append(b.const(np.arange(rank, dtype=np.int64)))
            b.tags.append("pc:axes")
        p = b.node("Pad", ins, **attrs)
    k = int(pick(b, [1, 2, 3]))
    w = (b.rng.standard_normal((m, cin) + (k,) * (rank - 2)) * 0.5).astype(dtype)
    conv_ins = [p, _init_input(b, w, legacy, "w")]
    if chance(b, 0.5):
        conv_ins.append(_init_input(b, b.rng.standard_normal(m).astype(dtype), legacy, "bias"))
    conv_attrs = {}
    if chance(b, 0.3):
        conv_attrs["pads"] = [int(pick(b, [0, 1])) for _ in range(2 * (rank - 2))]
    if chance(b, 0.3):
        conv_attrs["strides"] = [int(pick(b, [1, 2])) for _ in range(rank - 2)]
    if chance(b, 0.2):
        conv_attrs["dilations"] = [int(pick(b, [1, 2])) for _ in range(rank - 2)]
    if "pads" not in conv_attrs and chance(b, 0.08):
        conv_attrs["auto_pad"] = pick(b, ["SAME_UPPER", "VALID"])
        b.tags.append("pc:auto-pad")
    leak(b, [p], "pc", 0.08)
    b.output(b.node("Conv", conv_ins, **conv_attrs))


def matmul_add(b: Builder) -> None:
    legacy = _legacy(b)
    if legacy:
        b.opset = 8
    dtype_tag = pick(b, [TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.INT32] if not legacy else [TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.FLOAT],
                     [0.55, 0.25, 0.1, 0.1])
    dtype = NP[dtype_tag]
    k, n = int(pick(b, [1, 2, 3])), int(pick(b, [1, 2, 4]))
    mdim = pick(b, [1, 3, b.dim((2, 3)), b.dim((1, 0))])
    if chance(b, 0.2) and not legacy:
        # a Reshape to rank 3 whose value_info says rank 2 (a stale declaration)
        x = b.input(dtype_tag, [2, mdim, k] if not isinstance(mdim, str) else [2, 3, k], value_spec(b, dtype_tag, 0.05))
        a = b.node("Reshape", [x, b.const(np.array([2, -1, k], np.int64))])
        b.stale(a, dtype_tag, [pick(b, [6, "m"]), k])
        b.tags.append("mm:stale-rank")
    else:
        rank = 2 if chance(b, 0.8) else pick(b, [1, 3])
        lead = [mdim] if rank >= 2 else []
        if rank == 3:
            lead = [2] + lead
            b.tags.append("mm:rank3")
        x = b.input(dtype_tag, lead + [k], value_spec(b, dtype_tag, 0.05))
        a = x
    w = _init_input(b, b.rng.standard_normal((k, n)).astype(dtype) if dtype_tag != TP.INT32
                    else b.rng.integers(-3, 4, (k, n)).astype(dtype), legacy, "w")
    mm = b.node("MatMul", [a, w])
    cshape = pick(b, [(n,), (1,), (1, n), (1, 1), (3, n), (1, 1, n)])
    if cshape not in ((n,), (1,), (1, n), (1, 1)):
        b.tags.append(f"mm:bias{cshape}")
    cval = b.rng.standard_normal(cshape).astype(dtype) if dtype_tag != TP.INT32 else np.ones(cshape, dtype)
    y = binary(b, "Add", mm, _init_input(b, cval, legacy, "bias"))
    leak(b, [mm], "mm", 0.08)
    b.output(y)


def transpose(b: Builder) -> None:
    elem = pick(b, [TP.FLOAT, TP.INT64, TP.BOOL, TP.FLOAT16, TP.DOUBLE])
    rank = int(b.rng.integers(0, 6))
    y = b.input(elem, shape(b, rank), value_spec(b, elem))
    mids = []
    for _ in range(int(pick(b, [2, 2, 3]))):
        perm = [int(p) for p in b.rng.permutation(rank)]
        if mids and chance(b, 0.4):       # the inverse of the previous one
            prev = b.nodes[-1].attribute[0].ints
            perm = [int(i) for i in np.argsort(list(prev))]
        if perm:
            y = b.node("Transpose", [y], perm=perm)
        else:
            y = b.node("Transpose", [y])
            b.nodes[-1].attribute.append(helper.make_attribute("perm", [], attr_type=AttributeProto.INTS))
        mids.append(y)
    leak(b, mids[:-1], "tr", 0.15)
    b.output(y)


def reshape(b: Builder) -> None:
    b.opset = pick(b, [13, 14, 17])
    elem = pick(b, [TP.FLOAT, TP.INT32, TP.BOOL])
    dims = [pick(b, [2, 3, 1, 0]) for _ in range(int(b.rng.integers(1, 4)))]
    x = b.input(elem, dims, value_spec(b, elem))
    total = int(np.prod(dims))
    s1 = [total] if chance(b, 0.5) else [-1]
    y1 = b.node("Reshape", [x, b.const(np.array(s1, np.int64))])
    options = [[-1], [1, -1], [total, 1], [0, -1], [0], [1, 0], [-1, 1, 1], [0, 1]]
    s2 = pick(b, options)
    attrs = {}
    if b.opset >= 14 and chance(b, 0.3):
        attrs["allowzero"] = 1
    if not _reshape_ok((total,), s2, bool(attrs)):
        s2 = [total]
    if 0 in s2 or attrs:
        b.tags.append(f"rs:{s2}{'allowzero' if attrs else ''}")
    y2 = b.node("Reshape", [y1, b.const(np.array(s2, np.int64))], **attrs)
    leak(b, [y1], "rs", 0.15)
    b.output(y2)


def _reshape_ok(shape: tuple, target: list, allowzero: bool) -> bool:
    """Whether Reshape(shape -> target) is valid (0 copies an extent unless ``allowzero``)."""
    out = []
    for i, t in enumerate(target):
        if t == 0 and not allowzero:
            if i >= len(shape):
                return False
            t = shape[i]
        out.append(t)
    if out.count(-1) > 1 or (allowzero and 0 in out and -1 in out):
        return False
    known = int(np.prod([d for d in out if d != -1]))
    total = int(np.prod(shape))
    if -1 in out:
        return known != 0 and total % known == 0
    return known == total


def cast(b: Builder) -> None:
    types = [TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.INT32, TP.INT64, TP.BOOL, TP.UINT8]
    elem = pick(b, types[:6])
    spec = value_spec(b, elem, 0.0)
    if elem in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16):
        spec = {"kind": "f", "lo": -3, "hi": 300 if chance(b, 0.2) else 3}
    y = b.input(elem, shape(b, int(b.rng.integers(0, 5))), spec)
    cur, mids = elem, []
    for _ in range(int(pick(b, [1, 2, 3]))):
        to = cur if chance(b, 0.5) else pick(b, types)
        if cur in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16) and to in (TP.UINT8,) and spec.get("hi", 3) > 255:
            to = TP.INT32     # float -> uint8 out of range is undefined behaviour in C++ (onnxruntime)
        if cur in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16) and to == TP.UINT8:
            to = TP.INT64
        y = b.node("Cast", [y], to=to)
        mids.append(y)
        cur = to
    leak(b, mids[:-1], "cast", 0.15)
    b.output(y)


def identity_dropout(b: Builder) -> None:
    legacy = _legacy(b)
    b.opset = pick(b, [7, 10, 12, 13, 17]) if not legacy else pick(b, [7, 12, 13])
    if not legacy:
        b.ir_version = 3 if b.opset < 8 else 7
    elem = pick(b, [TP.FLOAT, TP.DOUBLE])
    n = int(pick(b, [3, 48]))
    x = b.input(elem, [b.dim((2, 1)), n], value_spec(b, elem, 0.1))
    y = b.node("Identity", [x]) if chance(b, 0.5) else x
    ratio = float(pick(b, [0.0, 0.5, 0.25]))
    ins, attrs = [y], {}
    training_fed = False
    if b.opset >= 12:
        if chance(b, 0.7):
            ins.append(b.const(np.array(ratio, NP[elem])) if not chance(b, 0.2) else "")
        if chance(b, 0.7):
            train = chance(b, 0.2)
            if b.ir_version < 4:
                t = b.const(np.array(train), "init", "train")
                b.inputs.append(helper.make_tensor_value_info(t, TP.BOOL, []))
                if chance(b, 0.6):
                    b.overrides[t] = {"kind": "b", "always": True}
                    training_fed = training_fed or "fed"
                    b.tags.append("dropout:fed-training")
            else:
                t = b.const(np.array(train))
            if len(ins) == 1:
                ins.append("")
            ins.append(t)
            if train:
                b.tags.append("dropout:training")
                training_fed = True
        if len(ins) < 2 or not ins[1]:
            ratio = 0.5                  # Dropout-12's default ratio
    else:
        attrs["ratio"] = ratio
    with_mask = chance(b, 0.3)
    outs = b.node("Dropout", ins, n_out=2 if with_mask else 1, **attrs)
    d = outs[0] if with_mask else outs
    if with_mask:
        b.output(outs[1])
        b.tags.append("dropout:mask")
        if b.opset < 10:     # Dropout-7..9: the mask of an inference run is "not filled" (Part 2): unspecified
            b.random.append({"output": outs[1], "why": "dropout-legacy-mask"})
    if training_fed:
        b.random.append({"output": d, "input": x if y == x else None, "ratio": ratio, "training": training_fed})
        if with_mask:
            b.random.append({"output": outs[1]})
    b.output(d if not chance(b, 0.3) else b.node("Identity", [d]))
    if training_fed and b.outputs[-1] != d:
        b.random.append({"output": b.outputs[-1], "input": x if y == x else None, "ratio": ratio, "training": training_fed})


FAMILIES = {"channel_affine": channel_affine, "conv_bn": conv_bn, "pad_conv": pad_conv, "matmul_add": matmul_add,
            "transpose": transpose,
            "reshape": reshape, "cast": cast, "identity_dropout": identity_dropout}
