"""Fold an 8-bit constant Pad whose value is the zero point into the QLinearConv / ConvInteger
that reads it.

``QLinearConv(Pad(X, pads, v), ...)`` with ``v`` equal to the convolution's X zero point and
pads on the spatial axes only is ``QLinearConv(X, ...)`` with those pads added to its own: the
integer convolutions pad X with its zero point (a padded position contributes ``(x_zp - x_zp) *
w = 0`` to each sum, as onnxruntime's kernels and the portable ones compute them), so both read
the same values at the same window positions, and the output shape is the same
(``floor((d + begin + end - dilated kernel) / stride) + 1`` either way): **bit-identical**
results.  ConvInteger likewise, its X zero point 0 where absent.  onnxruntime's quantizer
writes such Pads (the exporter's "same" padding of transformers' MobileNet and EfficientNet,
quantized: the QOperator format's uint8 Pad of value ``x_zp``; the QDQ format's float Pad,
made 8-bit by :mod:`.qdq`).

What must hold (anything else is left as it is): Pad-11 or later, mode ``constant``, its pads
known (constant, or computed from constants, :mod:`.computed`), non-negative and zero on the
batch and channel axes, no ``axes`` input, its value (absent: 0) one constant equal to the X
zero point's one value (same type); its output read by the convolution alone, as X (the rules'
guarantee); the convolution's ``auto_pad`` ``NOTSET`` (explicit pads, then added to) or
``VALID``.  Every constant the fold depends on is noted with ``read_constant``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .computed import computed_constant
from .pad_conv import fold_pads, spatial_pads, text
from .rules import Rule, Var, op, rules_pass
from .view import GraphView

#: the X zero point's input of each convolution
ZERO_POINT_INPUT = {"QLinearConv": 2, "ConvInteger": 2}


def _value(view: GraphView, name: str) -> Optional[tuple]:
    """``(value, initializers read)`` of a one-element 8-bit constant, or None."""
    found = computed_constant(view, name)
    if found is None or found[0].size != 1 or found[0].dtype not in (np.uint8, np.int8):
        return None
    return found[0].reshape(()), found[1] | {name}


def _parts(view: GraphView, match) -> Optional[tuple]:
    """``(begins, ends, constants read)`` where the fold holds (module docstring), else None."""
    pad, conv = match["pad"], match.root
    if view.version("") < 11 or text(pad.attr("mode", "constant")) != "constant" or len(pad.input) > 3 \
            or len(pad.output) != 1 or len(pad.input) < 2 or not pad.input[1]:
        return None
    zp_input = ZERO_POINT_INPUT[conv.op_type]
    zp = _value(view, conv.input[zp_input]) if len(conv.input) > zp_input and conv.input[zp_input] else None
    if zp is None and conv.op_type == "QLinearConv":
        return None
    if len(pad.input) > 2 and pad.input[2]:
        value = _value(view, pad.input[2])
        if value is None:
            return None
    else:
        value = None
    if zp is not None and value is not None:
        if zp[0].dtype != value[0].dtype or int(zp[0]) != int(value[0]):
            return None
    elif int(zp[0] if zp is not None else 0) != int(value[0] if value is not None else 0):
        return None
    spatial = spatial_pads(view, pad, conv)
    if spatial is None:
        return None
    read = computed_constant(view, pad.input[1])[1] | {pad.input[1]}
    for found in (zp, value):
        if found is not None:
            read |= found[1]
    return spatial + (read,)


def _fold(view: GraphView, match) -> None:
    pad, conv = match["pad"], match.root
    begins, ends, read = _parts(view, match)
    for name in read:
        view.read_constant(name)
    fold_pads(view, pad, conv, begins, ends)


RULES = tuple(Rule(f"qpad-{t.lower()}", getattr(op, t)(op.Pad(Var("x"), bind="pad", variadic=True), variadic=True),
                   _fold, lambda view, match: _parts(view, match) is not None) for t in ZERO_POINT_INPUT)
run = rules_pass(RULES)
