"""Type system of Clause 6: shapes, value types, denotations, and broadcasting (6.6)."""

import pytest

from onnxkit import ir
from onnxkit.dtypes import DataType
from onnxkit.shapes import (
    BroadcastError, broadcast_multidirectional, broadcast_shape, broadcast_unidirectional,
)
from onnxkit.wire import decode_message, encode_message


def roundtrip(obj, message):
    return decode_message(encode_message(obj, message), message)


def test_unknown_rank_is_distinct_from_rank_zero_and_from_unknown_extents():
    unknown_rank = ir.tensor_type(DataType.FLOAT)
    scalar = ir.tensor_type(DataType.FLOAT, [])
    unknown_extents = ir.tensor_type(DataType.FLOAT, [None, None])
    assert unknown_rank.shape is None
    assert scalar.shape is not None and scalar.shape.rank == 0
    assert unknown_extents.shape.rank == 2 and unknown_extents.shape.values == (None, None)
    # all three survive the wire as what they are (6.5.1)
    for t in (unknown_rank, scalar, unknown_extents):
        back = roundtrip(t, "TypeProto")
        assert back == t
    assert roundtrip(unknown_rank, "TypeProto").shape is None
    assert roundtrip(scalar, "TypeProto").shape.rank == 0


def test_dimensions_extent_variable_unknown_and_denotation_kept():
    shape = ir.Shape.of([0, "batch", None])
    shape.dim[1].denotation = "DATA_BATCH"
    t = ir.TensorType(DataType.INT64, shape, denotation="TENSOR")
    back = roundtrip(t, "TypeProto")
    assert back.shape.values == (0, "batch", None)
    assert back.shape.dim[0].is_static and back.shape.dim[0].dim_value == 0  # extent 0 is allowed (6.5.1)
    assert back.shape.dim[1].denotation == "DATA_BATCH"
    assert back.denotation == "TENSOR"


@pytest.mark.parametrize("t", [
    ir.SparseTensorType(DataType.FLOAT, [3, 4]),
    ir.SequenceType(ir.tensor_type(DataType.INT64, ["N"])),
    ir.MapType(DataType.STRING, ir.tensor_type(DataType.FLOAT, [])),
    ir.MapType(DataType.INT64, ir.SequenceType(ir.tensor_type(DataType.FLOAT))),
    ir.OptionalType(ir.SequenceType(ir.tensor_type(DataType.FLOAT))),
    ir.OpaqueType("com.example", "Handle"),
    ir.OpaqueType("", "Thing", denotation="TEXT"),
])
def test_every_value_type_round_trips(t):
    back = roundtrip(t, "TypeProto")
    assert type(back) is type(t) and back == t


def test_type_strings_are_readable():
    assert str(ir.tensor_type(DataType.FLOAT, [1, "N", None])) == "tensor(float)[1, N, ?]"
    assert str(ir.SequenceType(ir.tensor_type(DataType.INT64))) == "seq(tensor(int64))"
    assert str(ir.MapType(DataType.STRING, ir.tensor_type(DataType.FLOAT))) == "map(string, tensor(float))"


def test_map_key_types_are_the_integral_ones_and_string():
    # Clause 6.8.2
    assert ir.MAP_KEY_TAGS == {DataType.UINT8, DataType.INT8, DataType.UINT16, DataType.INT16, DataType.INT32,
                               DataType.INT64, DataType.UINT32, DataType.UINT64, DataType.STRING}


# -- broadcasting (6.6) -----------------------------------------------------------------------

@pytest.mark.parametrize("a, b, expected", [
    # the examples of 6.6.2
    ((2, 3, 4, 5), (), (2, 3, 4, 5)),
    ((1, 4, 5), (2, 3, 1, 1), (2, 3, 4, 5)),
    ((3, 4, 5), (2, 1, 1, 1), (2, 3, 4, 5)),
    ((0, 1), (1, 7), (0, 7)),
])
def test_multidirectional_examples_of_the_spec(a, b, expected):
    result = broadcast_multidirectional([a, b])
    assert result.shape == expected and result.provable


def test_multidirectional_static_clash_is_an_error():
    with pytest.raises(BroadcastError, match="axis 1"):
        broadcast_shape((2, 3), (2, 4))


def test_dimension_variable_rules_of_6_6_4():
    assert broadcast_multidirectional([("N", 3), ("N", 3)]) .shape == ("N", 3)
    assert broadcast_multidirectional([("N",), (1,)]).shape == ("N",)
    r = broadcast_multidirectional([("N",), ("M",)])
    assert r.shape == (None,) and not r.provable  # never equated (9.3)
    r = broadcast_multidirectional([("N",), (3,)])
    assert r.shape == (3,) and not r.provable  # N is not known to be 1 or 3
    r = broadcast_multidirectional([(None,), (1,)])
    assert r.shape == (None,) and not r.provable
    r = broadcast_multidirectional([(None,), ("N",)])
    assert r.shape == (None,)


def test_unidirectional_is_not_symmetric():
    assert broadcast_unidirectional((2, 3, 4), (3, 1)).shape == (2, 3, 4)
    with pytest.raises(BroadcastError):
        broadcast_unidirectional((3, 1), (2, 3, 4))
    with pytest.raises(BroadcastError, match="axis 1"):
        broadcast_unidirectional((2, 3), (2, 4))
    r = broadcast_unidirectional(("N", 3), ("M", 3))
    assert r.shape == ("N", 3) and not r.provable
    assert broadcast_unidirectional(("N", 3), ("N", 1)).provable
