"""Rewrite the GELU expansions exporters emit as one Gelu node.

Two patterns, each ending in ``0.5 * x * (1 + f)`` (the two products in any of the orders
exporters write: ``(x * (1 + f)) * 0.5``, ``(0.5 * x) * (1 + f)``, ``x * ((1 + f) * 0.5)``):

* exact GELU, ``f = Erf(x / sqrt(2))`` (``Div(x, 1.41421...)`` or ``Mul(x, 0.70710...)``):
  ``Gelu(x)`` with ``approximate = "none"``;
* tanh GELU, ``f = Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))`` (``x^3`` as ``Pow(x, 3)`` or
  ``x * x * x``): ``Gelu(x, approximate = "tanh")``.

Every constant is a one-element constant of x's element type, equal to the formula's within
1e-6 (exporters write them rounded to float32); every intermediate value is read by the next
node of the pattern alone and is neither a graph output nor read by a subgraph.  x must be a
floating-point tensor (type inference).  The fused node is ai.onnx Gelu where the model's
ai.onnx operator set is 20 or more, else ``ai.onnxkit`` Gelu-1 (the same definition,
onnxkit's own domain; the optimized model imports it).  Gelu computes the same function as
the expansion, rounded once instead of at each of its 5-8 nodes: the results agree within the
element type's tolerance (Clause 11), not bit for bit.
"""

from __future__ import annotations

import math
from typing import Optional

from ... import ir
from ...registry import normalize_domain
from .view import GraphView

#: the domain of onnxkit's fused operators (plugins/default_domain: onnxkit_default_domain.fused)
FUSED_DOMAIN = "ai.onnxkit"
_FLOAT_TAGS = (1, 10, 11, 16)   # float, float16, double, bfloat16
_SQRT2 = math.sqrt(2.0)
_TANH_SCALE = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


def _is(node, op: str) -> bool:
    return node is not None and node.op_type == op and normalize_domain(node.domain) == ""


def _scalar(view: GraphView, name: str, target: float) -> bool:
    """True if ``name`` is a one-element constant equal to ``target`` within 1e-6 (relative)."""
    c = view.constant(name)
    if c is None or c.size != 1 or c.dtype.kind != "f":
        return False
    return abs(float(c.reshape(-1)[0]) - target) <= 1e-6 * abs(target)


def _other(node, name: str) -> Optional[str]:
    """The input of a two-input ``node`` that is not ``name`` (None if ``name`` is not one)."""
    if len(node.input) != 2:
        return None
    a, b = node.input
    return b if a == name else a if b == name else None


def _only_reader(view: GraphView, name: str, op: str):
    """The node of type ``op`` that alone reads ``name`` (unprotected), or None."""
    node = view.sole_consumer(name)
    return node if _is(node, op) else None


def _tail(view: GraphView, x: str, f: str) -> Optional[tuple]:
    """``(nodes, output)`` of ``0.5 * x * (1 + f)`` starting at ``f``, or None."""
    add = _only_reader(view, f, "Add")
    if add is None or not _scalar(view, _other(add, f) or "", 1.0):
        return None
    one_plus = add.output[0]
    m = _only_reader(view, one_plus, "Mul")
    if m is None:
        return None
    other = _other(m, one_plus)
    if other == x:                                      # (x * (1 + f)) * 0.5
        m2 = _only_reader(view, m.output[0], "Mul")
        if m2 is not None and _scalar(view, _other(m2, m.output[0]) or "", 0.5):
            return [add, m, m2], m2.output[0]
        return None
    if other is not None and _scalar(view, other, 0.5):  # x * ((1 + f) * 0.5)
        m2 = _only_reader(view, m.output[0], "Mul")
        if m2 is not None and _other(m2, m.output[0]) == x:
            return [add, m, m2], m2.output[0]
        return None
    half = view.producer.get(other) if other else None     # (0.5 * x) * (1 + f)
    if _is(half, "Mul") and _other(half, x) is not None and _scalar(view, _other(half, x), 0.5) \
            and view.sole_consumer(other) is m:
        return [add, half, m], m.output[0]
    return None


def _erf_pattern(view: GraphView, erf) -> Optional[tuple]:
    """``(x, nodes, output)`` of an exact GELU whose Erf is ``erf``, or None."""
    scaled = view.producer.get(erf.input[0])
    if view.sole_consumer(erf.input[0]) is not erf:
        return None
    if _is(scaled, "Div") and _scalar(view, scaled.input[1], _SQRT2):
        x = scaled.input[0]
    elif _is(scaled, "Mul") and len(scaled.input) == 2:
        x = next((a for a, b in (scaled.input, scaled.input[::-1]) if _scalar(view, b, 1.0 / _SQRT2)), None)
    else:
        return None
    tail = _tail(view, x, erf.output[0]) if x else None
    return None if tail is None else (x, [scaled, erf] + tail[0], tail[1])


def _cube_of(view: GraphView, name: str) -> Optional[tuple]:
    """``(x, nodes)`` if ``name`` is ``Pow(x, 3)`` or ``Mul(Mul(x, x), x)`` read once, else None."""
    node = view.producer.get(name)
    if view.sole_consumer(name) is None:
        return None
    if _is(node, "Pow") and _scalar(view, node.input[1], 3.0):
        return node.input[0], [node]
    if _is(node, "Mul") and len(node.input) == 2:
        for sq, x in (node.input, node.input[::-1]):
            inner = view.producer.get(sq)
            if _is(inner, "Mul") and list(inner.input) == [x, x] and view.sole_consumer(sq) is node:
                return x, [inner, node]
    return None


def _tanh_pattern(view: GraphView, tanh) -> Optional[tuple]:
    """``(x, nodes, output)`` of a tanh GELU whose Tanh is ``tanh``, or None."""
    scale = view.producer.get(tanh.input[0])
    if not _is(scale, "Mul") or view.sole_consumer(tanh.input[0]) is not tanh or len(scale.input) != 2:
        return None
    inner = next((a for a, b in (scale.input, scale.input[::-1]) if _scalar(view, b, _TANH_SCALE)), None)
    add = view.producer.get(inner) if inner else None
    if not _is(add, "Add") or view.sole_consumer(inner) is not scale or len(add.input) != 2:
        return None
    for x, cubic in (add.input, add.input[::-1]):
        mul = view.producer.get(cubic)
        if not _is(mul, "Mul") or view.sole_consumer(cubic) is not add or len(mul.input) != 2:
            continue
        for cube, c in (mul.input, mul.input[::-1]):
            found = _cube_of(view, cube) if _scalar(view, c, _CUBIC) else None
            if found is not None and found[0] == x:
                tail = _tail(view, x, tanh.output[0])
                if tail is not None:
                    return x, found[1] + [mul, add, scale, tanh] + tail[0], tail[1]
    return None


def run(view: GraphView) -> int:
    fused = 0
    onnx_gelu = view.version("") >= 20
    for anchor in list(view.node):
        if not any(n is anchor for n in view.node) or normalize_domain(anchor.domain) != "" \
                or anchor.op_type not in ("Erf", "Tanh"):
            continue
        found = (_erf_pattern if anchor.op_type == "Erf" else _tanh_pattern)(view, anchor)
        if found is None:
            continue
        x, nodes, output = found
        typed = view.tensor_type(x)
        if typed is None or typed[0] not in _FLOAT_TAGS:
            continue
        for n in nodes:  # the constants the pattern read
            for i in n.input:
                if i != x and i in view.inits:
                    view.read_constant(i)
        mode = "none" if anchor.op_type == "Erf" else "tanh"
        ids = {id(n) for n in nodes}
        last = max(k for k, n in enumerate(view.node) if id(n) in ids)
        gelu = ir.Node(input=[x], output=[output], name=(anchor.name or output) + "/Gelu", op_type="Gelu",
                       domain="" if onnx_gelu else FUSED_DOMAIN,
                       attribute=[ir.Attribute(name="approximate", type=ir.AttributeType.STRING,
                                               value=mode.encode())])
        view.node[last] = gelu  # at the last node's place: every input of the pattern is defined there
        view.node = [n for n in view.node if id(n) not in ids]
        if not onnx_gelu:
            view.require_opset(FUSED_DOMAIN, 1)
        view.refresh()
        fused += 1
    return fused
