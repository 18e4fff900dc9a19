"""Rewrite the hard-swish expansion exporters emit as one HardSwish node.

``x * Clip(x + 3, 0, 6) / 6`` (MobileNetV3's and PP-LCNet's activation as paddle2onnx and
older torch exports write it: the Add and the product in either operand order, the division
as ``Div(., 6)`` or ``Mul(., 1/6)``, applied to the product or to the Clip) is
``HardSwish(x) = x * max(0, min(1, x / 6 + 1 / 2))``.  The Clip bounds are its ``min``/``max``
inputs (Clip-11 on) or attributes (before 11), every constant a one-element constant of x's
element type equal to the formula's within 1e-6, of rank 0 or no higher than x's as type
inference knows it from the checked inputs (:func:`~.patterns.keeps_shape`: a
``[1, 1, 1, 1, 1]`` 3 would make the expansion rank 5), every intermediate value read by
the next node of the pattern alone and neither a graph output nor read by a subgraph, and x a
floating-point tensor.  The
fused node is ai.onnx HardSwish where the model imports ai.onnx 14 or later, else ai.onnxkit
HardSwish-1 (the same definition, onnxkit's own domain).  HardSwish scales before it clips
where the expansion clips then divides: the results agree within the element type's
tolerance (Clause 11), not bit for bit.
"""

from __future__ import annotations

from typing import Optional

from ...registry import normalize_domain
from .patterns import float_input, fuse, is_op, only_reader, other_input, scalar_is
from .view import GraphView


def _bounds_are(view: GraphView, clip, lo: float, hi: float, x: str) -> bool:
    """True if ``clip`` clips to ``[lo, hi]`` (inputs from Clip-11, attributes before)."""
    if view.version("") >= 11:
        return len(clip.input) == 3 and scalar_is(view, clip.input[1], lo, x) and scalar_is(view, clip.input[2], hi, x)
    return len(clip.input) == 1 and clip.attr("min") == lo and clip.attr("max") == hi


def _divided_by_six(view: GraphView, name: str, x: str):
    """The node that alone reads ``name`` and divides it by 6 (``Div(., 6)`` or ``Mul(., 1/6)``), or None."""
    node = view.sole_consumer(name)
    if is_op(node, "Div") and node.input[0] == name and scalar_is(view, node.input[1], 6.0, x):
        return node
    if is_op(node, "Mul") and scalar_is(view, other_input(node, name) or "", 1.0 / 6.0, x):
        return node
    return None


def _pattern(view: GraphView, clip) -> Optional[tuple]:
    """``(x, nodes, output)`` of a hard-swish expansion around ``clip``, or None."""
    shifted = clip.input[0] if clip.input else ""
    add = view.producer.get(shifted)
    if not is_op(add, "Add") or view.sole_consumer(shifted) is not clip:
        return None
    x = next((a for a, b in (add.input, add.input[::-1]) if scalar_is(view, b, 3.0, a)), None) \
        if len(add.input) == 2 else None
    if x is None or not _bounds_are(view, clip, 0.0, 6.0, x):
        return None
    out = clip.output[0]
    six = _divided_by_six(view, out, x)       # x * (Clip(...) / 6)
    if six is not None:
        mul = only_reader(view, six.output[0], "Mul")
        if mul is not None and other_input(mul, six.output[0]) == x:
            return x, [add, clip, six, mul], mul.output[0]
        return None
    mul = only_reader(view, out, "Mul")        # (x * Clip(...)) / 6
    if mul is None or other_input(mul, out) != x:
        return None
    six = _divided_by_six(view, mul.output[0], x)
    return None if six is None else (x, [add, clip, mul, six], six.output[0])


def run(view: GraphView) -> int:
    fused = 0
    for clip in list(view.node):
        if not any(n is clip for n in view.node) or normalize_domain(clip.domain) != "" or clip.op_type != "Clip":
            continue
        found = _pattern(view, clip)
        if found is None or not float_input(view, found[0]):
            continue
        x, nodes, output = found
        fuse(view, nodes, x, output, "HardSwish", 14, (clip.name or output) + "/HardSwish")
        fused += 1
    return fused
