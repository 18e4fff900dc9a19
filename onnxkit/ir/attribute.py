"""Attributes (AttributeProto, Clause 7.4; Annex B.2.2).

An :class:`Attribute` is ``(name, type, value)``.  ``value`` by type:

========================  ==========================================
FLOAT / INT / STRING      ``float`` / ``int`` / ``bytes``
TENSOR / SPARSE_TENSOR    :class:`Tensor` / :class:`SparseTensor`
GRAPH                     :class:`Graph`
TYPE_PROTO                a :class:`Type` (read from the deprecated ``tp`` field only)
FLOATS / INTS / STRINGS   ``list`` of ``float`` / ``int`` / ``bytes``
TENSORS / GRAPHS / ...    ``list`` of the element kind
========================  ==========================================

An attribute with ``ref_attr_name`` (inside a function body, Clause 8.4) refers to an
attribute parameter of the enclosing function and has ``value is None``.

IR version 1 attributes carry no ``type`` field (see onnx-proto-ir3.txt): the decoder
takes the type from the value field present, and remembers that ``type`` was absent.
"""

from __future__ import annotations

import enum
from typing import Any

from onnxkit import records
from onnxkit import record_methods
import numpy as np

from .base import wire_field


class AttributeType(enum.IntEnum):
    """Table B.4."""

    UNDEFINED = 0
    FLOAT = 1
    INT = 2
    STRING = 3
    TENSOR = 4
    GRAPH = 5
    FLOATS = 6
    INTS = 7
    STRINGS = 8
    TENSORS = 9
    GRAPHS = 10
    SPARSE_TENSOR = 11
    SPARSE_TENSORS = 12
    TYPE_PROTO = 13
    TYPE_PROTOS = 14


#: The AttributeProto field that carries the value of each attribute type.
VALUE_FIELD = {
    AttributeType.FLOAT: "f",
    AttributeType.INT: "i",
    AttributeType.STRING: "s",
    AttributeType.TENSOR: "t",
    AttributeType.GRAPH: "g",
    AttributeType.SPARSE_TENSOR: "sparse_tensor",
    AttributeType.TYPE_PROTO: "tp",
    AttributeType.FLOATS: "floats",
    AttributeType.INTS: "ints",
    AttributeType.STRINGS: "strings",
    AttributeType.TENSORS: "tensors",
    AttributeType.GRAPHS: "graphs",
    AttributeType.SPARSE_TENSORS: "sparse_tensors",
    AttributeType.TYPE_PROTOS: "type_protos",
}
FIELD_TYPE = {f: t for t, f in VALUE_FIELD.items()}


@records.define
class Attribute:
    """A named attribute value; see the module docstring for the value of each type."""

    name: str = ""
    type: int = 0
    value: Any = None
    ref_attr_name: str = ""
    doc_string: str = ""
    _wire: object = wire_field()
    __eq__ = record_methods.EQ

    def __repr__(self) -> str:
        from . import display

        kind = AttributeType(self.type).name if self.type in AttributeType._value2member_map_ else str(self.type)
        if self.ref_attr_name:
            return f"Attribute({self.name}: {kind} = @{self.ref_attr_name})"
        v = self.value
        shown = repr(v) if hasattr(v, "_wire") else display.short_value(v)
        return f"Attribute({self.name}: {kind} = {shown})"

    @property
    def is_reference(self) -> bool:
        """True for a reference to an attribute parameter of the enclosing function."""
        return bool(self.ref_attr_name)

    @classmethod
    def make(cls, name: str, value: Any) -> "Attribute":
        """An attribute whose type is taken from a Python value (like ``onnx.helper.make_attribute``)."""
        from .later import is_a
        from .tensor import Tensor
        from .graph import Graph
        from .types import Type

        def kind(v):
            if isinstance(v, (bool, int, np.integer)):
                return "i"
            if isinstance(v, (float, np.floating)):
                return "f"
            if isinstance(v, (str, bytes)):
                return "s"
            for c, k in ((Tensor, "t"), (Graph, "g"), (Type, "tp")):
                if isinstance(v, c):
                    return k
            if is_a(v, "SparseTensor"):
                return "sparse"
            raise TypeError(f"attribute {name!r}: cannot infer an attribute type from {type(v).__name__}")

        single = {"i": AttributeType.INT, "f": AttributeType.FLOAT, "s": AttributeType.STRING,
                  "t": AttributeType.TENSOR, "sparse": AttributeType.SPARSE_TENSOR, "g": AttributeType.GRAPH,
                  "tp": AttributeType.TYPE_PROTO}
        multi = {"i": AttributeType.INTS, "f": AttributeType.FLOATS, "s": AttributeType.STRINGS,
                 "t": AttributeType.TENSORS, "sparse": AttributeType.SPARSE_TENSORS, "g": AttributeType.GRAPHS,
                 "tp": AttributeType.TYPE_PROTOS}
        conv = {"i": int, "f": float, "s": lambda s: s.encode() if isinstance(s, str) else bytes(s)}
        if isinstance(value, (list, tuple)):
            kinds = {kind(v) for v in value}
            if kinds == {"i", "f"}:
                kinds = {"f"}
            if len(kinds) > 1:
                raise TypeError(f"attribute {name!r}: list mixes value kinds {sorted(kinds)}")
            k = kinds.pop() if kinds else "i"
            c = conv.get(k, lambda v: v)
            return cls(name=name, type=multi[k], value=[c(v) for v in value])
        k = kind(value)
        return cls(name=name, type=single[k], value=conv.get(k, lambda v: v)(value))
