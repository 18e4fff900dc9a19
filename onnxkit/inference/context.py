"""The inference context: the one object an inference function (Clause 9.2) receives.

An inference function is ``fn(ctx)``.  It reads the node's input types, attributes and
(where known) constant input values from ``ctx`` and states the output types, either by
calling :meth:`InferenceContext.set_output` or by returning a list of types (``None`` =
unknown) in output order.  Rules (Clause 9.3, 9.4):

* yield unknown (``None`` for a type, ``None`` for an extent, ``shape=None`` for a rank)
  rather than guess;
* never equate two distinct dimension variables, never compute over them; an extent that
  cannot be determined is ``None`` or :meth:`InferenceContext.fresh_dim`;
* raise :class:`InferenceError` (``ctx.fail``) only for a genuine contradiction (shapes
  that cannot broadcast, a rank the operator forbids): it becomes an error diagnostic.

Values known at inference time: ``ctx.constant(i)`` is a numpy array when input ``i`` is
an initializer, the output of a Constant, or was computed from such values (at most
:data:`MAX_CONSTANT_ELEMENTS` elements).  ``ctx.symbolic(i)`` gives more: for an integer
tensor it is an object array whose entries are ``int`` (known), ``str`` (a dimension
variable) or ``None`` (unknown) — what ``Shape`` of a tensor of shape ``[N, 3]`` yields.
An inference function passes such values on with ``set_output(i, type, value=...)``.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .. import ir
from ..errors import OnnxkitTypeError
from ..ir.attribute import AttributeType

#: Largest constant (in elements) propagated through inference.
MAX_CONSTANT_ELEMENTS = 1024


class InferenceError(OnnxkitTypeError):
    """An inference function found the node's inputs contradict its operator's definition."""


_STRINGY = (AttributeType.STRING, AttributeType.STRINGS)


def _decode(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "surrogateescape")
    return v


def attribute_value(a: ir.Attribute):
    """An attribute's value, STRING / STRINGS decoded to ``str``."""
    if a.type in _STRINGY or isinstance(a.value, (bytes, bytearray)):
        if isinstance(a.value, list):
            return [_decode(v) for v in a.value]
        return _decode(a.value)
    return a.value


def is_symbolic(value) -> bool:
    """True for an object array of extents (int / str / None) rather than a constant."""
    return isinstance(value, np.ndarray) and value.dtype == object


def as_symbolic(value) -> Optional[np.ndarray]:
    """``value`` (an integer constant or a symbolic array) as an object array of int/str/None."""
    if value is None:
        return None
    if is_symbolic(value):
        return value
    if value.dtype.kind not in "iu" and value.dtype != np.bool_:
        return None
    out = np.empty(value.shape, dtype=object)
    flat = out.reshape(-1)
    for k, v in enumerate(np.asarray(value).reshape(-1).tolist()):
        flat[k] = int(v)
    return out


class InferenceContext:
    """What an inference function sees of one node; see the module docstring."""

    def __init__(self, engine, node: ir.Node, schema, domain: str, opset_version: int,
                 input_types: Sequence, input_values: Sequence, opsets: dict, scope, path: str,
                 record: bool):
        self._engine = engine
        self.node = node
        self.schema = schema
        self.domain = domain
        self.op_type = node.op_type
        self.opset_version = opset_version
        self.since_version = schema.since_version if schema is not None else opset_version
        self._input_types = list(input_types)
        self._input_values = list(input_values)
        self._opsets = opsets
        self._scope = scope
        self._path = path
        self._record = record
        self.output_types: list = [None] * len(node.output)
        self.output_values: list = [None] * len(node.output)
        self.visited_subgraphs: set = set()
        self.node_index = 0
        attributes = {}
        if schema is not None:
            for name, adef in (schema.attributes or {}).items():
                if adef.default_value is not None:
                    d = adef.default_value
                    v = list(d) if isinstance(d, tuple) else d
                    attributes[name] = attribute_value(ir.Attribute(name=name, type=int(adef.type), value=v))
        self._given = set()
        for a in node.attribute:
            if a.ref_attr_name:
                continue
            attributes[a.name] = attribute_value(a)
            self._given.add(a.name)
        self._attributes = attributes

    # -- inputs ------------------------------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        """Positions the node gives (unsupplied ones included, Clause 7.3.3)."""
        return len(self.node.input)

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def has_input(self, i: int) -> bool:
        return 0 <= i < len(self.node.input) and bool(self.node.input[i])

    def has_output(self, i: int) -> bool:
        return 0 <= i < len(self.node.output) and bool(self.node.output[i])

    def input_type(self, i: int) -> Optional[ir.Type]:
        """The type of input ``i``, or None when it is unknown or unsupplied."""
        if not self.has_input(i):
            return None
        return self._input_types[i]

    def input_types(self) -> list:
        return [self.input_type(i) for i in range(self.num_inputs)]

    def constant(self, i: int) -> Optional[np.ndarray]:
        """The value of input ``i`` when it is known at inference time (small constants only)."""
        if not self.has_input(i):
            return None
        v = self._input_values[i]
        if v is None or is_symbolic(v):
            return None
        return v

    def symbolic(self, i: int) -> Optional[np.ndarray]:
        """Input ``i`` as an object array of extents (int / str / None), for integer tensors."""
        if not self.has_input(i):
            return None
        return as_symbolic(self._input_values[i])

    # -- attributes ----------------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        """The node's attribute ``name`` (the schema default applied; STRING decoded to str)."""
        return self._attributes.get(name, default)

    def has_attr(self, name: str) -> bool:
        """True when the node itself gives the attribute (a schema default does not count)."""
        return name in self._given

    # -- outputs -------------------------------------------------------------------------------
    def set_output(self, i: int, type: Optional[ir.Type], value: Optional[np.ndarray] = None) -> None:
        """State the type of output ``i`` and, optionally, its value (a constant or symbolic array)."""
        if 0 <= i < len(self.output_types):
            self.output_types[i] = type
            if value is not None:
                self.output_values[i] = value

    def set_value(self, i: int, value: Optional[np.ndarray]) -> None:
        if 0 <= i < len(self.output_values):
            self.output_values[i] = value

    # -- dimension variables, failure ---------------------------------------------------------
    def fresh_dim(self) -> str:
        """A dimension variable used nowhere else in the model (Clause 9.3)."""
        return self._engine.fresh_dim()

    def fail(self, message: str):
        """Report that the node contradicts its operator's definition (an error diagnostic)."""
        raise InferenceError(message)

    def warn(self, code: str, message: str) -> None:
        self._engine.note_warning(code, "9.4", message, self.location)

    @property
    def location(self) -> str:
        return self._engine.node_location(self._path, self.node)

    # -- subgraphs -----------------------------------------------------------------------------
    def graph_attr(self, name: str):
        a = self.node.attributes.get(name)
        return None if a is None else a.value

    def subgraph_types(self, name: str, input_types: Sequence, index: Optional[int] = None,
                       input_values: Optional[Sequence] = None) -> Optional[list]:
        """Infer the subgraph held by attribute ``name`` (``index`` for a GRAPHS attribute).

        ``input_types``: the types the operator supplies to the subgraph's inputs, in order
        (None = unknown; the subgraph's own declarations refine them).  The subgraph sees the
        enclosing scope (Clause 5.4.3).  Returns its output types, or None when the node has
        no such graph.  May be called more than once (a fixed point for Loop); the last call's
        result is what is recorded.
        """
        g = self.graph_attr(name)
        if isinstance(g, list):
            if index is None or not 0 <= index < len(g):
                return None
            g, label = g[index], f"{name}[{index}]"
        else:
            label = name
        if not isinstance(g, ir.Graph):
            return None
        self.visited_subgraphs.add(name)
        return self._engine.infer_subgraph(g, self._opsets, self._scope, self._engine.subgraph_path(self._path, self.node, self.node_index, label),
                                           list(input_types), list(input_values or []), self._record)

    def subgraph_output_values(self) -> list:
        """Values (constants/symbolic) of the outputs of the subgraph inferred last."""
        return list(self._engine.last_subgraph_values)
