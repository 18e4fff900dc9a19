"""Element types (Clause 6.2, Table 5, Table 6) and the bit-level layer of onnxkit.narrow
(codes, Clause 6.3.4 packing, Table 7, conversion with RNE per Clauses 6.3.2/6.3.3).

Expected values are written out by hand from the spec, or computed here from the field
widths of Table 6 -- never by the code under test.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from onnxkit.dtypes import (
    ELEMENT_TYPES, DataType, by_name, element_type, from_numpy_dtype, is_valid_tag, tag_name,
)
from onnxkit.errors import OnnxkitTypeError
from onnxkit.narrow import (
    convert, from_codes, pack_bits, pack_typed, packed_size, to_codes, unpack_bits, unpack_typed,
)

# tag: (name, numpy dtype, bits, typed-storage field) -- Table 5, Annex B.2.16, Table 7.
EXPECTED = {
    1: ("FLOAT", np.float32, 32, "float_data"),
    2: ("UINT8", np.uint8, 8, "int32_data"),
    3: ("INT8", np.int8, 8, "int32_data"),
    4: ("UINT16", np.uint16, 16, "int32_data"),
    5: ("INT16", np.int16, 16, "int32_data"),
    6: ("INT32", np.int32, 32, "int32_data"),
    7: ("INT64", np.int64, 64, "int64_data"),
    8: ("STRING", np.object_, 0, "string_data"),
    9: ("BOOL", np.bool_, 8, "int32_data"),
    10: ("FLOAT16", np.float16, 16, "int32_data"),
    11: ("DOUBLE", np.float64, 64, "double_data"),
    12: ("UINT32", np.uint32, 32, "uint64_data"),
    13: ("UINT64", np.uint64, 64, "uint64_data"),
    14: ("COMPLEX64", np.complex64, 64, "float_data"),
    15: ("COMPLEX128", np.complex128, 128, "double_data"),
    16: ("BFLOAT16", ml_dtypes.bfloat16, 16, "int32_data"),
    17: ("FLOAT8E4M3FN", ml_dtypes.float8_e4m3fn, 8, "int32_data"),
    18: ("FLOAT8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz, 8, "int32_data"),
    19: ("FLOAT8E5M2", ml_dtypes.float8_e5m2, 8, "int32_data"),
    20: ("FLOAT8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz, 8, "int32_data"),
    21: ("UINT4", ml_dtypes.uint4, 4, "int32_data"),
    22: ("INT4", ml_dtypes.int4, 4, "int32_data"),
    23: ("FLOAT4E2M1", ml_dtypes.float4_e2m1fn, 4, "int32_data"),
    24: ("FLOAT8E8M0", ml_dtypes.float8_e8m0fnu, 8, "int32_data"),
    25: ("UINT2", ml_dtypes.uint2, 2, "int32_data"),
    26: ("INT2", ml_dtypes.int2, 2, "int32_data"),
    27: ("FLOAT6E2M3", ml_dtypes.float6_e2m3fn, 6, "int32_data"),
    28: ("FLOAT6E3M2", ml_dtypes.float6_e3m2fn, 6, "int32_data"),
}
ALL_TAGS = sorted(EXPECTED)
SMALL_TAGS = [t for t in ALL_TAGS if 0 < EXPECTED[t][2] <= 8]          # every bit pattern testable
NARROW_TAGS = [t for t in ALL_TAGS if 0 < EXPECTED[t][2] < 8]


# ----------------------------------------------------------------------------- Table 5

def test_table_is_complete_and_exact():
    assert sorted(int(t) for t in ELEMENT_TYPES) == list(range(1, 29))
    assert len(DataType) == 29 and DataType.UNDEFINED == 0


@pytest.mark.parametrize("tag", ALL_TAGS)
def test_row(tag):
    name, dt, bits, field = EXPECTED[tag]
    row = element_type(tag)
    assert int(row.tag) == tag and row.name == name and DataType[name] == tag
    assert row.dtype == np.dtype(dt)
    assert row.bits == bits
    assert row.typed_field == field
    assert row.is_narrow == (0 < bits < 8)
    assert by_name(name.lower()) is row and tag_name(tag) == name
    assert is_valid_tag(tag)


@pytest.mark.parametrize("tag", ALL_TAGS)
def test_tags_agree_with_onnx(tag):
    onnx = pytest.importorskip("onnx")
    assert onnx.TensorProto.DataType.Name(tag) == EXPECTED[tag][0]
    if tag != 8:
        assert np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tag)) == element_type(tag).dtype


@pytest.mark.parametrize("tag", [t for t in ALL_TAGS if t != 8])
def test_from_numpy_dtype(tag):
    dt = np.dtype(EXPECTED[tag][1])
    assert int(from_numpy_dtype(dt).tag) == tag
    if dt.kind in "iufc" and dt.itemsize > 1:
        assert int(from_numpy_dtype(dt.newbyteorder(">")).tag) == tag


@pytest.mark.parametrize("dt", ["U3", "S2", object])
def test_string_dtypes(dt):
    assert from_numpy_dtype(np.dtype(dt)).tag == DataType.STRING


def test_flags():
    assert element_type(DataType.FLOAT8E8M0).is_float and not element_type(DataType.FLOAT8E8M0).is_signed
    assert element_type(DataType.INT4).is_signed and element_type(DataType.INT4).is_integral
    assert not element_type(DataType.UINT2).is_signed
    assert not element_type(DataType.BOOL).is_integral and not element_type(DataType.STRING).is_integral
    assert element_type(DataType.COMPLEX128).is_complex and not element_type(DataType.COMPLEX128).is_float


def test_tag_zero_rejected():
    with pytest.raises(OnnxkitTypeError, match="UNDEFINED"):
        element_type(0)
    assert not is_valid_tag(0)


@pytest.mark.parametrize("tag", [29, 30, 100, -1, 2**31 - 1, "1", 1.0, None])
def test_unlisted_tags_rejected(tag):
    with pytest.raises(OnnxkitTypeError):
        element_type(tag)


def test_unlisted_tag_message_names_place():
    with pytest.raises(OnnxkitTypeError, match=r"29.*graph\.initializer\[3\]"):
        element_type(29, where="graph.initializer[3]")


@pytest.mark.parametrize("dt", ["datetime64[s]", "timedelta64[s]", "V4"])
def test_unknown_numpy_dtype_rejected(dt):
    with pytest.raises(OnnxkitTypeError):
        from_numpy_dtype(np.dtype(dt))


def test_unknown_name_rejected():
    with pytest.raises(OnnxkitTypeError):
        by_name("FLOAT128")


# ----------------------------------------------------------------------------- values of codes

# Table 6: (exponent bits, mantissa bits, bias, has_inf, nan_rule)
TABLE6 = {
    DataType.FLOAT8E4M3FN: (4, 3, 7, False, "all_ones"),
    DataType.FLOAT8E4M3FNUZ: (4, 3, 8, False, "neg_zero"),
    DataType.FLOAT8E5M2: (5, 2, 15, True, "ieee"),
    DataType.FLOAT8E5M2FNUZ: (5, 2, 16, False, "neg_zero"),
    DataType.FLOAT6E2M3: (2, 3, 1, False, None),
    DataType.FLOAT6E3M2: (3, 2, 3, False, None),
    DataType.FLOAT4E2M1: (2, 1, 1, False, None),
}


def table6_value(code: int, e_bits: int, m_bits: int, bias: int, has_inf: bool, nan_rule) -> float:
    """The value Table 6 gives to a bit pattern (sign, exponent, mantissa), written from scratch."""
    sign = -1.0 if code >> (e_bits + m_bits) else 1.0
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    m = code & ((1 << m_bits) - 1)
    e_max = (1 << e_bits) - 1
    if nan_rule == "neg_zero" and code == 1 << (e_bits + m_bits):
        return math.nan                       # 6.3.2: the UZ types have no -0; that pattern is NaN
    if nan_rule == "all_ones" and e == e_max and m == (1 << m_bits) - 1:
        return math.nan
    if nan_rule == "ieee" and e == e_max:
        return sign * math.inf if (has_inf and m == 0) else math.nan
    if e == 0:
        return sign * m / (1 << m_bits) * 2.0 ** (1 - bias)
    return sign * (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)


@pytest.mark.parametrize("tag", sorted(TABLE6))
def test_every_code_has_table6_value(tag):
    e_bits, m_bits, bias, has_inf, nan_rule = TABLE6[tag]
    width = 1 + e_bits + m_bits
    codes = np.arange(1 << width, dtype=np.uint8)
    got = from_codes(codes, tag).astype(np.float64)
    want = np.array([table6_value(int(c), *TABLE6[tag]) for c in codes])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok])
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))  # -0 kept where it exists
    if nan_rule is None:
        assert not np.isnan(got).any()


def test_every_code_e8m0():
    got = from_codes(np.arange(256, dtype=np.uint8), DataType.FLOAT8E8M0).astype(np.float64)
    assert np.isnan(got[255])
    assert np.array_equal(got[:255], 2.0 ** (np.arange(255) - 127))


@pytest.mark.parametrize("tag, values", [
    (DataType.INT4, [0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1]),
    (DataType.UINT4, list(range(16))),
    (DataType.INT2, [0, 1, -2, -1]),
    (DataType.UINT2, [0, 1, 2, 3]),
])
def test_every_code_narrow_int(tag, values):
    codes = np.arange(len(values), dtype=np.uint8)
    assert from_codes(codes, tag).astype(np.int64).tolist() == values
    assert to_codes(np.array(values).astype(element_type(tag).dtype)).tolist() == codes.tolist()


@pytest.mark.parametrize("tag", SMALL_TAGS)
def test_codes_round_trip_every_pattern(tag):
    bits = EXPECTED[tag][2]
    n = 2 if tag == DataType.BOOL else 1 << bits
    codes = np.arange(n, dtype=np.uint8)
    arr = from_codes(codes, tag)
    assert arr.dtype == element_type(tag).dtype
    assert np.array_equal(to_codes(arr), codes)
    # the ml_dtypes storage itself holds the pattern (same bits a plain uint8 view shows)
    assert np.array_equal(arr.view(np.uint8), codes)


@pytest.mark.parametrize("tag, bad", [(DataType.INT4, 16), (DataType.INT2, 4), (DataType.FLOAT6E2M3, 64),
                                      (DataType.BOOL, 2)])
def test_from_codes_rejects_wide_codes(tag, bad):
    with pytest.raises(OnnxkitTypeError):
        from_codes(np.array([0, bad], dtype=np.uint8), tag)


def test_to_codes_rejects_wide_types():
    with pytest.raises(OnnxkitTypeError):
        to_codes(np.zeros(2, np.float32))


# ----------------------------------------------------------------------------- Clause 6.3.4 raw packing

def test_int4_example_seven_elements_four_octets():
    # 1, -2, 3, -8, 7, 0, 5 -> patterns 0001 1110 0011 1000 0111 0000 0101, low nibble first
    codes = to_codes(np.array([1, -2, 3, -8, 7, 0, 5], dtype=ml_dtypes.int4))
    packed = pack_bits(codes, 4)
    assert packed == bytes([0xE1, 0x83, 0x07, 0x05])
    assert len(packed) == 4 and packed[3] >> 4 == 0           # four padding bits, zero
    assert unpack_bits(bytes([0xE1, 0x83, 0x07, 0xF5]), 4, 7).tolist() == codes.tolist()  # ignored


def test_float6_example_seven_elements_six_octets():
    codes = np.arange(7, dtype=np.uint8)   # 000000 000001 000010 ... 000110, LSB first
    packed = pack_bits(codes, 6)
    assert packed == bytes([0x40, 0x20, 0x0C, 0x44, 0x61, 0x00])
    assert len(packed) == 6 and packed[5] >> 6 == 0           # two padding bits, zero
    assert unpack_bits(packed[:5] + bytes([0xC0]), 6, 7).tolist() == list(range(7))
    allset = bytes([0xFF] * 6)
    assert unpack_bits(allset, 6, 7).tolist() == [63] * 7


def test_two_bit_packing_by_hand():
    assert pack_bits(np.array([0, 1, 2, 3, 0, 1, 2], np.uint8), 2) == bytes([0b11100100, 0b00100100])
    assert unpack_bits(bytes([0b11100100, 0b11100100]), 2, 7).tolist() == [0, 1, 2, 3, 0, 1, 2]


@pytest.mark.parametrize("bits", [2, 4, 6])
@pytest.mark.parametrize("n", list(range(0, 19)))
def test_packed_size_and_padding(bits, n):
    codes = np.full(n, (1 << bits) - 1, dtype=np.uint8)       # all ones: padding would show
    packed = pack_bits(codes, bits)
    assert len(packed) == math.ceil(n * bits / 8) == packed_size(n, bits)
    used = n * bits
    if used % 8:
        assert packed[-1] >> (used % 8) == 0
    assert sum(bin(b).count("1") for b in packed) == used     # exactly N*w bits set


@pytest.mark.parametrize("bits", [2, 4, 6])
def test_every_pattern_pack_unpack(bits):
    codes = np.arange(1 << bits, dtype=np.uint8)
    for shift in range(0, 5):        # every alignment of the patterns in the stream
        c = np.concatenate([np.zeros(shift, np.uint8), codes, codes[::-1]])
        assert np.array_equal(unpack_bits(pack_bits(c, bits), bits, c.size), c)


def test_bit_order_against_naive_stream():
    rng = np.random.default_rng(1)
    for bits in (2, 4, 6):
        c = rng.integers(0, 1 << bits, size=37).astype(np.uint8)
        stream = "".join(format(int(v), f"0{bits}b")[::-1] for v in c)   # LSB-first bits
        stream += "0" * (-len(stream) % 8)
        want = bytes(int(stream[i:i + 8][::-1], 2) for i in range(0, len(stream), 8))
        assert pack_bits(c, bits) == want


def test_large_round_trip_vectorised():
    rng = np.random.default_rng(2)
    c = rng.integers(0, 64, size=1_000_003).astype(np.uint8)
    packed = pack_bits(c, 6)
    assert len(packed) == math.ceil(1_000_003 * 6 / 8)
    assert np.array_equal(unpack_bits(packed, 6, c.size), c)


def test_unpack_too_short_and_bad_codes():
    with pytest.raises(OnnxkitTypeError, match=r"4 octets.*got 3"):
        unpack_bits(b"\x00\x00\x00", 4, 7)
    with pytest.raises(OnnxkitTypeError):
        pack_bits(np.array([16], np.uint8), 4)
    with pytest.raises(OnnxkitTypeError):
        pack_bits(np.array([-1]), 2)


# ----------------------------------------------------------------------------- Table 7 typed packing

def test_typed_packing_by_hand():
    assert pack_typed(np.array([1, 2, 3, 0, 1], np.uint8), 2).tolist() == [1 | 2 << 2 | 3 << 4, 1]
    assert pack_typed(np.array([1, 2, 3], np.uint8), 4).tolist() == [0x21, 0x03]
    assert pack_typed(np.array([63, 5], np.uint8), 6).tolist() == [63, 5]
    assert unpack_typed([0x21, 0x03], 4, 3).tolist() == [1, 2, 3]
    assert unpack_typed([57, 1], 2, 5).tolist() == [1, 2, 3, 0, 1]


@pytest.mark.parametrize("bits", [2, 4, 6])
def test_typed_every_pattern_and_other_bits_zero(bits):
    codes = np.arange(1 << bits, dtype=np.uint8)
    ints = pack_typed(codes, bits)
    assert len(ints) == math.ceil(codes.size / {2: 4, 4: 2, 6: 1}[bits])
    assert (ints >> {2: 8, 4: 8, 6: 6}[bits] == 0).all()    # every other bit zero (6.3.4)
    assert np.array_equal(unpack_typed(ints, bits, codes.size), codes)


def test_typed_count_mismatch_and_bad_width():
    with pytest.raises(OnnxkitTypeError, match="needs 2"):
        unpack_typed([1, 2, 3], 4, 3)
    with pytest.raises(OnnxkitTypeError):
        pack_typed(np.array([1], np.uint8), 3)


# ----------------------------------------------------------------------------- conversion (RNE)

def _conv(values, tag, **kw):
    return convert(np.array(values, dtype=np.float64), tag, **kw).astype(np.float64).tolist()


def test_float4_rne_ties_to_even():
    # FLOAT4E2M1 values: 0 0.5 1 1.5 2 3 4 6 (codes 0..7); each tie goes to the even code.
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.75, -5.0]
    assert _conv(ties, DataType.FLOAT4E2M1) == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -1.0, -4.0]
    assert _conv([0.3, 1.3, 2.6, 4.9, 5.1], DataType.FLOAT4E2M1) == [0.5, 1.5, 3.0, 4.0, 6.0]


def test_float4_single_rounding_from_double():
    # just above / below a tie: a float32 intermediate would turn both into the tie.
    assert _conv([1.25 + 2**-40, 1.25 - 2**-40], DataType.FLOAT4E2M1) == [1.5, 1.0]


def test_bfloat16_single_rounding_from_double():
    assert _conv([1 + 2**-8, 1 + 2**-8 + 2**-40, 1 + 3 * 2**-8], DataType.BFLOAT16) == [1.0, 1 + 2**-7, 1 + 2**-6]


@pytest.mark.parametrize("tag, tie_down, tie_up, up", [
    (DataType.FLOAT8E4M3FN, 1 + 2**-4, 1 + 3 * 2**-4, 1.25),
    (DataType.FLOAT8E4M3FNUZ, 1 + 2**-4, 1 + 3 * 2**-4, 1.25),
    (DataType.FLOAT8E5M2, 1 + 2**-3, 1 + 3 * 2**-3, 1.5),
    (DataType.FLOAT8E5M2FNUZ, 1 + 2**-3, 1 + 3 * 2**-3, 1.5),
    (DataType.FLOAT6E2M3, 1 + 2**-4, 1 + 3 * 2**-4, 1.25),
    (DataType.FLOAT6E3M2, 1 + 2**-3, 1 + 3 * 2**-3, 1.5),
])
def test_fp8_fp6_rne(tag, tie_down, tie_up, up):
    assert _conv([tie_down, tie_up, -tie_down], tag) == [1.0, up, -1.0]


@pytest.mark.parametrize("tag, big", [
    (DataType.FLOAT8E4M3FN, 448.0), (DataType.FLOAT8E4M3FNUZ, 240.0), (DataType.FLOAT8E5M2, 57344.0),
    (DataType.FLOAT8E5M2FNUZ, 57344.0), (DataType.FLOAT4E2M1, 6.0), (DataType.FLOAT6E2M3, 7.5),
    (DataType.FLOAT6E3M2, 28.0),
])
def test_saturation(tag, big):
    assert _conv([1e6, -1e6, math.inf, -math.inf], tag) == [big, -big, big, -big]


def test_no_saturation():
    assert all(math.isnan(v) for v in _conv([1e6, math.inf], DataType.FLOAT8E4M3FN, saturate=False))
    assert _conv([1e6, -1e6], DataType.FLOAT8E5M2, saturate=False) == [math.inf, -math.inf]
    assert _conv([100.0], DataType.FLOAT4E2M1, saturate=False) == [6.0]   # no Inf/NaN: saturates


def test_e8m0_rne_and_range():
    got = convert(np.array([0.75, 3.0, 6.0, 1.4, 1.6, 1.0, 0.0, -1.0, math.nan, 2.0**130, 2.0**-140]),
                  DataType.FLOAT8E8M0).view(np.uint8).tolist()
    assert got == [126, 128, 130, 127, 128, 127, 0, 255, 255, 254, 0]
    assert convert(np.array([2.0**130]), DataType.FLOAT8E8M0, saturate=False).view(np.uint8).tolist() == [255]


@pytest.mark.parametrize("tag, values, want", [
    (DataType.INT4, [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 6.5, 7.5, 100, -100, math.nan, math.inf],
     [0, 2, 2, 0, -2, -2, 6, 7, 7, -8, 0, 7]),
    (DataType.UINT4, [0.5, 1.5, 14.5, 15.5, 16, -3, -math.inf], [0, 2, 14, 15, 15, 0, 0]),
    (DataType.INT2, [0.5, 1.5, -1.5, -2.5, -3, 0.49], [0, 1, -2, -2, -2, 0]),
    (DataType.UINT2, [1.5, 2.5, 3.5, -0.5], [2, 2, 3, 0]),
    (DataType.INT8, [126.5, 127.5, 1000, -1000], [126, 127, 127, -128]),
])
def test_narrow_int_rne_and_clamp(tag, values, want):
    assert convert(np.array(values), tag).astype(np.int64).tolist() == want


def test_int_sources_clamp():
    assert convert(np.array([100, -100, 3], np.int64), DataType.INT4).astype(int).tolist() == [7, -8, 3]
    assert convert(np.array([2**64 - 1], np.uint64), DataType.INT2).astype(int).tolist() == [1]
    assert convert(np.array([2**63 - 1, -5], np.int64), DataType.UINT8).tolist() == [255, 0]
    assert convert(np.array([-1, 7], ml_dtypes.int4), DataType.UINT2).astype(int).tolist() == [0, 3]


def test_convert_refuses_lossy_kinds():
    with pytest.raises(OnnxkitTypeError):
        convert(np.array([1 + 1j]), DataType.FLOAT)
    with pytest.raises(OnnxkitTypeError):
        convert(np.array(["a"]), DataType.INT8)
