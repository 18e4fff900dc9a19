"""Annex B as one declarative table: 33 messages (35 definitions with the two enums), 166 fields.

Every message is a :class:`MessageSpec` listing its fields as :class:`FieldSpec`
(name, tag, scalar type, obligation, packed form).  The reader and the writer are driven
by this table alone; the IR class a message maps to is named beside it.  ``tests/
test_wire_schema.py`` checks the table against the text of Annex B itself.

Scalar types (Clause 12.7 NOTE: seven in all, enums being int32): int32, int64, uint64,
float, double, string, bytes; and ``message`` for embedded messages.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records
from onnxkit import record_methods

#: Wire type of each scalar type (Table 10).
WIRE_TYPE = {"int32": 0, "int64": 0, "uint64": 0, "enum": 0, "float": 5, "double": 1,
             "string": 2, "bytes": 2, "message": 2}
#: Default value of each scalar type, for the presence rules of the writer.
DEFAULTS = {"int32": 0, "int64": 0, "uint64": 0, "enum": 0, "float": 0.0, "double": 0.0, "string": "", "bytes": b""}

MANDATORY, OPTIONAL, REPEATED, ONEOF, DEPRECATED = "mandatory", "optional", "repeated", "oneof", "deprecated"


@records.define
class FieldSpec:
    """One row of an Annex B table.

    ``kind``: scalar type or 'message'; ``msg``: embedded message name; ``label``: obligation;
    ``packed``: Annex B records the packed form; ``array``: the IR holds a numpy array
    (TensorProto's packed data fields); ``group``: the one-of group of a ONEOF field.
    """

    name: str
    tag: int
    kind: str
    label: str
    msg: Optional[str] = None
    packed: bool = False
    array: Optional[str] = None
    group: Optional[str] = None
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    @property
    def wire_type(self) -> int:
        return WIRE_TYPE[self.kind]

    @property
    def repeated(self) -> bool:
        return self.label == REPEATED

    @property
    def packable(self) -> bool:
        return self.repeated and self.wire_type != 2


@records.define
class MessageSpec:
    """One Annex B message and the IR class it decodes to (dotted name under onnxkit.ir)."""

    name: str
    ir_class: str
    fields: list
    by_tag: dict = records.field(factory=dict)
    by_name: dict = records.field(factory=dict)
    #: Fields in increasing tag order: the order the writer uses (Clause 12.3.2).
    write_order: list = records.field(factory=list)
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def __attrs_post_init__(self):
        self.by_tag = {f.tag: f for f in self.fields}
        self.by_name = {f.name: f for f in self.fields}
        self.write_order = sorted(self.fields, key=lambda f: f.tag)


def _f(name, tag, kind, label=OPTIONAL, msg=None, packed=False, array=None, group=None):
    if kind not in WIRE_TYPE:
        msg, kind = kind, "message"
    return FieldSpec(name, tag, kind, label, msg, packed, array, group)


M, O, R, D = MANDATORY, OPTIONAL, REPEATED, DEPRECATED


def _oneof(group, *fields):
    for f in fields:
        f.label, f.group = ONEOF, group
    return list(fields)


SSE = "StringStringEntryProto"

MESSAGES: dict[str, MessageSpec] = {m.name: m for m in [
    MessageSpec("AttributeProto", "Attribute", [
        _f("name", 1, "string", M), _f("ref_attr_name", 21, "string"), _f("doc_string", 13, "string"),
        _f("type", 20, "enum", M), _f("f", 2, "float", M), _f("i", 3, "int64"), _f("s", 4, "bytes"),
        _f("t", 5, "TensorProto"), _f("g", 6, "GraphProto"), _f("sparse_tensor", 22, "SparseTensorProto"),
        _f("tp", 14, "TypeProto", D), _f("floats", 7, "float", R), _f("ints", 8, "int64", R),
        _f("strings", 9, "bytes", R), _f("tensors", 10, "TensorProto", R), _f("graphs", 11, "GraphProto", R),
        _f("sparse_tensors", 23, "SparseTensorProto", R), _f("type_protos", 15, "TypeProto", R)]),
    MessageSpec("ValueInfoProto", "ValueInfo", [
        _f("name", 1, "string", M), _f("type", 2, "TypeProto", M), _f("doc_string", 3, "string"),
        _f("metadata_props", 4, SSE, R)]),
    MessageSpec("NodeProto", "Node", [
        _f("input", 1, "string", R), _f("output", 2, "string", R), _f("name", 3, "string"),
        _f("op_type", 4, "string"), _f("domain", 7, "string"), _f("overload", 8, "string"),
        _f("attribute", 5, "AttributeProto", R), _f("doc_string", 6, "string"),
        _f("metadata_props", 9, SSE, R), _f("device_configurations", 10, "NodeDeviceConfigurationProto", R)]),
    MessageSpec("IntIntListEntryProto", "IntIntListEntry", [
        _f("key", 1, "int64"), _f("value", 2, "int64", R)]),
    MessageSpec("NodeDeviceConfigurationProto", "NodeDeviceConfiguration", [
        _f("configuration_id", 1, "string", M), _f("sharding_spec", 2, "ShardingSpecProto", R),
        _f("pipeline_stage", 3, "int32")]),
    MessageSpec("ShardingSpecProto", "ShardingSpec", [
        _f("tensor_name", 1, "string", M), _f("device", 2, "int64", R),
        _f("index_to_device_group_map", 3, "IntIntListEntryProto", R), _f("sharded_dim", 4, "ShardedDimProto", R)]),
    MessageSpec("ShardedDimProto", "ShardedDim", [
        _f("axis", 1, "int64", M), _f("simple_sharding", 2, "SimpleShardedDimProto", R)]),
    MessageSpec("SimpleShardedDimProto", "SimpleShardedDim", [
        *_oneof("dim", _f("dim_value", 1, "int64"), _f("dim_param", 2, "string")), _f("num_shards", 3, "int64", M)]),
    MessageSpec("TrainingInfoProto", "TrainingInfo", [
        _f("initialization", 1, "GraphProto"), _f("algorithm", 2, "GraphProto"),
        _f("initialization_binding", 3, SSE, R), _f("update_binding", 4, SSE, R)]),
    MessageSpec("ModelProto", "Model", [
        _f("ir_version", 1, "int64"), _f("opset_import", 8, "OperatorSetIdProto", R),
        _f("producer_name", 2, "string"), _f("producer_version", 3, "string"), _f("domain", 4, "string"),
        _f("model_version", 5, "int64"), _f("doc_string", 6, "string"), _f("graph", 7, "GraphProto"),
        _f("metadata_props", 14, SSE, R), _f("training_info", 20, "TrainingInfoProto", R),
        _f("functions", 25, "FunctionProto", R), _f("configuration", 26, "DeviceConfigurationProto", R)]),
    MessageSpec("DeviceConfigurationProto", "DeviceConfiguration", [
        _f("name", 1, "string", M), _f("num_devices", 2, "int32", M), _f("device", 3, "string", R)]),
    MessageSpec(SSE, "StringStringEntry", [_f("key", 1, "string"), _f("value", 2, "string")]),
    MessageSpec("TensorAnnotation", "TensorAnnotation", [
        _f("tensor_name", 1, "string"), _f("quant_parameter_tensor_names", 2, SSE, R)]),
    MessageSpec("GraphProto", "Graph", [
        _f("node", 1, "NodeProto", R), _f("name", 2, "string"), _f("initializer", 5, "TensorProto", R),
        _f("sparse_initializer", 15, "SparseTensorProto", R), _f("doc_string", 10, "string"),
        _f("input", 11, "ValueInfoProto", R), _f("output", 12, "ValueInfoProto", R),
        _f("value_info", 13, "ValueInfoProto", R), _f("quantization_annotation", 14, "TensorAnnotation", R),
        _f("metadata_props", 16, SSE, R)]),
    MessageSpec("TensorProto", "Tensor", [
        _f("dims", 1, "int64", R), _f("data_type", 2, "int32"), _f("segment", 3, "TensorProto.Segment"),
        _f("float_data", 4, "float", R, packed=True, array="<f4"),
        _f("int32_data", 5, "int32", R, packed=True, array="int32"),
        _f("string_data", 6, "bytes", R), _f("int64_data", 7, "int64", R, packed=True, array="int64"),
        _f("name", 8, "string"), _f("doc_string", 12, "string"), _f("raw_data", 9, "bytes"),
        _f("external_data", 13, SSE, R), _f("data_location", 14, "enum"),
        _f("double_data", 10, "double", R, packed=True, array="<f8"),
        _f("uint64_data", 11, "uint64", R, packed=True, array="uint64"), _f("metadata_props", 16, SSE, R)]),
    MessageSpec("TensorProto.Segment", "Segment", [_f("begin", 1, "int64"), _f("end", 2, "int64")]),
    MessageSpec("SparseTensorProto", "SparseTensor", [
        _f("values", 1, "TensorProto"), _f("indices", 2, "TensorProto"), _f("dims", 3, "int64", R)]),
    MessageSpec("TensorShapeProto", "Shape", [_f("dim", 1, "TensorShapeProto.Dimension", R)]),
    MessageSpec("TensorShapeProto.Dimension", "Dim", [
        *_oneof("value", _f("dim_value", 1, "int64"), _f("dim_param", 2, "string")), _f("denotation", 3, "string")]),
    MessageSpec("TypeProto", "Type", [
        *_oneof("value", _f("tensor_type", 1, "TypeProto.Tensor"), _f("sequence_type", 4, "TypeProto.Sequence"),
                _f("map_type", 5, "TypeProto.Map"), _f("optional_type", 9, "TypeProto.Optional"),
                _f("sparse_tensor_type", 8, "TypeProto.SparseTensor"), _f("opaque_type", 7, "TypeProto.Opaque")),
        _f("denotation", 6, "string")]),
    MessageSpec("TypeProto.Tensor", "TensorType", [_f("elem_type", 1, "int32", M), _f("shape", 2, "TensorShapeProto")]),
    MessageSpec("TypeProto.Sequence", "SequenceType", [_f("elem_type", 1, "TypeProto", M)]),
    MessageSpec("TypeProto.Map", "MapType", [_f("key_type", 1, "int32", M), _f("value_type", 2, "TypeProto", M)]),
    MessageSpec("TypeProto.Optional", "OptionalType", [_f("elem_type", 1, "TypeProto", M)]),
    MessageSpec("TypeProto.SparseTensor", "SparseTensorType", [
        _f("elem_type", 1, "int32", M), _f("shape", 2, "TensorShapeProto")]),
    MessageSpec("TypeProto.Opaque", "OpaqueType", [_f("domain", 1, "string"), _f("name", 2, "string")]),
    MessageSpec("OperatorSetIdProto", "OperatorSetId", [_f("domain", 1, "string", M), _f("version", 2, "int64", M)]),
    MessageSpec("FunctionProto", "Function", [
        _f("name", 1, "string"), _f("input", 4, "string", R), _f("output", 5, "string", R),
        _f("attribute", 6, "string", R), _f("attribute_proto", 11, "AttributeProto", R),
        _f("node", 7, "NodeProto", R), _f("doc_string", 8, "string"), _f("opset_import", 9, "OperatorSetIdProto", R),
        _f("domain", 10, "string"), _f("overload", 13, "string"), _f("value_info", 12, "ValueInfoProto", R),
        _f("metadata_props", 14, SSE, R)]),
    MessageSpec("OperatorProto", "OperatorInfo", [
        _f("op_type", 1, "string", M), _f("since_version", 2, "int64", M), _f("status", 3, "enum"),
        _f("doc_string", 10, "string")]),
    MessageSpec("OperatorSetProto", "OperatorSetInfo", [
        _f("magic", 1, "string", M), _f("ir_version", 2, "int64", M), _f("ir_version_prerelease", 3, "string"),
        _f("ir_build_metadata", 7, "string"), _f("domain", 4, "string"), _f("opset_version", 5, "int64"),
        _f("doc_string", 6, "string"), _f("operator", 8, "OperatorProto", R), _f("functions", 9, "FunctionProto", R)]),
    MessageSpec("SequenceProto", "SequenceData", [
        _f("name", 1, "string"), _f("elem_type", 2, "int32"), _f("tensor_values", 3, "TensorProto", R),
        _f("sparse_tensor_values", 4, "SparseTensorProto", R), _f("sequence_values", 5, "SequenceProto", R),
        _f("map_values", 6, "MapProto", R), _f("optional_values", 7, "OptionalProto", R)]),
    MessageSpec("MapProto", "MapData", [
        _f("name", 1, "string"), _f("key_type", 2, "int32"), _f("keys", 3, "int64", R),
        _f("string_keys", 4, "bytes", R), _f("values", 5, "SequenceProto")]),
    MessageSpec("OptionalProto", "OptionalData", [
        _f("name", 1, "string"), _f("elem_type", 2, "int32"), _f("tensor_value", 3, "TensorProto"),
        _f("sparse_tensor_value", 4, "SparseTensorProto"), _f("sequence_value", 5, "SequenceProto"),
        _f("map_value", 6, "MapProto"), _f("optional_value", 7, "OptionalProto")]),
]}

#: The enumerations of Annex B (values by name), for the record and for tests.
ENUMS = {
    "Version": 15, "AttributeProto.AttributeType": 15, "TensorProto.DataType": 29,
    "TensorProto.DataLocation": 2, "OperatorStatus": 2, "SequenceProto.DataType": 6, "OptionalProto.DataType": 6,
}
