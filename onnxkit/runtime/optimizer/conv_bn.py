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
be in inference mode with one output.  Every constant folded is noted with ``read_constant``
(an IR < 4 override of one runs the model as given).
"""

from __future__ import annotations

from typing import Optional

import attrs
import numpy as np

from .patterns import inference_batch_norm
from .rules import Rule, Var, apply_rules, op
from .view import GraphView


def _parameters(view: GraphView, match) -> Optional[tuple]:
    """``(w_name, b_name, w, b, [scale, bias, mean, var])`` of a foldable pair, or None."""
    conv, bn = match["conv"], match.root
    if len(conv.output) != 1:
        return None
    w_name = conv.input[1]
    b_name = conv.input[2] if len(conv.input) > 2 and conv.input[2] else None
    if view.use_count(w_name) != 1 or (b_name and view.use_count(b_name) != 1):
        return None
    w = view.constant(w_name)
    b = view.constant(b_name) if b_name else None
    params = [view.constant(n) for n in bn.input[1:]]
    if w is None or (b_name and b is None) or any(p is None for p in params):
        return None
    dtype = w.dtype
    if dtype not in (np.float32, np.float64) or w.ndim < 3:
        return None
    m = w.shape[0]
    if any(p.dtype != dtype or p.shape != (m,) for p in params) or (b is not None and (b.dtype != dtype or b.shape != (m,))):
        return None
    return w_name, b_name, w, b, params


def _fold(view: GraphView, match) -> None:
    conv, bn = match["conv"], match.root
    w_name, b_name, w, b, params = _parameters(view, match)
    for n in (w_name, b_name, *bn.input[1:]):
        if n:
            view.read_constant(n)
    dtype, m = w.dtype, w.shape[0]
    scale, bias, mean, var = (p.astype(np.float64) for p in params)
    s = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
    w2 = (w.astype(np.float64) * s.reshape((m,) + (1,) * (w.ndim - 1))).astype(dtype)
    b0 = b.astype(np.float64) if b is not None else np.zeros(m)
    b2 = ((b0 - mean) * s + bias).astype(dtype)
    tag = 1 if dtype == np.float32 else 11
    new_w = view.add_constant(w_name, w2, tag)
    new_b = view.add_constant(b_name or f"{conv.output[0]}_bias", b2, tag)
    view.replace(conv, attrs.evolve(conv, input=[conv.input[0], new_w, new_b], output=[bn.output[0]]))
    view.remove(bn)


_PARAMETERS = (Var("scale"), Var("bias"), Var("mean"), Var("var"))
RULES = (Rule("conv_bn", op.BatchNormalization(op.Conv(Var("x"), Var("w"), bind="conv", variadic=True), *_PARAMETERS,
                                               check=inference_batch_norm),
              _fold, lambda view, match: _parameters(view, match) is not None),)


def run(view: GraphView) -> int:
    return apply_rules(view, RULES)
