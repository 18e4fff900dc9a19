"""Rewrite the GELU expansions exporters emit as one Gelu node.

Two rules (:mod:`.rules`), each ending in ``0.5 * x * (1 + f)``, matched in any order and
grouping of the products and sums (``(x * (1 + f)) * 0.5``, ``(0.5 * x) * (1 + f)``,
``x * ((1 + f) * 0.5)``, a division by 2 for the 0.5):

* exact GELU, ``f = Erf(x / sqrt(2))`` (``Div(x, 1.41421...)`` or ``Mul(x, 0.70710...)``):
  ``Gelu(x)`` with ``approximate = "none"``;
* tanh GELU, ``f = Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))`` (the cubic term a product of
  x, x, x and 0.044715 in any order and grouping, ``x^3`` possibly ``Pow(x, 3)``: GPT-2's
  ``0.044715 * Pow(x, 3)``, jax2tf's ``x * (x * (0.044715 * x))``): ``Gelu(x, approximate = "tanh")``.

A match guarantees what :mod:`.rules` says (every constant of x's element type, within 1e-6 of
the formula's, as exporters round them to float32, and keeping x's shape: a ``[1, 1, 1, 1, 1]``
0.5 would make the expansion rank 5; every intermediate read by the pattern alone); x must be a
floating-point tensor (type inference).  The fused node is ai.onnx Gelu where the model imports
ai.onnx 20 or later, else ``ai.onnxkit`` Gelu-1 (the same definition; the optimized model
imports it).  Gelu computes the same function as the expansion, rounded once instead of at each
of its 5-8 nodes: the results agree within the element type's tolerance (Clause 11).
"""

from __future__ import annotations

import math

from ... import ir
from .patterns import float_input
from .rules import AnyOf, Rule, Var, fused_op, op, rules_pass
from .view import GraphView

x = Var("x")
_ERF = 0.5 * (x * (op.Erf(x / math.sqrt(2.0), bind="anchor") + 1.0))
_CUBE = AnyOf((0.044715 * x * x * x, 0.044715 * op.Pow(x, 3.0)))
_TANH = 0.5 * (x * (op.Tanh(math.sqrt(2.0 / math.pi) * (x + _CUBE), bind="anchor") + 1.0))


def _approximate(mode: str):
    return lambda match: [ir.Attribute(name="approximate", type=ir.AttributeType.STRING, value=mode.encode())]


RULES = tuple(Rule(name, pattern, fused_op("Gelu", 20, attributes=_approximate(mode), named_after="anchor"),
                   lambda view, match: float_input(view, match["x"]), subject="x")
              for name, pattern, mode in (("gelu-erf", _ERF, "none"), ("gelu-tanh", _TANH, "tanh")))
run = rules_pass(RULES)
