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

from .rules import Rule, Var, op, rules_pass
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


def _removable(view: GraphView, match) -> bool:
    node, y = match.root, match.output
    if not y or y in view.protected:
        return False
    return node.op_type == "Identity" or _dropout_is_identity(view, node)


def _bypass(view: GraphView, match) -> None:
    view.bypass(match.root, match["x"])


RULES = (Rule("identity", op.Identity(Var("x")), _bypass, _removable),
         Rule("dropout", op.Dropout(Var("x"), variadic=True), _bypass, _removable))
run = rules_pass(RULES)
