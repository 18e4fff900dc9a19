"""The value messages of Annex B.4 (SequenceProto, MapProto, OptionalProto) as used by test data files."""

from __future__ import annotations

from typing import Optional

from onnxkit import records

from .base import wire_field


class ValueKind:
    """Tables B.38 / B.41."""

    UNDEFINED = 0
    TENSOR = 1
    SPARSE_TENSOR = 2
    SEQUENCE = 3
    MAP = 4
    OPTIONAL = 5


@records.define
class SequenceData:
    name: str = ""
    elem_type: int = 0
    tensor_values: list = records.field(factory=list)
    sparse_tensor_values: list = records.field(factory=list)
    sequence_values: list = records.field(factory=list)
    map_values: list = records.field(factory=list)
    optional_values: list = records.field(factory=list)
    _wire: object = wire_field()


@records.define
class MapData:
    name: str = ""
    key_type: int = 0
    keys: list = records.field(factory=list)
    string_keys: list = records.field(factory=list)
    values: Optional[SequenceData] = None
    _wire: object = wire_field()


@records.define
class OptionalData:
    name: str = ""
    elem_type: int = 0
    tensor_value: Optional[object] = None
    sparse_tensor_value: Optional[object] = None
    sequence_value: Optional[SequenceData] = None
    map_value: Optional[MapData] = None
    optional_value: Optional["OptionalData"] = None
    _wire: object = wire_field()
