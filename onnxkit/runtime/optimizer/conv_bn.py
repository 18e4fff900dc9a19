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

import attrs
import numpy as np

from ...registry import normalize_domain
from .view import GraphView



def _inference_bn(view: GraphView, bn) -> bool:
    if any(o for o in bn.output[1:]) or len(bn.input) != 5 or not all(bn.input):
        return False
    version = view.version("")
    if version < 7:
        return bn.attr("is_test", 0) == 1 and bn.attr("spatial", 1) == 1
    if version < 9 and bn.attr("spatial", 1) != 1:
        return False
    return bn.attr("training_mode", 0) == 0


def _fold(view: GraphView, conv, bn) -> bool:
    if len(conv.input) < 2 or not conv.input[1] or len(conv.output) != 1:
        return False
    w_name = conv.input[1]
    b_name = conv.input[2] if len(conv.input) > 2 and conv.input[2] else None
    if view.use_count(w_name) != 1 or (b_name and view.use_count(b_name) != 1):
        return False
    w = view.constant(w_name)
    b = view.constant(b_name) if b_name else None
    params = [view.constant(n) for n in bn.input[1:]]
    if w is None or (b_name and b is None) or any(p is None for p in params):
        return False
    dtype = w.dtype
    if dtype not in (np.float32, np.float64) or w.ndim < 3:
        return False
    m = w.shape[0]
    if any(p.dtype != dtype or p.shape != (m,) for p in params) or (b is not None and (b.dtype != dtype or b.shape != (m,))):
        return False
    for n in (w_name, b_name, *bn.input[1:]):
        if n:
            view.read_constant(n)
    scale, bias, mean, var = (p.astype(np.float64) for p in params)
    s = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
    w2 = (w.astype(np.float64) * s.reshape((m,) + (1,) * (w.ndim - 1))).astype(dtype)
    b0 = b.astype(np.float64) if b is not None else np.zeros(m)
    b2 = ((b0 - mean) * s + bias).astype(dtype)
    tag = 1 if dtype == np.float32 else 11
    new_w = view.add_constant(w_name, w2, tag)
    new_b = view.add_constant(b_name or f"{conv.output[0]}_bias", b2, tag)
    folded = attrs.evolve(conv, input=[conv.input[0], new_w, new_b], output=[bn.output[0]])
    view.node[view.node.index(conv)] = folded
    view.remove(bn)
    return True


def run(view: GraphView) -> int:
    folded = 0
    for bn in list(view.node):
        if normalize_domain(bn.domain) != "" or bn.op_type != "BatchNormalization" or not _inference_bn(view, bn):
            continue
        conv = view.producer.get(bn.input[0])
        if conv is None or conv.op_type != "Conv" or normalize_domain(conv.domain) != "":
            continue
        if view.sole_consumer(bn.input[0]) is not bn:
            continue
        if _fold(view, conv, bn):
            folded += 1
            view.refresh()
    return folded

