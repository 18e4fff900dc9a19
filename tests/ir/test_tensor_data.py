"""Tensor storage (Clause 6.3.4 raw and typed storage, Table 7, Annex B.2.16) and sparse tensors.

Round trips compare bit patterns (NaNs included); layouts are checked against octets written
out by hand; an oracle check decodes protos built by the onnx package with both onnx and
onnxkit.  The onnx package is used here only, never by onnxkit.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from onnxkit import tensor_data
from onnxkit.dtypes import DataType, element_type
from onnxkit.errors import OnnxkitTypeError
from onnxkit.ir.tensor import DataLocation, Segment, SparseTensor, Tensor, numpy_to_tensor, numpy_to_typed_tensor
from onnxkit.tensor_data import numpy_to_typed, sparse_to_dense, tensor_to_numpy

# tag: (name, numpy dtype, bits, typed-storage field) -- Table 5, Annex B.2.16, Table 7
# (the same table as tests/ir/test_dtypes.py; importlib import mode keeps test modules apart).
EXPECTED = {
    1: ("FLOAT", np.float32, 32, "float_data"), 2: ("UINT8", np.uint8, 8, "int32_data"),
    3: ("INT8", np.int8, 8, "int32_data"), 4: ("UINT16", np.uint16, 16, "int32_data"),
    5: ("INT16", np.int16, 16, "int32_data"), 6: ("INT32", np.int32, 32, "int32_data"),
    7: ("INT64", np.int64, 64, "int64_data"), 8: ("STRING", np.object_, 0, "string_data"),
    9: ("BOOL", np.bool_, 8, "int32_data"), 10: ("FLOAT16", np.float16, 16, "int32_data"),
    11: ("DOUBLE", np.float64, 64, "double_data"), 12: ("UINT32", np.uint32, 32, "uint64_data"),
    13: ("UINT64", np.uint64, 64, "uint64_data"), 14: ("COMPLEX64", np.complex64, 64, "float_data"),
    15: ("COMPLEX128", np.complex128, 128, "double_data"),
    16: ("BFLOAT16", ml_dtypes.bfloat16, 16, "int32_data"),
    17: ("FLOAT8E4M3FN", ml_dtypes.float8_e4m3fn, 8, "int32_data"),
    18: ("FLOAT8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz, 8, "int32_data"),
    19: ("FLOAT8E5M2", ml_dtypes.float8_e5m2, 8, "int32_data"),
    20: ("FLOAT8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz, 8, "int32_data"),
    21: ("UINT4", ml_dtypes.uint4, 4, "int32_data"), 22: ("INT4", ml_dtypes.int4, 4, "int32_data"),
    23: ("FLOAT4E2M1", ml_dtypes.float4_e2m1fn, 4, "int32_data"),
    24: ("FLOAT8E8M0", ml_dtypes.float8_e8m0fnu, 8, "int32_data"),
    25: ("UINT2", ml_dtypes.uint2, 2, "int32_data"), 26: ("INT2", ml_dtypes.int2, 2, "int32_data"),
    27: ("FLOAT6E2M3", ml_dtypes.float6_e2m3fn, 6, "int32_data"),
    28: ("FLOAT6E3M2", ml_dtypes.float6_e3m2fn, 6, "int32_data"),
}
ALL_TAGS = sorted(EXPECTED)
SMALL_TAGS = [t for t in ALL_TAGS if 0 < EXPECTED[t][2] <= 8]

FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def bits_of(a: np.ndarray) -> np.ndarray:
    """The element bit patterns, so that NaNs (and -0) compare exactly."""
    a = np.ascontiguousarray(a)
    if a.dtype == object:
        return a
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}[a.dtype.itemsize])


def sample(tag: int) -> np.ndarray:
    """A 2x3 array of type ``tag`` with awkward values (extremes, signs, NaN where possible)."""
    dt = np.dtype(EXPECTED[tag][1])
    bits = EXPECTED[tag][2]
    if tag == DataType.STRING:
        return np.array([[b"", b"a", b"\x00\xff"], [b"long" * 50, "é".encode(), b"z"]], dtype=object)
    if tag == DataType.BOOL:
        return np.array([[True, False, True], [False, False, True]])
    if bits <= 8:   # any pattern: straight from bytes
        return np.array([[0, 1, (1 << bits) - 1], [1 << (bits - 1), 5 % (1 << bits), 2]], np.uint8).view(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array([[info.min, info.max, 0], [1, 2, info.max - 1]], dtype=dt)
    if dt.kind == "c":
        return np.array([[1 + 2j, -0.0 - 1j, np.nan + 0j], [np.inf, 1e-30j, 3]], dtype=dt)
    return np.array([[1.5, -0.0, np.nan], [np.inf, -np.inf, 1e-3]]).astype(dt)


def assert_same(a: np.ndarray, b: np.ndarray):
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    else:
        assert np.array_equal(bits_of(a), bits_of(b))


# ----------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("tag", ALL_TAGS)
def test_raw_round_trip(tag):
    a = sample(tag)
    t = numpy_to_tensor(a, name="w")
    assert t.data_type == tag and t.dims == [2, 3] and t.name == "w"
    if tag == DataType.STRING:
        assert t.raw_data is None and t.string_data == a.reshape(-1).tolist()
    else:
        assert isinstance(t.raw_data, bytes) and all(len(getattr(t, f)) == 0 for f in FIELDS)
        bits = EXPECTED[tag][2]
        assert len(t.raw_data) == math.ceil(6 * bits / 8)
    assert_same(tensor_to_numpy(t), a)
    assert_same(t.numpy(), a)                       # Tensor.numpy delegates here


@pytest.mark.parametrize("tag", ALL_TAGS)
def test_typed_round_trip(tag):
    a = sample(tag)
    t = numpy_to_typed_tensor(a, name="w")
    field = EXPECTED[tag][3]
    assert t.raw_data is None and t.data_type == tag
    assert [f for f in FIELDS if len(getattr(t, f))] == [field]
    assert_same(tensor_to_numpy(t), a)


@pytest.mark.parametrize("tag", ALL_TAGS)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (1, 1, 1, 7)])
def test_shapes(tag, shape):
    n = math.prod(shape)
    a = np.resize(sample(tag).reshape(-1), n).reshape(shape) if n else np.empty(shape, sample(tag).dtype)
    for build in (numpy_to_tensor, numpy_to_typed_tensor):
        t = build(a)
        assert t.dims == list(shape)
        assert_same(tensor_to_numpy(t), a)


@pytest.mark.parametrize("tag", SMALL_TAGS)
def test_every_bit_pattern_raw_and_typed(tag):
    bits = EXPECTED[tag][2]
    codes = np.arange(2 if tag == DataType.BOOL else 1 << bits, dtype=np.uint8)
    codes = np.concatenate([codes, codes[::-1], codes[:3]])   # odd length: padding in play
    a = codes.view(EXPECTED[tag][1])
    for t in (numpy_to_tensor(a), numpy_to_typed_tensor(a)):
        out = tensor_to_numpy(t)
        assert out.dtype == np.dtype(EXPECTED[tag][1])
        assert np.array_equal(out.view(np.uint8), codes)


# ----------------------------------------------------------------------------- layouts by hand

def test_raw_layout_little_endian():
    assert numpy_to_tensor(np.array([1.0], np.float32)).raw_data == b"\x00\x00\x80\x3f"
    assert numpy_to_tensor(np.array([1, -2], np.int32)).raw_data == b"\x01\x00\x00\x00\xfe\xff\xff\xff"
    assert numpy_to_tensor(np.array([1 + 2j], np.complex64)).raw_data == b"\x00\x00\x80\x3f\x00\x00\x00\x40"
    assert numpy_to_tensor(np.array([True, False, True])).raw_data == b"\x01\x00\x01"
    assert numpy_to_tensor(np.array([1.0], ml_dtypes.bfloat16)).raw_data == b"\x80\x3f"
    t = Tensor(dims=[2], data_type=DataType.UINT16, raw_data=b"\x01\x02\x03\x04")
    assert tensor_to_numpy(t).tolist() == [0x0201, 0x0403]


def test_typed_layout_by_hand():
    assert numpy_to_typed(np.array([1.0, -2.0], np.float16), DataType.FLOAT16)[1].tolist() == [0x3C00, 0xC000]
    assert numpy_to_typed(np.array([1.0], ml_dtypes.bfloat16), DataType.BFLOAT16)[1].tolist() == [0x3F80]
    f, d = numpy_to_typed(np.array([-2.0, 1.0], ml_dtypes.float8_e4m3fn), DataType.FLOAT8E4M3FN)
    assert f == "int32_data" and d.tolist() == [0xC0, 0x38]        # unsigned integer of the bits
    assert numpy_to_typed(np.array([-1, 5], np.int8), DataType.INT8)[1].tolist() == [-1, 5]
    assert numpy_to_typed(np.array([1, -2, 3], ml_dtypes.int4), DataType.INT4)[1].tolist() == [0xE1, 0x03]
    assert numpy_to_typed(np.array([1, -2, 1, 0, -1], ml_dtypes.int2), DataType.INT2)[1].tolist() == [
        0b00011001, 0b11]
    assert numpy_to_typed(np.array([1 + 2j], np.complex128), DataType.COMPLEX128) == ("double_data", pytest.approx([1, 2]))
    assert numpy_to_typed(np.array([2**32 - 1], np.uint32), DataType.UINT32)[1].tolist() == [2**32 - 1]
    f, d = numpy_to_typed(np.array(["é", b"x"], dtype=object), DataType.STRING)
    assert f == "string_data" and d == [b"\xc3\xa9", b"x"]


def test_typed_read_by_hand():
    t = Tensor(dims=[2], data_type=DataType.FLOAT16, int32_data=[0x3C00, 0xC000])
    assert tensor_to_numpy(t).tolist() == [1.0, -2.0]
    t = Tensor(dims=[3], data_type=DataType.UINT4, int32_data=[0x21, 0x0F])
    assert tensor_to_numpy(t).astype(int).tolist() == [1, 2, 15]
    t = Tensor(dims=[1], data_type=DataType.COMPLEX64, float_data=[3.0, -4.0])
    assert tensor_to_numpy(t).tolist() == [3 - 4j]
    t = Tensor(dims=[2], data_type=DataType.BOOL, int32_data=[0, 1])
    assert tensor_to_numpy(t).tolist() == [False, True]
    # a sign-extended rendering of the same 16 bits (0xC000 as int16) reads the same (lenient)
    t = Tensor(dims=[2], data_type=DataType.FLOAT16, int32_data=[-16384, 0xC000])
    assert tensor_to_numpy(t).tolist() == [-2.0, -2.0]


def test_clause_634_int4_example_through_tensor():
    t = numpy_to_tensor(np.array([1, -2, 3, -8, 7, 0, 5], ml_dtypes.int4))
    assert t.raw_data == bytes([0xE1, 0x83, 0x07, 0x05])              # 4 octets, top nibble zero
    t2 = Tensor(dims=[7], data_type=DataType.INT4, raw_data=bytes([0xE1, 0x83, 0x07, 0xA5]))
    assert tensor_to_numpy(t2).astype(int).tolist() == [1, -2, 3, -8, 7, 0, 5]


def test_clause_634_float6_example_through_tensor():
    a = np.array([0.125, 0.25, -7.5, 1.0, 0.0, 7.5, -0.125], ml_dtypes.float6_e2m3fn)
    t = numpy_to_tensor(a)
    assert len(t.raw_data) == 6 and t.raw_data[5] >> 6 == 0            # 42 bits + 2 zero padding
    # codes 1, 2, 0b111111, 0b001000, 0, 0b011111, 0b100001 packed LSB first, by hand:
    assert t.raw_data == bytes([0x81, 0xF0, 0x23, 0xC0, 0x17, 0x02])
    t2 = Tensor(dims=[7], data_type=DataType.FLOAT6E2M3, raw_data=t.raw_data[:5] + bytes([0xC2]))
    assert_same(tensor_to_numpy(t2), a)


def test_narrow_typed_other_bits_ignored():
    t = Tensor(dims=[3], data_type=DataType.INT4, int32_data=[0x7F00_0021, 0x0000_0F03])
    assert tensor_to_numpy(t).astype(int).tolist() == [1, 2, 3]


# ----------------------------------------------------------------------------- zero copy

def test_raw_is_read_only_zero_copy_view():
    buf = bytearray(np.arange(6, dtype=np.float32).tobytes())
    t = Tensor(dims=[2, 3], data_type=DataType.FLOAT, raw_data=memoryview(buf))
    a = tensor_to_numpy(t)
    assert not a.flags.writeable and a.shape == (2, 3)
    buf[0:4] = np.float32(42).tobytes()          # the view sees the octets: nothing was copied
    assert a[0, 0] == 42.0
    with pytest.raises(ValueError):
        a[0, 0] = 1.0


def test_raw_view_of_bytes_shares_memory():
    raw = np.arange(4, dtype=np.int64).tobytes()
    a = tensor_to_numpy(Tensor(dims=[4], data_type=DataType.INT64, raw_data=raw))
    assert np.shares_memory(a, np.frombuffer(raw, np.uint8))


def test_bool_raw_stray_octets_read_true():
    a = tensor_to_numpy(Tensor(dims=[3], data_type=DataType.BOOL, raw_data=b"\x00\x02\x01"))
    assert a.tolist() == [False, True, True] and a.view(np.uint8).tolist() == [0, 1, 1]


# ----------------------------------------------------------------------------- external storage

def test_external_goes_through_read_external(monkeypatch):
    seen = []

    def read_external(t):
        seen.append(t.name)
        return memoryview(np.array([1.5, -2.5], np.float64).tobytes())

    monkeypatch.setattr(tensor_data, "read_external", read_external)
    t = Tensor(dims=[2], data_type=DataType.DOUBLE, name="ext", data_location=DataLocation.EXTERNAL)
    assert tensor_to_numpy(t).tolist() == [1.5, -2.5] and seen == ["ext"]
    t4 = Tensor(dims=[3], data_type=DataType.INT4, name="ext", data_location=DataLocation.EXTERNAL)
    with pytest.raises(OnnxkitTypeError, match=r"'ext'.*2 octets, got 16"):
        tensor_to_numpy(t4)


# ----------------------------------------------------------------------------- errors

def _raises(t, *patterns):
    with pytest.raises(OnnxkitTypeError) as info:
        tensor_to_numpy(t)
    for p in patterns:
        assert p in str(info.value), str(info.value)


def test_raw_wrong_length():
    _raises(Tensor(dims=[2, 3], data_type=DataType.FLOAT, name="W1", raw_data=b"\x00" * 20), "W1", "24", "20")
    _raises(Tensor(dims=[7], data_type=DataType.INT4, name="q", raw_data=b"\x00" * 3), "'q'", "4", "3")
    _raises(Tensor(dims=[7], data_type=DataType.INT4, name="q", raw_data=b"\x00" * 5), "'q'", "4", "5")
    _raises(Tensor(dims=[2], data_type=DataType.COMPLEX128, name="c", raw_data=b"\x00" * 16), "'c'", "32", "16")


@pytest.mark.parametrize("tag", [t for t in ALL_TAGS])
def test_typed_wrong_count(tag):
    field = EXPECTED[tag][3]
    data = [b"x"] * 5 if field == "string_data" else np.zeros(5)   # dims [2, 4] need 8 (or fewer ints)
    t = Tensor(dims=[2, 4], data_type=tag, name="bad", **{field: data})
    _raises(t, "'bad'", field, "5")


def test_missing_storage_is_zero_elements():
    _raises(Tensor(dims=[3], data_type=DataType.FLOAT, name="empty"), "'empty'", "3", "0")
    assert tensor_to_numpy(Tensor(dims=[0], data_type=DataType.FLOAT)).shape == (0,)


@pytest.mark.parametrize("tag", [0, 29, 255, -3])
def test_bad_tag(tag):
    _raises(Tensor(dims=[1], data_type=tag, name="tagged", raw_data=b"\x00"), "'tagged'")


def test_conflicting_storage():
    _raises(Tensor(dims=[1], data_type=DataType.FLOAT, name="both", raw_data=b"\x00" * 4, float_data=[1.0]),
            "'both'", "raw_data", "float_data")
    _raises(Tensor(dims=[1], data_type=DataType.FLOAT, name="wrong", int32_data=[1]), "'wrong'", "int32_data")
    _raises(Tensor(dims=[1], data_type=DataType.STRING, name="s", raw_data=b"abc"), "'s'", "string_data")
    _raises(Tensor(dims=[-1], data_type=DataType.FLOAT, name="neg", raw_data=b""), "'neg'", "negative")
    _raises(Tensor(dims=[1], data_type=DataType.FLOAT, name="seg", raw_data=b"\x00" * 4, segment=Segment(0, 1)),
            "'seg'", "segment")


def test_complex_typed_needs_pairs():
    _raises(Tensor(dims=[2], data_type=DataType.COMPLEX64, name="z", float_data=[1.0, 2.0, 3.0]), "'z'", "4", "3")


# ----------------------------------------------------------------------------- writing

def test_data_type_converts_values_not_codes():
    t = numpy_to_tensor([1.5, 2.5, 100.0], data_type=DataType.FLOAT4E2M1)
    # 1.5 -> 0b0011, 2.5 -> 2.0 (tie to even) 0b0100, 100 -> 6.0 (saturate) 0b0111
    assert t.data_type == DataType.FLOAT4E2M1 and t.raw_data == bytes([0x43, 0x07])
    t = numpy_to_tensor(np.array([1, -1, 9], np.int8), data_type=DataType.INT4)
    assert tensor_to_numpy(t).astype(int).tolist() == [1, -1, 7]        # values, clamped
    t = numpy_to_tensor(np.array([1, 2], np.int32), data_type=DataType.INT32)
    assert t.raw_data == np.array([1, 2], "<i4").tobytes()


def test_strings():
    t = numpy_to_tensor(np.array(["é", "ab"]))
    assert t.data_type == DataType.STRING and t.string_data == [b"\xc3\xa9", b"ab"]
    assert tensor_to_numpy(t).tolist() == [b"\xc3\xa9", b"ab"]
    with pytest.raises(OnnxkitTypeError):
        numpy_to_tensor(np.array([1, 2]), data_type=DataType.STRING)
    with pytest.raises(OnnxkitTypeError):
        numpy_to_tensor(np.array(["x"]), data_type=DataType.FLOAT)
    with pytest.raises(OnnxkitTypeError):
        numpy_to_tensor(np.array([b"x", 3], dtype=object))


def test_big_endian_input_and_from_numpy():
    a = np.array([1.0, 2.0], dtype=">f8")
    t = Tensor.from_numpy(a, name="be")
    assert t.data_type == DataType.DOUBLE and t.raw_data == np.array([1.0, 2.0], "<f8").tobytes()


def test_large_int4_round_trip():
    rng = np.random.default_rng(3)
    a = rng.integers(-8, 8, size=(1001, 999)).astype(ml_dtypes.int4)
    t = numpy_to_tensor(a)
    assert len(t.raw_data) == math.ceil(a.size / 2)
    assert_same(tensor_to_numpy(t), a)


# ----------------------------------------------------------------------------- sparse

def _sparse(values, indices, dims, name="sp"):
    return SparseTensor(values=numpy_to_tensor(np.asarray(values), name=name),
                        indices=numpy_to_tensor(np.asarray(indices, np.int64)), dims=list(dims))


def test_sparse_linear_and_coordinates():
    d = sparse_to_dense(_sparse(np.array([5.0, 7.0], np.float32), [1, 5], [2, 3]))
    assert d.tolist() == [[0, 5, 0], [0, 0, 7]] and d.dtype == np.float32
    d = sparse_to_dense(_sparse(np.array([5, 7], np.int8), [[0, 1], [1, 2]], [2, 3]))
    assert d.tolist() == [[0, 5, 0], [0, 0, 7]] and d.dtype == np.int8
    d = SparseTensor(values=numpy_to_tensor(np.array([b"q"], object)),
                     indices=numpy_to_tensor(np.array([2], np.int64)), dims=[3]).to_dense()
    assert d.tolist() == [b"", b"", b"q"]
    assert sparse_to_dense(_sparse(np.zeros(0, np.float32), np.zeros((0, 2)), [2, 2])).tolist() == [[0, 0], [0, 0]]


@pytest.mark.parametrize("values, indices, dims, words", [
    ([1.0, 2.0], [1, 6], [2, 3], ["sp", "6", "0..5"]),
    ([1.0], [-1], [4], ["-1"]),
    ([1.0, 2.0], [[0, 0], [0, 3]], [2, 3], ["coordinate 3", "axis 1"]),
    ([1.0, 2.0], [[0, 1]], [2, 3], ["[1, 2]", "[2, 2]"]),
    ([1.0, 2.0], [2], [4], ["1 linearized", "2 values"]),
    ([1.0, 2.0], [3, 3], [4], ["more than once"]),
    ([1.0], [[[0]]], [1], ["[NNZ]"]),
])
def test_sparse_errors(values, indices, dims, words):
    with pytest.raises(OnnxkitTypeError) as info:
        sparse_to_dense(_sparse(np.array(values, np.float32), indices, dims))
    for w in words:
        assert w in str(info.value), str(info.value)


def test_sparse_missing_parts():
    with pytest.raises(OnnxkitTypeError, match="indices"):
        sparse_to_dense(SparseTensor(values=numpy_to_tensor(np.zeros(1, np.float32)), dims=[1]))
    bad_ix = SparseTensor(values=numpy_to_tensor(np.zeros(1, np.float32)),
                          indices=numpy_to_tensor(np.zeros(1, np.float32)), dims=[1])
    with pytest.raises(OnnxkitTypeError, match="integers"):
        sparse_to_dense(bad_ix)


# ----------------------------------------------------------------------------- oracle: onnx

def _copy_proto(tp) -> Tensor:
    """An onnxkit Tensor holding the same fields as the TensorProto ``tp``."""
    return Tensor(
        dims=list(tp.dims), data_type=tp.data_type, name=tp.name,
        raw_data=tp.raw_data if tp.HasField("raw_data") else None,
        float_data=np.array(tp.float_data, np.float32), int32_data=np.array(tp.int32_data, np.int32),
        string_data=list(tp.string_data), int64_data=np.array(tp.int64_data, np.int64),
        double_data=np.array(tp.double_data, np.float64), uint64_data=np.array(tp.uint64_data, np.uint64),
    )


def _oracle_input(tag):
    if tag in SMALL_TAGS and tag != DataType.BOOL:
        codes = np.arange(1 << EXPECTED[tag][2], dtype=np.uint8)
        return np.concatenate([codes, codes[:5]]).view(EXPECTED[tag][1])   # every pattern, odd length
    return sample(tag)


@pytest.mark.parametrize("tag", ALL_TAGS)
def test_oracle_onnx(tag):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    a = _oracle_input(tag)
    if tag == DataType.STRING:
        # onnx decodes STRING elements as UTF-8 str; onnxkit keeps octets (Clause 6.4 note).
        a = np.array([["", "a", "é"], ["\u65e5\u672c", "x" * 70, "\x00"]], dtype=object)
        tp = helper.make_tensor("s", tag, list(a.shape), [s.encode() for s in a.reshape(-1)])
        got = tensor_to_numpy(_copy_proto(tp))
        assert got.shape == (2, 3)
        assert [b.decode("utf-8") for b in got.reshape(-1)] == list(numpy_helper.to_array(tp).reshape(-1))
        return
    protos = [numpy_helper.from_array(a, "raw"),                                # raw storage
              helper.make_tensor("typed", tag, list(a.shape), a.reshape(-1))]   # typed storage
    assert protos[0].HasField("raw_data") and not protos[1].HasField("raw_data")
    for tp in protos:
        want = numpy_helper.to_array(tp)
        got = tensor_to_numpy(_copy_proto(tp))
        assert_same(got, want)
        # what onnxkit writes for the same array is what onnx wrote (raw) / holds (typed)
        if tp.HasField("raw_data"):
            assert numpy_to_tensor(want).raw_data == tp.raw_data
        else:
            field, data = numpy_to_typed(want, tag)
            theirs = np.array(getattr(tp, field), dtype=np.asarray(data).dtype)
            assert np.array_equal(bits_of(np.asarray(data)), bits_of(theirs))


def test_oracle_onnx_typed_fields_match_for_exact_values():
    onnx = pytest.importorskip("onnx")
    from onnx import helper

    cases = {
        DataType.FLOAT16: np.array([1.0, -2.0, 0.5], np.float16),
        DataType.BFLOAT16: np.array([1.0, -2.0, 0.5], ml_dtypes.bfloat16),
        DataType.FLOAT8E5M2: np.array([1.0, -2.0, 0.5], ml_dtypes.float8_e5m2),
        DataType.INT4: np.array([1, -2, 3, -8, 7], ml_dtypes.int4),
        DataType.UINT2: np.array([3, 2, 1, 0, 3], ml_dtypes.uint2),
        DataType.FLOAT6E3M2: np.array([1.0, -28.0, 0.25], ml_dtypes.float6_e3m2fn),
        DataType.UINT32: np.array([0, 2**32 - 1], np.uint32),
        DataType.COMPLEX64: np.array([1 + 2j, -3j], np.complex64),
    }
    for tag, a in cases.items():
        tp = helper.make_tensor("t", tag, list(a.shape), a)
        field, data = numpy_to_typed(a, tag)
        assert np.asarray(data).tolist() == list(getattr(tp, field)), element_type(tag).name
