"""What every IR object carries beside its content: how it came off the wire.

Clause 12.4 lets a consumer keep the octets of fields it does not recognise; onnxkit does,
and writes them back unchanged on save.  An object decoded from bytes also remembers which
scalar fields were present with their default value (proto2 presence), so that
``save(load(b)) == b`` for every model written in tag order.  Objects built in Python have
no wire record; the writer then writes every mandatory field and every non-default one.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records
from onnxkit import record_methods
import numpy as np


@records.define(eq=False)
class WireInfo:
    """Codec bookkeeping of one decoded message; never part of equality.

    ``unknown``: ``(tag, octets)`` of each field (key and payload) the schema does not define,
    or that is deprecated (Annex B.1), in order of appearance.  The writer puts them back
    among the known fields in tag order.
    ``explicit``: names of scalar fields present in the input with their default value.
    ``absent``: names of mandatory fields absent from the input (so a re-encode keeps them absent).
    """

    unknown: list = records.field(factory=list)
    explicit: frozenset = frozenset()
    absent: frozenset = frozenset()
    __repr__ = record_methods.REPR


def wire_field():
    """The ``_wire`` field every IR class has (init keyword ``_wire``)."""
    return records.field(default=None, eq=False, repr=False, alias="_wire")


def _array_eq(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b))


#: attrs' ``eq`` takes a key; a two-argument equality is wrapped once (made per class, not per field)
_ARRAY_EQ = records.cmp_using(eq=_array_eq, require_same_type=False, class_name="ArrayEq")


def array_field(dtype):
    """A record field holding a 1-D numpy array (packed TensorProto data), compared by value.

    A list is accepted too (the writer converts); the reader always gives arrays."""
    empty = np.zeros(0, dtype=dtype)
    empty.flags.writeable = False  # shared by every default: never written in place
    return records.field(
        default=empty,
        eq=_ARRAY_EQ,
        repr=lambda a: f"array(len={a.size})",
    )


def _bytes_eq(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return bytes(a) == bytes(b) if len(a) < 64 else memoryview(a).cast("B") == memoryview(b).cast("B")


_BYTES_EQ = records.cmp_using(eq=_bytes_eq, require_same_type=False, class_name="BytesEq")


def bytes_field(optional: bool = True):
    """A record field holding octets (bytes or a zero-copy memoryview), compared by content."""
    return records.field(
        default=None if optional else b"",
        eq=_BYTES_EQ,
        repr=lambda v: "None" if v is None else f"<{len(v)} octets>",
    )


def unknown_fields(obj) -> list:
    """The retained unknown fields of ``obj`` (empty for objects built in Python)."""
    w: Optional[WireInfo] = getattr(obj, "_wire", None)
    return w.unknown if w is not None else []
