"""Remove a Cast to the element type its input already has; write CastLike as Cast.

* ``CastLike(x, like) -> y`` where type inference (Clause 9, from the checked inputs and the
  constants, not from declarations) gives ``like`` element type ``T``: the node becomes
  ``Cast(x, to=T)`` with CastLike's other attributes (``saturate``, ``round_mode``: Cast defines
  the same ones at every version CastLike has), keeping its output's name.  CastLike's definition
  is that Cast (Part 2, CastLike: "the output type is that of ``target_type``"): exact.  This is
  what onnxruntime's saved optimized model holds (its function inlining writes Cast).
* ``Cast(x, to=T) -> y`` where inference gives ``x`` element type ``T``: a conversion of a value
  to its own type is the value itself (Clause 6.3; ``saturate`` and rounding apply only when the
  type changes), so readers of ``y`` read ``x``: exact.  A Cast whose output is a graph output or
  read inside a subgraph is kept (its name must remain).

Casts to their input's own type are removed first, then CastLike is rewritten: the Cast a
CastLike becomes stays even where it converts to its input's own type (a copy), as in
onnxruntime's saved file (its API tests compare the saved graph's node list).
"""

from __future__ import annotations

from ... import ir
from .rules import Rule, Var, op, rules_pass
from .view import GraphView, is_default


def _to_its_own_type(view: GraphView, match) -> bool:
    typed = view.tensor_type(match["x"])
    return bool(match.output) and match.output not in view.protected and typed is not None \
        and typed[0] == match.root.attr("to")


def cast_like_to_cast(view: GraphView) -> int:
    """Every ai.onnx CastLike whose ``target_type`` has an inferred element type becomes a Cast to
    it (module docstring); the count rewritten."""
    count = 0
    for node in list(view.node):
        if not is_default(node, "CastLike") or len(node.input) != 2 or not view.holds(node):
            continue
        typed = view.tensor_type(node.input[1])
        if typed is None:
            continue
        to = ir.Attribute(name="to", type=ir.AttributeType.INT, value=int(typed[0]))
        view.replace(node, ir.Node(input=[node.input[0]], output=list(node.output), op_type="Cast",
                                   domain=node.domain, name=node.name,
                                   attribute=[a for a in node.attribute if a.name != "to"] + [to]))
        count += 1
    return count


RULES = (Rule("cast", op.Cast(Var("x")), lambda view, match: view.bypass(match.root, match["x"]), _to_its_own_type),)
_remove_own_type = rules_pass(RULES)


def run(view: GraphView) -> int:
    """Each Cast to its input's own type removed, then CastLike written as Cast: the rewrites made."""
    removed = _remove_own_type(view)
    return removed + cast_like_to_cast(view)
