"""Clauses 12.2-12.3, rule by rule, on handcrafted octets (12.4, 12.5, 12.8 and the writer:
test_wire_writer.py).

Every input here is built by hand from the rules of the clause (the small encoders in
``wire_octets`` are the test's own, not onnxkit's), and every expectation is either spelled out in octets
or taken from ``onnx``'s protobuf classes as the oracle.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from onnxkit import api, ir
from onnxkit.ir import AttributeType as AT
from onnxkit.wire import decode_message, encode_message

onnx = pytest.importorskip("onnx")
from google.protobuf.message import DecodeError as ProtobufDecodeError  # noqa: E402
from wire_octets import decode_error, f32, key, ld, pb, st, uv, vi  # noqa: E402


# -- 12.2.2 / 12.2.3 variable-length integers --------------------------------------------------

def test_own_encoder_matches_the_examples():
    assert uv(1) == bytes.fromhex("01")
    assert uv(300) == bytes.fromhex("ac02")
    assert uv(-1) == bytes.fromhex("ffffffffffffffffff01")
    assert key(1, 0) == bytes.fromhex("08") and key(20, 0) == bytes.fromhex("a001")  # 12.3.1 EXAMPLE


@pytest.mark.parametrize("octets, value", [("01", 1), ("ac02", 300), ("7f", 127), ("8001", 128),
                                           ("ffffffffffffffffff01", -1), ("ffffffffffffffff7f", 2 ** 63 - 1),
                                           ("80808080808080808001", -(2 ** 63))])
def test_varint_decoding(octets, value):
    m = decode_message(b"\x08" + bytes.fromhex(octets))
    assert m.ir_version == value


def test_varint_examples_written():
    # 12.2.2 EXAMPLE: 1 is 01, 300 is ac 02 -- as the writer writes ModelProto.ir_version (key 08)
    assert api.to_bytes(ir.Model(ir_version=1)) == bytes.fromhex("0801")
    assert api.to_bytes(ir.Model(ir_version=300)) == bytes.fromhex("08ac02")
    # 12.3.1 EXAMPLE: the key of tag 20, wire type 0 is a0 01 (AttributeProto.type)
    assert encode_message(ir.Attribute("a", AT.INT, 5)) == bytes.fromhex("0a0161") + bytes.fromhex("1805") + \
        bytes.fromhex("a00102")


def test_negative_is_ten_octets():
    # 12.2.3 EXAMPLE: -1 is ff ff ff ff ff ff ff ff ff 01, for int64 and int32 alike
    minus_one = bytes.fromhex("ffffffffffffffffff01")
    assert api.to_bytes(ir.Model(ir_version=-1)) == b"\x08" + minus_one
    t = decode_message(b"\x10" + minus_one, "TensorProto")  # TensorProto.data_type is int32
    assert t.data_type == -1
    assert encode_message(t) == b"\x10" + minus_one
    assert encode_message(ir.Tensor(data_type=-2)) == b"\x10" + bytes.fromhex("feffffffffffffffff01")
    assert decode_message(b"\x10" + uv(-(2 ** 31)), "TensorProto").data_type == -(2 ** 31)
    assert decode_message(b"\x10" + uv(2 ** 31 - 1), "TensorProto").data_type == 2 ** 31 - 1
    # packed int32 elements are negative as ten octets too
    t = decode_message(ld(5, minus_one + b"\x05"), "TensorProto")
    assert t.int32_data.tolist() == [-1, 5]
    assert encode_message(t) == ld(5, minus_one + b"\x05")


def test_varint_of_eleven_octets_rejected():
    eleven = b"\x80" * 10 + b"\x00"  # the value 0, but in eleven octets
    err = decode_error(b"\x08\x07" + b"\x08" + eleven)
    assert "longer than ten octets" in err.reason and "12.2.2" in err.reason
    assert err.offset == 3 and err.path == "ModelProto.ir_version"
    # as a field key, as a length, and inside a packed field
    decode_error(eleven)
    err = decode_error(b"\x12" + eleven)
    assert "ten octets" in err.reason
    err = decode_error(ld(7, eleven), "TensorProto")
    assert "ten octets" in err.reason and err.path == "TensorProto.int64_data"
    # ten octets is the most, and is accepted
    assert decode_message(b"\x08" + b"\x80" * 9 + b"\x00").ir_version == 0


def test_varint_beyond_2_64_rejected():
    over = b"\xff" * 9 + b"\x02"  # 2**64 + 2**63 - 1: ten octets, but more than 2**64 - 1
    err = decode_error(b"\x08" + over)
    assert "exceeds 2**64 - 1" in err.reason and err.offset == 1 and err.path == "ModelProto.ir_version"
    err = decode_error(ld(11, over), "TensorProto")  # packed uint64
    assert "exceeds" in err.reason
    # 2**64 - 1 itself is the largest value: a uint64 keeps it
    t = decode_message(ld(11, b"\xff" * 9 + b"\x01"), "TensorProto")
    assert t.uint64_data.tolist() == [2 ** 64 - 1]


@pytest.mark.parametrize("value", [2 ** 31, -(2 ** 31) - 1, 2 ** 32 - 1, 2 ** 63 - 1])
def test_int32_out_of_range_rejected(value):
    err = decode_error(b"\x10" + uv(value), "TensorProto")
    assert "out of range" in err.reason and "12.2.3" in err.reason
    assert err.path == "TensorProto.data_type" and err.offset == 0
    # the same in other int32 fields: TypeProto.Tensor.elem_type, packed int32_data, an enum
    decode_error(vi(1, value), "TypeProto.Tensor")
    assert "out of range" in decode_error(ld(5, uv(value)), "TensorProto").reason
    assert "out of range" in decode_error(st(1, "a") + vi(20, value), "AttributeProto").reason
    assert "out of range" in decode_error(st(1, "d") + vi(2, value), "DeviceConfigurationProto").reason


def test_int32_written_as_32_bit_twos_complement_rejected():
    # -1 in five octets is 2**32 - 1: not the encoding of any int32 (12.2.3 wants ten octets)
    err = decode_error(b"\x10" + bytes.fromhex("ffffffff0f"), "TensorProto")
    assert "out of range" in err.reason


# -- 12.2.1 wire types 3 and 4 -------------------------------------------------------------------

@pytest.mark.parametrize("wt", [3, 4])
@pytest.mark.parametrize("tag", [1, 7, 99, 2000])
def test_wire_types_3_and_4_rejected(wt, tag):
    err = decode_error(b"\x08\x07" + key(tag, wt))
    assert f"wire type {wt}" in err.reason and "12.2.1" in err.reason
    assert err.offset == 2 and err.path == "ModelProto"
    # nested in a graph, after valid content
    err = decode_error(b"\x08\x07" + ld(7, st(2, "g") + key(tag, wt)))
    assert f"wire type {wt}" in err.reason and err.path == "ModelProto.graph" and err.offset == 7


# -- 12.2.5 lengths ------------------------------------------------------------------------------

def test_length_past_end_of_message_rejected():
    err = decode_error(b"\x08\x07" + b"\x12\x05abc")  # producer_name: 5 octets announced, 3 there
    assert "runs past the end" in err.reason and err.offset == 2 and err.path == "ModelProto.producer_name"
    err = decode_error(b"\x3a\x05\x12\x01a")  # graph: 5 announced, 3 there
    assert "runs past the end" in err.reason and err.path == "ModelProto.graph"
    err = decode_error(key(11, 2) + b"\x09" + b"x" * 8)  # an unknown field
    assert "runs past the end" in err.reason and err.offset == 0
    err = decode_error(b"\x22\x08" + b"\x00" * 4, "TensorProto")  # packed float_data
    assert "runs past the end" in err.reason


def test_nested_length_fitting_buffer_but_not_parent_rejected():
    # graph is 4 octets long; inside it a node claims 10 octets, which the buffer has but the graph has not
    # (the octets after the graph are a valid producer_name, so the graph's fault is the only one)
    data = b"\x3a\x04" + b"\x0a\x0a" + b"\x12\x00" + b"\x12\x0a" + b"p" * 10
    with pytest.raises(ProtobufDecodeError):
        pb(data)  # protobuf rejects it as well
    err = decode_error(data)
    assert "runs past the end" in err.reason
    assert err.offset == 2 and err.path.startswith("ModelProto.graph.node")
    # same for a string inside a node inside the graph
    node = b"\x22\x09Relu"  # op_type says 9 octets, the node holds 4 after the length
    data = ld(7, ld(1, node) + st(2, "g" * 20))
    err = decode_error(data)
    assert "runs past the end" in err.reason and err.path == "ModelProto.graph.node[0].op_type"
    assert err.offset == 4


def test_truncated_fixed_width_rejected():
    err = decode_error(st(1, "a") + key(2, 5) + b"\x00\x00\x80", "AttributeProto")  # f: 3 of 4 octets
    assert "truncated 32-bit" in err.reason and err.path == "AttributeProto.f" and err.offset == 3
    err = decode_error(key(10, 1) + b"\x00" * 7, "TensorProto")  # an unpacked double_data element
    assert "truncated 64-bit" in err.reason and err.offset == 0
    err = decode_error(b"\x08\x07" + key(99, 1) + b"\x00" * 7)  # unknown 64-bit field
    assert err.offset == 2 and "runs past the end" in err.reason
    err = decode_error(b"\x08\x07" + key(99, 5) + b"\x00" * 3)  # unknown 32-bit field
    assert err.offset == 2
    # inside a graph whose length covers the partial value only
    # (what follows the graph is a valid ir_version, so the graph's fault is the only one)
    err = decode_error(ld(7, key(99, 5) + b"\x00\x00") + b"\x08\x07")
    assert err.path == "ModelProto.graph" and err.offset == 2


def test_field_tag_0_rejected():
    for k in (b"\x00", b"\x02\x00", b"\x05\x00\x00\x00\x00", b"\x80\x00"):
        err = decode_error(b"\x08\x07" + k)
        assert "tag 0" in err.reason and err.offset == 2
    err = decode_error(ld(7, b"\x00\x01"))
    assert "tag 0" in err.reason and err.path == "ModelProto.graph" and err.offset == 2


# -- 12.3.3 repeated fields ----------------------------------------------------------------------

def test_packed_and_unpacked_example():
    # 12.3.3 EXAMPLE with the repeated field of tag 5 of TensorProto (int32_data): 1 and 300
    packed = bytes.fromhex("2a0301ac02")
    unpacked = bytes.fromhex("2801" + "28ac02")
    for data in (packed, unpacked):
        t = decode_message(data, "TensorProto")
        assert t.int32_data.tolist() == [1, 300] == list(pb(data, "TensorProto").int32_data)
    # the writer uses the form Annex B records: packed
    assert encode_message(decode_message(unpacked, "TensorProto")) == packed


REPEATED_SCALARS = [
    # message, field, tag, element encoder, values
    ("TensorProto", "dims", 1, lambda v: uv(v), [2, 300, -1]),
    ("TensorProto", "int32_data", 5, lambda v: uv(v), [1, -7, 2 ** 31 - 1]),
    ("TensorProto", "int64_data", 7, lambda v: uv(v), [1, 300, -(2 ** 63)]),
    ("TensorProto", "uint64_data", 11, lambda v: uv(v), [0, 2 ** 64 - 1, 5]),
    ("TensorProto", "float_data", 4, lambda v: struct.pack("<f", v), [1.5, -0.0, 3.25]),
    ("TensorProto", "double_data", 10, lambda v: struct.pack("<d", v), [1e300, -2.5, 0.0]),
    ("AttributeProto", "ints", 8, lambda v: uv(v), [7, -1, 300]),
    ("AttributeProto", "floats", 7, lambda v: struct.pack("<f", v), [0.5, 2.0, -1.0]),
    ("SparseTensorProto", "dims", 3, lambda v: uv(v), [4, 5]),
    ("IntIntListEntryProto", "value", 2, lambda v: uv(v), [1, 2, 3]),
    ("ShardingSpecProto", "device", 2, lambda v: uv(v), [0, 1, -5]),
    ("MapProto", "keys", 3, lambda v: uv(v), [10, -20, 30]),
]


def _elements(obj, message, field):
    if message == "AttributeProto":
        return list(obj.value)
    v = getattr(obj, field)
    return v.tolist() if isinstance(v, np.ndarray) else [int(x) if not isinstance(x, float) else x for x in v]


def _wt(message, field):
    return 5 if field in ("float_data", "floats") else 1 if field == "double_data" else 0


@pytest.mark.parametrize("message, field, tag, enc, values", REPEATED_SCALARS, ids=lambda x: x if isinstance(x, str) else None)
def test_packed_unpacked_and_mixed(message, field, tag, enc, values):
    prefix = (st(1, "a") + vi(20, 7 if field == "ints" else 6)) if message == "AttributeProto" else b""
    wt = _wt(message, field)
    packed = prefix + ld(tag, b"".join(enc(v) for v in values))
    unpacked = prefix + b"".join(key(tag, wt) + enc(v) for v in values)
    # both forms in one message: unpacked first element, a packed run, unpacked last, then packed again
    mixed = prefix + key(tag, wt) + enc(values[0]) + ld(tag, b"".join(enc(v) for v in values[1:])) + \
        key(tag, wt) + enc(values[-1]) + ld(tag, enc(values[0]))
    expected_mixed = values + [values[-1], values[0]]
    for data, want in ((packed, values), (unpacked, values), (mixed, expected_mixed)):
        got = _elements(decode_message(data, message), message, field)
        oracle = list(getattr(pb(data, message), field))
        assert got == want == oracle, (data.hex(), got, want, oracle)


def test_empty_packed_field_accepted():
    t = decode_message(ld(7, b"") + ld(4, b""), "TensorProto")
    assert t.int64_data.size == 0 and t.float_data.size == 0


def test_packed_fixed_width_length_not_multiple_rejected():
    err = decode_error(ld(4, b"\x00" * 6), "TensorProto")
    assert "multiple of 4" in err.reason and err.path == "TensorProto.float_data"
    err = decode_error(ld(10, b"\x00" * 12), "TensorProto")
    assert "multiple of 8" in err.reason


def test_packed_varint_cut_short_rejected():
    err = decode_error(ld(7, b"\x01\xac"), "TensorProto")
    assert err.path == "TensorProto.int64_data"


# -- 12.3.2 order and repetition -------------------------------------------------------------------

def test_fields_in_any_order():
    in_order = vi(1, 7) + st(2, "prod") + st(3, "1.0") + vi(5, 3) + ld(7, st(2, "g")) + ld(8, st(1, "") + vi(2, 13))
    reversed_ = ld(8, vi(2, 13) + st(1, "")) + ld(7, st(2, "g")) + vi(5, 3) + st(3, "1.0") + st(2, "prod") + vi(1, 7)
    a, b = decode_message(in_order), decode_message(reversed_)
    assert a == b
    assert (a.ir_version, a.producer_name, a.producer_version, a.model_version, a.graph.name) == (7, "prod", "1.0", 3, "g")
    # written back in increasing tag order: the same octets as protobuf writes
    assert api.to_bytes(b) == in_order == pb(reversed_).SerializeToString()


def test_last_occurrence_wins_for_a_singular_scalar():
    data = vi(1, 3) + st(2, "first") + vi(1, 8) + st(2, "second") + vi(5, 1) + vi(5, 0)
    m = decode_message(data)
    p = pb(data)
    assert (m.ir_version, m.producer_name, m.model_version) == (8, "second", 0) == \
        (p.ir_version, p.producer_name, p.model_version)
    assert api.to_bytes(m) == p.SerializeToString() == vi(1, 8) + st(2, "second") + vi(5, 0)
    t = decode_message(vi(2, 1) + vi(2, 7) + ld(9, b"ab") + ld(9, b"xyz"), "TensorProto")
    assert t.data_type == 7 and bytes(t.raw_data) == b"xyz"
    a = decode_message(st(1, "a") + vi(20, 1) + f32(2, 1.0) + f32(2, 2.5), "AttributeProto")
    assert a.value == 2.5


def test_last_occurrence_wins_in_a_one_of_group():
    # Dimension.dim_value then dim_param: the group takes the last (B.2.20)
    data = vi(1, 5) + st(2, "N")
    d = decode_message(data, "TensorShapeProto.Dimension")
    assert (d.dim_value, d.dim_param) == (None, "N")
    assert pb(data, "TensorShapeProto.Dimension").WhichOneof("value") == "dim_param"
    assert encode_message(d, "TensorShapeProto.Dimension") == st(2, "N")
    d = decode_message(st(2, "N") + vi(1, 0), "TensorShapeProto.Dimension")
    assert (d.dim_value, d.dim_param) == (0, None)
    # TypeProto: tensor_type then sequence_type -> a sequence type
    data = ld(1, vi(1, 1)) + ld(4, ld(1, ld(1, vi(1, 7))))
    t = decode_message(data, "TypeProto")
    assert isinstance(t, ir.SequenceType) and t.elem_type == ir.tensor_type(7)
    assert pb(data, "TypeProto").WhichOneof("value") == "sequence_type"


def test_embedded_message_twice_is_merged():
    node1 = st(1, "x") + st(2, "y") + st(4, "Relu")
    node2 = st(1, "y") + st(2, "z") + st(4, "Abs")
    g1 = ld(1, node1) + st(2, "first") + st(10, "doc")
    g2 = ld(1, node2) + st(2, "second")
    data = vi(1, 7) + ld(7, g1) + ld(8, st(1, "") + vi(2, 13)) + ld(7, g2)
    m = decode_message(data)
    p = pb(data)
    assert m.graph.name == "second" == p.graph.name
    assert m.graph.doc_string == "doc" == p.graph.doc_string  # kept from the first occurrence
    assert [n.op_type for n in m.graph.node] == ["Relu", "Abs"] == [n.op_type for n in p.graph.node]
    assert api.to_bytes(m) == p.SerializeToString()


def test_merge_is_recursive():
    # ValueInfo.type twice: tensor_type.elem_type in the first, tensor_type.shape in the second,
    # and the shape itself given twice (dims concatenate)
    t1 = ld(1, vi(1, 1) + ld(2, ld(1, vi(1, 2))))
    t2 = ld(1, ld(2, ld(1, st(2, "N"))) + vi(1, 7))
    data = st(1, "v") + ld(2, t1) + ld(2, t2)
    v = decode_message(data, "ValueInfoProto")
    p = pb(data, "ValueInfoProto")
    assert v.type.elem_type == 7 == p.type.tensor_type.elem_type
    assert v.type.shape.values == (2, "N")
    assert [d.dim_value or d.dim_param for d in p.type.tensor_type.shape.dim] == [2, "N"]
    assert encode_message(v) == p.SerializeToString()
    # the attribute's tensor given twice: dims and data concatenate, name replaced
    a = st(1, "a") + ld(5, vi(1, 2) + st(8, "t1") + ld(7, uv(1))) + ld(5, vi(1, 3) + ld(7, uv(2)) + st(8, "t2")) + vi(20, 4)
    got = decode_message(a, "AttributeProto")
    want = pb(a, "AttributeProto")
    assert got.value.dims == [2, 3] == list(want.t.dims)
    assert got.value.int64_data.tolist() == [1, 2] == list(want.t.int64_data)
    assert got.value.name == "t2" == want.t.name
    assert encode_message(got) == want.SerializeToString()
