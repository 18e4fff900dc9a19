"""Regions of float32 elementwise operators as one node: ai.onnxkit Elementwise.

Each elementwise node of a chain (``Sub``, ``Div``, ``Sqrt``, ``Mul``, ``Add`` of a decomposed
normalization; ``x * Sigmoid(x)``) is one kernel call with its own temporary and its own pass over
memory.  Where the values between the nodes of such a region are read by the region alone, the
region computes each element of its result from its inputs' elements at that position: one node,
whose kernel may make one pass (onnxruntime and compilers fuse such chains likewise).

**The region** (found from its last node, the *terminal*, back; graph order, last node first, each
node in one region at most): default-domain nodes of :data:`OPS` (Clause 11's elementwise operators
with the multidirectional broadcast, Clause 10: the model imports ai.onnx 7 or later), one output
each, no subgraph, every value they read and write float32 (type inference, Clause 9: a float64
constant, a float16 or integer value does not qualify), ``Pow`` only with a constant exponent of
one float32 element, 2, 3 or 0.5, of rank at most its base's (the cpu kernel's products and square
root), at least one operand not computed from initializers alone (a weight standardization's
``(w - mean(w)) * ...`` is planning's to fold, :mod:`onnxkit.runtime.plan`, whatever its size).  A node's operand produced by such a node joins the region where that value is read by
region nodes alone (not by another node, not inside a subgraph, not a graph output); the walk is
repeated until no more join.  A node whose result a Conv, MatMul, Gemm or BatchNormalization
kernel may apply in place (an ``Add``, ``Relu``, ``Sigmoid`` or ``Mul`` reading such a node's
output, and a ``Relu`` after such an ``Add``: the plan pass :mod:`.epilogue`'s folds) stays out.

**Broadcast, checked at planning.**  The values the region reads from outside (its *leaves*) must
each broadcast to the terminal's output shape ``S`` (rank at least 1, every extent known: a
number or a symbol, type inference's) in one of four ways, after padding its shape with leading
1s: ``S`` itself (full), all 1s (a scalar), 1s then ``S``'s last extent (a vector along the last
axis), or ``S``'s extents but the last, then 1 (one value per row).  A leaf of any other shape
(broadcast on another axis, an unknown shape) leaves the nodes reading it out of the region, and
the walk is made again without them.  A region holds at least two nodes.

**The rewrite.**  The region becomes one ai.onnxkit ``Elementwise-4`` node reading its leaves (in
the order the region's nodes first read them), its ``body`` attribute the region's nodes in graph
order (names renamed fresh, a Pow's exponent copied into it as an initializer), writing the
terminal's output.  Run as its body (the default domain's kernel) it computes what the region
computed, node by node: **bit-identical**.  The cpu kernel's one pass (``onnxkit_cpu``'s
``overrides/fused_elementwise.py``) computes each element by the same float32 operations in the
same order.  A model importing ai.onnxkit below 4 is left alone (its Elementwise would not bind).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ... import ir
from ...functions import subgraphs_of
from .computed import computed_constant
from .patterns import FUSED_DOMAIN
from .view import GraphView, is_default

#: the operators a region may hold, with their operand count
OPS = {"Add": 2, "Sub": 2, "Mul": 2, "Div": 2, "Pow": 2, "Neg": 1, "Abs": 1, "Sqrt": 1, "Reciprocal": 1,
       "Relu": 1, "Sigmoid": 1, "Tanh": 1}
#: the exponents of a Pow a region may hold
POWERS = (2.0, 3.0, 0.5)
#: producers whose cpu kernels fold a following step (the epilogue plan pass), and what they fold
EPILOGUE_PRODUCERS = frozenset(("Conv", "MatMul", "Gemm", "BatchNormalization"))
EPILOGUE_CONSUMERS = frozenset(("Add", "Relu", "Sigmoid", "Mul"))
#: ONNX element type float32; the ai.onnxkit version defining Elementwise
FLOAT, ELEMENTWISE_VERSION = 1, 4
#: the most nodes of one region
MAX_NODES = 128


def _elem(view: GraphView, name: str) -> int:
    typed = view.tensor_type(name)
    return 0 if typed is None else int(typed[0])


def _dims(view: GraphView, name: str) -> Optional[list]:
    typed = view.tensor_type(name)
    return None if typed is None else typed[1]


def _exponent(view: GraphView, node) -> Optional[tuple]:
    """``(value, initializers read)`` of a Pow's exponent where a region may hold the Pow."""
    found = computed_constant(view, node.input[1])
    if found is None:
        return None
    value = found[0]
    base = _dims(view, node.input[0])
    if value.dtype != np.float32 or value.size != 1 or base is None or value.ndim > len(base) \
            or float(value.reshape(-1)[0]) not in POWERS:
        return None
    return found


def operands(node) -> list:
    """The inputs of a region node that are its operands (a Pow's exponent is not)."""
    return list(node.input[:1]) if node.op_type == "Pow" else list(node.input)


def _folded_by_epilogue(view: GraphView, node) -> bool:
    """True if the epilogue plan pass may fold ``node`` into its producer (module docstring)."""
    if node.op_type not in EPILOGUE_CONSUMERS:
        return False
    for name in node.input:
        producer = view.producer_of(name)
        if producer is None or not is_default(producer):
            continue
        if producer.op_type in EPILOGUE_PRODUCERS:
            return True
        if node.op_type == "Relu" and producer.op_type == "Add" and _folded_by_epilogue(view, producer):
            return True
    return False


def constant_derived(view: GraphView) -> set:
    """The names computed from initializers alone (inputs' defaults included): initializers, and
    the outputs of default-domain nodes without subgraphs whose inputs are all such names (a
    Constant's too) — values planning folds, or could, however large."""
    fixed = {t.name for t in view.initializer}
    for node in view.node:
        if is_default(node) and not subgraphs_of(node) and all(i in fixed for i in node.input if i):
            fixed.update(o for o in node.output if o)
    return fixed


def eligible(view: GraphView, node, fixed: set = frozenset()) -> bool:
    """True if a region may hold ``node`` (module docstring); ``fixed``: :func:`constant_derived`."""
    if node is None or not is_default(node) or node.op_type not in OPS or len(node.output) != 1 \
            or len(node.input) != OPS[node.op_type] or subgraphs_of(node) or not all(node.input):
        return False
    if _elem(view, node.output[0]) != FLOAT or any(_elem(view, n) != FLOAT for n in operands(node)):
        return False
    if node.op_type == "Pow" and _exponent(view, node) is None:
        return False
    if all(n in fixed for n in operands(node)):
        return False                 # a function of constants (or inputs' defaults): planning folds it
    return not _folded_by_epilogue(view, node)


def leaf_kind(dims, out: list) -> Optional[str]:
    """How a leaf of shape ``dims`` broadcasts to ``out``: ``"F"`` (full), ``"S"`` (scalar),
    ``"V"`` (a vector along the last axis), ``"R"`` (one value per row), or None."""
    if dims is None or len(dims) > len(out) or any(d is None for d in dims):
        return None
    padded = [1] * (len(out) - len(dims)) + list(dims)
    if padded == out:
        return "F"
    if all(d == 1 for d in padded):
        return "S"
    if all(d == 1 for d in padded[:-1]) and padded[-1] == out[-1]:
        return "V"
    if padded[:-1] == out[:-1] and padded[-1] == 1:
        return "R"
    return None


def _grow(view: GraphView, terminal, taken: set, excluded: set, fixed: set) -> dict:
    """The nodes joining ``terminal``'s region (by id; module docstring), ``excluded`` left out."""
    region = {id(terminal): terminal}
    changed = True
    while changed and len(region) < MAX_NODES:
        changed = False
        for node in list(region.values()):
            for name in operands(node):
                producer = view.producer_of(name)
                if producer is None or id(producer) in region or id(producer) in excluded \
                        or id(producer) in taken or name in view.protected or not eligible(view, producer, fixed):
                    continue
                if all(id(u.item) in region for u in view.index.uses(name)):
                    region[id(producer)] = producer
                    changed = True
    return region


def leaves(region: dict) -> list:
    """The values the region's nodes read from outside it, in the order first read (graph order)."""
    written = {n.output[0] for n in region.values()}
    out: list = []
    for node in region.values():
        for name in operands(node):
            if name not in written and name not in out:
                out.append(name)
    return out


def find(view: GraphView, terminal, taken: set, fixed: set) -> Optional[tuple]:
    """``(nodes in graph order, leaves)`` of the region ending at ``terminal``, or None
    (``fixed``: :func:`constant_derived`)."""
    if not eligible(view, terminal, fixed):
        return None
    out = _dims(view, terminal.output[0])
    if not out or any(d is None for d in out):
        return None
    excluded: set = set()
    while True:
        region = _grow(view, terminal, taken, excluded, fixed)
        bad = [name for name in leaves(region) if leaf_kind(_dims(view, name), out) is None]
        if not bad:
            break
        readers = {id(n) for n in region.values() if any(b in operands(n) for b in bad)}
        if id(terminal) in readers:
            return None
        excluded |= readers
    if len(region) < 2:
        return None
    ordered = [n for n in view.node if id(n) in region]
    return ordered, leaves({id(n): n for n in ordered})


def _body(view: GraphView, ordered: list, inputs: list, terminal) -> ir.Graph:
    """The region's nodes as a graph from its leaves to the terminal's output (names renamed fresh)."""
    names = {name: view.fresh_name("ew_x") for name in inputs}
    initializers = []
    nodes = []
    for node in ordered:
        ins = [names[i] for i in operands(node)]
        if node.op_type == "Pow":
            value, read = _exponent(view, node)
            for used in read | {node.input[1]}:
                view.read_constant(used)
            ins.append(view.fresh_name("ew_power"))
            initializers.append(ir.Tensor.from_numpy(np.ascontiguousarray(value), name=ins[-1], data_type=FLOAT))
        names[node.output[0]] = view.fresh_name("ew_t")
        nodes.append(ir.Node(input=ins, output=[names[node.output[0]]], op_type=node.op_type, domain="",
                             name=node.name, attribute=list(node.attribute)))
    return ir.Graph(node=nodes, name=f"{terminal.name or terminal.output[0]}.elementwise", initializer=initializers,
                    input=[ir.ValueInfo(name=names[i], type=ir.TensorType(FLOAT, None)) for i in inputs],
                    output=[ir.ValueInfo(name=names[terminal.output[0]], type=ir.TensorType(FLOAT, None))])


def run(view: GraphView) -> int:
    """Replace each qualifying region by an Elementwise node (module docstring); how many."""
    if view.version("") < 7 or 0 < view.version(FUSED_DOMAIN) < ELEMENTWISE_VERSION:
        return 0
    count, taken, fixed = 0, set(), constant_derived(view)
    for node in reversed(list(view.node)):
        if id(node) in taken or not view.holds(node):
            continue
        found = find(view, node, taken, fixed)
        if found is None:
            continue
        ordered, inputs = found
        taken |= {id(n) for n in ordered}
        body = _body(view, ordered, inputs, node)
        exponents = [n.input[1] for n in ordered if n.op_type == "Pow"]
        fused = ir.Node(input=inputs, output=[node.output[0]], op_type="Elementwise", domain=FUSED_DOMAIN,
                        name=(node.name or node.output[0]) + "/Elementwise",
                        attribute=[ir.Attribute(name="body", type=ir.AttributeType.GRAPH, value=body)])
        view.replace_pattern(ordered, fused)
        view.require_opset(FUSED_DOMAIN, ELEMENTWISE_VERSION)
        view.drop_unread(exponents)
        count += 1
    return count
