"""Clause 12.2-12.5 and 12.8, rule by rule, on handcrafted octets.

Every input here is built by hand from the rules of the clause (the small encoders below
are the test's own, not onnxkit's), and every expectation is either spelled out in octets
or taken from ``onnx``'s protobuf classes as the oracle.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest

from onnxkit import api, ir
from onnxkit.errors import DecodeError, EncodeError, LimitExceeded
from onnxkit.ir import AttributeType as AT
from onnxkit.limits import Limits
from onnxkit.wire import decode_message, encode_message

onnx = pytest.importorskip("onnx")
from google.protobuf.message import DecodeError as ProtobufDecodeError  # noqa: E402
from google.protobuf.unknown_fields import UnknownFieldSet  # noqa: E402
from onnx import helper  # noqa: E402


# -- the test's own encoder, straight from 12.2 / 12.3 -------------------------------------

def uv(n: int) -> bytes:
    """Variable-length integer (12.2.2); a negative n as its 64-bit two's complement (12.2.3)."""
    if n < 0:
        n += 1 << 64
    assert 0 <= n < 1 << 64
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def key(tag: int, wt: int) -> bytes:
    return uv(tag * 8 + wt)  # (1)


def vi(tag: int, n: int) -> bytes:
    return key(tag, 0) + uv(n)


def ld(tag: int, payload: bytes) -> bytes:
    return key(tag, 2) + uv(len(payload)) + payload


def st(tag: int, text: str) -> bytes:
    return ld(tag, text.encode("utf-8"))


def f32(tag: int, x: float) -> bytes:
    return key(tag, 5) + struct.pack("<f", x)


def f64(tag: int, x: float) -> bytes:
    return key(tag, 1) + struct.pack("<d", x)


def model(*fields: bytes) -> bytes:
    return b"".join(fields)


def decode_error(data: bytes, message: str = "ModelProto", **kw) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode_message(data, message, **kw)
    err = info.value
    assert isinstance(err.offset, int), "every DecodeError carries an offset"
    assert err.path.startswith(message), f"path {err.path!r} should start at {message}"
    return err


def pb(data: bytes, message: str = "ModelProto"):
    cls = onnx
    for part in message.split("."):
        cls = getattr(cls, part)
    return cls.FromString(data)


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
    # 12.2.5 strings are UTF-8; octets that are not valid UTF-8 are still kept exactly (README: surrogate escapes)
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
