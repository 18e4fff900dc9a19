"""Cancel Transpose pairs that compose to the identity and merge consecutive Transposes.

``Transpose(Transpose(x, p), q)`` is ``Transpose(x, r)`` with ``r[i] = p[q[i]]`` (output axis
``i`` of the second is its input axis ``q[i]``, which is axis ``p[q[i]]`` of ``x``): one
permutation of the same elements, exact.  When ``r`` is the identity the pair is dropped and
readers of the result read ``x``.  Both nodes need an explicit ``perm``; the first one's output
must be read by the second alone.  A result that is a graph output keeps its name (a merged
Transpose produces it; an identity pair there is left alone).
"""

from __future__ import annotations

import attrs

from ...registry import normalize_domain
from .view import GraphView


def _is_transpose(node) -> bool:
    return node is not None and node.op_type == "Transpose" and normalize_domain(node.domain) == "" \
        and node.attr("perm") is not None and len(node.input) == 1 and bool(node.input[0])


def run(view: GraphView) -> int:
    changed = 0
    for second in list(view.node):
        if not _is_transpose(second) or second not in view.node:
            continue
        first = view.producer.get(second.input[0])
        if not _is_transpose(first) or view.sole_consumer(second.input[0]) is not second:
            continue
        p, q = list(first.attr("perm")), list(second.attr("perm"))
        if len(p) != len(q):
            continue
        r = [p[i] for i in q]
        x, y = first.input[0], second.output[0]
        if r == list(range(len(r))):
            if y in view.protected:
                continue
            view.bypass(second, x)
        else:
            perm = [a for a in second.attribute if a.name == "perm"][0]
            merged = attrs.evolve(second, input=[x], attribute=[
                attrs.evolve(perm, value=r) if a.name == "perm" else a for a in second.attribute])
            view.node[view.node.index(second)] = merged
        view.remove(first)
        view.refresh()
        changed += 1
    return changed
