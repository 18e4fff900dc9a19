"""Cancel Transpose pairs that compose to the identity and merge consecutive Transposes.

``Transpose(Transpose(x, p), q)`` is ``Transpose(x, r)`` with ``r[i] = p[q[i]]`` (output axis
``i`` of the second is its input axis ``q[i]``, which is axis ``p[q[i]]`` of ``x``): one
permutation of the same elements, exact.  When ``r`` is the identity the pair is dropped and
readers of the result read ``x``.  Both nodes need an explicit ``perm``; the first one's output
must be read by the second alone.  A result that is a graph output keeps its name (a merged
Transpose produces it; an identity pair there is left alone).
"""

from __future__ import annotations

from onnxkit import records

from .rules import Rule, Var, op, rules_pass
from .view import GraphView


def _has_perm(view: GraphView, node) -> bool:
    return node.attr("perm") is not None


def _composed(p, q) -> list:
    return [p[i] for i in q]


def _composable(view: GraphView, match) -> bool:
    p, q = match["first"].attr("perm"), match["second"].attr("perm")
    if len(p) != len(q):
        return False
    return not (_composed(p, q) == list(range(len(q))) and match.output in view.protected)


def _merge(view: GraphView, match) -> None:
    first, second, x = match["first"], match["second"], match["x"]
    r = _composed(list(first.attr("perm")), list(second.attr("perm")))
    if r == list(range(len(r))):
        view.bypass(second, x)
    else:
        view.replace(second, records.evolve(second, input=[x], attribute=[
            records.evolve(a, value=r) if a.name == "perm" else a for a in second.attribute]))
    view.remove(first)


RULES = (Rule("transpose", op.Transpose(op.Transpose(Var("x"), check=_has_perm, bind="first"),
                                        check=_has_perm, bind="second"), _merge, _composable),)
run = rules_pass(RULES)
