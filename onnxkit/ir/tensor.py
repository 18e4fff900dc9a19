"""Tensors as carried in a model (TensorProto, SparseTensorProto; Clauses 6.3.4, 13).

A :class:`Tensor` keeps its storage exactly as it came off the wire (raw octets, or one
typed field, or an external reference) so that a re-encode is byte-exact and nothing is
copied on load: ``raw_data`` is a view of the input buffer.  :meth:`Tensor.numpy` turns
the storage into a numpy array (read-only view where the layout allows);
:meth:`Tensor.from_numpy` builds a tensor from an array.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records
from onnxkit import record_methods
import numpy as np

from ..tensor_data import raw_fields, tensor_to_numpy, typed_fields
from .base import array_field, bytes_field, wire_field


@records.define
class StringStringEntry:
    """A key/value pair (StringStringEntryProto): metadata and external data references."""

    key: str = ""
    value: str = ""
    _wire: object = wire_field()
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ


class DataLocation:
    """Table B.20."""

    DEFAULT = 0
    EXTERNAL = 1


@records.define
class Tensor:
    """A dense tensor (TensorProto).  Fields are those of Annex B.2.16.

    Exactly one storage is used: ``raw_data`` (octets, Clause 6.3.4 raw storage), one typed
    field (``float_data``, ``int32_data``, ``string_data``, ``int64_data``, ``double_data``,
    ``uint64_data``), or external data (``data_location == EXTERNAL``, Clause 13).
    """

    dims: list = records.field(factory=list)
    data_type: int = 0
    segment: Optional[Segment] = None
    float_data: np.ndarray = array_field(np.float32)
    int32_data: np.ndarray = array_field(np.int32)
    string_data: list = records.field(factory=list)
    int64_data: np.ndarray = array_field(np.int64)
    name: str = ""
    doc_string: str = ""
    raw_data: Optional[object] = bytes_field()
    external_data: list = records.field(factory=list)
    data_location: int = 0
    double_data: np.ndarray = array_field(np.float64)
    uint64_data: np.ndarray = array_field(np.uint64)
    metadata_props: list = records.field(factory=list)
    _wire: object = wire_field()
    #: Where external data is resolved from (set by :func:`onnxkit.load`; not part of the model, 13.2 NOTE).
    base_dir: Optional[str] = records.field(default=None, eq=False, repr=False, kw_only=True)
    #: The external data options the loader applied (:class:`onnxkit.external.ExternalDataOptions`).
    external_options: Optional[object] = records.field(default=None, eq=False, repr=False, kw_only=True)
    __eq__ = record_methods.EQ

    @property
    def shape(self) -> tuple:
        return tuple(int(d) for d in self.dims)

    def __repr__(self) -> str:
        from ..dtypes import tag_name

        where = "external" if self.is_external else ("raw" if self.raw_data is not None else "typed")
        return f"Tensor({self.name!r}, {tag_name(self.data_type).lower()}{list(self.shape)}, {where})"

    def __reduce__(self):
        """A tensor pickles with its contents copied out of the loaded buffer (a memoryview does not pickle)."""
        state = {f.name: getattr(self, f.name) for f in records.fields(type(self)) if f.name != "_wire"}
        if self.raw_data is not None and not isinstance(self.raw_data, bytes):
            state["raw_data"] = bytes(self.raw_data)
        return (_tensor_from_state, (state,))

    @property
    def size(self) -> int:
        n = 1
        for d in self.dims:
            n *= int(d)
        return n

    @property
    def is_external(self) -> bool:
        return self.data_location == DataLocation.EXTERNAL

    def numpy(self) -> np.ndarray:
        """The contents as a numpy array of this tensor's dtype (Clause 6.2 table).

        Raw storage gives a read-only view of the loaded bytes (no copy); typed storage is
        converted per Table 7.  External contents are read through the storage the tensor
        was loaded with (Clause 13); see :mod:`onnxkit.external`.
        """
        return tensor_to_numpy(self)

    @classmethod
    def from_numpy(cls, array, name: str = "", data_type: Optional[int] = None) -> "Tensor":
        """A tensor holding ``array``: raw storage, or ``string_data`` for STRING
        (:func:`numpy_to_tensor`)."""
        return cls(name=name, **raw_fields(array, data_type))


def numpy_to_tensor(array, name: str = "", data_type: Optional[int] = None) -> Tensor:
    """A :class:`Tensor` of shape ``array.shape`` holding ``array`` in raw storage
    (:func:`onnxkit.tensor_data.raw_fields`: ``raw_data``, or ``string_data`` for STRING; with
    ``data_type`` the values are converted to it, never reinterpreted)."""
    return Tensor(name=name, **raw_fields(array, data_type))


def numpy_to_typed_tensor(array, name: str = "", data_type: Optional[int] = None) -> Tensor:
    """A :class:`Tensor` holding ``array`` in typed storage (:func:`onnxkit.tensor_data.typed_fields`)."""
    return Tensor(name=name, **typed_fields(array, data_type))


def _tensor_from_state(state: dict) -> "Tensor":
    base_dir = state.pop("base_dir", None)
    options = state.pop("external_options", None)
    return Tensor(**state, base_dir=base_dir, external_options=options)


#: classes :mod:`onnxkit.ir.seldom` defines on first use, still found here under their names
_IN_SELDOM = ("Segment",)


def __getattr__(name: str):
    if name in _IN_SELDOM:
        from . import seldom

        return getattr(seldom, name)
    if name == "SparseTensor":  # defined by onnxkit.ir.sparse on first use
        from . import sparse

        return sparse.SparseTensor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
