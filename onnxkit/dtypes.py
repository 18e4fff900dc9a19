"""Element types (Clause 6.2, Table 5) and how each maps to numpy / ml_dtypes.

Every fact about an element type lives in the one table :data:`ELEMENT_TYPES`:
its wire tag, its name, its numpy dtype, its width in bits, and which typed-storage
field of TensorProto (Annex B.2.16, Table 7) carries it.  Everything else in onnxkit
asks this module instead of keeping a table of its own.

Tag 0 (UNDEFINED) and tags not listed in Table 5 are rejected: Clause 6.2 forbids
assigning a meaning to them.

The narrow types' dtypes (bfloat16, the 8/6/4-bit floats, the 4/2-bit integers) are ml_dtypes'
types, and importing ml_dtypes (its compiled extension) is costly for a fresh process: a row's
``dtype`` is resolved (and ml_dtypes imported) the first time it is read, so a model without a
narrow type never imports it.  :func:`from_numpy_dtype` needs no import to recognise them: an
ml_dtypes dtype can only exist once ml_dtypes is in ``sys.modules``.
"""

from __future__ import annotations

import enum
import sys
from typing import Optional

from onnxkit import records
from onnxkit import record_methods
import numpy as np

from .errors import OnnxkitTypeError


class DataType(enum.IntEnum):
    """Table 5 / Table B.19: the element type tags.  ``UNDEFINED`` is not an element type."""

    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20
    UINT4 = 21
    INT4 = 22
    FLOAT4E2M1 = 23
    FLOAT8E8M0 = 24
    UINT2 = 25
    INT2 = 26
    FLOAT6E2M3 = 27
    FLOAT6E3M2 = 28


@records.frozen
class ElementType:
    """One row of Table 5, with what onnxkit needs to store and compute with it.

    ``typed_field`` is the TensorProto field used by typed storage (Table 7 and the
    field comments of Annex B.2.16); ``bits`` is the width of one element (0 for STRING).
    ``is_float`` covers every floating-point format, the narrow ones included.
    ``numpy`` names the dtype: numpy's type (``'float32'``) or ml_dtypes' (``'ml_dtypes.bfloat16'``);
    ``dtype`` is that dtype, resolved on first read for ml_dtypes' types (importing ml_dtypes).
    """

    tag: DataType
    name: str
    numpy: str
    bits: int
    typed_field: str
    is_float: bool = False
    is_signed: bool = False
    is_complex: bool = False
    #: left unset for ml_dtypes' types until first read (``__getattr__``): a slot's read costs nothing more
    dtype: np.dtype = records.field(init=False, eq=False, repr=False)
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    def __attrs_post_init__(self) -> None:
        if not self.numpy.startswith("ml_dtypes."):
            object.__setattr__(self, "dtype", np.dtype(self.numpy))

    def __getattr__(self, attr: str):
        # only reached for an unset slot: the dtype of an ml_dtypes type not read yet
        if attr != "dtype":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")
        import ml_dtypes

        dtype = np.dtype(getattr(ml_dtypes, self.numpy[len("ml_dtypes."):]))
        object.__setattr__(self, "dtype", dtype)
        return dtype

    @property
    def is_narrow(self) -> bool:
        """True for the types of Clause 6.3 narrower than 8 bits (packed in raw storage)."""
        return 0 < self.bits < 8

    @property
    def is_integral(self) -> bool:
        return not (self.is_float or self.is_complex) and self.tag not in (DataType.STRING, DataType.BOOL)


def _row(tag, dtype, bits, field, **flags) -> ElementType:
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return ElementType(tag=tag, name=tag.name, numpy=name, bits=bits, typed_field=field, **flags)


_F, _S, _C = {"is_float": True, "is_signed": True}, {"is_signed": True}, {"is_complex": True, "is_signed": True}
#: Table 5, complete.  Typed storage per Annex B.2.16: int32_data carries every integer and
#: 8/16-bit float type narrower than 32 bits (as the unsigned integer of its bits, 6.3.4).
ELEMENT_TYPES: dict[DataType, ElementType] = {
    r.tag: r
    for r in (
        _row(DataType.FLOAT, np.float32, 32, "float_data", **_F),
        _row(DataType.UINT8, np.uint8, 8, "int32_data"),
        _row(DataType.INT8, np.int8, 8, "int32_data", **_S),
        _row(DataType.UINT16, np.uint16, 16, "int32_data"),
        _row(DataType.INT16, np.int16, 16, "int32_data", **_S),
        _row(DataType.INT32, np.int32, 32, "int32_data", **_S),
        _row(DataType.INT64, np.int64, 64, "int64_data", **_S),
        _row(DataType.STRING, np.object_, 0, "string_data"),
        _row(DataType.BOOL, np.bool_, 8, "int32_data"),
        _row(DataType.FLOAT16, np.float16, 16, "int32_data", **_F),
        _row(DataType.DOUBLE, np.float64, 64, "double_data", **_F),
        _row(DataType.UINT32, np.uint32, 32, "uint64_data"),
        _row(DataType.UINT64, np.uint64, 64, "uint64_data"),
        _row(DataType.COMPLEX64, np.complex64, 64, "float_data", **_C),
        _row(DataType.COMPLEX128, np.complex128, 128, "double_data", **_C),
        _row(DataType.BFLOAT16, "ml_dtypes.bfloat16", 16, "int32_data", **_F),
        _row(DataType.FLOAT8E4M3FN, "ml_dtypes.float8_e4m3fn", 8, "int32_data", **_F),
        _row(DataType.FLOAT8E4M3FNUZ, "ml_dtypes.float8_e4m3fnuz", 8, "int32_data", **_F),
        _row(DataType.FLOAT8E5M2, "ml_dtypes.float8_e5m2", 8, "int32_data", **_F),
        _row(DataType.FLOAT8E5M2FNUZ, "ml_dtypes.float8_e5m2fnuz", 8, "int32_data", **_F),
        _row(DataType.UINT4, "ml_dtypes.uint4", 4, "int32_data"),
        _row(DataType.INT4, "ml_dtypes.int4", 4, "int32_data", **_S),
        _row(DataType.FLOAT4E2M1, "ml_dtypes.float4_e2m1fn", 4, "int32_data", **_F),
        # FLOAT8E8M0 has no sign bit (6.3.2): it is a float format but not a signed one.
        _row(DataType.FLOAT8E8M0, "ml_dtypes.float8_e8m0fnu", 8, "int32_data", is_float=True),
        _row(DataType.UINT2, "ml_dtypes.uint2", 2, "int32_data"),
        _row(DataType.INT2, "ml_dtypes.int2", 2, "int32_data", **_S),
        _row(DataType.FLOAT6E2M3, "ml_dtypes.float6_e2m3fn", 6, "int32_data", **_F),
        _row(DataType.FLOAT6E3M2, "ml_dtypes.float6_e3m2fn", 6, "int32_data", **_F),
    )
}

#: the rows by dtype: numpy's types from the start, ml_dtypes' once ml_dtypes is imported (_narrow_dtypes)
_BY_DTYPE: dict[np.dtype, ElementType] = {e.dtype: e for e in ELEMENT_TYPES.values()
                                          if not e.numpy.startswith("ml_dtypes.")}
_BY_NAME: dict[str, ElementType] = {e.name: e for e in ELEMENT_TYPES.values()}
_NARROW_NAMES = frozenset(e.numpy for e in ELEMENT_TYPES.values() if e.numpy.startswith("ml_dtypes."))


def element_type(tag: int, where: str = "") -> ElementType:
    """The Table 5 row for ``tag``; raises :class:`OnnxkitTypeError` for 0 or an unlisted tag."""
    row = ELEMENT_TYPES.get(tag) if isinstance(tag, int) else None
    if row is None:
        at = f" at {where}" if where else ""
        if tag == 0:
            raise OnnxkitTypeError(f"element type tag 0 (UNDEFINED) is not an element type{at} (Clause 6.2)")
        raise OnnxkitTypeError(f"element type tag {tag!r} is not listed in Table 5{at} (Clause 6.2)")
    return row


def is_valid_tag(tag: int) -> bool:
    """True if ``tag`` names an element type of Table 5 (0 is not one)."""
    return tag in ELEMENT_TYPES


def from_numpy_dtype(dtype) -> ElementType:
    """The element type whose numpy dtype is ``dtype`` (``str``/``bytes`` object arrays map to STRING)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:  # numpy knows ml_dtypes' names ('bfloat16') only once it is imported
        if not (isinstance(dtype, str) and f"ml_dtypes.{dtype}" in _NARROW_NAMES):
            raise
        import ml_dtypes  # noqa: F401

        dt = np.dtype(dtype)
    if dt.kind in "USO":
        return ELEMENT_TYPES[DataType.STRING]
    row = _BY_DTYPE.get(dt.newbyteorder("=")) if dt.byteorder not in "=|" else _BY_DTYPE.get(dt)
    if row is None and _narrow_dtypes():
        row = _BY_DTYPE.get(dt.newbyteorder("=")) if dt.byteorder not in "=|" else _BY_DTYPE.get(dt)
    if row is None:
        raise OnnxkitTypeError(f"numpy dtype {dt} has no ONNX element type (Table 5)")
    return row


def _narrow_dtypes() -> bool:
    """Adds ml_dtypes' rows to ``_BY_DTYPE`` if ml_dtypes is imported (else no dtype of its exists to
    look up, and nothing is imported); True if rows were added."""
    if "ml_dtypes" not in sys.modules or len(_BY_DTYPE) == len(ELEMENT_TYPES):
        return False
    for e in ELEMENT_TYPES.values():
        _BY_DTYPE.setdefault(e.dtype, e)
    return True


def numpy_dtype(tag: int) -> np.dtype:
    """The numpy dtype of element type ``tag`` (ml_dtypes' for the narrow types, importing it)."""
    return element_type(tag).dtype


def by_name(name: str) -> ElementType:
    """The element type named ``name`` (``'FLOAT'``, ``'INT4'``, ...), case-insensitive."""
    row = _BY_NAME.get(name.upper())
    if row is None:
        raise OnnxkitTypeError(f"{name!r} is not the name of an element type of Table 5")
    return row


def tag_name(tag: Optional[int]) -> str:
    """A readable name for a tag, listed or not, for messages."""
    row = ELEMENT_TYPES.get(tag) if isinstance(tag, int) else None
    return row.name if row else f"<tag {tag}>"
