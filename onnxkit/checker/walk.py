"""A walk over every IR object of a model, each with its location.

:func:`walk` visits the model depth-first, in field order, and returns ``(obj, location,
parent, field)`` for every IR object (every record class of :mod:`onnxkit.ir`): graphs,
nodes, attributes, tensors, types, dimensions, metadata entries, device configurations,
functions, training information.  The message-local checks (Annex B obligations, types,
tensor contents, external references, metadata) run on this walk; the checks that need a
graph's scope run on the graph walk of :mod:`onnxkit.checker.structure`.

Iterative, so a deeply nested model cannot exhaust the stack; each graph object is visited
once, so a graph that is its own subgraph (an IR built in Python; the graph check reports
``subgraph-cycle``) cannot make it run forever.
"""

from __future__ import annotations

import numpy as np

from onnxkit import records

from .. import ir
from ..locations import Location
from .context import function_label, graph_label, node_label, q

_SKIP = frozenset({"_wire", "_outer_wire", "base_dir", "external_options", "_decoded"})
#: defaults of fields that hold scalars or arrays, never an IR object
_SCALAR_DEFAULTS = (str, bytes, int, float, np.ndarray)
_FIELDS: dict = {}


def _fields(cls):
    """The fields of record class ``cls`` that may hold IR objects (an optional message, a list)."""
    f = _FIELDS.get(cls)
    if f is None:
        f = _FIELDS[cls] = tuple(a.name for a in records.fields(cls) if a.name not in _SKIP
                                 and not isinstance(a.default, _SCALAR_DEFAULTS)) if records.has(cls) else ()
    return f


class _WalkLocation(Location):
    """A walk's location: the segment (:func:`label`) is made only when the location is rendered."""

    __slots__ = ("_args",)

    def __init__(self, parent, *args):
        self.parent = parent
        self._args = args
        self._text = None

    @property
    def segment(self) -> str:
        return label(*self._args)


def label(parent, field: str, index, obj) -> str:
    """The location component of ``obj``, found at ``parent.field[index]``."""
    if isinstance(obj, ir.Graph):
        if isinstance(parent, ir.Attribute):
            return f"graph {index} {q(obj.name)}" if index is not None else graph_label(obj)
        if ir.is_a(parent, "TrainingInfo"):
            return f"{field} {graph_label(obj)}"
        return graph_label(obj)
    if isinstance(obj, ir.Node):
        return node_label(index, obj)
    if isinstance(obj, ir.Attribute):
        return f"attribute {q(obj.name)}"
    if isinstance(obj, ir.ValueInfo):
        if field in ("input", "output"):
            return f"{field} {index} {q(obj.name)}"
        return f"{field} {q(obj.name)}"
    if isinstance(obj, ir.Tensor):
        if field == "initializer":
            return f"initializer {q(obj.name)}"
        if field in ("values", "indices"):
            return field
        return f"tensor {index}" if index is not None else "tensor"
    if ir.is_a(obj, "SparseTensor"):
        if field == "sparse_initializer":
            name = obj.values.name if obj.values is not None else ""
            return f"sparse_initializer {q(name)}"
        return f"sparse_tensor {index}" if index is not None else "sparse_tensor"
    if isinstance(obj, ir.Type):
        if isinstance(parent, ir.ValueInfo):
            return "type"
        if isinstance(parent, ir.Attribute):
            return f"type_proto {index}" if index is not None else "type_proto"
        return field
    if isinstance(obj, ir.Shape):
        return "shape"
    if isinstance(obj, ir.Dim):
        return f"dim {index}"
    if isinstance(obj, ir.StringStringEntry):
        if field == "external_data":
            return f"external_data {q(obj.key)}"
        return f"{field} {index} {q(obj.key)}"
    if ir.is_a(obj, "Function"):
        return function_label(obj)
    if isinstance(obj, ir.OperatorSetId):
        return f"opset_import {index} {q(obj.domain)}"
    if isinstance(obj, ir.NodeDeviceConfiguration):
        return f"device_configuration {index} {q(obj.configuration_id)}"
    if isinstance(obj, ir.DeviceConfiguration):
        return f"configuration {index} {q(obj.name)}"
    return f"{field} {index}" if index is not None else field


_IS_IR: dict = {}


def _is_ir(cls) -> bool:
    r = _IS_IR.get(cls)
    if r is None:
        r = _IS_IR[cls] = records.has(cls)
    return r


def walk(root, root_location: str = "") -> list:
    """Every IR object under ``root`` as ``(obj, location, parent, field)``, depth-first in field order.

    A location is a :class:`~onnxkit.locations.Location` (rendered when a diagnostic prints it;
    the root's is ``root_location``)."""
    out = []
    append = out.append
    stack = [(root, root_location, None, "")]
    pop = stack.pop
    graphs: set = set()
    fields_of, is_ir, Graph, Model = _FIELDS.get, _IS_IR.get, ir.Graph, ir.Model
    scalars = (str, bytes, int, float, memoryview)
    while stack:
        entry = pop()
        obj, loc = entry[0], entry[1]
        cls = type(obj)
        if isinstance(obj, Graph):
            if id(obj) in graphs:
                continue
            graphs.add(id(obj))
        append(entry)
        names = fields_of(cls)
        if names is None:
            names = _fields(cls)
        if not names:
            continue
        children = []
        model = isinstance(obj, Model)
        for name in names:
            v = getattr(obj, name)
            if v is None or isinstance(v, scalars):
                continue
            # children of the model other than its graph and functions are located under "model"
            base = "model" if model and name not in ("graph", "functions") else loc
            if isinstance(v, list):
                if not v:
                    continue
                first, last = is_ir(type(v[0])), is_ir(type(v[-1]))
                if first is None:
                    first = _is_ir(type(v[0]))
                if last is None:
                    last = _is_ir(type(v[-1]))
                if not first and not last:
                    continue  # a list of scalars (ints, floats, strings): nothing to walk
                for i, item in enumerate(v):
                    known = is_ir(type(item))
                    if known is None:
                        known = _is_ir(type(item))
                    if known:
                        children.append((item, _WalkLocation(base, obj, name, i, item), obj, name))
            else:
                known = is_ir(type(v))
                if known is None:
                    known = _is_ir(type(v))
                if known:
                    children.append((v, _WalkLocation(base, obj, name, None, v), obj, name))
        if children:
            children.reverse()
            stack.extend(children)
    return out
