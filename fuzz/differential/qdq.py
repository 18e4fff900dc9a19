"""The model family of the qdq pass (onnxkit/runtime/optimizer/qdq.py): an 8-bit value made by
QuantizeLinear of a float input, one QDQ group (Conv, MatMul, Gemm, Add, Mul, GlobalAveragePool,
a value move, a DQ -> Q pair, a chain of elementwise steps for the qlut pass's lookup tables) and a final DequantizeLinear, with near misses planted at random
(the float result read elsewhere, a per-channel weight on another axis, a bias of another scale,
a Q of other parameters or another type) and recorded in ``Builder.tags``.

Every scale is a power of two, every sum stays far below 2^24 units, and each Q's scale divides
the unit of the value it quantizes (``y / y_scale`` is an integer): the float path (onnxruntime,
onnxkit unoptimized; a Winograd convolution's few ulps included) and the integer kernels then
round to the same integers, with no tie to break, so the oracle's exact comparison holds for the
fused model too (the fusion's one-step bound with arbitrary scales is tests/optimizer/test_opt_qdq.py's)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP

from .build import Builder
from .common import chance, pick

_SPEC = {"kind": "f", "lo": -3.0, "hi": 3.0}


def _zero(b: Builder, dtype) -> int:
    return int(b.rng.integers(-10, 11)) + (128 if dtype == np.uint8 else 0)


def _params(b: Builder, dtype, log2_scale: int):
    """``(scale name, zero point name, scale)`` per tensor, as 0-d or one-element constants."""
    shape = () if chance(b, 0.7) else (1,)
    scale = np.float32(2.0 ** log2_scale)
    return (b.const(np.full(shape, scale, np.float32)), b.const(np.full(shape, _zero(b, dtype), dtype)), scale)


def _quantize(b: Builder, x: str, dtype, log2_scale: int) -> tuple:
    s, z, scale = _params(b, dtype, log2_scale)
    return b.node("QuantizeLinear", [x, s, z]), s, z, scale


def _weight(b: Builder, shape, axis, per_channel: bool, log2_scale: int):
    """A constant int8 weight, its DequantizeLinear and its scales (one, or one per ``axis`` entry)."""
    w = b.const(b.rng.integers(-3, 4, size=shape).astype(np.int8))
    m = shape[axis]
    if per_channel:
        scales = (2.0 ** (log2_scale - b.rng.integers(0, 3, m))).astype(np.float32)
        s, z = b.const(scales), b.const(np.zeros(m, np.int8))
        return b.node("DequantizeLinear", [w, s, z], axis=axis), scales
    scale = np.float32(2.0 ** log2_scale)
    return b.node("DequantizeLinear", [w, b.const(scale), b.const(np.int8(0))]), np.full(1, scale, np.float32)


def _bias(b: Builder, n: int, unit: np.ndarray) -> str:
    """An int32 bias of scale ``unit`` (x_scale * w_scale; doubled as a near miss)."""
    if chance(b, 0.1):
        unit = unit * np.float32(2)
        b.tags.append("qdq:bias-scale")
    values = b.const(b.rng.integers(-40, 41, n).astype(np.int32))
    scale = b.const(unit.astype(np.float32) if unit.size > 1 else unit.reshape(()).astype(np.float32))
    zero = b.const(np.zeros(unit.shape if unit.size > 1 else (), np.int32))
    return b.node("DequantizeLinear", [values, scale, zero], axis=0)


def _linear(b: Builder, kind: str, xd: str, x_scale: np.float32, dtype):
    """Conv / MatMul / Gemm on the dequantized ``xd``; ``(float result, its unit, extents)``."""
    per_channel = chance(b, 0.4)
    if kind == "conv":
        c, m = 3, int(pick(b, [2, 4]))
        axis = 0
        if per_channel and chance(b, 0.15):
            axis = 1
            b.tags.append("qdq:axis")
        wd, ws = _weight(b, (m, c, 3, 3), axis, per_channel, -1)
        unit = x_scale * ws if axis == 0 else x_scale * ws[:1]
        ins = [xd, wd] + ([_bias(b, m, unit)] if chance(b, 0.6) and axis == 0 else [])
        return b.node("Conv", ins, pads=[1, 1, 1, 1], strides=[1, int(pick(b, [1, 2]))]), unit
    k, n = 4, int(pick(b, [3, 5]))
    if kind == "matmul":
        wd, ws = _weight(b, (k, n), 1, per_channel, -1)
        return b.node("MatMul", [xd, wd]), x_scale * ws
    trans_b = int(chance(b, 0.5))
    wd, ws = _weight(b, (n, k) if trans_b else (k, n), 0 if trans_b else 1, per_channel, -1)
    unit = x_scale * ws
    ins = [xd, wd] + ([_bias(b, n, unit)] if chance(b, 0.6) else [])
    return b.node("Gemm", ins, transB=trans_b), unit


#: the elementwise steps of the ``lut`` kind (the qlut pass's regions): operators whose float32
#: result is the correctly rounded one in both runtimes, constants a power of two or a quarter
_UNARY, _BINARY = ("Relu", "Abs", "Neg", "Floor", "Ceil"), ("Add", "Sub", "Mul", "Div", "Max", "Min")


def _elementwise(b: Builder, xd: str) -> str:
    """One to three elementwise steps on ``xd``, each unary or with a one-element constant (0-d, or
    ``[1]`` now and then), either operand order for the binary ones but Div's."""
    y = xd
    for _ in range(int(b.rng.integers(1, 4))):
        op = pick(b, list(_UNARY + _BINARY))
        if op in _UNARY:
            y = b.node(op, [y])
            continue
        value = 2.0 ** int(b.rng.integers(-2, 2)) if op in ("Mul", "Div") else 0.25 * int(b.rng.integers(-8, 9))
        c = b.const(np.full(() if chance(b, 0.8) else (1,), value * (1 if chance(b, 0.7) else -1), np.float32))
        y = b.node(op, [y, c] if op == "Div" or chance(b, 0.5) else [c, y])
    return y


def qdq(b: Builder) -> None:
    b.opset = int(pick(b, [13, 17, 19, 21]))
    dtype = pick(b, [np.int8, np.uint8])
    # the pair rules run by default (qdq.DEFAULT_RULES): moves and cancels most often
    kind = pick(b, ["conv", "matmul", "gemm", "add", "mul", "pool", "move", "cancel", "lut"],
                [0.1, 0.08, 0.08, 0.07, 0.07, 0.1, 0.25, 0.15, 0.1])
    b.tags.append(kind)
    shape = {"conv": [pick(b, [1, 2, b.dim((1, 2))]), 3, 4, 4], "matmul": [2, 3, 4], "gemm": [3, 4],
             "pool": [2, 3, int(pick(b, [2, 4])), 2]}.get(kind, [2, 3, 4])
    x = b.input(TP.FLOAT, shape, dict(_SPEC))
    log2_x = int(b.rng.integers(-1, 1))
    xq, xs, xz, x_scale = _quantize(b, x, dtype, log2_x)
    xd = b.node("DequantizeLinear", [xq, xs, xz])
    if kind in ("conv", "matmul", "gemm"):
        y, unit = _linear(b, kind, xd, x_scale, dtype)
        log2_y = int(np.log2(float(unit.min()))) - int(b.rng.integers(0, 2))
    elif kind in ("add", "mul"):
        other = b.input(TP.FLOAT, shape, dict(_SPEC))
        log2_o = int(b.rng.integers(-1, 1))
        oq, os_, oz, _ = _quantize(b, other, dtype, log2_o)
        y = b.node(kind.capitalize(), [xd, b.node("DequantizeLinear", [oq, os_, oz])])
        log2_y = min(log2_x, log2_o) if kind == "add" else log2_x + log2_o
    elif kind == "lut":
        y, log2_y = _elementwise(b, xd), log2_x - int(b.rng.integers(0, 2))
    elif kind == "pool":
        y, log2_y = b.node("GlobalAveragePool", [xd]), log2_x - int(np.log2(shape[2] * shape[3]))
    else:
        y = xd if kind == "cancel" else b.node(pick(b, ["Transpose", "Relu", "Identity", "Flatten"]), [xd])
        if chance(b, 0.7):      # the DQ's own parameters (else a near miss: other ones)
            out_dtype = dtype if chance(b, 0.9) else (np.uint8 if dtype == np.int8 else np.int8)
            if out_dtype != dtype:
                b.tags.append("qdq:other-type")
            z = xz if out_dtype == dtype else b.const(np.array(5, out_dtype))
            yq = b.node("QuantizeLinear", [y, xs, z])
            b.output(b.node("DequantizeLinear", [yq, xs, z]))
            if chance(b, 0.3):
                b.output(yq)
            return
        b.tags.append("qdq:other-parameters")
        log2_y = log2_x - 1
    if chance(b, 0.1) and kind != "cancel":
        b.output(y)
        b.tags.append("qdq:leak")
    yq, ys, yz, _ = _quantize(b, y, dtype, log2_y)
    b.output(b.node("DequantizeLinear", [yq, ys, yz]))
    if chance(b, 0.3):
        b.output(yq)


FAMILIES = {"qdq": qdq}
