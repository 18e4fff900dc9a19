"""Model-local functions (Clause 8.4) and training information, defined when first asked for.

:class:`Function` and :class:`TrainingInfo` are :mod:`onnxkit.ir.graph`'s classes (found there
and in :mod:`onnxkit.ir` by name, ``__module__`` ``onnxkit.ir.graph``, so they pickle as before)
that a model without functions or training graphs never instantiates: a record class costs time
to define (``benchmarks/records.py``), so a session on such a model does not define them.  The
codec looks a message's class up through :mod:`onnxkit.ir` when it first decodes one
(:mod:`onnxkit.wire.adapters`); code that asks whether an object is one of them without defining
them calls :func:`onnxkit.ir.is_a`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from onnxkit import records
from onnxkit import record_methods

from . import display
from .base import wire_field

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["Function", "TrainingInfo"]


@records.define
class TrainingInfo:
    """TrainingInfoProto (Annex B.2): the training graphs a model carries beside its inference graph."""

    __module__ = "onnxkit.ir.graph"
    initialization: Optional[Graph] = None
    algorithm: Optional[Graph] = None
    initialization_binding: list = records.field(factory=list)
    update_binding: list = records.field(factory=list)
    _wire: object = wire_field()
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ


@records.define
class Function:
    """A model-local function (Clause 8.4), identified by (domain, name, overload).

    ``attribute`` lists attribute parameters without defaults, ``attribute_proto`` those with one.
    """

    __module__ = "onnxkit.ir.graph"

    name: str = ""
    input: list = records.field(factory=list)
    output: list = records.field(factory=list)
    attribute: list = records.field(factory=list)
    attribute_proto: list = records.field(factory=list)
    node: list = records.field(factory=list)
    doc_string: str = ""
    opset_import: list = records.field(factory=list)
    domain: str = ""
    overload: str = ""
    value_info: list = records.field(factory=list)
    metadata_props: list = records.field(factory=list)
    _wire: object = wire_field()
    __eq__ = record_methods.EQ

    def __repr__(self) -> str:
        name = (f"{self.domain}::" if self.domain else "") + self.name + (f":{self.overload}" if self.overload else "")
        return (f"Function({name}, inputs={display.items(self.input)}, outputs={display.items(self.output)}, "
                f"{display.plural(len(self.node), 'node')})")
