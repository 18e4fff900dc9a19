"""Collapse ``Reshape(Reshape(x, s1), s2)`` into ``Reshape(x, s2)``.

A Reshape keeps the elements in row-major order and changes only the shape, so the second
Reshape's result depends on its input's elements and element count alone — the same for
``x`` and ``Reshape(x, s1)`` — provided ``s2`` does not refer to its input's extents: ``s2``
must be a constant with no ``0`` entry (``0`` copies the input's extent unless ``allowzero``
is 1; ``-1`` is computed from the element count, which is unchanged).  Exact.  The first
Reshape's output must be read by the second alone; needs Reshape-5 or later (shape input).
"""

from __future__ import annotations

import attrs

from ...registry import normalize_domain
from .view import GraphView


def _is_reshape(node) -> bool:
    return node is not None and node.op_type == "Reshape" and normalize_domain(node.domain) == "" \
        and len(node.input) == 2 and all(node.input)


def run(view: GraphView) -> int:
    if view.version("") < 5:
        return 0
    changed = 0
    for second in list(view.node):
        if not _is_reshape(second):
            continue
        first = view.producer.get(second.input[0])
        if not _is_reshape(first) or view.sole_consumer(second.input[0]) is not second:
            continue
        shape = view.constant(second.input[1])
        if shape is None or (second.attr("allowzero", 0) != 1 and bool((shape == 0).any())):
            continue
        view.read_constant(second.input[1])
        view.node[view.node.index(second)] = attrs.evolve(second, input=[first.input[0], second.input[1]])
        view.remove(first)
        view.refresh()
        changed += 1
    return changed
