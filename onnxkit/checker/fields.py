"""Annex B obligations, checked per message at the model's own IR version (Annex B.1, 12.6, 14).

Detects, for every message of the model (see :func:`check_object`):

* ``mandatory-field-missing`` (Annex B.1): a field marked mandatory is absent.  Obligations
  are those in force at the model's IR version, which Annex B does not record (Annex C);
  onnxkit applies these rules, each traced to the schema text the annex was derived from:

  - ``AttributeProto.type`` is mandatory from IR version 2 (onnx-proto-ir3.txt: "For 0.0.1
    versions of the IR, this field was not defined"); absent at IR 1 is conforming.
  - ``AttributeProto.f``: the annex marks it mandatory because the schema says "Exactly
    ONE of the following fields must be present"; onnxkit reads that as "the field carrying
    the value of the attribute's type is present", reported as ``attribute-value-missing``.
  - ``OperatorSetIdProto.domain``: "The empty string or absence of this field implies the
    operator set defined as part of the ONNX specification" - absence is the default domain.
  - ``ValueInfoProto.type``: mandatory for the top-level graph's inputs and outputs
    (``missing-type``, 6.5.1) and for ``value_info`` entries of graphs; a subgraph's inputs
    and outputs MAY omit it (7.1), and so may a function body (8.4).
  - Every other mandatory field of Table B.x: whenever its message is present.
  - ``TensorShapeProto.Dimension``: B.2.20 says exactly one of dim_value, dim_param SHALL be
    present, but 6.5.1 and 6.5.2 define a dimension with neither as *unknown*; the body text
    is specific and normative, so such a dimension is accepted.  (The same one-of in
    ``SimpleShardedDimProto``, B.2.9, has no such exception and is checked in metadata.py.)

* ``deprecated-field`` (warning, Annex B.1): a deprecated field (``AttributeProto.tp``) is present.
* ``reserved-field`` (12.6): a tag recorded as reserved is used.
* ``attribute-type-invalid``, ``attribute-type-mismatch``, ``attribute-value-missing``
  (Annex B.2.2): an attribute's ``type`` is UNDEFINED or unknown, does not match the value
  field present (or several are present), or its value field is absent.
* ``ir-version-feature`` (warning, 14.1.2 Table 12): a field introduced after the model's
  IR version (model-local functions, optional and sparse tensor types before IR 8, function
  attribute defaults before 9, overloads and non-model metadata before 10, device
  configurations before 11, opset imports and node domains before 3).
"""

from __future__ import annotations

import numpy as np

from .. import ir
from ..ir.attribute import VALUE_FIELD, AttributeType
from ..wire.adapters import MESSAGE_OF_CLASS, late_message
from ..wire.schema import DEPRECATED, MESSAGES
from .context import Context

_MEMBER_MESSAGE = {
    ir.TensorType: "TypeProto.Tensor", ir.SequenceType: "TypeProto.Sequence", ir.MapType: "TypeProto.Map",
    ir.OptionalType: "TypeProto.Optional", ir.SparseTensorType: "TypeProto.SparseTensor", ir.OpaqueType: "TypeProto.Opaque",
}
#: Tags Annex B records as reserved (12.6).
RESERVED = {"AttributeProto": {12, 16, 17, 18, 19}, "GraphProto": {3, 4, 6, 7, 8, 9},
            "TypeProto.Opaque": {3}, "FunctionProto": {2, 3}}
_DEPRECATED_TAGS = {name: {f.tag: f.name for f in spec.fields if f.label == DEPRECATED} for name, spec in MESSAGES.items()}
_ATTR_SPEC = MESSAGES["AttributeProto"]
#: AttributeProto tags that carry a value (any of them besides the one of its type is a mismatch).
_VALUE_TAGS = {_ATTR_SPEC.by_name[f].tag: f for f in VALUE_FIELD.values() if f != "tp"}
_SCALAR_OR_MESSAGE = {"f", "i", "s", "t", "g", "sparse_tensor"}


class _Kinds(dict):
    """The kinds of :data:`_KIND`; SPARSE_TENSOR's looked up when first asked for (the class
    :mod:`onnxkit.ir.sparse` defines on first use)."""

    def __missing__(self, atype):
        if atype != AttributeType.SPARSE_TENSOR:
            raise KeyError(atype)
        kinds = self[atype] = (ir.SparseTensor,)
        return kinds


#: Python value kinds by attribute type, for attributes built in Python (no wire record).
_KIND = _Kinds({
    AttributeType.FLOAT: (float, int, np.floating), AttributeType.INT: (int, np.integer), AttributeType.STRING: (bytes, str),
    AttributeType.TENSOR: (ir.Tensor,), AttributeType.GRAPH: (ir.Graph,), AttributeType.TYPE_PROTO: (ir.Type,),
})
_LIST_OF = {AttributeType.FLOATS: AttributeType.FLOAT, AttributeType.INTS: AttributeType.INT,
            AttributeType.STRINGS: AttributeType.STRING, AttributeType.TENSORS: AttributeType.TENSOR,
            AttributeType.GRAPHS: AttributeType.GRAPH, AttributeType.SPARSE_TENSORS: AttributeType.SPARSE_TENSOR,
            AttributeType.TYPE_PROTOS: AttributeType.TYPE_PROTO}


def _wires(obj):
    if isinstance(obj, ir.Type):
        yield "TypeProto", getattr(obj, "_outer_wire", None)
        member = _MEMBER_MESSAGE.get(type(obj))
        if member:
            yield member, getattr(obj, "_wire", None)
        return
    message = MESSAGE_OF_CLASS.get(type(obj)) or late_message(type(obj))
    if message:
        yield message, getattr(obj, "_wire", None)


def check_object(ctx: Context, obj, loc: str) -> None:
    """The Annex B checks of one message (its fields only; the walk visits the children)."""
    for message, wire in _wires(obj):
        if wire is None:
            continue
        for name in sorted(wire.absent):
            if _exempt(ctx, message, name):
                continue
            ctx.emit("mandatory-field-missing", f"{message}.{name} is mandatory (Annex B) but absent", loc or "model")
        for tag, _ in wire.unknown:
            dep = _DEPRECATED_TAGS.get(message, {}).get(tag)
            if dep is not None:
                ctx.emit("deprecated-field", f"{message}.{dep} (tag {tag}) is deprecated; a consumer ignores it", loc)
            elif tag in RESERVED.get(message, ()):
                ctx.emit("reserved-field", f"tag {tag} of {message} is reserved and SHALL NOT be used", loc)
    if isinstance(obj, ir.Attribute):
        _check_attribute(ctx, obj, loc)
    _features(ctx, obj, loc)


def _exempt(ctx: Context, message: str, name: str) -> bool:
    if message == "AttributeProto":
        return name != "name" and not (name == "type" and ctx.ir >= 2)
    if message == "OperatorSetIdProto" and name == "domain":
        return True
    return False


def _check_attribute(ctx: Context, a: ir.Attribute, loc: str) -> None:
    wire = a._wire
    try:
        atype = AttributeType(a.type)
    except ValueError:
        atype = None
    if atype is None or atype == AttributeType.UNDEFINED:
        if not (wire is not None and "type" in wire.absent and a.ref_attr_name):
            ctx.emit("attribute-type-invalid", f"attribute {a.name!r} has type {a.type}, "
                     + ("UNDEFINED" if a.type == 0 else "not a value of Table B.4"), loc)
        return
    vfield = VALUE_FIELD[atype]
    if wire is not None:
        extra = sorted({_VALUE_TAGS[t] for t, _ in wire.unknown if t in _VALUE_TAGS})
        if extra:
            what = "declares" if "type" not in wire.absent else "(IR 1, no type field) carries"
            besides = "" if vfield in wire.absent else f" besides {vfield!r}"
            ctx.emit("attribute-type-mismatch", f"attribute {a.name!r} {what} type {atype.name}, whose value is in "
                     f"field {vfield!r}, but carries value field(s) {', '.join(extra)}{besides}; exactly one value "
                     "field, the one of its type, is allowed", loc)
            return
        if vfield in wire.absent and vfield in _SCALAR_OR_MESSAGE and not a.ref_attr_name:
            ctx.emit("attribute-value-missing", f"attribute {a.name!r} has type {atype.name} but its value field "
                     f"{vfield!r} is absent", loc)
            return
    if a.ref_attr_name:
        return
    if atype == AttributeType.TYPE_PROTO and a.value is None:
        ctx.emit("attribute-value-missing", f"attribute {a.name!r} has type TYPE_PROTO but no type value", loc)
        return
    if wire is None and not _value_matches(atype, a.value):
        ctx.emit("attribute-type-mismatch", f"attribute {a.name!r} declares type {atype.name} but holds a "
                 f"{type(a.value).__name__}", loc)


def _value_matches(atype: AttributeType, value) -> bool:
    element = _LIST_OF.get(atype)
    if element is not None:
        if not isinstance(value, list):
            return False
        kinds = _KIND[element]  # the distinct element types, found at C speed (lists can be huge)
        return all(issubclass(t, kinds) and not (element != AttributeType.INT and t is bool) for t in set(map(type, value)))
    kinds = _KIND[atype]
    return isinstance(value, kinds) and not (atype != AttributeType.INT and isinstance(value, bool))


def _features(ctx: Context, obj, loc: str) -> None:
    """``ir-version-feature``: fields introduced after the model's IR version (Table 12, IR 3 schema)."""
    if ctx.ir >= 14:
        return
    if isinstance(obj, ir.Model):
        if obj.functions:
            ctx.feature("model-local functions", 8, "model")
        if obj.configuration:
            ctx.feature("device configurations", 11, "model")
        if obj.opset_import:
            ctx.feature("operator set imports (opset_import)", 3, "model")
    elif isinstance(obj, ir.Node):
        if obj.overload:
            ctx.feature("NodeProto.overload", 10, loc)
        if obj.device_configurations:
            ctx.feature("device configurations", 11, loc)
        if obj.domain:
            ctx.feature("NodeProto.domain", 3, loc)
    elif ir.is_a(obj, "Function"):
        if obj.attribute_proto:
            ctx.feature("function attribute default values (attribute_proto)", 9, loc)
        if obj.overload:
            ctx.feature("FunctionProto.overload", 10, loc)
    elif isinstance(obj, (ir.SparseTensorType, ir.OptionalType)):
        ctx.feature(f"the {obj.kind().replace('_', ' ')} type", 8, loc)
    if not isinstance(obj, ir.Model) and getattr(obj, "metadata_props", None):
        ctx.feature("metadata_props outside ModelProto", 10, loc)
