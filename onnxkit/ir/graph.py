"""Model, graph, node, function and the smaller messages around them (Clauses 5, 7, 8.4; Annex B.2-B.3).

Field names are those of Annex B, so that anyone who knows ONNX finds them: ``graph.node``,
``graph.initializer``, ``model.opset_import``, ``node.attribute``.  Repeated fields are lists.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records
from onnxkit import record_methods

from ..domains import normalize_domain, opset_map
from . import display
from .base import wire_field


@records.define
class OperatorSetId:
    """An operator set import (Clause 5.3.2): ``domain`` ('' = ai.onnx) and ``version``."""

    domain: str = ""
    version: int = 0
    _wire: object = wire_field()
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ


@records.define
class ValueInfo:
    """Name and type of a value (ValueInfoProto); ``type`` None when not declared."""

    name: str = ""
    type: Optional[object] = None
    doc_string: str = ""
    metadata_props: list = records.field(factory=list)
    _wire: object = wire_field()
    __eq__ = record_methods.EQ

    def __repr__(self) -> str:
        return f"ValueInfo({display.value_info(self)})"


@records.define
class Node:
    """One invocation of an operator (Clause 7.3).  ``''`` in ``input``/``output`` = unsupplied (7.3.3)."""

    input: list = records.field(factory=list)
    output: list = records.field(factory=list)
    name: str = ""
    op_type: str = ""
    domain: str = ""
    overload: str = ""
    attribute: list = records.field(factory=list)
    doc_string: str = ""
    metadata_props: list = records.field(factory=list)
    device_configurations: list = records.field(factory=list)
    _wire: object = wire_field()
    __eq__ = record_methods.EQ

    def attr(self, name: str, default=None):
        """The value of attribute ``name``, or ``default`` when the node has none of that name."""
        for a in self.attribute:
            if a.name == name:
                return a.value
        return default

    @property
    def attributes(self) -> dict:
        """Attributes by name (the last one wins where names repeat; the checker reports that)."""
        return {a.name: a for a in self.attribute}

    def __repr__(self) -> str:
        op = (f"{self.domain}::" if self.domain else "") + self.op_type
        name = f", name={self.name!r}" if self.name else ""
        attrs_ = f", attributes={display.items(a.name for a in self.attribute)}" if self.attribute else ""
        return (f"Node({op}{name}, inputs={display.items(self.input)}, outputs={display.items(self.output)}"
                f"{attrs_})")


@records.define
class Graph:
    """A graph (Clause 7): nodes in order, inputs, outputs, initializers, value_info."""

    node: list = records.field(factory=list)
    name: str = ""
    initializer: list = records.field(factory=list)
    sparse_initializer: list = records.field(factory=list)
    doc_string: str = ""
    input: list = records.field(factory=list)
    output: list = records.field(factory=list)
    value_info: list = records.field(factory=list)
    quantization_annotation: list = records.field(factory=list)
    metadata_props: list = records.field(factory=list)
    _wire: object = wire_field()
    __eq__ = record_methods.EQ

    def __repr__(self) -> str:
        return (f"Graph({self.name!r}, inputs={display.items(display.value_info(v) for v in self.input)}, "
                f"outputs={display.items(display.value_info(v) for v in self.output)}, "
                f"{display.plural(len(self.node), 'node')}, {display.plural(len(self.initializer), 'initializer')})")


@records.define
class Model:
    """A model (Clause 5.3): IR version, operator set imports, the top-level graph and the rest."""

    ir_version: int = 0
    opset_import: list = records.field(factory=list)
    producer_name: str = ""
    producer_version: str = ""
    domain: str = ""
    model_version: int = 0
    doc_string: str = ""
    graph: Optional[Graph] = None
    metadata_props: list = records.field(factory=list)
    training_info: list = records.field(factory=list)
    functions: list = records.field(factory=list)
    configuration: list = records.field(factory=list)
    _wire: object = wire_field()
    #: Directory the model was loaded from; external data resolves against it (13.2 NOTE).
    base_dir: Optional[str] = records.field(default=None, eq=False, repr=False, kw_only=True)
    __eq__ = record_methods.EQ

    def __repr__(self) -> str:
        opsets = {o.domain: int(o.version) for o in self.opset_import}
        producer = " ".join(p for p in (self.producer_name, self.producer_version) if p)
        graph = "None" if self.graph is None else display.graph_summary(self.graph)
        funcs = f", {display.plural(len(self.functions), 'function')}" if self.functions else ""
        return f"Model(ir_version={self.ir_version}, opsets={opsets}, producer={producer!r}, graph={graph}{funcs})"

    def opset_version(self, domain: str) -> Optional[int]:
        """The imported version of ``domain`` ('' and 'ai.onnx' are the default domain), or None."""
        return opset_map(self.opset_import).get(normalize_domain(domain))


#: classes :mod:`onnxkit.ir.seldom` defines on first use, still found here under their names
_IN_SELDOM = ("IntIntListEntry", "SimpleShardedDim", "ShardedDim", "ShardingSpec", "NodeDeviceConfiguration",
               "DeviceConfiguration", "TensorAnnotation", "OperatorInfo", "OperatorSetInfo")
#: classes :mod:`onnxkit.ir.function` defines on first use (this module's by name and ``__module__``)
_IN_FUNCTION = ("Function", "TrainingInfo")


def __getattr__(name: str):
    if name in _IN_SELDOM:
        from . import seldom

        return getattr(seldom, name)
    if name in _IN_FUNCTION:
        from . import function

        return getattr(function, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
