"""Small questions the fusion passes ask of a :class:`~.view.GraphView` about a node pattern."""

from __future__ import annotations

from typing import Optional

from ... import ir
from ...dtypes import ELEMENT_TYPES
from ...registry import normalize_domain
from .view import GraphView

#: the domain of onnxkit's fused operators (plugins/default_domain: onnxkit_default_domain.fused)
FUSED_DOMAIN = "ai.onnxkit"
#: element types the fusions rewrite: float, float16, double, bfloat16
FLOAT_TAGS = (1, 10, 11, 16)


def is_op(node, op: str) -> bool:
    """True if ``node`` is an ai.onnx ``op`` node (False for None)."""
    return node is not None and node.op_type == op and normalize_domain(node.domain) == ""


#: how far (relative) a pattern's constant may be from the formula's (exporters round to float32)
SCALAR_RTOL = 1e-6


def keeps_shape(view: GraphView, c, x: str) -> bool:
    """True if the one-element constant array ``c`` combined elementwise (broadcasting) with a
    value of ``x``'s shape leaves that shape as it is: ``c`` has ``x``'s element type and a rank
    no higher than ``x``'s — a 0-d ``c`` always, a ``[1, ..., 1]`` one only where type inference
    (:meth:`~.view.GraphView.tensor_type`: checked inputs, no declarations) knows ``x``'s rank.
    A ``[1, 1, 1, 1, 1]`` constant times a rank-1 ``x`` is rank 5: a fused node keeping ``x``'s
    shape would drop those axes."""
    typed = view.tensor_type(x)
    if c is None or c.size != 1 or typed is None or ELEMENT_TYPES.get(typed[0]) is None \
            or c.dtype != ELEMENT_TYPES[typed[0]].dtype:
        return False
    return c.ndim == 0 or (typed[1] is not None and c.ndim <= len(typed[1]))


def scalar_is(view: GraphView, name: str, target: float, x: str) -> bool:
    """True if ``name`` is a one-element floating-point constant equal to ``target`` within
    :data:`SCALAR_RTOL` (relative) that keeps the shape of the pattern's input ``x``
    (:func:`keeps_shape`)."""
    c = view.constant(name)
    if c is None or c.size != 1 or c.dtype.kind != "f" or not keeps_shape(view, c, x):
        return False
    return abs(float(c.reshape(-1)[0]) - target) <= SCALAR_RTOL * abs(target)


def other_input(node, name: str) -> Optional[str]:
    """The input of a two-input ``node`` that is not ``name`` (None if ``name`` is not one)."""
    if len(node.input) != 2:
        return None
    a, b = node.input
    return b if a == name else a if b == name else None


def only_reader(view: GraphView, name: str, op: str):
    """The node of type ``op`` that alone reads ``name`` (unprotected), or None."""
    node = view.sole_consumer(name)
    return node if is_op(node, op) else None


def fuse(view: GraphView, nodes: list, x: str, output: str, op_type: str, since_onnx: int, name: str,
         attributes=()) -> None:
    """Replace ``nodes`` (a pattern computing ``output`` from ``x``) by one ``op_type`` node:
    ai.onnx's where the model imports ai.onnx ``since_onnx`` or later, else ai.onnxkit's (the
    optimized model then imports ai.onnxkit 1).  The node takes the place of the pattern's last
    node (every input of the pattern is defined there); every constant it read is noted
    (:meth:`~.view.GraphView.read_constant`: an IR < 4 override then runs the model as given)."""
    for n in nodes:
        for i in n.input:
            if i and i != x:
                view.read_constant(i)
    onnx_op = view.version("") >= since_onnx
    ids = {id(n) for n in nodes}
    last = max(k for k, n in enumerate(view.node) if id(n) in ids)
    view.node[last] = ir.Node(input=[x], output=[output], name=name, op_type=op_type,
                              domain="" if onnx_op else FUSED_DOMAIN, attribute=list(attributes))
    view.node = [n for n in view.node if id(n) not in ids]
    if not onnx_op:
        view.require_opset(FUSED_DOMAIN, 1)
    view.refresh()


def float_input(view: GraphView, x: str) -> bool:
    """True if type inference gives ``x`` a floating-point tensor type the fusions rewrite."""
    typed = view.tensor_type(x)
    return typed is not None and typed[0] in FLOAT_TAGS
