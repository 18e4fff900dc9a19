"""Fold a per-channel scale and shift after a Conv or a BatchNormalization into its parameters.

Exporters of Caffe models write BatchNormalization (or a Conv) followed by ``Mul`` by a
per-channel scale ``s`` and ``Add`` of a per-channel shift ``t`` (Caffe's "Scale" layer).  For
a Conv, ``conv(X, W, B)[m] * s[m] + t[m] = conv(X, W * s[m])[m] + (B[m] * s[m] + t[m])`` (a
convolution is linear in its weights); for an inference-mode BatchNormalization,
``((x - mean) / sqrt(var + eps) * scale + bias) * s + t`` is the same BatchNormalization with
``scale * s`` and ``bias * s + t``.  The pass replaces the Mul and/or Add by those parameters:
equal in real arithmetic, equal up to one rounding in floating point (parameters computed in
float64, rounded once to the model's type; the tests check :mod:`onnxkit.tolerances`).

Folded only when: the element type is float32/float64; the producer's parameters are
constants read by it alone; its output is read by the Mul (or Add) alone; the Mul's/Add's other
operand is a constant of its element type that broadcasts along the channel axis only and
leaves the shape as it is (shape ``(C, 1, ...)`` of rank r-1, ``(1, C, 1, ...)`` of rank r, a
single element of rank at most r — not a ``(C,)`` vector on a rank-4 value, which broadcasts
along the last axis), possibly through an Unsqueeze/Reshape of a constant; and the output rank
r is known to type inference from the checked inputs and constants (never from a declared
value_info); and the scale and the parameters folded are finite in the element type (an
infinite scale, or one overflowing a weight, gives NaN folded where the Mul gives +-inf: the
identity holds for finite values only).  Every constant read (an Unsqueeze's or Reshape's
inputs too) is noted with ``read_constant``: an IR < 4 override of one runs the model as given.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records
import numpy as np

from .patterns import conv_parameters, conv_weights_scaled, finite_scale, fold_into_conv, inference_batch_norm
from .rules import AnyOf, Rule, Var, op, rules_pass
from .view import GraphView, is_default


def _constant(view: GraphView, name: str, used: list) -> Optional[np.ndarray]:
    """A constant, also through an Unsqueeze or Reshape of a constant (what exporters write);
    the names of the constants read are appended to ``used`` (noted if the fold is made)."""
    value = view.constant(name)
    if value is not None:
        used.append(name)
        return value
    node = view.producer_of(name)
    src = view.constant(node.input[0]) if is_default(node, "Unsqueeze", "Reshape") and node.input else None
    if src is None:
        return None
    used.extend(i for i in node.input if i)
    if node.op_type == "Reshape":
        shape = view.constant(node.input[1]) if len(node.input) > 1 else None
        if shape is None or (shape <= 0).any():
            return None
        return src.reshape([int(d) for d in shape]) if int(np.prod(shape)) == src.size else None
    axes = node.attr("axes") if len(node.input) < 2 else view.constant(node.input[1])
    if axes is None:
        return None
    rank = src.ndim + len(list(axes))
    out = src
    for a in sorted(int(a) % rank for a in axes):
        out = np.expand_dims(out, a)
    return out


def _per_channel(value: np.ndarray, rank: int, channels: int) -> Optional[np.ndarray]:
    """``value`` as a (channels,) vector if it broadcasts along axis 1 of a rank-``rank`` tensor
    only, leaving its shape as it is (the shapes of the module docstring), else None."""
    if value.size == 1 and value.ndim <= rank:
        return np.full(channels, value.reshape(-1)[0])
    shape = list(value.shape)
    if len(shape) == rank:
        shape = shape[1:] if shape[0] == 1 else None
    if shape is None or len(shape) != rank - 1 or shape[0] != channels or any(d != 1 for d in shape[1:]):
        return None
    return value.reshape(channels)


def _parameters(view: GraphView, node) -> Optional[tuple]:
    """``(channels, dtype)`` of a foldable producer (its parameters constants read by it alone), or None."""
    if node.op_type == "Conv":
        found = conv_parameters(view, node)
        return None if found is None else (found[0].shape[0], found[0].dtype)
    if node.op_type == "BatchNormalization" and inference_batch_norm(view, node):
        params = [view.constant(n) for n in node.input[1:3]]
        if any(p is None or p.ndim != 1 for p in params) or any(view.use_count(n) != 1 for n in node.input[1:3]):
            return None
        return params[0].shape[0], params[0].dtype
    return None


def _fold(view: GraphView, node, s: np.ndarray, t: np.ndarray, dtype, out: str) -> None:
    """``node`` scaled by ``s`` and shifted by ``t`` (float64 per-channel vectors), writing ``out``."""
    if node.op_type == "Conv":
        fold_into_conv(view, node, s, lambda b: b * s + t, out)
        return
    tag = 1 if dtype == np.float32 else 11
    scale, bias = (view.read_constant(n).astype(np.float64) for n in node.input[1:3])
    inputs = [node.input[0], view.add_constant(node.input[1], (scale * s).astype(dtype), tag),
              view.add_constant(node.input[2], (bias * s + t).astype(dtype), tag), *node.input[3:]]
    view.replace(node, records.evolve(node, input=inputs, output=[out]))


def _affine(view: GraphView, match) -> Optional[tuple]:
    """``(s, t, used, dtype)`` of a foldable match: the per-channel scale and shift (float64), the
    names of the constants they were read from and the producer's element type, or None."""
    node = match["producer"]
    found = _parameters(view, node)
    known = view.tensor_type(node.output[0]) if found else None
    if found is None or known is None or known[1] is None or found[1] not in (np.float32, np.float64):
        return None
    (channels, dtype), rank = found, len(known[1])
    s, t, used = np.ones(channels), np.zeros(channels), []
    for operand in ("s", "t"):
        if match.get(operand) is None:
            continue
        value = _constant(view, match[operand], used)
        vec = None if value is None or value.dtype != dtype else _per_channel(value, rank, channels)
        if vec is None:
            return None
        if operand == "s":
            s, t = s * vec.astype(np.float64), t * vec.astype(np.float64)
        else:
            t = t + vec.astype(np.float64)
    return (s, t, used, dtype) if _finite_fold(view, node, s, t, dtype) else None


def _finite_fold(view: GraphView, node, s: np.ndarray, t: np.ndarray, dtype) -> bool:
    """True if ``s`` and the parameters :func:`_fold` would write are finite in ``dtype``
    (:func:`~.patterns.finite_scale`): an infinite scale, or one overflowing a weight, gives NaN
    folded where the unfused Mul gives +-inf."""
    with np.errstate(all="ignore"):
        if node.op_type == "Conv":
            b_name = node.input[2] if len(node.input) > 2 else ""
            b = view.constant(b_name).astype(np.float64) if b_name else np.zeros(s.shape)
            return finite_scale(s, conv_weights_scaled(view, node, s), (b * s + t).astype(dtype))
        scale, bias = (view.constant(n).astype(np.float64) for n in node.input[1:3])
        return finite_scale(s, (scale * s).astype(dtype), (bias * s + t).astype(dtype))


def _fold_affine(view: GraphView, match) -> None:
    s, t, used, dtype = _affine(view, match)
    for name in used:       # an IR < 4 override of one of them runs the model as given
        view.read_constant(name)
    node = match["producer"]
    _fold(view, node, s, t, dtype, match.output)
    for n in match.nodes:
        if n is not node and view.holds(n):
            view.remove(n)


_PRODUCER = AnyOf((op.Conv(Var("x"), Var("w"), variadic=True, bind="producer"),
                   op.BatchNormalization(Var("x"), *(Var(n) for n in ("scale", "bias", "mean", "var")),
                                         check=inference_batch_norm, bind="producer")))
_SCALED = op.Mul(_PRODUCER, Var("s"))
#: tried at each node from the graph's end: a Mul then Add is one fold, not two roundings
RULES = tuple(Rule(name, pattern, _fold_affine, lambda view, match: _affine(view, match) is not None)
              for name, pattern in (("scale_shift", op.Add(_SCALED, Var("t"))), ("scale", _SCALED),
                                    ("shift", op.Add(_PRODUCER, Var("t")))))
run = rules_pass(RULES, from_the_end=True)
