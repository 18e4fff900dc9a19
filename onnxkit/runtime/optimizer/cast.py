"""Remove a Cast to the element type its input already has.

``Cast(x, to=T) -> y`` where type inference (Clause 9, from the checked inputs and the
constants, not from declarations) gives ``x`` element type ``T``: a
conversion of a value to its own type is the value itself (Clause 6.3; ``saturate`` and
rounding apply only when the type changes), so readers of ``y`` read ``x``: exact.  A Cast
whose output is a graph output or read inside a subgraph is kept (its name must remain).
"""

from __future__ import annotations

from ...registry import normalize_domain
from .view import GraphView


def run(view: GraphView) -> int:
    removed = 0
    for node in list(view.node):
        if normalize_domain(node.domain) != "" or node.op_type != "Cast" or len(node.input) != 1:
            continue
        x, y = node.input[0], node.output[0] if node.output else ""
        if not x or not y or y in view.protected:
            continue
        typed = view.tensor_type(x)
        if typed is None or typed[0] != node.attr("to"):
            continue
        view.bypass(node, x)
        removed += 1
    view.refresh()
    return removed
