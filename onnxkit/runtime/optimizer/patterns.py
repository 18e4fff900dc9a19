"""The questions several passes ask of a :class:`~.view.GraphView`, public here so that no pass
imports another's private names: the fused domain, the element types fusions rewrite, whether a
constant keeps a value's shape, whether a BatchNormalization is in inference mode, a Conv's
constant weights and the fold of a per-channel scale and shift into them."""

from __future__ import annotations

from typing import Callable, Optional

from onnxkit import records
import numpy as np

from ...dtypes import ELEMENT_TYPES
from ...operator_modes import batch_norm_mode
from .view import GraphView

#: the domain of onnxkit's fused operators (plugins/default_domain: onnxkit_default_domain.fused)
FUSED_DOMAIN = "ai.onnxkit"
#: element types the fusions rewrite: float, float16, double, bfloat16
FLOAT_TAGS = (1, 10, 11, 16)


#: how far (relative) a pattern's constant may be from the formula's (exporters round to float32)
SCALAR_RTOL = 1e-6


def keeps_shape(view: GraphView, c, x: str) -> bool:
    """True if the one-element constant array ``c`` combined elementwise (broadcasting) with a
    value of ``x``'s shape leaves that shape as it is: ``c`` has ``x``'s element type and a rank
    no higher than ``x``'s — a 0-d ``c`` always, a ``[1, ..., 1]`` one only where type inference
    (:meth:`~.view.GraphView.tensor_type`: checked inputs, no declarations) knows ``x``'s rank.
    A ``[1, 1, 1, 1, 1]`` constant times a rank-1 ``x`` is rank 5: a fused node keeping ``x``'s
    shape would drop those axes."""
    typed = view.tensor_type(x)
    if c is None or c.size != 1 or typed is None or ELEMENT_TYPES.get(typed[0]) is None \
            or c.dtype != ELEMENT_TYPES[typed[0]].dtype:
        return False
    return c.ndim == 0 or (typed[1] is not None and c.ndim <= len(typed[1]))


def float_input(view: GraphView, x: str) -> bool:
    """True if type inference gives ``x`` a floating-point tensor type the fusions rewrite."""
    typed = view.tensor_type(x)
    return typed is not None and typed[0] in FLOAT_TAGS


def inference_batch_norm(view: GraphView, bn) -> bool:
    """True if the BatchNormalization ``bn`` computes in inference mode, per channel
    (:func:`onnxkit.operator_modes.batch_norm_mode`, the rule its kernel reads too), with one
    output and its five inputs given."""
    if any(o for o in bn.output[1:]) or len(bn.input) != 5 or not all(bn.input):
        return False
    mode = batch_norm_mode(view.version(""), {a.name: a.value for a in bn.attribute}, bn.output)
    return not mode.training and mode.spatial


def conv_parameters(view: GraphView, conv) -> Optional[tuple]:
    """``(W, B)`` of a Conv with one output whose weights (float32/float64, rank >= 3) and bias
    (None where it has none, else of W's type and shape ``(M,)``, M = W's first extent) are
    constants read by it alone; else None."""
    if len(conv.input) < 2 or len(conv.output) != 1:
        return None
    w_name, b_name = conv.input[1], (conv.input[2] if len(conv.input) > 2 else "")
    if view.use_count(w_name) != 1 or (b_name and view.use_count(b_name) != 1):
        return None
    w, b = view.constant(w_name), (view.constant(b_name) if b_name else None)
    if w is None or w.dtype not in (np.float32, np.float64) or w.ndim < 3:
        return None
    if b_name and (b is None or b.dtype != w.dtype or b.shape != (w.shape[0],)):
        return None
    return w, b


def finite_scale(scale: np.ndarray, *folded: np.ndarray) -> bool:
    """True if the per-channel ``scale`` (float64) is finite and so is every array of ``folded``
    (the parameters it multiplies, as they would be folded: an overflow of W * s declines too).
    Folding a scale into a Conv's weights (or a BatchNormalization's scale) is the identity of
    real arithmetic only for finite values: an infinite ``s`` (a zero variance with a zero
    epsilon) gives ``conv(X, W) * inf``, +-inf per output, unfused and ``conv(X, W * inf)``,
    a sum of infinities of both signs, NaN, folded.  (An overflow inside the folded Conv's sums,
    its weights finite but near the type's largest value, is not ruled out.)"""
    with np.errstate(all="ignore"):
        return bool(np.isfinite(scale).all()) and all(bool(np.isfinite(f).all()) for f in folded)


def conv_weights_scaled(view: GraphView, conv, scale: np.ndarray) -> np.ndarray:
    """``W * scale[m]`` of :func:`fold_into_conv` (float64, rounded to W's type), read without
    noting W as read (a predicate's look; the fold notes it)."""
    w = view.constant(conv.input[1])
    with np.errstate(all="ignore"):
        return (w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)


def fold_into_conv(view: GraphView, conv, scale: np.ndarray, bias: Callable, out: str) -> None:
    """Replace ``conv`` (:func:`conv_parameters` holds) by one writing ``out`` with weights
    ``W * scale[m]`` per output channel ``m`` and bias ``bias(B)`` (``B`` zeros where the Conv has
    none), computed in float64 and rounded once to W's type; W and B are noted as read
    (:meth:`~.view.GraphView.read_constant`)."""
    w_name, b_name = conv.input[1], (conv.input[2] if len(conv.input) > 2 else "")
    w = view.read_constant(w_name)
    b = view.read_constant(b_name).astype(np.float64) if b_name else np.zeros(w.shape[0])
    tag = 1 if w.dtype == np.float32 else 11
    w2 = w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    inputs = [conv.input[0], view.add_constant(w_name, w2.astype(w.dtype), tag),
              view.add_constant(b_name or f"{out}_bias", bias(b).astype(w.dtype), tag)]
    view.replace(conv, records.evolve(conv, input=inputs, output=[out]))
