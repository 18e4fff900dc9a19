"""Rewrite the hard-swish expansion exporters emit as one HardSwish node.

``x * Clip(x + 3, 0, 6) / 6`` (MobileNetV3's and PP-LCNet's activation as paddle2onnx and
older torch exports write it), one rule (:mod:`.rules`): the Add and the product in any operand
order and grouping, the division as ``Div(., 6)`` or ``Mul(., 1/6)`` applied to any factor or
product of them, is ``HardSwish(x) = x * max(0, min(1, x / 6 + 1 / 2))``.  The Clip bounds are
its ``min``/``max`` inputs (Clip-11 on) or attributes (before 11); a match guarantees what
:mod:`.rules` says (constants of x's type within 1e-6 keeping x's shape: a ``[1, 1, 1, 1, 1]``
3 would make the expansion rank 5; intermediates read by the pattern alone); x is a
floating-point tensor.  The fused node is ai.onnx HardSwish where the model imports ai.onnx 14
or later, else ai.onnxkit HardSwish-1 (the same definition).  HardSwish scales before it clips
where the expansion clips then divides: the results agree within the element type's tolerance
(Clause 11), not bit for bit.
"""

from __future__ import annotations

from .patterns import float_input
from .rules import AnyOf, Rule, Var, fused_op, op, rules_pass
from .view import GraphView


def _bounds_as_inputs(view: GraphView, clip) -> bool:
    return view.version("") >= 11            # Clip-11 on: min and max are inputs


def _bounds_as_attributes(view: GraphView, clip) -> bool:
    return view.version("") < 11 and clip.attr("min") == 0.0 and clip.attr("max") == 6.0


x = Var("x")
_CLIP = AnyOf((op.Clip(x + 3.0, 0.0, 6.0, check=_bounds_as_inputs, bind="clip"),
               op.Clip(x + 3.0, check=_bounds_as_attributes, bind="clip")))
RULES = (Rule("hardswish", x * _CLIP / 6.0, fused_op("HardSwish", 14, named_after="clip"),
              lambda view, match: float_input(view, match["x"]), subject="x"),)
run = rules_pass(RULES)
