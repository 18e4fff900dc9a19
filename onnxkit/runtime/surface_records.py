"""onnxruntime's description records that a session makes only when asked: what
:meth:`~onnxkit.InferenceSession.get_modelmeta`, ``get_inputs`` / ``get_outputs`` and
``get_provider_graph_assignment_info`` return.

They are defined here, on first use, so that a session that is never asked defines none of them
(a record class costs time to define: :mod:`onnxkit.records`); :mod:`.options` gives
:class:`ModelMetadata` and :class:`NodeArg` by name and :mod:`.session_ort`
:class:`OrtEpAssignedNode` (their module ``__getattr__``), as do :mod:`onnxkit.runtime` and
:mod:`onnxkit`.
"""

from __future__ import annotations

from typing import Any, Optional

from onnxkit import record_methods, records

__all__ = ["ModelMetadata", "NodeArg", "OrtEpAssignedNode"]


@records.frozen
class ModelMetadata:
    """What :meth:`InferenceSession.get_modelmeta` returns (onnxruntime's ``ModelMetadata``)."""

    producer_name: str = ""
    graph_name: str = ""
    domain: str = ""
    description: str = ""
    graph_description: str = ""
    version: int = 0
    custom_metadata_map: dict = records.field(factory=dict)
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH


@records.frozen
class NodeArg:
    """A graph input or output as onnxruntime describes it: name, type string, shape.

    ``shape`` lists ints (extents), strs (dimension variables) and None (unknown), or is
    None for an unknown rank.
    """

    name: str
    type: str
    shape: Optional[list]
    ir_type: Any = records.field(default=None, repr=False, eq=False)
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH


@records.frozen
class OrtEpAssignedNode:
    """A node as :meth:`OrtSessionSurface.get_provider_graph_assignment_info` reports it."""

    name: str
    domain: str
    op_type: str
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH
