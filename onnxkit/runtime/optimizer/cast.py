"""Remove a Cast to the element type its input already has.

``Cast(x, to=T) -> y`` where type inference (Clause 9, from the checked inputs and the
constants, not from declarations) gives ``x`` element type ``T``: a
conversion of a value to its own type is the value itself (Clause 6.3; ``saturate`` and
rounding apply only when the type changes), so readers of ``y`` read ``x``: exact.  A Cast
whose output is a graph output or read inside a subgraph is kept (its name must remain).
"""

from __future__ import annotations

from .rules import Rule, Var, op, rules_pass
from .view import GraphView


def _to_its_own_type(view: GraphView, match) -> bool:
    typed = view.tensor_type(match["x"])
    return bool(match.output) and match.output not in view.protected and typed is not None \
        and typed[0] == match.root.attr("to")


RULES = (Rule("cast", op.Cast(Var("x")), lambda view, match: view.bypass(match.root, match["x"]), _to_its_own_type),)
run = rules_pass(RULES)
