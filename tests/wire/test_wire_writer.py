"""Clauses 12.4, 12.5 and 12.8 and the writer, on handcrafted octets: unrecognized fields kept
and written back, tag order and packed form as Annex B says, IR version 1 attributes and the
deprecated TYPE_PROTO, decode errors' offsets and paths, the size and nesting limits, and the
canonical form.  Inputs are built with the test's own encoder (``wire_octets``); expectations
are spelled out in octets or taken from ``onnx``'s protobuf classes as the oracle.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest

from onnxkit import api, ir
from onnxkit.errors import EncodeError, LimitExceeded
from onnxkit.ir import AttributeType as AT
from onnxkit.limits import Limits
from onnxkit.wire import decode_message, encode_message

onnx = pytest.importorskip("onnx")
from google.protobuf.unknown_fields import UnknownFieldSet  # noqa: E402
from onnx import helper  # noqa: E402
from wire_octets import decode_error, f32, key, ld, pb, st, uv, vi  # noqa: E402


# -- 12.4 unrecognized fields --------------------------------------------------------------------

def unknowns(first_tag: int, salt: int) -> bytes:
    """Unknown fields of wire types 0, 1, 2 and 5, in increasing tag order from ``first_tag``."""
    return (vi(first_tag, 1000 + salt) + key(first_tag + 1, 1) + struct.pack("<q", -salt)
            + ld(first_tag + 2, b"opaque-%d" % salt) + key(first_tag + 3, 5) + struct.pack("<f", salt + 0.5))


def _model_with_unknowns() -> bytes:
    dim = vi(1, 3) + unknowns(4, 1)  # Dimension: tags 1-3 known
    dim2 = st(2, "N") + st(3, "den") + unknowns(4, 11)
    shape = ld(1, dim) + ld(1, dim2) + unknowns(2, 2)  # TensorShapeProto: tag 1 known
    tensor_type = vi(1, 1) + ld(2, shape) + unknowns(3, 3)  # TypeProto.Tensor: 1-2 known
    type_ = ld(1, tensor_type) + unknowns(10, 4)  # TypeProto: 1, 4-9 known
    value_info = st(1, "x") + ld(2, type_) + unknowns(5, 5)  # ValueInfoProto: 1-4 known
    tensor = vi(1, 2) + vi(2, 1) + ld(4, struct.pack("<ff", 1.0, 2.0)) + st(8, "w") + unknowns(17, 6)
    attr = st(1, "alpha") + f32(2, 0.25) + vi(20, 1) + unknowns(24, 7)  # AttributeProto: up to 23
    attr_t = st(1, "value") + ld(5, tensor) + vi(20, 4) + unknowns(24, 8)
    node = st(1, "x") + st(1, "w") + st(2, "y") + st(4, "Foo") + ld(5, attr) + ld(5, attr_t) + unknowns(11, 9)
    graph = ld(1, node) + st(2, "g") + ld(5, tensor) + ld(11, value_info) + ld(12, st(1, "y")) + unknowns(17, 10)
    return (vi(1, 8) + st(2, "p") + ld(7, graph) + ld(8, st(1, "") + vi(2, 13)) + unknowns(9, 12)
            + vi(30, 42) + ld(31, b""))


def _unknown_sets(p):
    """protobuf's view of the unknown fields at each nesting level."""
    g = p.graph
    n = g.node[0]
    t = g.input[0].type
    levels = {"ModelProto": p, "GraphProto": g, "NodeProto": n, "AttributeProto": n.attribute[0],
              "AttributeProto.t": n.attribute[1], "TensorProto(attr)": n.attribute[1].t, "TensorProto": g.initializer[0],
              "ValueInfoProto": g.input[0], "TypeProto": t, "TypeProto.Tensor": t.tensor_type,
              "TensorShapeProto": t.tensor_type.shape, "Dimension": t.tensor_type.shape.dim[0],
              "Dimension[1]": t.tensor_type.shape.dim[1]}
    return {k: sorted((f.field_number, f.wire_type, f.data) for f in UnknownFieldSet(v)) for k, v in levels.items()}


def test_unknown_fields_skipped_retained_and_written_back():
    data = _model_with_unknowns()
    m = decode_message(data)
    # content known fields are read past the unknown ones
    assert m.graph.node[0].attribute[0].value == 0.25
    assert m.graph.input[0].type.shape.values == (3, "N")
    assert m.graph.initializer[0].float_data.tolist() == [1.0, 2.0]
    # each level holds its unknown fields, octet for octet
    assert ir.unknown_fields(m) == [(9, vi(9, 1012)), (10, key(10, 1) + struct.pack("<q", -12)),
                                    (11, ld(11, b"opaque-12")), (12, key(12, 5) + struct.pack("<f", 12.5)),
                                    (30, vi(30, 42)), (31, ld(31, b""))]
    assert [t for t, _ in ir.unknown_fields(m.graph.initializer[0])] == [17, 18, 19, 20]
    assert [t for t, _ in ir.unknown_fields(m.graph.input[0].type.shape.dim[1])] == [4, 5, 6, 7]
    # written back unchanged (12.4: the same model)
    out = api.to_bytes(m)
    assert out == data
    # protobuf agrees the result is the same message, unknown fields included
    assert pb(out).SerializeToString() == pb(data).SerializeToString()
    sets = _unknown_sets(pb(out))
    assert all(len(s) == 4 for k, s in sets.items() if k != "ModelProto"), sets
    assert len(sets["ModelProto"]) == 6
    assert sets["Dimension"][0] == (4, 0, 1001)


def test_unknown_fields_survive_an_edit(tmp_path):
    data = _model_with_unknowns()
    m = api.load(data)
    m.graph.name = "renamed"
    m.graph.node[0].op_type = "Bar"
    m.producer_name = "someone else"
    path = tmp_path / "m.onnx"
    api.save(m, path)
    p, q = pb(data), pb(path.read_bytes())
    assert (q.graph.name, q.graph.node[0].op_type, q.producer_name) == ("renamed", "Bar", "someone else")
    assert _unknown_sets(q) == _unknown_sets(p)


def test_unknown_fields_out_of_tag_order_are_kept():
    # the writer puts retained fields among the known ones by tag; content is unchanged
    data = vi(99, 5) + vi(1, 7) + ld(9, b"zz") + st(2, "p")
    m = decode_message(data)
    out = api.to_bytes(m)
    assert out == vi(1, 7) + st(2, "p") + ld(9, b"zz") + vi(99, 5)
    assert _sorted_unknown(pb(out)) == _sorted_unknown(pb(data))


def _sorted_unknown(p):
    return sorted((f.field_number, f.wire_type, f.data) for f in UnknownFieldSet(p))


def test_known_tag_with_wrong_wire_type_is_kept_as_unknown():
    # ir_version (tag 1) as length-delimited: protobuf treats it as an unknown field; so does onnxkit
    data = ld(1, b"x") + st(2, "p")
    m = decode_message(data)
    assert m.ir_version == 0 and m.producer_name == "p"
    assert api.to_bytes(m) == data
    assert _sorted_unknown(pb(data)) == [(1, 2, b"x")]


# -- writer: tag order and packed form (12.3.2, 12.3.3) ------------------------------------------

def test_writer_matches_protobuf_for_helper_built_model():
    t = helper.make_tensor("w", onnx.TensorProto.FLOAT, [2, 3], [1.0, 2, 3, 4, 5, 6])
    t64 = helper.make_tensor("i", onnx.TensorProto.INT64, [3], [1, -1, 300])
    td = helper.make_tensor("d", onnx.TensorProto.DOUBLE, [2], [0.5, -2.0])
    n = helper.make_node("Foo", ["x", "w"], ["y"], name="n0", ints=[1, 300, -1], floats=[0.5, 1.5], s="abc",
                         f=2.0, i=-3, t=t64, strings=[b"a", b"bc"])
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, "N"])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], initializer=[t, td])
    ref = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="p").SerializeToString()

    T = ir.Tensor(dims=[2, 3], data_type=1, float_data=np.arange(1, 7, dtype=np.float32), name="w")
    T64 = ir.Tensor(dims=[3], data_type=7, int64_data=[1, -1, 300], name="i")
    TD = ir.Tensor(dims=[2], data_type=11, double_data=[0.5, -2.0], name="d")
    attrs_ = sorted([ir.Attribute("ints", AT.INTS, [1, 300, -1]), ir.Attribute("floats", AT.FLOATS, [0.5, 1.5]),
                     ir.Attribute("s", AT.STRING, b"abc"), ir.Attribute("f", AT.FLOAT, 2.0),
                     ir.Attribute("i", AT.INT, -3), ir.Attribute("t", AT.TENSOR, T64),
                     ir.Attribute("strings", AT.STRINGS, [b"a", b"bc"])], key=lambda a: a.name)
    N = ir.Node(input=["x", "w"], output=["y"], name="n0", op_type="Foo", attribute=attrs_)
    G = ir.Graph(node=[N], name="g", initializer=[T, TD], input=[ir.ValueInfo("x", ir.tensor_type(1, [2, "N"]))],
                 output=[ir.ValueInfo("y", ir.tensor_type(1, None))])
    M = ir.Model(ir_version=pb(ref).ir_version, opset_import=[ir.OperatorSetId("", 13)], producer_name="p", graph=G)
    assert api.to_bytes(M) == ref


def test_packed_only_where_annex_b_says():
    t = encode_message(ir.Tensor(dims=[2, 3], data_type=1, float_data=[1.0, 2.0]))
    # dims unpacked (08 02 08 03), data_type, float_data packed (22 08 ...)
    assert t == bytes.fromhex("0802" "0803" "1001" "2208") + struct.pack("<ff", 1.0, 2.0)
    a = encode_message(ir.Attribute("a", AT.INTS, [1, 300]))
    assert a == st(1, "a") + bytes.fromhex("4001" "40ac02") + bytes.fromhex("a00107")  # ints unpacked
    a = encode_message(ir.Attribute("a", AT.FLOATS, [1.0]))
    assert a == st(1, "a") + b"\x3d" + struct.pack("<f", 1.0) + bytes.fromhex("a00106")  # floats unpacked, wt 5
    cases = [
        (ir.Tensor(int32_data=[1, 2]), onnx.TensorProto(int32_data=[1, 2])),
        (ir.Tensor(int64_data=[1, -2]), onnx.TensorProto(int64_data=[1, -2])),
        (ir.Tensor(uint64_data=[2 ** 64 - 1]), onnx.TensorProto(uint64_data=[2 ** 64 - 1])),
        (ir.Tensor(double_data=[1.0, 2.0]), onnx.TensorProto(double_data=[1.0, 2.0])),
        (ir.Tensor(string_data=[b"a", b""]), onnx.TensorProto(string_data=[b"a", b""])),
        (ir.SparseTensor(dims=[3, 4]), onnx.SparseTensorProto(dims=[3, 4])),
        (ir.IntIntListEntry(key=1, value=[2, 3]), onnx.IntIntListEntryProto(key=1, value=[2, 3])),
        (ir.ShardingSpec(tensor_name="t", device=[0, 1]), onnx.ShardingSpecProto(tensor_name="t", device=[0, 1])),
        (ir.MapData(key_type=7, keys=[1, 2]), onnx.MapProto(key_type=7, keys=[1, 2])),
    ]
    for obj, proto in cases:
        assert encode_message(obj) == proto.SerializeToString(), type(obj).__name__


def test_nan_and_negative_zero_bits_preserved():
    # 12.2.4: the octets of the representation -- a signalling NaN and -0.0 survive
    snan, qnan_payload, negzero = bytes.fromhex("0100807f"), bytes.fromhex("0500c0ff"), bytes.fromhex("00000080")
    data = st(1, "a") + key(2, 5) + snan + vi(20, 1)
    assert encode_message(decode_message(data, "AttributeProto")) == data
    data = ld(4, snan + qnan_payload + negzero)
    t = decode_message(data, "TensorProto")
    assert t.float_data.tobytes() == snan + qnan_payload + negzero
    assert encode_message(t) == data
    assert encode_message(ir.Tensor(float_data=np.frombuffer(snan + negzero, "<f4"))) == ld(4, snan + negzero)


def test_strings_kept_octet_for_octet():
    # 12.2.5 strings are UTF-8; octets that are not valid UTF-8 are still kept exactly (docs/decisions.md: surrogate escapes)
    for raw in (b"\xff\xfe", b"caf\xc3\xa9", b"\xc3", b"\xed\xa0\x80", "\u2603".encode()):
        data = vi(1, 7) + ld(2, raw)
        m = decode_message(data)
        assert api.to_bytes(m) == data
    assert decode_message(vi(1, 7) + ld(2, "caf\u00e9".encode())).producer_name == "caf\u00e9"


def test_empty_octet_field_is_present():
    # proto2 presence: raw_data of zero octets is present (4a 00), as onnx writes an empty array;
    # None is the IR's absence
    empty = np.zeros((0, 3), np.float32)
    ref = onnx.numpy_helper.from_array(empty, "e").SerializeToString()
    assert ref.endswith(b"\x4a\x00")
    t = ir.Tensor.from_numpy(empty, "e")
    assert encode_message(t) == ref
    back = decode_message(ref, "TensorProto")
    assert back.raw_data is not None and bytes(back.raw_data) == b"" and back.dims == t.dims == [0, 3]
    assert encode_message(back) == ref
    assert decode_message(b"\x10\x01", "TensorProto").raw_data is None
    # a STRING attribute read without its `s` keeps it absent; a built one writes it
    assert encode_message(decode_message(st(1, "a") + vi(20, 3), "AttributeProto")) == st(1, "a") + vi(20, 3)
    assert encode_message(ir.Attribute("a", AT.STRING, b"")) == st(1, "a") + ld(4, b"") + vi(20, 3)
    # the canonical form drops the explicit empty default
    assert api.canonical_bytes(ld(7, ld(5, vi(2, 1) + ld(9, b"")))) == api.canonical_bytes(ld(7, ld(5, vi(2, 1))))


def test_decoded_raw_data_equals_built_raw_data():
    t = ir.Tensor(dims=[2], data_type=2, raw_data=b"\x01\x02")
    back = decode_message(encode_message(t), "TensorProto")
    assert bytes(back.raw_data) == b"\x01\x02"
    assert back == t


# -- IR version 1 attributes and the deprecated TYPE_PROTO ---------------------------------------

@pytest.mark.parametrize("body, atype, value", [
    (f32(2, 1.5), AT.FLOAT, 1.5),
    (vi(3, 5), AT.INT, 5),
    (vi(3, 0), AT.INT, 0),
    (ld(4, b"hi"), AT.STRING, b"hi"),
    (key(7, 5) + struct.pack("<f", 1.0) + key(7, 5) + struct.pack("<f", 2.0), AT.FLOATS, [1.0, 2.0]),
    (vi(8, 1) + vi(8, -1), AT.INTS, [1, -1]),
    (ld(9, b"x") + ld(9, b"y"), AT.STRINGS, [b"x", b"y"]),
    (ld(5, vi(1, 1) + vi(2, 1)), AT.TENSOR, None),
    (ld(6, st(2, "body")), AT.GRAPH, None),
], ids=["f", "i", "i0", "s", "floats", "ints", "strings", "t", "g"])
def test_ir_version_1_attribute_without_type(body, atype, value):
    data = st(1, "a") + body  # no `type` (tag 20): IR version 1
    a = decode_message(data, "AttributeProto")
    assert a.type == atype
    if value is not None:
        assert a.value == value
    assert encode_message(a) == data  # byte-exact: no `type` is added
    # in a whole model as well
    m = vi(1, 1) + ld(7, ld(1, st(4, "Foo") + ld(5, data)))
    assert api.to_bytes(api.load(m)) == m
    # the canonical form writes the mandatory type (so both spellings hash alike)
    with_type = data + vi(20, int(atype))
    assert api.canonical_bytes(m) == api.canonical_bytes(vi(1, 1) + ld(7, ld(1, st(4, "Foo") + ld(5, with_type))))


def test_type_proto_attribute_passes_through_but_is_never_written_anew():
    tp = ld(1, vi(1, 1))  # TypeProto { tensor_type { elem_type: FLOAT } }
    data = st(1, "type") + ld(14, tp) + vi(20, 13)
    a = decode_message(data, "AttributeProto")
    assert a.type == AT.TYPE_PROTO and a.value == ir.tensor_type(1)
    assert encode_message(a) == data  # unchanged
    node = st(2, "y") + st(4, "Optional") + ld(5, data)
    m = vi(1, 8) + ld(7, ld(1, node))
    assert api.to_bytes(api.load(m)) == m
    # a newly built one is refused
    with pytest.raises(EncodeError) as info:
        encode_message(ir.Attribute("type", AT.TYPE_PROTO, ir.tensor_type(1)))
    assert "deprecated" in str(info.value) and "TYPE_PROTOS" in str(info.value)
    # and so is one read from bytes whose value was then changed
    a.value = ir.tensor_type(7)
    with pytest.raises(EncodeError):
        encode_message(a)
    # TYPE_PROTOS is the way to write it
    ok = encode_message(ir.Attribute("type", AT.TYPE_PROTOS, [ir.tensor_type(1)]))
    assert ok == st(1, "type") + ld(15, tp) + vi(20, 14)


# -- errors carry offset and path ----------------------------------------------------------------

def test_decode_error_offset_and_path():
    attr_bad = st(1, "alpha") + key(30, 3)  # wire type 3 inside attribute[0] of node[1]
    node0 = st(4, "Relu")
    node1 = st(4, "Foo") + ld(5, attr_bad)
    data = vi(1, 8) + ld(7, ld(1, node0) + ld(1, node1))
    err = decode_error(data)
    assert err.path == "ModelProto.graph.node[1].attribute[0]"
    assert err.offset == data.index(attr_bad) + len(st(1, "alpha"))
    assert str(err.offset) in str(err) and err.path in str(err)
    # an out-of-range int32 inside the attribute's tensor
    attr_t = st(1, "t") + ld(5, vi(1, 1) + vi(2, 2 ** 40)) + vi(20, 4)
    data = vi(1, 8) + ld(7, st(2, "g") + ld(1, node0) + ld(1, st(4, "Foo") + ld(5, st(1, "ok") + vi(20, 2) + vi(3, 1))
                                                         + ld(5, attr_t)))
    err = decode_error(data)
    assert err.path == "ModelProto.graph.node[1].attribute[1].t.data_type"
    assert err.offset == data.index(vi(2, 2 ** 40))
    # a fault in a function body: wire type 4 in node[1]
    data = vi(1, 8) + ld(25, st(1, "f") + ld(7, st(4, "A")) + ld(7, st(4, "B") + key(1, 4)))
    err = decode_error(data)
    assert err.path == "ModelProto.functions[0].node[1]" and err.offset == len(data) - 1
    # a packed field of the tensor of a sparse initializer
    data = vi(1, 8) + ld(7, st(2, "g") + ld(15, ld(1, vi(2, 1) + ld(4, b"\x00" * 5))))
    err = decode_error(data)
    assert err.path == "ModelProto.graph.sparse_initializer[0].values.float_data"


# -- 12.5 limits ---------------------------------------------------------------------------------

def test_max_message_bytes():
    data = vi(1, 8) + st(2, "x" * 100)
    n = len(data)
    assert decode_message(data, limits=Limits(max_message_bytes=n)).producer_name == "x" * 100
    for call in (lambda: decode_message(data, limits=Limits(max_message_bytes=n - 1)),
                 lambda: api.load(data, limits=Limits(max_message_bytes=n - 1))):
        with pytest.raises(LimitExceeded) as info:
            call()
        assert info.value.limit == "max_message_bytes"
        assert info.value.maximum == n - 1 and info.value.value == n


def _nested_sequence_type(levels: int) -> bytes:
    t = ld(1, vi(1, 1))  # TypeProto { tensor_type { elem_type: 1 } }
    for _ in range(levels):
        t = ld(4, ld(1, t))  # TypeProto { sequence_type { elem_type: t } }
    return t


def test_max_nesting_depth():
    # ModelProto > graph > input[0] > type > sequence_type > elem_type > tensor_type: 7 messages deep
    data = vi(1, 8) + ld(7, ld(11, st(1, "x") + ld(2, _nested_sequence_type(1))))
    assert decode_message(data, limits=Limits(max_nesting_depth=7)).graph.input[0].type.elem_type == ir.tensor_type(1)
    with pytest.raises(LimitExceeded) as info:
        api.load(data, limits=Limits(max_nesting_depth=6))
    assert info.value.limit == "max_nesting_depth"
    assert info.value.path.startswith("ModelProto.graph.input[0].type.sequence_type.elem_type")


def test_deep_nesting_never_overflows_the_stack():
    deep = _nested_sequence_type(3000)  # 6000 messages deep
    with pytest.raises(LimitExceeded) as info:
        decode_message(deep, "TypeProto")  # default limit
    assert info.value.limit == "max_nesting_depth"
    with pytest.raises(LimitExceeded) as info:
        decode_message(deep, "TypeProto", limits=Limits(max_nesting_depth=10 ** 9))  # beyond Python's own stack
    assert info.value.limit == "max_nesting_depth"


# -- 12.8 canonical form -------------------------------------------------------------------------

OPSET = ld(8, st(1, "") + vi(2, 13))
TENSOR_PACKED = vi(1, 3) + vi(2, 7) + ld(7, uv(1) + uv(300) + uv(5)) + st(8, "t")
TENSOR_UNPACKED = st(8, "t") + vi(7, 1) + vi(2, 7) + vi(7, 300) + vi(1, 3) + vi(7, 5)
BASE = vi(1, 7) + ld(7, st(2, "g") + ld(5, TENSOR_PACKED)) + OPSET


@pytest.mark.parametrize("variant, same_for_protobuf", [
    # field order
    (OPSET + ld(7, ld(5, TENSOR_PACKED) + st(2, "g")) + vi(1, 7), True),
    # unpacked instead of packed, and a different field order inside the tensor
    (vi(1, 7) + ld(7, st(2, "g") + ld(5, TENSOR_UNPACKED)) + OPSET, True),
    # a mix of both forms
    (vi(1, 7) + ld(7, st(2, "g") + ld(5, vi(1, 3) + vi(2, 7) + vi(7, 1) + ld(7, uv(300) + uv(5)) + st(8, "t"))) + OPSET, True),
    # the graph given twice (merged), a scalar given twice (last wins)
    (vi(1, 3) + ld(7, st(2, "h")) + OPSET + ld(7, ld(5, TENSOR_PACKED) + st(2, "g")) + vi(1, 7), True),
    # non-minimal varints: 0x87 0x00 for 7, 0x81 0x00 for 1, a padded key and a padded length
    (b"\x08\x87\x00" + ld(7, st(2, "g") + ld(5, vi(1, 3) + vi(2, 7) + ld(7, b"\x81\x00" + uv(300) + uv(5)) + st(8, "t")))
     + b"\xc2\x00" + b"\x84\x80\x00" + st(1, "") + vi(2, 13), True),
    # explicit default values
    (BASE + st(3, "") + vi(5, 0) + st(6, ""), False),
    (vi(1, 7) + ld(7, st(2, "g") + st(10, "") + ld(5, TENSOR_PACKED + vi(14, 0) + st(12, ""))) + OPSET, False),
], ids=["order", "unpacked", "mixed", "merged", "non-minimal", "defaults", "nested-defaults"])
def test_canonical_form_equal(variant, same_for_protobuf):
    assert variant != BASE
    if same_for_protobuf:  # protobuf sees the same message (explicit defaults differ in proto2 presence only)
        assert pb(variant).SerializeToString() == pb(BASE).SerializeToString()
    assert api.canonical_bytes(variant) == api.canonical_bytes(BASE)
    assert api.model_hash(variant) == api.model_hash(BASE)
    assert api.model_hash(BASE) == hashlib.sha256(api.canonical_bytes(BASE)).hexdigest()


def test_canonical_form_is_tag_ordered_and_minimal():
    c = api.canonical_bytes(BASE)
    # canonical bytes are those protobuf writes for the same content, and are a fixed point
    assert c == pb(BASE).SerializeToString()
    assert api.canonical_bytes(c) == c
    assert api.canonical_bytes(api.load(BASE)) == c


@pytest.mark.parametrize("other", [
    vi(1, 8) + ld(7, st(2, "g") + ld(5, TENSOR_PACKED)) + OPSET,  # ir_version
    vi(1, 7) + ld(7, st(2, "G") + ld(5, TENSOR_PACKED)) + OPSET,  # graph name
    vi(1, 7) + ld(7, st(2, "g") + ld(5, vi(1, 3) + vi(2, 7) + ld(7, uv(1) + uv(5) + uv(300)) + st(8, "t"))) + OPSET,
    vi(1, 7) + ld(7, st(2, "g") + ld(5, TENSOR_PACKED)) + ld(8, st(1, "") + vi(2, 14)),
    vi(1, 7) + ld(7, st(2, "g") + ld(5, TENSOR_PACKED)) + OPSET + st(2, "producer"),
    vi(1, 7) + ld(7, st(2, "g") + ld(5, TENSOR_PACKED)) + OPSET + vi(99, 1),  # an unknown field is content too
], ids=["ir_version", "name", "data-order", "opset", "producer", "unknown"])
def test_canonical_form_differs_for_different_content(other):
    assert api.canonical_bytes(other) != api.canonical_bytes(BASE)
    assert api.model_hash(other) != api.model_hash(BASE)


def test_canonical_form_of_unknown_fields():
    a = BASE + vi(99, 1) + ld(98, b"x")
    b = ld(98, b"x") + BASE + key(99, 0) + b"\x81\x80\x00"  # reordered, non-minimal
    assert api.canonical_bytes(a) == api.canonical_bytes(b)
    assert api.canonical_bytes(a) != api.canonical_bytes(BASE + vi(99, 2) + ld(98, b"x"))


@pytest.mark.parametrize("n", [31, 32, 33, 100, 70000])
def test_long_unpacked_runs_decode_like_short_ones(n):
    """Unpacked repeated scalars past the vectorised threshold: same values, exact bytes back."""
    import onnx

    rng = np.random.default_rng(n)
    ints = rng.integers(-(1 << 40), 1 << 40, size=n).tolist()
    floats = rng.standard_normal(n).astype(np.float32)
    floats[::7] = np.float32("nan")
    node = onnx.helper.make_node("X", [], ["y"], ints=ints, floats=floats.tolist())
    data = node.SerializeToString()
    back = decode_message(data, "NodeProto")
    attrs_ = {a.name: a.value for a in back.attribute}
    assert attrs_["ints"] == ints
    got = np.array(attrs_["floats"], dtype=np.float32)
    assert got.tobytes() == floats.tobytes()
    assert encode_message(back) == data
    # a run that stops in the middle: the same key resumes after another field
    t = onnx.TensorProto(dims=list(range(40)), data_type=1, name="t")
    t.dims.extend(range(40, 80))
    assert decode_message(t.SerializeToString(), "TensorProto").dims == list(range(80))
