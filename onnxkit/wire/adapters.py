"""Between decoded fields and IR objects, in both directions.

Most messages map one to one onto an IR class whose attribute names are the field names
(:func:`build` calls ``cls(**fields)``).  Two are adapted:

* ``TypeProto``: its one-of group becomes a family of classes (``TensorType``, ...), the
  group member's own message giving the object and ``denotation`` / the outer wire record
  being attached to it.
* ``AttributeProto``: the value fields become ``(type, value)``.  An IR version 1 attribute
  has no ``type``; it is taken from the value field present (onnx-proto-ir3.txt).  Value
  fields that do not belong to the type are kept, encoded, as retained fields.
"""

from __future__ import annotations

from typing import Optional

from .. import ir
from ..ir.attribute import FIELD_TYPE, VALUE_FIELD, AttributeType
from ..ir.base import WireInfo
from .schema import MESSAGES

_TYPE_MEMBER = {
    "tensor_type": ir.TensorType, "sequence_type": ir.SequenceType, "map_type": ir.MapType,
    "optional_type": ir.OptionalType, "sparse_tensor_type": ir.SparseTensorType, "opaque_type": ir.OpaqueType,
}
_MEMBER_OF_CLASS = {cls: name for name, cls in _TYPE_MEMBER.items()}
_ATTR_VALUE_FIELDS = [f for f in VALUE_FIELD.values() if f != "tp"]
_ATTR_ORDER = ["f", "i", "s", "t", "g", "sparse_tensor", "floats", "ints", "strings", "tensors", "graphs",
               "sparse_tensors", "type_protos"]


class _ClassOf(dict):
    """The IR class of each message, looked up in :mod:`onnxkit.ir` when first asked for where it is
    not defined yet: the classes :mod:`onnxkit.ir` defines on first use (seldom-carried messages,
    test data's values) are defined once a message needs one, not on every decoder's import."""

    def __missing__(self, message: str):
        cls = self[message] = getattr(ir, MESSAGES[message].ir_class)
        MESSAGE_OF_CLASS.setdefault(cls, message)
        return cls


IR_CLASS = _ClassOf({name: vars(ir)[spec.ir_class] for name, spec in MESSAGES.items() if spec.ir_class in vars(ir)})
MESSAGE_OF_CLASS = {cls: name for name, cls in IR_CLASS.items()}
MESSAGE_OF_CLASS.update({cls: "TypeProto" for cls in _TYPE_MEMBER.values()})
MESSAGE_OF_CLASS[ir.UndefinedType] = "TypeProto"
_MESSAGE_OF_NAME = {spec.ir_class: name for name, spec in MESSAGES.items()}


def late_message(cls) -> Optional[str]:
    """The message of an IR class :data:`MESSAGE_OF_CLASS` does not hold yet (one :mod:`onnxkit.ir`
    defined on first use, whose objects were made in Python, not decoded); None for another class.
    Callers try ``MESSAGE_OF_CLASS.get(cls)`` first."""
    message = _MESSAGE_OF_NAME.get(getattr(cls, "__name__", None))
    if message is None or getattr(ir, MESSAGES[message].ir_class, None) is not cls:
        return None
    MESSAGE_OF_CLASS[cls] = message
    return message


def build(message: str, fields: dict, wire):
    """The IR object for a decoded message."""
    if message == "TypeProto":
        return _build_type(fields, wire)
    if message == "AttributeProto":
        return _build_attribute(fields, wire)
    return IR_CLASS[message](**fields, _wire=wire)


def builder_for(message: str):
    """A function ``(fields, wire) -> IR object`` for ``message`` (what :func:`build` does, bound once)."""
    if message == "TypeProto":
        return _build_type
    if message == "AttributeProto":
        return _build_attribute
    cls = IR_CLASS.get(message)
    if cls is None:  # a class defined on first use: looked up when the first such message is decoded
        return lambda fields, wire: IR_CLASS[message](**fields, _wire=wire)
    return lambda fields, wire: cls(**fields, _wire=wire)


def _build_type(fields: dict, wire):
    denotation = fields.pop("denotation", "")
    obj = None
    kept = None
    for name in _TYPE_MEMBER:
        if name in fields:
            obj, kept = fields[name], name
    if obj is None:
        obj = ir.UndefinedType()
    elif len(fields) > 1:  # B.2.21: exactly one member; the others are retained (12.4), the checker flags them
        wire = _retain(fields, [f for f in _TYPE_MEMBER if f in fields and f != kept], wire, "TypeProto")
    obj.denotation = denotation
    obj._outer_wire = wire
    return obj


_ATTR_META = frozenset({"name", "type", "ref_attr_name", "doc_string"})
_ATYPE = {int(t): t for t in AttributeType}


def _build_attribute(fields: dict, wire):
    atype = fields.get("type")
    vfield = VALUE_FIELD.get(atype)
    if vfield is not None and vfield in fields:
        meta = sum(1 for k in _ATTR_META if k in fields)
        if len(fields) == meta + 1:  # the common case: type and its one value field
            return ir.Attribute(name=fields.get("name", ""), type=_ATYPE[atype], value=fields[vfield],
                                ref_attr_name=fields.get("ref_attr_name", ""),
                                doc_string=fields.get("doc_string", ""), _wire=wire)
    return _build_attribute_slow(fields, wire)


#: ``encode_field(spec, value) -> bytes``, registered by :mod:`onnxkit.wire.writer` when it is
#: imported (:func:`use_field_encoder`): decoding keeps stray attribute value fields encoded, and
#: the decoder must not import the encoder (which imports this module).  The package
#: :mod:`onnxkit.wire` imports the writer, so it is set before anything is decoded.
_field_encoder = None


def use_field_encoder(encode_field) -> None:
    """Register the encoder :func:`_retain` encodes retained fields with (the writer's)."""
    global _field_encoder
    _field_encoder = encode_field


def _retain(fields: dict, names: list, wire, message: str):
    """``wire`` with ``fields[names]`` added, encoded, to its retained fields in tag order."""
    encode_field = _field_encoder
    if encode_field is None:
        raise RuntimeError("onnxkit.wire.adapters: no field encoder registered (import onnxkit.wire)")
    wire = wire or WireInfo()
    spec = MESSAGES[message]
    wire.unknown = sorted([(spec.by_name[f].tag, encode_field(spec.by_name[f], fields[f])) for f in names]
                          + wire.unknown, key=lambda t: t[0])
    return wire


def _build_attribute_slow(fields: dict, wire):
    present = [f for f in _ATTR_ORDER if f in fields]
    if "type" in fields:
        atype = fields["type"]
    elif present:  # IR version 1: no type field; the value field present says it (onnx-proto-ir3.txt)
        atype = FIELD_TYPE[present[0]]
    else:
        atype = AttributeType.UNDEFINED
    try:
        atype = AttributeType(atype)
    except ValueError:
        pass
    vfield = VALUE_FIELD.get(atype)
    value = fields.get(vfield) if vfield else None
    extra = [f for f in present if f != vfield]
    if extra or (vfield and vfield != "tp" and vfield not in fields and "ref_attr_name" not in fields):
        # fields that do not belong to the type are retained, as unknown fields are (12.4)
        wire = _retain(fields, extra, wire, "AttributeProto")
        if vfield and vfield not in fields and "ref_attr_name" not in fields and vfield != "tp":
            wire.absent = wire.absent | {vfield}
    if value is None and vfield in ("floats", "ints", "strings", "tensors", "graphs", "sparse_tensors", "type_protos") \
            and "ref_attr_name" not in fields:
        value = []
    elif value is None and vfield in ("f", "i", "s") and "ref_attr_name" not in fields:
        value = {"f": 0.0, "i": 0, "s": b""}[vfield]
    return ir.Attribute(name=fields.get("name", ""), type=atype, value=value,
                        ref_attr_name=fields.get("ref_attr_name", ""), doc_string=fields.get("doc_string", ""),
                        _wire=wire)


def wire_of(message: str, obj):
    """The wire record that belongs to ``obj`` as an encoding of ``message``."""
    if message == "TypeProto":
        return getattr(obj, "_outer_wire", None)
    return getattr(obj, "_wire", None)


def getter(message: str, obj):
    """A function ``name -> value`` reading the fields of ``message`` from ``obj``."""
    if message == "TypeProto":
        member = _MEMBER_OF_CLASS.get(type(obj))

        def get_type(name):
            if name == "denotation":
                return obj.denotation
            return obj if name == member else None

        return get_type
    if message == "AttributeProto":
        vfield = VALUE_FIELD.get(obj.type)

        def get_attr(name):
            if name in _ATTR_VALUE_FIELDS or name == "tp":
                return obj.value if name == vfield else None
            return getattr(obj, name)

        return get_attr
    return lambda name: getattr(obj, name)


def always_written(message: str, obj) -> frozenset:
    """Scalar fields the writer writes even at their default value (unless the input lacked them)."""
    if message == "AttributeProto":
        vfield = VALUE_FIELD.get(obj.type)
        out = {"name", "type"}
        if vfield in ("f", "i", "s") and not obj.ref_attr_name:
            out.add(vfield)
        return frozenset(out)
    return MANDATORY_SCALARS[message]


MANDATORY_SCALARS = {
    name: frozenset(f.name for f in spec.fields if f.label == "mandatory" and f.kind != "message")
    for name, spec in MESSAGES.items()
}
