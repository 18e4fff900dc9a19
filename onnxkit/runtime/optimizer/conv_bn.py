"""Fold an inference-mode BatchNormalization into the Conv before it.

``BatchNormalization(Conv(X, W, B), scale, bias, mean, var)`` computes, per output channel
``m``, ``(conv(X, W)[m] + B[m] - mean[m]) * s[m] + bias[m]`` with ``s = scale / sqrt(var + eps)``;
that is ``conv(X, W * s[m])[m] + ((B[m] - mean[m]) * s[m] + bias[m])``, since a convolution is
linear in its weights.  The fold replaces the two nodes by one Conv with those weights and
bias: equal in real arithmetic, equal up to rounding in floating point (the folded weights are
computed in float64 and rounded once to the model's type; the tests check the tolerance of
:mod:`onnxkit.tolerances`).  Only float32/float64; the Conv's weights (and bias) must be
constants read by that Conv alone, its output read by the BatchNormalization alone, the
BatchNormalization's parameters constants of shape ``(M,)`` (M the Conv's output channels,
W's first extent: no broadcasting, no shape taken from inference or a declaration), and it must
be in inference mode with one output; ``s``, the scaled weights and the new bias must be finite
(a zero variance with a zero epsilon makes ``s`` infinite: unfused, each output is the Conv's
sum times inf, +-inf; folded, a sum of infinite weights of both signs, NaN).  Every constant
folded is noted with ``read_constant`` (an IR < 4 override of one runs the model as given).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .patterns import conv_parameters, conv_weights_scaled, finite_scale, fold_into_conv, inference_batch_norm
from .rules import Rule, Var, op, rules_pass
from .view import GraphView


def _parameters(view: GraphView, match) -> Optional[list]:
    """``[scale, bias, mean, var]`` of a foldable pair (of W's type and shape ``(M,)``), or None."""
    found = conv_parameters(view, match["conv"])
    params = [view.constant(n) for n in match.root.input[1:]]
    if found is None or any(p is None or p.dtype != found[0].dtype or p.shape != found[0].shape[:1] for p in params):
        return None
    return params


def _foldable(view: GraphView, match) -> bool:
    """The parameters fit (:func:`_parameters`) and the fold is exact in real arithmetic: ``s``,
    the scaled weights and the new bias finite in W's type (:func:`~.patterns.finite_scale`)."""
    params = _parameters(view, match)
    if params is None:
        return False
    scale, bias, mean, var = (p.astype(np.float64) for p in params)
    w, b = conv_parameters(view, match["conv"])
    with np.errstate(all="ignore"):
        s = scale / np.sqrt(var + float(match.root.attr("epsilon", 1e-5)))
        shift = ((np.zeros(s.shape) if b is None else b.astype(np.float64)) - mean) * s + bias
    return finite_scale(s, conv_weights_scaled(view, match["conv"], s), shift.astype(w.dtype))


def _fold(view: GraphView, match) -> None:
    bn = match.root
    scale, bias, mean, var = (p.astype(np.float64) for p in _parameters(view, match))
    for n in bn.input[1:]:
        view.read_constant(n)
    s = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))       # finite: _foldable
    fold_into_conv(view, match["conv"], s, lambda b: (b - mean) * s + bias, bn.output[0])
    view.remove(bn)


_PARAMETERS = (Var("scale"), Var("bias"), Var("mean"), Var("var"))
RULES = (Rule("conv_bn", op.BatchNormalization(op.Conv(Var("x"), Var("w"), bind="conv", variadic=True), *_PARAMETERS,
                                               check=inference_batch_norm),
              _fold, _foldable),)
run = rules_pass(RULES)
