"""Rewrite the GELU expansions exporters emit as one Gelu node.

Two patterns, each ending in ``0.5 * x * (1 + f)`` (the two products in any of the orders
exporters write: ``(x * (1 + f)) * 0.5``, ``(0.5 * x) * (1 + f)``, ``x * ((1 + f) * 0.5)``):

* exact GELU, ``f = Erf(x / sqrt(2))`` (``Div(x, 1.41421...)`` or ``Mul(x, 0.70710...)``):
  ``Gelu(x)`` with ``approximate = "none"``;
* tanh GELU, ``f = Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))`` (the cubic term a product of
  x, x, x and 0.044715 in any order and grouping, ``x^3`` possibly ``Pow(x, 3)``: GPT-2's
  ``0.044715 * Pow(x, 3)``, jax2tf's ``x * (x * (0.044715 * x))``): ``Gelu(x, approximate = "tanh")``.

Every constant is a one-element constant of x's element type, equal to the formula's within
1e-6 (exporters write them rounded to float32), of rank 0 or of a rank no higher than x's as
type inference knows it from the checked inputs (a ``[1, 1, 1, 1, 1]`` 0.5 would make the
expansion rank 5, :func:`~.patterns.keeps_shape`); every intermediate value is read by the next
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
from .patterns import float_input, fuse, is_op, only_reader, other_input, scalar_is
from .view import GraphView
_SQRT2 = math.sqrt(2.0)
_TANH_SCALE = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


def _tail(view: GraphView, x: str, f: str) -> Optional[tuple]:
    """``(nodes, output)`` of ``0.5 * x * (1 + f)`` starting at ``f``, or None."""
    add = only_reader(view, f, "Add")
    if add is None or not scalar_is(view, other_input(add, f) or "", 1.0, x):
        return None
    one_plus = add.output[0]
    m = only_reader(view, one_plus, "Mul")
    if m is None:
        return None
    other = other_input(m, one_plus)
    if other == x:                                      # (x * (1 + f)) * 0.5
        m2 = only_reader(view, m.output[0], "Mul")
        if m2 is not None and scalar_is(view, other_input(m2, m.output[0]) or "", 0.5, x):
            return [add, m, m2], m2.output[0]
        return None
    if other is not None and scalar_is(view, other, 0.5, x):  # x * ((1 + f) * 0.5)
        m2 = only_reader(view, m.output[0], "Mul")
        if m2 is not None and other_input(m2, m.output[0]) == x:
            return [add, m, m2], m2.output[0]
        return None
    half = view.producer.get(other) if other else None     # (0.5 * x) * (1 + f)
    if is_op(half, "Mul") and other_input(half, x) is not None and scalar_is(view, other_input(half, x), 0.5, x) \
            and view.sole_consumer(other) is m:
        return [add, half, m], m.output[0]
    return None


def _erf_pattern(view: GraphView, erf) -> Optional[tuple]:
    """``(x, nodes, output)`` of an exact GELU whose Erf is ``erf``, or None."""
    scaled = view.producer.get(erf.input[0])
    if view.sole_consumer(erf.input[0]) is not erf:
        return None
    if is_op(scaled, "Div") and scalar_is(view, scaled.input[1], _SQRT2, scaled.input[0]):
        x = scaled.input[0]
    elif is_op(scaled, "Mul") and len(scaled.input) == 2:
        x = next((a for a, b in (scaled.input, scaled.input[::-1]) if scalar_is(view, b, 1.0 / _SQRT2, a)), None)
    else:
        return None
    tail = _tail(view, x, erf.output[0]) if x else None
    return None if tail is None else (x, [scaled, erf] + tail[0], tail[1])


def _product_leaves(view: GraphView, name: str, reader, limit: int = 4) -> Optional[tuple]:
    """``(leaves, nodes)`` of the product tree computing ``name``: a Mul (two inputs) read by
    ``reader`` alone is opened into its inputs' trees, a ``Pow(v, 3)`` read by its parent alone
    into ``v`` three times; any other value is a leaf.  None past ``limit`` leaves."""
    node = view.producer.get(name)
    if reader is not None and view.sole_consumer(name) is not reader:
        node = None
    if is_op(node, "Pow") and scalar_is(view, node.input[1], 3.0, node.input[0]):
        return [node.input[0]] * 3, [node]
    if not (is_op(node, "Mul") and len(node.input) == 2):
        return [name], []
    if limit < 2:
        return None
    first = _product_leaves(view, node.input[0], node, limit - 1)
    second = None if first is None else _product_leaves(view, node.input[1], node, limit - len(first[0]))
    if second is None:
        return None
    leaves = first[0] + second[0]
    return (leaves, [node] + first[1] + second[1]) if len(leaves) <= limit else None


def _cubic_term(view: GraphView, name: str, x: str, add) -> Optional[list]:
    """The nodes computing ``0.044715 * x^3`` as ``name`` (read by ``add`` alone), or None: a
    product of x, x, x and the constant in any order and grouping (``Mul(Pow(x, 3), k)``,
    ``(x * x * x) * k``, jax2tf's ``x * (x * (k * x))``), each inner product read by the next."""
    if view.sole_consumer(name) is not add:
        return None
    found = _product_leaves(view, name, None)
    if found is None or len(found[1]) == 0:
        return None
    leaves, nodes = found
    others = [v for v in leaves if v != x]
    if leaves.count(x) != 3 or len(others) != 1 or not scalar_is(view, others[0], _CUBIC, x):
        return None
    return nodes


def _tanh_pattern(view: GraphView, tanh) -> Optional[tuple]:
    """``(x, nodes, output)`` of a tanh GELU whose Tanh is ``tanh``, or None."""
    scale = view.producer.get(tanh.input[0])
    if not is_op(scale, "Mul") or view.sole_consumer(tanh.input[0]) is not tanh or len(scale.input) != 2:
        return None
    # the scale's rank is checked against the Add's (x's, once the cubic term's constant is)
    inner = next((a for a, b in (scale.input, scale.input[::-1]) if scalar_is(view, b, _TANH_SCALE, a)), None)
    add = view.producer.get(inner) if inner else None
    if not is_op(add, "Add") or view.sole_consumer(inner) is not scale or len(add.input) != 2:
        return None
    for x, cubic in (add.input, add.input[::-1]):
        nodes = _cubic_term(view, cubic, x, add)
        if nodes is not None:
            tail = _tail(view, x, tanh.output[0])
            if tail is not None:
                return x, nodes + [add, scale, tanh] + tail[0], tail[1]
    return None


def run(view: GraphView) -> int:
    fused = 0
    for anchor in list(view.node):
        if not any(n is anchor for n in view.node) or normalize_domain(anchor.domain) != "" \
                or anchor.op_type not in ("Erf", "Tanh"):
            continue
        found = (_erf_pattern if anchor.op_type == "Erf" else _tanh_pattern)(view, anchor)
        if found is None or not float_input(view, found[0]):
            continue
        x, nodes, output = found
        mode = "none" if anchor.op_type == "Erf" else "tanh"
        fuse(view, nodes, x, output, "Gelu", 20, (anchor.name or output) + "/Gelu",
             [ir.Attribute(name="approximate", type=ir.AttributeType.STRING, value=mode.encode())])
        fused += 1
    return fused
