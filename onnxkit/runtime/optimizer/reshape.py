"""Collapse ``Reshape(Reshape(x, s1), s2)`` into ``Reshape(x, s2)``.

A Reshape keeps the elements in row-major order and changes only the shape, so the second
Reshape's result depends on its input's elements and element count alone — the same for
``x`` and ``Reshape(x, s1)`` — provided ``s2`` does not refer to its input's extents: ``s2``
must be a constant with no ``0`` entry (``0`` copies the input's extent unless ``allowzero``
is 1; ``-1`` is computed from the element count, which is unchanged).  Exact.  The first
Reshape's output must be read by the second alone; needs Reshape-5 or later (shape input).
"""

from __future__ import annotations

from onnxkit import records

from .rules import Rule, Var, op, rules_pass
from .view import GraphView


def _independent_of_its_input(view: GraphView, match) -> bool:
    """The second shape a constant with no ``0`` (unless ``allowzero`` is 1)."""
    shape = view.constant(match["s2"])
    return shape is not None and (match["second"].attr("allowzero", 0) == 1 or not bool((shape == 0).any()))


def _collapse(view: GraphView, match) -> None:
    second = match["second"]
    view.read_constant(second.input[1])
    view.replace(second, records.evolve(second, input=[match["x"], second.input[1]]))
    view.remove(match["first"])


RULES = (Rule("reshape", op.Reshape(op.Reshape(Var("x"), Var("s1"), bind="first"), Var("s2"), bind="second"),
              _collapse, _independent_of_its_input),)
run = rules_pass(RULES, applies=lambda view: view.version("") >= 5)
