"""Value types of Clause 6: tensor, sparse tensor, sequence, map, optional, opaque.

On the wire these are one message, ``TypeProto``, with a one-of group (Annex B.2.21);
in the IR each member of the group is its own class, all derived from :class:`Type`.
``denotation`` (Clause 6.7) is kept on every type and on every dimension.

Shapes (Clause 6.5): ``shape is None`` is *unknown rank*; ``Shape([])`` is rank 0, a
scalar.  A :class:`Dim` is an integer extent (``dim_value``), a dimension variable
(``dim_param``), or unknown (neither).
"""

from __future__ import annotations

from typing import Iterable, Optional, Union

from onnxkit import records
from onnxkit import record_methods

from .base import wire_field
from ..dtypes import tag_name

#: Element types a map key may have (Clause 6.8.2): the integral types and STRING.
MAP_KEY_TAGS = frozenset({2, 3, 4, 5, 6, 7, 12, 13, 8})


@records.define
class Dim:
    """One dimension: an extent, a dimension variable, or unknown (both None)."""

    dim_value: Optional[int] = None
    dim_param: Optional[str] = None
    denotation: str = ""
    _wire: object = wire_field()
    __eq__ = record_methods.EQ

    @property
    def value(self) -> Union[int, str, None]:
        """The extent as an int, the variable as a str, or None when unknown.

        A negative ``dim_value`` (exporters write -1 for a dynamic extent) is read as unknown
        (the checker reports it as ``negative-dim-value``); the field itself is kept as written."""
        v = self.dim_value
        if v is not None:
            return v if v >= 0 else None
        return self.dim_param if self.dim_param is not None else None

    @property
    def is_static(self) -> bool:
        return self.dim_value is not None and self.dim_value >= 0

    def __str__(self) -> str:
        v = self.value
        return "?" if v is None else str(v)

    def __repr__(self) -> str:
        return f"Dim({self.value!r})"


def to_dim(d) -> Dim:
    """A :class:`Dim` from an int, a str (a dimension variable), None (unknown) or a Dim."""
    if isinstance(d, Dim):
        return d
    if d is None:
        return Dim()
    if isinstance(d, str):
        return Dim(dim_param=d)
    return Dim(dim_value=int(d))


@records.define
class Shape:
    """An ordered sequence of dimensions (TensorShapeProto)."""

    dim: list = records.field(factory=list)
    _wire: object = wire_field()
    __eq__ = record_methods.EQ

    @classmethod
    def of(cls, dims: Iterable) -> "Shape":
        """``Shape.of([1, 'N', None])``: ints are extents, strs variables, None unknown."""
        return cls([to_dim(d) for d in dims])

    @property
    def rank(self) -> int:
        return len(self.dim)

    @property
    def values(self) -> tuple:
        """Each dimension as int, str or None."""
        return tuple(d.value for d in self.dim)

    @property
    def is_static(self) -> bool:
        return all(d.is_static for d in self.dim)

    def __len__(self) -> int:
        return len(self.dim)

    def __iter__(self):
        return iter(self.dim)

    def __getitem__(self, i):
        return self.dim[i]

    def __str__(self) -> str:
        return "[" + ", ".join(str(d) for d in self.dim) + "]"

    def __repr__(self) -> str:
        return f"Shape({self})"


def _shape_converter(v):
    if v is None or isinstance(v, Shape):
        return v
    return Shape.of(v)


@records.define
class Type:
    """Base of the value types.  ``_outer_wire`` is the wire record of the enclosing TypeProto.

    ``str()`` of a type is the IR's display form, which keeps the shapes
    (``tensor(float)[N, 3]``, ``map(int64, tensor(float))``: the spelling of the operator
    tables' type strings, with a space after a map's key); the type string onnxruntime and
    the session surface give (``NodeArg.type``, no shape) is :func:`type_string`."""
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def kind(self) -> str:
        raise NotImplementedError


@records.define
class TensorType(Type):
    """Tensor of ``elem_type`` (a Table 5 tag); ``shape`` None = unknown rank."""

    elem_type: int = 0
    shape: Optional[Shape] = records.field(default=None, converter=_shape_converter)
    denotation: str = records.field(default="", kw_only=True)
    _wire: object = wire_field()
    _outer_wire: object = records.field(default=None, eq=False, repr=False, alias="_outer_wire", kw_only=True)
    __eq__ = record_methods.EQ

    def kind(self) -> str:
        return "tensor"

    def __repr__(self) -> str:
        return f"TensorType({self})"

    def __str__(self) -> str:
        return f"tensor({tag_name(self.elem_type).lower()}){'' if self.shape is None else self.shape}"


@records.define
class SparseTensorType(Type):
    """Sparse tensor of ``elem_type``; ``shape`` None = unknown rank."""

    elem_type: int = 0
    shape: Optional[Shape] = records.field(default=None, converter=_shape_converter)
    denotation: str = records.field(default="", kw_only=True)
    _wire: object = wire_field()
    _outer_wire: object = records.field(default=None, eq=False, repr=False, alias="_outer_wire", kw_only=True)
    __eq__ = record_methods.EQ

    def kind(self) -> str:
        return "sparse_tensor"

    def __repr__(self) -> str:
        return f"SparseTensorType({self})"

    def __str__(self) -> str:
        return f"sparse_tensor({tag_name(self.elem_type).lower()}){'' if self.shape is None else self.shape}"


@records.define
class SequenceType(Type):
    """Homogeneous sequence of ``elem_type`` values (Clause 6.8.1)."""

    elem_type: Optional[Type] = None
    denotation: str = records.field(default="", kw_only=True)
    _wire: object = wire_field()
    _outer_wire: object = records.field(default=None, eq=False, repr=False, alias="_outer_wire", kw_only=True)
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def kind(self) -> str:
        return "sequence"

    def __str__(self) -> str:
        return f"seq({self.elem_type})"


@records.define
class MapType(Type):
    """Map from ``key_type`` (integral or STRING tag, Clause 6.8.2) to ``value_type`` values."""

    key_type: int = 0
    value_type: Optional[Type] = None
    denotation: str = records.field(default="", kw_only=True)
    _wire: object = wire_field()
    _outer_wire: object = records.field(default=None, eq=False, repr=False, alias="_outer_wire", kw_only=True)
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def kind(self) -> str:
        return "map"

    def __str__(self) -> str:
        return f"map({tag_name(self.key_type).lower()}, {self.value_type})"


@records.define
class OptionalType(Type):
    """Optional of a tensor, sparse tensor, sequence or map type (Clause 6.8.3)."""

    elem_type: Optional[Type] = None
    denotation: str = records.field(default="", kw_only=True)
    _wire: object = wire_field()
    _outer_wire: object = records.field(default=None, eq=False, repr=False, alias="_outer_wire", kw_only=True)
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def kind(self) -> str:
        return "optional"

    def __str__(self) -> str:
        return f"optional({self.elem_type})"


@records.define
class OpaqueType(Type):
    """Opaque type (Clause 6.8.4): ``name`` required; empty ``domain`` = default domain."""

    domain: str = ""
    name: str = ""
    denotation: str = records.field(default="", kw_only=True)
    _wire: object = wire_field()
    _outer_wire: object = records.field(default=None, eq=False, repr=False, alias="_outer_wire", kw_only=True)
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def kind(self) -> str:
        return "opaque"

    def __str__(self) -> str:
        return f"opaque({self.domain}::{self.name})" if self.domain else f"opaque({self.name})"


@records.define
class UndefinedType(Type):
    """A TypeProto with no member of its one-of group set: not a valid type (B.2.21), kept for fidelity."""

    denotation: str = records.field(default="", kw_only=True)
    _outer_wire: object = records.field(default=None, eq=False, repr=False, alias="_outer_wire", kw_only=True)
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def kind(self) -> str:
        return "undefined"

    def __str__(self) -> str:
        return "undefined"


def tensor_type(elem_type: int, shape=None, denotation: str = "") -> TensorType:
    """Shorthand: ``tensor_type(DataType.FLOAT, [1, 'N'])``."""
    return TensorType(int(elem_type), shape, denotation=denotation)


def type_string(t: Optional[Type]) -> str:
    """The type as onnxruntime spells it (``NodeArg.type``, ``OrtValue.data_type()``; onnx's
    ``DataTypeUtils::ToString``), shapes left out: ``tensor(float)``, ``sparse_tensor(int64)``,
    ``seq(tensor(int64))``, ``map(string,tensor(float))`` (no space after the key),
    ``optional(seq(tensor(bfloat16)))``, ``opaque(domain,name)``; ``undefined`` for a TypeProto
    with no member set, ``unknown`` where there is no type (None).  The one implementation:
    tests/structure/test_one_way.py checks it against onnxruntime where that is installed."""
    if isinstance(t, TensorType):
        return f"tensor({tag_name(t.elem_type).lower()})"
    if isinstance(t, SparseTensorType):
        return f"sparse_tensor({tag_name(t.elem_type).lower()})"
    if isinstance(t, SequenceType):
        return f"seq({type_string(t.elem_type)})"
    if isinstance(t, MapType):
        return f"map({tag_name(t.key_type).lower()},{type_string(t.value_type)})"
    if isinstance(t, OptionalType):
        return f"optional({type_string(t.elem_type)})"
    if isinstance(t, OpaqueType):
        return f"opaque({t.domain},{t.name})" if t.domain else f"opaque({t.name})"
    if isinstance(t, UndefinedType):
        return "undefined"
    return "unknown"
