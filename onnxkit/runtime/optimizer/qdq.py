"""QDQ groups run on integer kernels: onnxruntime's QDQ fusions, as rules.

A model made by a QDQ quantizer computes each quantized operator as ``DequantizeLinear`` of its
8-bit operands, the float operator, and ``QuantizeLinear`` of the result.  Every rule's root is
that QuantizeLinear ``Q`` (but the float-output QGemm's, a Gemm); the pattern is ``Q(op(...))``,
the op's output read by ``Q`` alone (the framework's guarantee).  The op's operands must each be written by an ai.onnx
``DequantizeLinear`` (a *DQ*); the fused node reads the DQ's 8-bit input, scale and zero point
directly, and a DQ left with no reader is removed (a DQ read by other nodes too stays for them,
as onnxruntime's duplication of shared DQs gives each reader its own).

**Conditions** (every rule): the scales are float32 constants and the zero points constants of
the 8-bit element type of the value they quantize (int8 or uint8: never int16, int4, float8 or
int32 activations), given (the fused ops need them), per tensor (one value) — except a weight's
scale and zero point, which may be per channel on the fused op's channel axis (a Conv's W: axis
0, ``(M,)``; a MatMul's B: axis 1, ``(N,)``), zero point of the scale's shape; no ``block_size``,
no ``output_dtype`` other than the zero point's, no Q ``precision``; the float op computes
float32 (type inference).  The fused operator must exist at the model's imports:
QLinearConv / QLinearMatMul are ai.onnx from opset 10; QLinearAdd, QLinearMul,
QLinearGlobalAveragePool and QGemm are com.microsoft 1 and only written where that domain's
plugin (onnxkit-microsoft) is installed; an int8 MaxPool needs opset 12, Relu 14, Flatten 9.

**Rules** (:data:`ACTIVE` says which run by default, and why).

* ``DQ(x), DQ(w)[, DQ_int32(B)] -> Conv -> Q`` becomes ``QLinearConv``; the bias must be int32
  with zero point 0 and a scale equal (float32, relative 1e-6) to ``x_scale * w_scale`` (what
  onnxruntime's quantizer writes): its integers are then the QLinearConv's B.  A float32
  constant bias (the quantizer leaves one float where the exporter shared it between nodes)
  qualifies where it *is* such a dequantization: integers ``k`` (int32) exist with
  ``float32(k) * float32(x_scale * w_scale) == bias`` element for element (the
  DequantizeLinear formula, so the fused node reads the same bias values; a zero bias always);
  ``k`` becomes a new int32 initializer; so does a bias DQ of another product's scale (per
  tensor, or per channel: the quantizer quantized the shared bias for its first reader) whose
  dequantized values are such integers.  The same bias rule holds for Gemm's C below.
* ``DQ(a), DQ(b) -> MatMul -> Q`` becomes ``QLinearMatMul``.
* ``DQ(a), DQ(b)[, DQ_int32(C)] -> Gemm -> Q`` (alpha 1, beta 1) becomes com.microsoft
  ``QGemm`` (b per tensor, or per column of B': axis 0 with ``transB``, else 1).
* ``DQ(a), DQ(b)[, bias] -> Gemm`` whose float32 output no QuantizeLinear alone reads (the
  QOperator quantizer leaves GPT-2's Gemms so) becomes ``QGemm`` without ``y_scale``: a float
  output, the bias as for QGemm above (onnxruntime's QDQ fusion does the same).  Not within a
  step: the float path rounds each product and sum in float32, QGemm sums exactly and scales in
  float64, rounded once: the results agree within float32's tolerance (Clause 11).
* ``DQ(a), DQ(b) -> Add / Mul -> Q`` becomes com.microsoft ``QLinearAdd`` / ``QLinearMul``
  (a, b and the result of one 8-bit type); ``DQ -> GlobalAveragePool -> Q`` becomes
  ``QLinearGlobalAveragePool`` (x and y of one type).
* ``DQ -> op -> Q`` with Q's scale and zero point equal to the DQ's, ``op`` one of Reshape,
  Transpose, Flatten, Squeeze, Unsqueeze, Identity, MaxPool (one output), and Relu where the zero
  point is the type's minimum: ``op`` runs on the 8-bit values, the pair dropped.  **Exact**:
  ``d(q) = (q - z) * s`` (float32, s > 0 normal) is strictly increasing on the 8-bit integers
  and ``Q(d(q)) = q`` (``(q - z) * s / s`` is within an ulp of the integer ``q - z``, |q - z| <=
  255); these ops move values or take maxima, which commute with an increasing ``d``; Relu is
  ``max(d(q), 0) = d(max(q, z)) = d(q)`` when ``z`` is the minimum.
* ``DQ -> Pad -> Q`` (Pad-11 on, Q's parameters the DQ's): Pad runs on the 8-bit values, the
  pair dropped, exact as for the moves above (Pad moves values); its constant value (mode
  ``constant``: absent, 0; or a constant the graph computes, such as the quantizer's DQ of a
  quantized 0) must be ``d(v)`` for a code ``v`` of the type (``Q(d(v)) = v``), which becomes
  the 8-bit Pad's value.  The Pad may then fold into the QLinearConv reading it (:mod:`.qpad_conv`).
* ``DQ -> Q`` with equal parameters and Q writing the DQ's input type: ``Q`` removed, its
  readers read the DQ's input (exact, as above); not where Q's output is a graph output.

**What differs, and why it is bounded (within one quantization step).**  Unfused, the float
path computes ``y = sum((x - xz) xs (w - wz) ws) + b bs`` in float32 (each product and partial
sum rounded, in the kernel's order) and Q rounds ``y / ys`` half to even.  Fused, the integer
sum is exact (the cpu kernels' bound, :mod:`onnxkit_cpu.overrides.quantization`) and the
requantization rounds ``acc * m + yz`` with ``m = xs * ws / ys`` rounded to float32 and the
product taken in float64 (QGemm, QLinearAdd, QLinearMul, QLinearGlobalAveragePool: the
dequantized values in float64).  Both compute the same real number up to a relative error
``e`` of a few float32 roundings per operation (the float path's accumulation: at most about
``K * 2^-24`` of the sum of the terms' magnitudes, K the terms summed; the multiplier's:
``2^-24``); rounding a value to the nearest integer changes by at most one when the value moves
by less than one, so the two results differ by at most one step, and only where the exact
value lies within that error of a half-integer.  Saturation (clipping to the type's range)
is monotone and cannot widen the gap.  onnxruntime's own QLinear kernels requantize in float32
(another rounding of the same size): the same bound holds against it.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records
import numpy as np

from ... import ir
from .rules import Rule, Var, apply_rules, op, replace_match
from .view import GraphView, is_default

#: ONNX element types of the 8-bit quantized values (UINT8, INT8) and their ranges
EIGHT_BIT = {2: np.dtype(np.uint8), 3: np.dtype(np.int8)}
RANGES = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127)}
INT32 = 6
MICROSOFT = "com.microsoft"
#: how close (relative) a bias scale must be to ``x_scale * w_scale``
BIAS_SCALE_RTOL = 1e-6
#: ops that move 8-bit values or take maxima (the pair around them drops), with the lowest
#: ai.onnx opset at which each accepts int8 / uint8 data
MOVES = {"Reshape": 5, "Transpose": 1, "Flatten": 9, "Squeeze": 1, "Unsqueeze": 1, "Identity": 1,
         "MaxPool": 12, "Relu": 14}


@records.frozen
class Quant:
    """One quantization: the 8-bit (or int32 bias) value ``q`` and the names and constant values
    of its ``scale`` and ``zero`` point; ``axis`` the normalized per-channel axis (None: per
    tensor); ``node`` the DequantizeLinear (None for a QuantizeLinear's own parameters)."""

    q: str
    scale: str
    zero: str
    scale_value: np.ndarray
    zero_value: np.ndarray
    axis: Optional[int]
    node: Optional[ir.Node]

    @property
    def per_tensor(self) -> bool:
        return self.axis is None

    @property
    def inputs(self) -> list:
        """``[q, scale, zero]``: a QLinear operator's inputs for this quantization."""
        return [self.q, self.scale, self.zero]

    def same_as(self, other: "Quant") -> bool:
        """Equal per-tensor parameters (scale and zero point values, zero point type)."""
        return (self.per_tensor and other.per_tensor and self.zero_value.dtype == other.zero_value.dtype
                and float(self.scale_value.reshape(-1)[0]) == float(other.scale_value.reshape(-1)[0])
                and int(self.zero_value.reshape(-1)[0]) == int(other.zero_value.reshape(-1)[0]))


def _plain_quantizer(node: ir.Node, version: int, is_q: bool) -> bool:
    """No blocks, no output_dtype or precision that changes the computation."""
    if version >= 21 and int(node.attr("block_size", 0) or 0) != 0:
        return False
    if is_q and version >= 23 and int(node.attr("precision", 0) or 0) not in (0, 1):
        return False
    return True


def _parameters(view: GraphView, node: ir.Node, value_name: str, is_q: bool, allow_axis: bool,
                int32: bool = False) -> Optional[Quant]:
    """The :class:`Quant` of a DequantizeLinear (``is_q`` False: ``value_name`` its 8-bit input)
    or QuantizeLinear (its output), or None where a condition of the module docstring fails."""
    version = view.version("")
    if len(node.input) != 3 or not all(node.input) or not _plain_quantizer(node, version, is_q):
        return None
    scale, zero = view.constant(node.input[1]), view.constant(node.input[2])
    if scale is None or zero is None or scale.dtype != np.float32 or not (
            scale.shape == zero.shape or scale.size == zero.size == 1):
        return None
    if not (np.isfinite(scale).all() and (scale > np.float32(1e-30)).all() and (scale < np.float32(1e30)).all()):
        return None
    wanted = {INT32: np.dtype(np.int32)} if int32 else EIGHT_BIT
    if zero.dtype not in wanted.values():
        return None
    declared = int(node.attr("output_dtype", 0) or 0) if version >= (21 if is_q else 23) else 0
    if declared and (wanted.get(declared) != zero.dtype if is_q else declared != 1):
        return None
    typed = view.tensor_type(value_name)
    if typed is None or wanted.get(typed[0]) != zero.dtype:
        return None
    axis = None
    if scale.size != 1:
        dims = typed[1]
        if not allow_axis or version < 13 or scale.ndim != 1 or dims is None:
            return None
        raw = int(node.attr("axis", 1))
        rank = len(dims)
        axis = 0 if rank == 1 and raw in (0, -1, 1) else (raw + rank if -rank <= raw < 0 else raw)
        if not 0 <= axis < rank or dims[axis] != scale.shape[0]:
            return None
    return Quant(value_name, node.input[1], node.input[2], scale, zero, axis, None if is_q else node)


def dequantized(view: GraphView, name: str, allow_axis: bool = False, int32: bool = False) -> Optional[Quant]:
    """The :class:`Quant` of the ai.onnx DequantizeLinear writing ``name`` (float32), or None."""
    node = view.producer_of(name)
    if not is_default(node, "DequantizeLinear") or len(node.output) != 1:
        return None
    return _parameters(view, node, node.input[0], False, allow_axis, int32)


def quantized_by(view: GraphView, q_node: ir.Node) -> Optional[Quant]:
    """The per-tensor :class:`Quant` of the QuantizeLinear ``q_node`` (its output's), or None."""
    if view.version("") < 10:
        return None
    return _parameters(view, q_node, q_node.output[0], True, False)


def _float32(view: GraphView, name: str) -> bool:
    typed = view.tensor_type(name)
    return typed is not None and typed[0] == 1


def microsoft_installed(view: GraphView) -> bool:
    """True if the registry knows com.microsoft 1 (onnxkit-microsoft installed)."""
    registry = view.registry
    if registry is None:
        from ...registry import get_registry

        registry = get_registry()
    return registry.operator_set(MICROSOFT, 1) is not None


def _float_bias(view: GraphView, name: str, x: Quant, w: Quant, channels: int, value=None) -> Optional[tuple]:
    """``(name, k)``: a float32 constant bias ``name`` (or ``value``, the values of a DQ of constant
    int32) of ``channels`` values that is the dequantization of int32 integers ``k`` by the scale
    ``x_scale * w_scale`` (module docstring), or None."""
    value = view.constant(name) if value is None else value
    if value is None or value.dtype != np.float32 or value.shape != (channels,) or not np.isfinite(value).all():
        return None
    scale = (x.scale_value.reshape(-1).astype(np.float32) * w.scale_value.reshape(-1).astype(np.float32))
    k = np.rint(value.astype(np.float64) / scale.astype(np.float64))
    if not (np.abs(k) < 2.0 ** 31).all():
        return None
    k = k.astype(np.int32)
    if not np.array_equal(k.astype(np.float32) * scale, value):
        return None
    return name, k


def bias_input(view: GraphView, bias) -> Optional[str]:
    """The fused node's int32 bias input: ``bias`` itself (a DQ's int32 value), or for a float
    constant bias (:func:`_float_bias`'s pair) a new int32 initializer of its integers."""
    if not isinstance(bias, tuple):
        return bias
    name, k = bias
    view.read_constant(name)
    return view.add_constant(name + "_int32", k, INT32)


def _bias(view: GraphView, name: str, x: Quant, w: Quant, channels: int):
    """The int32 name of a bias DQ whose scale is ``x_scale * w_scale`` and zero point 0, or a
    float constant bias that is such a dequantization (:func:`_float_bias`), or None."""
    b = dequantized(view, name, allow_axis=True, int32=True)
    if b is None:
        return _float_bias(view, name, x, w, channels)
    if (b.zero_value != 0).any():
        return None
    shared = view.constant(b.q)
    if shared is not None and not _scale_matches(b, x, w):
        # a constant bias quantized with another node's scale (the exporter shared it; per tensor,
        # or per channel along its one axis, the first reader's x_scale * w_scale[m]): its
        # dequantized values (float32(k) * scale, zero point 0), if they are integers of this
        # product's scale
        scale = b.scale_value.reshape(-1)
        if shared.ndim != 1 or (not b.per_tensor and (b.axis != 0 or scale.size != shared.size)):
            return None
        values = shared.astype(np.float32) * (scale[0] if b.per_tensor else scale)
        found = _float_bias(view, b.q, x, w, channels, values)
        return None if found is None else (found[0], found[1], b)
    typed = view.tensor_type(b.q)
    if typed is None or typed[1] is None or len(typed[1]) != 1 or typed[1][0] != channels:
        return None
    return b.q if _scale_matches(b, x, w) else None


def _scale_matches(b: Quant, x: Quant, w: Quant) -> bool:
    """The bias's scale is ``x_scale * w_scale`` (relative :data:`BIAS_SCALE_RTOL`)."""
    want = (x.scale_value.reshape(-1).astype(np.float32) * w.scale_value.reshape(-1).astype(np.float32))
    got = b.scale_value.reshape(-1)
    if got.size not in (1, want.size) or (got.size != want.size and want.size != 1):
        return False
    return bool(np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=BIAS_SCALE_RTOL, atol=0.0))


def _with_bias(view: GraphView, node: ir.Node, found: tuple, channels: int) -> Optional[tuple]:
    """``(quants, y, bias)``: ``found`` (:func:`_group`'s) with the int32 bias DQ of ``node``'s third
    input appended and the bias's integers (None where ``node`` has no bias), or None (:func:`_bias`)."""
    quants, y = found
    if len(node.input) < 3 or not node.input[2]:
        return quants, y, None
    bias = _bias(view, node.input[2], quants[0], quants[1], channels)
    if bias is None:
        return None
    if isinstance(bias, tuple):         # a float constant (no DQ), or a DQ of another scale's integers
        return (quants if len(bias) == 2 else quants + [bias[2]]), y, bias[:2]
    return quants + [dequantized(view, node.input[2], allow_axis=True, int32=True)], y, bias


def _group(view: GraphView, match, operands: list) -> Optional[tuple]:
    """``(quants, y)``: the DQs of ``operands`` (name, per-channel axis allowed or None) and the
    root Q's parameters, or None."""
    if not _float32(view, match["mid"].output[0]):
        return None
    y = quantized_by(view, match.root)
    if y is None:
        return None
    quants = []
    for name, axis in operands:
        found = dequantized(view, name, allow_axis=axis is not None)
        if found is None or (not found.per_tensor and found.axis != axis):
            return None
        quants.append(found)
    return quants, y


def _finish(view: GraphView, match, op_type: str, inputs: list, quants: list, domain: str = "", attribute=()) -> None:
    """One ``op_type`` node in place of the match (:func:`~.rules.replace_match`, named after the
    float op), the parameters of ``quants`` noted as read; DQs left unread removed."""
    replace_match(view, match, op_type, inputs, domain, attribute, "mid", read=[c for qt in quants for c in qt.inputs[1:]])
    _drop_unread(view, quants)


def _drop_unread(view: GraphView, quants: list) -> None:
    for qt in quants:
        dq = qt.node
        if dq is not None and view.holds(dq) and view.use_count(dq.output[0]) == 0:
            view.remove(dq)


# ------------------------------------------------------------------------------ QLinearConv
def _conv_parts(view: GraphView, match) -> Optional[tuple]:
    conv = match["mid"]
    if len(conv.input) not in (2, 3) or len(conv.output) != 1:
        return None
    w_typed = view.tensor_type(conv.input[1])
    if w_typed is None or w_typed[1] is None or len(w_typed[1]) < 3 or not isinstance(w_typed[1][0], int):
        return None
    found = _group(view, match, [(conv.input[0], None), (conv.input[1], 0)])
    if found is None:
        return None
    (x, w), y = found
    if not (x.per_tensor and y.zero_value.dtype in RANGES):
        return None
    return _with_bias(view, conv, found, w_typed[1][0])


def _qlinear_conv(view: GraphView, match) -> None:
    quants, y, bias = _conv_parts(view, match)
    bias = bias_input(view, bias)
    x, w = quants[0], quants[1]
    conv = match["mid"]
    inputs = [x.q, x.scale, x.zero, w.q, w.scale, w.zero, y.scale, y.zero] + ([bias] if bias else [])
    _finish(view, match, "QLinearConv", inputs, quants + [y], attribute=conv.attribute)


# ---------------------------------------------------------------------------- QLinearMatMul
def _matmul_parts(view: GraphView, match) -> Optional[tuple]:
    mm = match["mid"]
    b_typed = view.tensor_type(mm.input[1])
    if b_typed is None or b_typed[1] is None or len(b_typed[1]) != 2:
        return None
    found = _group(view, match, [(mm.input[0], None), (mm.input[1], 1)])
    if found is None or not found[0][0].per_tensor:
        return None
    return found


def _qlinear_matmul(view: GraphView, match) -> None:
    (a, b), y = _matmul_parts(view, match)
    _finish(view, match, "QLinearMatMul", a.inputs + b.inputs + y.inputs[1:], [a, b, y])


# -------------------------------------------------------------------------------- QGemm
def _gemm_parts(view: GraphView, match) -> Optional[tuple]:
    gemm = match["mid"]
    if not microsoft_installed(view) or len(gemm.input) not in (2, 3) or len(gemm.output) != 1:
        return None
    if float(gemm.attr("alpha", 1.0)) != 1.0 or float(gemm.attr("beta", 1.0)) != 1.0:
        return None
    trans_b = int(gemm.attr("transB", 0) or 0)
    b_typed = view.tensor_type(gemm.input[1])
    if b_typed is None or b_typed[1] is None or len(b_typed[1]) != 2 or not isinstance(b_typed[1][1 - trans_b], int):
        return None
    found = _group(view, match, [(gemm.input[0], None), (gemm.input[1], 0 if trans_b else 1)])
    if found is None or not found[0][0].per_tensor:
        return None
    return _with_bias(view, gemm, found, b_typed[1][1 - trans_b])


def _qgemm(view: GraphView, match) -> None:
    quants, y, c = _gemm_parts(view, match)
    c = bias_input(view, c)
    a, b = quants[0], quants[1]
    gemm = match["mid"]
    attributes = [at for at in gemm.attribute if at.name in ("transA", "transB")]
    _finish(view, match, "QGemm", a.inputs + b.inputs + [c or ""] + y.inputs[1:], quants + [y], MICROSOFT, attributes)


# ------------------------------------------------------------------ QGemm with a float output
def _gemm_float_parts(view: GraphView, match) -> Optional[tuple]:
    """A Gemm of two DQs whose float32 output no QuantizeLinear alone reads (that Q's rule fuses
    it): ``(quants, None, bias)`` as :func:`_with_bias`, or None."""
    gemm = match["mid"]
    if not microsoft_installed(view) or len(gemm.input) not in (2, 3) or len(gemm.output) != 1:
        return None
    if float(gemm.attr("alpha", 1.0)) != 1.0 or float(gemm.attr("beta", 1.0)) != 1.0 \
            or is_default(view.sole_consumer(gemm.output[0]), "QuantizeLinear") or not _float32(view, gemm.output[0]):
        return None
    trans_b = int(gemm.attr("transB", 0) or 0)
    b_typed = view.tensor_type(gemm.input[1])
    if b_typed is None or b_typed[1] is None or len(b_typed[1]) != 2 or not isinstance(b_typed[1][1 - trans_b], int):
        return None
    quants = []
    for name, axis in ((gemm.input[0], None), (gemm.input[1], 0 if trans_b else 1)):
        found = dequantized(view, name, allow_axis=axis is not None)
        if found is None or found.axis not in (None, axis):
            return None
        quants.append(found)
    if not quants[0].per_tensor:
        return None
    return _with_bias(view, gemm, (quants, None), b_typed[1][1 - trans_b])


def _qgemm_float(view: GraphView, match) -> None:
    quants, _, c = _gemm_float_parts(view, match)
    c = bias_input(view, c)
    attributes = [at for at in match["mid"].attribute if at.name in ("transA", "transB")]
    _finish(view, match, "QGemm", quants[0].inputs + quants[1].inputs + ([c] if c else []), quants, MICROSOFT,
            attributes)


# ------------------------------------------------------------- QLinearAdd / Mul / GlobalAveragePool
def _binary_parts(view: GraphView, match) -> Optional[tuple]:
    node = match["mid"]
    if not microsoft_installed(view) or len(node.input) != 2:
        return None
    found = _group(view, match, [(node.input[0], None), (node.input[1], None)])
    if found is None:
        return None
    (a, b), y = found
    if not (a.zero_value.dtype == b.zero_value.dtype == y.zero_value.dtype):
        return None
    return found


def _qlinear_binary(view: GraphView, match) -> None:
    (a, b), y = _binary_parts(view, match)
    _finish(view, match, "QLinear" + match["mid"].op_type, a.inputs + b.inputs + y.inputs[1:], [a, b, y], MICROSOFT)


def _pool_parts(view: GraphView, match) -> Optional[tuple]:
    node = match["mid"]
    typed = view.tensor_type(node.input[0])
    if not microsoft_installed(view) or typed is None or typed[1] is None or len(typed[1]) < 3:
        return None
    found = _group(view, match, [(node.input[0], None)])
    if found is None or found[0][0].zero_value.dtype != found[1].zero_value.dtype:
        return None
    return found


def _qlinear_pool(view: GraphView, match) -> None:
    (x,), y = _pool_parts(view, match)
    _finish(view, match, "QLinearGlobalAveragePool", x.inputs + y.inputs[1:], [x, y], MICROSOFT,
            [ir.Attribute(name="channels_last", type=ir.AttributeType.INT, value=0)])


# ------------------------------------------------------------------ pairs around value moves
def _move_parts(view: GraphView, match) -> Optional[Quant]:
    node = match["mid"]
    if view.version("") < MOVES[node.op_type] or not node.input or len([o for o in node.output if o]) != 1 \
            or len(node.output) != 1:
        return None
    found = _group(view, match, [(node.input[0], None)])
    if found is None or not found[0][0].same_as(found[1]):
        return None
    x = found[0][0]
    if node.op_type == "Relu" and int(x.zero_value.reshape(-1)[0]) != RANGES[x.zero_value.dtype][0]:
        return None
    return x


def _drop_pair(view: GraphView, match) -> None:
    x, node = _move_parts(view, match), match["mid"]
    if node.op_type == "Relu":      # the identity on every value: the 8-bit input itself
        _finish(view, match, "Identity", [x.q], [x])
        return
    view.read_constant(x.scale)
    view.read_constant(x.zero)
    view.replace_pattern(match.nodes, records.evolve(node, input=[x.q] + list(node.input[1:]), output=[match.output]))
    _drop_unread(view, [x])


# ------------------------------------------------------------------------ pairs around Pad
def _pad_code(view: GraphView, node: ir.Node, x: Quant) -> Optional[tuple]:
    """``(code, constants read)``: the 8-bit code ``v`` whose dequantization is the Pad's
    constant value (module docstring; ``None`` code for a mode that inserts no value), or None."""
    from .computed import computed_constant

    mode = node.attr("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode != "constant":
        return (None, set()) if mode in ("edge", "reflect") else None
    if len(node.input) < 3 or not node.input[2]:
        value, read = np.float32(0.0), set()
    else:
        found = computed_constant(view, node.input[2])
        if found is None or found[0].dtype != np.float32 or found[0].size != 1:
            return None
        value, read = found[0].reshape(()), found[1] | {node.input[2]}
    scale, zero = np.float32(x.scale_value.reshape(-1)[0]), int(x.zero_value.reshape(-1)[0])
    lo, hi = RANGES[x.zero_value.dtype]
    code = int(np.rint(np.float64(value) / np.float64(scale))) + zero if np.isfinite(value) else None
    if code is None or not lo <= code <= hi:
        return None
    if (np.float32(code) - np.float32(zero)) * scale != value:
        return None
    return code, read


def _pad_parts(view: GraphView, match) -> Optional[tuple]:
    node = match["mid"]
    if view.version("") < 11 or len(node.output) != 1 or len(node.input) < 2 or not node.input[1]:
        return None
    found = _group(view, match, [(node.input[0], None)])
    if found is None:
        return None
    x = found[0][0]
    if not x.same_as(found[1]):        # the pair's parameters differ: the Pad stays between them
        return None
    code = _pad_code(view, node, x)
    return None if code is None else (x, code)


def _drop_pad_pair(view: GraphView, match) -> None:
    (x, (code, read)), node = _pad_parts(view, match), match["mid"]
    for name in read:
        view.read_constant(name)
    view.read_constant(x.scale)
    view.read_constant(x.zero)
    inputs = [x.q, node.input[1]]
    if code is not None:
        inputs.append(view.add_constant(node.name + "_value", np.array(code, x.zero_value.dtype),
                                        3 if x.zero_value.dtype == np.int8 else 2))
    elif len(node.input) > 3:
        inputs.append("")
    inputs += list(node.input[3:4])
    dq_value = view.producer_of(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    view.replace_pattern(match.nodes, records.evolve(node, input=inputs, output=[match.output]))
    _drop_unread(view, [x])
    if dq_value is not None and view.holds(dq_value) and view.use_count(dq_value.output[0]) == 0:
        view.remove(dq_value)


# ----------------------------------------------------------------------- DQ -> Q cancelled
def _cancels(view: GraphView, match) -> bool:
    if match.output in view.protected:
        return False
    y = quantized_by(view, match.root)
    x = dequantized(view, match["x"])
    return y is not None and x is not None and x.same_as(y) and _float32(view, match["x"])


def _cancel(view: GraphView, match) -> None:
    x = dequantized(view, match["x"])
    view.read_constant(x.scale)
    view.read_constant(x.zero)
    view.bypass(match.root, x.q)
    _drop_unread(view, [x])


def _q(mid, check=None) -> "op":
    return op.QuantizeLinear(mid, Var("ys"), Var("yz"), check=check)


def _mid(op_type: str, operands: int, variadic: bool = False):
    return getattr(op, op_type)(*[Var(f"in{k}") for k in range(operands)], bind="mid", variadic=variadic)


RULES = (
    Rule("qdq-conv", _q(_mid("Conv", 2, True)), _qlinear_conv, lambda v, m: _conv_parts(v, m) is not None),
    Rule("qdq-matmul", _q(_mid("MatMul", 2)), _qlinear_matmul, lambda v, m: _matmul_parts(v, m) is not None),
    Rule("qdq-gemm", _q(_mid("Gemm", 2, True)), _qgemm, lambda v, m: _gemm_parts(v, m) is not None),
    Rule("qdq-gemm-float", _mid("Gemm", 2, True), _qgemm_float, lambda v, m: _gemm_float_parts(v, m) is not None),
    Rule("qdq-add", _q(_mid("Add", 2)), _qlinear_binary, lambda v, m: _binary_parts(v, m) is not None),
    Rule("qdq-mul", _q(_mid("Mul", 2)), _qlinear_binary, lambda v, m: _binary_parts(v, m) is not None),
    Rule("qdq-global-average-pool", _q(_mid("GlobalAveragePool", 1)), _qlinear_pool,
         lambda v, m: _pool_parts(v, m) is not None),
    *(Rule(f"qdq-drop-{t.lower()}", _q(_mid(t, 1, True)), _drop_pair, lambda v, m: _move_parts(v, m) is not None)
      for t in MOVES),
    Rule("qdq-drop-pad", _q(_mid("Pad", 1, True)), _drop_pad_pair, lambda v, m: _pad_parts(v, m) is not None),
    Rule("qdq-cancel", _q(Var("x")), _cancel, _cancels),
)


#: the rules :func:`run` applies by default: every rule but QLinearAdd / QLinearMul's.  The
#: integer kernels of QLinearConv, QLinearMatMul and QGemm (exact integer sums, the
#: requantization in the same pass: the cpu backend's VNNI product where the host has it) beat
#: the float operator between its DequantizeLinear and QuantizeLinear on the quantizer's models
#: (docs/benchmarks.md, "int8 models in onnxruntime's quantizer's formats"); the float Add / Mul
#: with its two compiled quantize passes beats QLinearAdd / QLinearMul's float64 pass, so those
#: two rules run only where :data:`ACTIVE` is set to :data:`RULES`
DEFAULT_RULES = tuple(r for r in RULES if r.name not in ("qdq-add", "qdq-mul"))
#: the rules :func:`run` applies (:data:`DEFAULT_RULES`; tests set every rule)
ACTIVE = DEFAULT_RULES


def run(view: GraphView) -> int:
    return apply_rules(view, ACTIVE) if view.version("") >= 10 else 0
