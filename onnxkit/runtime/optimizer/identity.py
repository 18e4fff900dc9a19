"""Remove Identity nodes and inference-mode Dropout.

``Identity(x) -> y`` and a Dropout that is not training (Part 2: opset 7-11 always; opset 12+
when ``training_mode`` is absent or a constant false — an IR < 4 initializer a feed may
override is noted as read, so a run feeding it runs the model as given; before 7 when
``is_test`` is 1) give
``y`` equal to ``x``, element for element, so every reader of ``y`` may read ``x`` instead:
the rewrite is exact.  A Dropout whose ``mask`` output is used is kept.  ``y`` keeps its name
where it is a graph output or read inside a subgraph: such a node is left in place.
"""

from __future__ import annotations

import numpy as np

from ...registry import normalize_domain
from .view import GraphView


def _dropout_is_identity(view: GraphView, node) -> bool:
    if any(o and view.use_count(o) for o in node.output[1:]):
        return False  # the mask is read
    version = view.version("")
    if version < 7:
        return node.attr("is_test", 0) == 1
    if version < 12 or len(node.input) < 3 or not node.input[2]:
        return True
    training = view.constant(node.input[2])
    if training is None or training.size != 1 or bool(np.asarray(training).reshape(())):
        return False
    view.read_constant(node.input[2])   # an IR < 4 override of it runs the model as given
    return True


def run(view: GraphView) -> int:
    """Rewire the readers of every removable Identity/Dropout output to its input; returns the count."""
    removed = 0
    for node in list(view.node):
        if normalize_domain(node.domain) != "" or node.op_type not in ("Identity", "Dropout"):
            continue
        if not node.input or not node.input[0] or not node.output or not node.output[0]:
            continue
        y, x = node.output[0], node.input[0]
        if y in view.protected:
            continue
        if node.op_type == "Dropout" and not _dropout_is_identity(view, node):
            continue
        view.bypass(node, x)
        removed += 1
    view.refresh()
    return removed
