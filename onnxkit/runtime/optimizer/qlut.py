"""An 8-bit function of one 8-bit tensor as a 256-entry lookup table: ai.onnxkit LookupTable.

onnxruntime's quantizer leaves the elementwise float operators it does not quantize between a
``DequantizeLinear`` and a ``QuantizeLinear`` of their own (GELU's erf form: ``DQ -> Div -> Erf ->
Q``, then ``DQ -> Add -> Q``, ``DQ, DQ -> Mul -> Q``, ``DQ -> Mul -> Q``; the QOperator format's
``DQ -> Div -> Erf -> Q -> QLinearAdd -> QLinearMul -> QLinearMul``).  Where every value of such a
region is, element for element, a function of the element at the same position of **one** 8-bit
tensor ``X`` (the *source*), the region's 8-bit result is a function of one byte: 256 values.

**The region** (found from its last node, the *terminal*, back): nodes of these kinds, each
operand a region value, the source, or a one-element constant (an initializer, a Constant node,
or a value the graph computes from constants, :mod:`.computed`):

* ai.onnx ``DequantizeLinear`` / ``QuantizeLinear`` whose scale and zero point (absent: 0) are
  0-d constants (per tensor; a per-axis or ``[1]``-shaped scale does not qualify), the 8-bit side
  uint8 or int8;
* the ai.onnx operators of :data:`ELEMENTWISE` and ai.onnxkit's of :data:`FUSED_ELEMENTWISE`,
  each output element a function of the inputs' elements at its position (Clause 11's
  elementwise operators; constants one element of rank at most the source's, so no operand
  broadcasts the region's values to another shape), every value they read and write float32
  (type inference: a float16 intermediate, a float64 constant or an integer operator does not
  qualify);
* com.microsoft ``QLinearSigmoid``, ``QLinearLeakyRelu``, ``QLinearAdd``, ``QLinearMul``
  (:data:`QLINEAR`), their scales and zero points one-element constants, each 8-bit operand a
  region value, the source or a one-element constant.

The source is the one non-constant value the region reads; it must be 8-bit (uint8 / int8).
Every value a region node writes is read by region nodes alone — not by another node, not inside
a subgraph, not a graph output — except the terminal's (the fused node writes it) and a
``DequantizeLinear`` of the source read by others too (it stays for them, and the body has its
own copy).  A value read outside stops the walk there: an 8-bit one becomes the source where it
can be, a float one from a DQ stops at the DQ's 8-bit input; any other declines.  A walk that
finds several 8-bit inputs stops at the 8-bit operands it crossed on its way to them, and tries again.  The terminal is
a QuantizeLinear or one of :data:`QLINEAR` (an 8-bit output), and the region holds at least two
nodes or one of :data:`QLINEAR`.

**The rewrite.**  The region becomes one ai.onnxkit ``LookupTable-3`` node reading the source,
its ``body`` attribute the region's own nodes in graph order (names renamed fresh, the constants
copied into it as initializers), from an 8-bit input to the terminal's 8-bit output.  Its kernel
plans the body as the node's subgraph, with the session's own kernels and the plan's own choice
of bodies (a cold plan's numpy bodies, a warm plan's compiled loops), runs it once on the 256
codes and looks each element up.  **Bit-identical** to the unfused plan by construction, given
that the region's kernels compute each element alike whatever the array's size (each element of
an elementwise kernel depends on its operands' elements alone).  Passes run in
:data:`~onnxkit.runtime.optimizer.PASSES` order; this one runs last among the graph passes, so a
fusion of another pass inside such a region (a Gelu) is in the body as the unfused plan runs it.

Walks start from each terminal, the last node first (the largest region ends at the last one);
a model importing ai.onnxkit below 3 is left alone (its LookupTable would not bind).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ... import ir
from ...dtypes import from_numpy_dtype
from ...functions import subgraphs_of
from .computed import computed_constant
from .patterns import FUSED_DOMAIN
from .view import GraphView, is_default

#: ai.onnx operators each of whose output elements is a function of its inputs' elements at the
#: same position (constants broadcast as one element)
ELEMENTWISE = frozenset((
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Relu", "LeakyRelu", "PRelu", "Sigmoid",
    "HardSigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Floor", "Ceil", "Round",
    "Sign", "Softplus", "Softsign", "Elu", "Selu", "Celu", "ThresholdedRelu", "Gelu", "HardSwish", "Mish", "Clip",
    "Sin", "Cos", "Identity"))
#: ai.onnxkit operators of the same kind (the optimizer's fusions)
FUSED_ELEMENTWISE = frozenset(("Gelu", "HardSwish"))
MICROSOFT = "com.microsoft"
#: com.microsoft 8-bit operators, per element of their 8-bit operands: (operand inputs, parameter inputs)
QLINEAR = {"QLinearSigmoid": ((0,), (1, 2, 3, 4)), "QLinearLeakyRelu": ((0,), (1, 2, 3, 4)),
           "QLinearAdd": ((0, 3), (1, 2, 4, 5, 6, 7)), "QLinearMul": ((0, 3), (1, 2, 4, 5, 6, 7))}
#: ONNX element types: float32, and the 8-bit ones
FLOAT, EIGHT_BIT = 1, (2, 3)
#: the ai.onnxkit version defining LookupTable
LOOKUP_VERSION = 3
#: the most nodes of one region, and the most times a walk restarts with a new cut
MAX_NODES, MAX_CUTS = 64, 8


def _kind(node) -> Optional[str]:
    """``"dq"``, ``"q"``, ``"float"``, ``"qlinear"`` for a node a region may hold, else None."""
    if node is None or len(node.output) != 1 or subgraphs_of(node):
        return None
    if is_default(node, "DequantizeLinear"):
        return "dq"
    if is_default(node, "QuantizeLinear"):
        return "q"
    if is_default(node) and node.op_type in ELEMENTWISE:
        return "float"
    domain = node.domain or ""
    if domain == FUSED_DOMAIN and node.op_type in FUSED_ELEMENTWISE:
        return "float"
    if domain == MICROSOFT and node.op_type in QLINEAR:
        return "qlinear"
    return None


def _roles(node, kind: str) -> list:
    """``(input position, role)`` of each input: ``"operand"`` or ``"param"`` (a 0-d / one-element constant)."""
    if kind in ("dq", "q"):
        return [(k, "operand" if k == 0 else "param") for k in range(len(node.input))]
    if kind == "qlinear":
        operands, _ = QLINEAR[node.op_type]
        return [(k, "operand" if k in operands else "param") for k in range(len(node.input))]
    return [(k, "operand") for k in range(len(node.input))]


class _Region:
    """What a walk found: the region's nodes (by id), its constants, its source."""

    def __init__(self):
        self.nodes: dict = {}
        self.constants: dict = {}       # name -> (value, initializers read)
        self.sources: set = set()
        self.vias: dict = {}            # source -> the last 8-bit operand crossed on the way to it (or None)


def _elem(view: GraphView, name: str) -> int:
    typed = view.tensor_type(name)
    return 0 if typed is None else int(typed[0])


def _rank(view: GraphView, name: str) -> Optional[int]:
    typed = view.tensor_type(name)
    return None if typed is None or typed[1] is None else len(typed[1])


def _constant(view: GraphView, name: str, role: str, region: _Region) -> Optional[bool]:
    """True if ``name`` is a constant the region may read in ``role`` (noted), False if it is a
    constant it may not, None if it is not a constant."""
    found = computed_constant(view, name)
    if found is None:
        return None
    value = found[0]
    if value.size != 1 or (role == "param" and value.ndim != 0):
        return False
    region.constants[name] = found
    return True


def _walk(view: GraphView, terminal, cuts: set):
    """The :class:`_Region` ending at ``terminal``, a name to cut at (a string: walk again with it
    a source), or None where no region qualifies (module docstring).  A walk that fails past an
    8-bit operand of a DQ or QLinear node cuts at the last such value on its way there."""
    region, stack = _Region(), [(terminal, None)]
    while stack:
        node, via = stack.pop()
        if id(node) in region.nodes:
            continue
        kind = _kind(node)
        if kind is None or len(region.nodes) >= MAX_NODES:
            return via
        region.nodes[id(node)] = node
        for k, role in _roles(node, kind):
            name = node.input[k]
            if not name:
                if k == 0:
                    return via
                continue
            if name in cuts:
                region.sources.add(name)
                region.vias.setdefault(name, via)
                continue
            const = _constant(view, name, role, region)
            if const is not None:
                if not const:
                    return via
                continue
            if role == "param":
                return via
            producer = view.producer_of(name)
            eight_bit = kind in ("dq", "qlinear") and _elem(view, name) in EIGHT_BIT
            if _kind(producer) is not None and name not in view.protected:
                stack.append((producer, name if eight_bit else via))
            elif eight_bit:
                region.sources.add(name)
                region.vias.setdefault(name, via)
            else:
                return via
    return _read_inside(view, terminal, region)


def _read_inside(view: GraphView, terminal, region: _Region):
    """``region`` if every value its nodes write is read inside it (module docstring), else a name
    to cut at, or None."""
    for node in region.nodes.values():
        if node is terminal:
            continue
        out = node.output[0]
        outside = out in view.protected or any(id(u.item) not in region.nodes for u in view.index.uses(out))
        if not outside:
            continue
        if _kind(node) == "dq":
            if node.input[0] in region.sources:
                continue                 # a DQ of the source read by others too: it stays for them
            return node.input[0]
        if _elem(view, out) in EIGHT_BIT and out not in view.protected:
            return out
        return None
    return region


def _typed(view: GraphView, region: _Region, terminal) -> bool:
    """Every value of the region of the type its kind takes (module docstring), the source one 8-bit
    value, each constant of rank at most the source's."""
    if len(region.sources) != 1:
        return False
    source = next(iter(region.sources))
    if _elem(view, source) not in EIGHT_BIT or _elem(view, terminal.output[0]) not in EIGHT_BIT:
        return False
    rank = _rank(view, source)
    for value, _ in region.constants.values():
        if value.ndim and (rank is None or value.ndim > rank):
            return False
    for node in region.nodes.values():
        kind = _kind(node)
        out = _elem(view, node.output[0])
        if kind == "dq" and out != FLOAT or kind in ("q", "qlinear") and out not in EIGHT_BIT:
            return False
        if kind == "float":
            if out != FLOAT:
                return False
            for name in node.input:
                if name and (region.constants[name][0].dtype != np.float32 if name in region.constants
                             else _elem(view, name) != FLOAT):
                    return False
    return len(region.nodes) >= 2 or _kind(terminal) == "qlinear"


def find(view: GraphView, terminal) -> Optional[_Region]:
    """The region ending at ``terminal`` that the rewrite replaces, or None."""
    if _kind(terminal) not in ("q", "qlinear"):
        return None
    cuts: set = set()
    for _ in range(MAX_CUTS):
        found = _walk(view, terminal, cuts)
        if isinstance(found, str):
            cuts.add(found)
            continue
        if found is not None and len(found.sources) > 1:    # cut where the walk crossed into the other sources
            more = {v for v in found.vias.values() if v is not None} - cuts
            if more:
                cuts |= more
                continue
        return found if found is not None and _typed(view, found, terminal) else None
    return None


def _body(view: GraphView, region: _Region, terminal, ordered: list) -> ir.Graph:
    """The region's nodes as a graph from the source's type to the terminal's (names renamed fresh)."""
    source = next(iter(region.sources))
    names = {source: view.fresh_name("lut_x")}
    initializers = []
    for name, (value, _) in region.constants.items():
        names[name] = view.fresh_name(f"lut_{name}")
        tag = _numpy_tag(value.dtype)
        initializers.append(ir.Tensor.from_numpy(np.ascontiguousarray(value), name=names[name], data_type=tag))
    nodes = []
    for node in ordered:
        names[node.output[0]] = view.fresh_name(f"lut_{node.output[0]}")
        nodes.append(ir.Node(input=[names[i] if i else "" for i in node.input], output=[names[node.output[0]]],
                             op_type=node.op_type, domain=node.domain, name=node.name, attribute=list(node.attribute)))
    return ir.Graph(node=nodes, name=f"{terminal.name or terminal.output[0]}.lookup", initializer=initializers,
                    input=[ir.ValueInfo(name=names[source], type=ir.TensorType(_elem(view, source), None))],
                    output=[ir.ValueInfo(name=names[terminal.output[0]],
                                         type=ir.TensorType(_elem(view, terminal.output[0]), None))])


def _numpy_tag(dtype) -> int:
    return from_numpy_dtype(dtype).tag


def _rewrite(view: GraphView, terminal, region: _Region) -> None:
    ordered = [n for n in view.node if id(n) in region.nodes]
    body = _body(view, region, terminal, ordered)
    for name, (_, read) in region.constants.items():
        for used in read | {name}:
            view.read_constant(used)
    kept = [n for n in ordered if n is not terminal and _kind(n) == "dq" and n.input[0] in region.sources
            and (n.output[0] in view.protected or any(id(u.item) not in region.nodes for u in view.index.uses(n.output[0])))]
    replaced = [n for n in ordered if all(n is not k for k in kept)]
    fused = ir.Node(input=[next(iter(region.sources))], output=[terminal.output[0]], op_type="LookupTable",
                    domain=FUSED_DOMAIN, name=(terminal.name or terminal.output[0]) + "/LookupTable",
                    attribute=[ir.Attribute(name="body", type=ir.AttributeType.GRAPH, value=body)])
    view.replace_pattern(replaced, fused)
    view.require_opset(FUSED_DOMAIN, LOOKUP_VERSION)
    view.drop_unread(list(region.constants))


def run(view: GraphView) -> int:
    """Replace each qualifying region by a LookupTable (module docstring); how many."""
    if 0 < view.version(FUSED_DOMAIN) < LOOKUP_VERSION:
        return 0
    count = 0
    for node in reversed(list(view.node)):
        if not view.holds(node):
            continue
        region = find(view, node)
        if region is not None:
            _rewrite(view, node, region)
            count += 1
    return count
