"""Property tests of the codec (Clause 12).

(a) Random IR models -- graphs, nodes, attributes of every writable type (subgraphs included),
    tensors in raw and typed storage, value infos of every type kind, dimensions of every
    kind, metadata, functions, training info, device configurations -- encode, decode to an
    equal IR, and encode again to the same octets; ``onnx``'s protobuf parses the octets and
    writes back the very same octets.
(b) Random octets, structured field soup, and mutations (bit flips, insertions, deletions,
    truncations) of real models of the ONNX 1-3 package only ever raise ``DecodeError`` or
    ``LimitExceeded``, each with an offset and a path.

The examples are deterministic (tests/conftest.py loads a derandomized hypothesis profile with
no wall-clock deadline), so a run on a slow shared machine draws and judges the same examples.
"""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from onnxkit import api, ir
from onnxkit.errors import DecodeError, EncodeError, ExternalDataError, LimitExceeded
from onnxkit.ir import AttributeType as AT
from onnxkit.wire import decode_message, encode_message

onnx = pytest.importorskip("onnx")

ROUND_TRIP = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                              HealthCheck.data_too_large])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_examples_are_deterministic():
    """The conftest profile holds for both settings of this module (no seed drawn, no deadline)."""
    for chosen in (ROUND_TRIP, FUZZ):
        assert chosen.derandomize is True and chosen.deadline is None and chosen.database is None

# -- scalars -----------------------------------------------------------------------------------

INT64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
INT32 = st.integers(-(2 ** 31), 2 ** 31 - 1)
UINT64 = st.integers(0, 2 ** 64 - 1)
SMALL = st.integers(-3, 300)
F32 = st.floats(width=32, allow_nan=False)  # NaN != NaN would defeat IR equality; bits are tested in test_wire_rules
F64 = st.floats(allow_nan=False)
TEXT = st.text(max_size=6)
NAME = st.sampled_from(["", "x", "y", "W", "ai.onnx", "com.microsoft", "N", "batch"]) | TEXT
OCTETS = st.binary(max_size=12)
ELEM = st.sampled_from([1, 2, 3, 6, 7, 8, 9, 10, 11, 16, 17, 21, 23, 28]) | INT32


def _lists(s, n=3):
    return st.lists(s, max_size=n)


def entries():
    return _lists(st.builds(ir.StringStringEntry, key=TEXT, value=TEXT), 2)


# -- tensors -----------------------------------------------------------------------------------

@st.composite
def tensors(draw):
    storage = draw(st.sampled_from(["raw", "float", "int32", "string", "int64", "double", "uint64", "none",
                                    "external", "several"]))
    kw = dict(dims=draw(_lists(st.integers(0, 2 ** 40) | SMALL)), data_type=draw(ELEM), name=draw(NAME),
              doc_string=draw(TEXT), metadata_props=draw(entries()))
    if draw(st.booleans()):
        kw["segment"] = ir.Segment(begin=draw(INT64), end=draw(INT64))
    fields = {"float": ("float_data", F32, np.float32), "int32": ("int32_data", INT32, np.int32),
              "int64": ("int64_data", INT64, np.int64), "double": ("double_data", F64, np.float64),
              "uint64": ("uint64_data", UINT64, np.uint64)}
    chosen = list(fields) + ["string", "raw"] if storage == "several" else [storage]
    for c in chosen:
        if c in fields:
            name, s, dt = fields[c]
            kw[name] = np.array(draw(_lists(s, 5)), dtype=dt)
        elif c == "string":
            kw["string_data"] = draw(_lists(OCTETS))
        elif c == "raw":
            kw["raw_data"] = draw(st.binary(max_size=24))  # bytes; the decoder gives a memoryview: equal
    if storage == "external":
        kw["data_location"] = 1
        kw["external_data"] = [ir.StringStringEntry("location", draw(TEXT)), ir.StringStringEntry("offset", "0")]
    elif draw(st.integers(0, 9)) == 0:
        kw["data_location"] = draw(st.sampled_from([0, 1]))  # (proto2 enums are closed: protobuf moves 5 to unknowns)
    return ir.Tensor(**kw)


@st.composite
def sparse_tensors(draw):
    return ir.SparseTensor(values=draw(st.none() | tensors()), indices=draw(st.none() | tensors()),
                           dims=draw(_lists(SMALL)))


# -- types ---------------------------------------------------------------------------------------

@st.composite
def dims(draw):
    kind = draw(st.sampled_from(["value", "param", "unknown"]))
    den = draw(st.sampled_from(["", "DATA_BATCH"]) | TEXT)
    if kind == "value":
        return ir.Dim(dim_value=draw(st.integers(0, 8) | INT64), denotation=den)
    if kind == "param":
        return ir.Dim(dim_param=draw(NAME), denotation=den)
    return ir.Dim(denotation=den)


SHAPES = st.none() | st.builds(ir.Shape, _lists(dims()))
DENOT = st.sampled_from(["", "TENSOR", "IMAGE"])
LEAF_TYPES = st.one_of(
    st.builds(ir.TensorType, elem_type=ELEM, shape=SHAPES, denotation=DENOT),
    st.builds(ir.SparseTensorType, elem_type=ELEM, shape=SHAPES, denotation=DENOT),
    st.builds(ir.OpaqueType, domain=NAME, name=NAME, denotation=DENOT),
    st.builds(ir.UndefinedType, denotation=DENOT),
)
TYPES = st.recursive(LEAF_TYPES, lambda inner: st.one_of(
    st.builds(ir.SequenceType, elem_type=inner | st.none(), denotation=DENOT),
    st.builds(ir.MapType, key_type=st.sampled_from([7, 8, 2]) | INT32, value_type=inner | st.none(), denotation=DENOT),
    st.builds(ir.OptionalType, elem_type=inner | st.none(), denotation=DENOT),
), max_leaves=4)


def value_infos():
    return st.builds(ir.ValueInfo, name=NAME, type=st.none() | TYPES, doc_string=TEXT, metadata_props=entries())


# -- attributes, nodes, graphs (recursive through GRAPH / GRAPHS attributes) -----------------------

@st.composite
def attributes(draw, depth, in_function=False):
    name = draw(NAME)
    doc = draw(st.sampled_from(["", "doc"]))
    if in_function and draw(st.integers(0, 4)) == 0:  # a reference to a function attribute parameter (8.4)
        return ir.Attribute(name, draw(st.sampled_from(list(AT)[1:])), None, ref_attr_name=draw(NAME.filter(bool)), doc_string=doc)
    kinds = {
        AT.FLOAT: F32, AT.INT: INT64, AT.STRING: OCTETS, AT.TENSOR: tensors(), AT.SPARSE_TENSOR: sparse_tensors(),
        AT.FLOATS: _lists(F32), AT.INTS: _lists(INT64), AT.STRINGS: _lists(OCTETS), AT.TENSORS: _lists(tensors(), 2),
        AT.SPARSE_TENSORS: _lists(sparse_tensors(), 2), AT.TYPE_PROTOS: _lists(TYPES, 2),
    }
    if depth < 2:
        kinds[AT.GRAPH] = graphs(depth + 1)
        kinds[AT.GRAPHS] = _lists(graphs(depth + 1), 2 - depth)
    atype = draw(st.sampled_from(sorted(kinds)))
    return ir.Attribute(name, atype, draw(kinds[atype]), doc_string=doc)


def _sharding():
    simple = st.one_of(st.builds(ir.SimpleShardedDim, dim_value=INT64, num_shards=SMALL),
                       st.builds(ir.SimpleShardedDim, dim_param=NAME, num_shards=SMALL),
                       st.builds(ir.SimpleShardedDim, num_shards=SMALL))
    spec = st.builds(ir.ShardingSpec, tensor_name=NAME, device=_lists(INT64),
                     index_to_device_group_map=_lists(st.builds(ir.IntIntListEntry, key=INT64, value=_lists(INT64)), 2),
                     sharded_dim=_lists(st.builds(ir.ShardedDim, axis=INT64, simple_sharding=_lists(simple, 2)), 2))
    return _lists(st.builds(ir.NodeDeviceConfiguration, configuration_id=NAME, sharding_spec=_lists(spec, 2),
                            pipeline_stage=INT32), 1)


@st.composite
def nodes(draw, depth, in_function=False):
    return ir.Node(input=draw(_lists(NAME)), output=draw(_lists(NAME)), name=draw(NAME), op_type=draw(NAME),
                   domain=draw(NAME), overload=draw(st.sampled_from(["", "o1"])),
                   attribute=draw(_lists(attributes(depth, in_function), 3)), doc_string=draw(TEXT),
                   metadata_props=draw(entries()),
                   device_configurations=draw(_sharding()) if draw(st.integers(0, 5)) == 0 else [])


@st.composite
def graphs(draw, depth=0):
    return ir.Graph(
        node=draw(_lists(nodes(depth), 3 - depth)), name=draw(NAME), initializer=draw(_lists(tensors(), 2)),
        sparse_initializer=draw(_lists(sparse_tensors(), 1)), doc_string=draw(TEXT),
        input=draw(_lists(value_infos(), 2)), output=draw(_lists(value_infos(), 2)),
        value_info=draw(_lists(value_infos(), 2)),
        quantization_annotation=draw(_lists(st.builds(ir.TensorAnnotation, tensor_name=NAME,
                                                      quant_parameter_tensor_names=entries()), 1)),
        metadata_props=draw(entries()))


OPSETS = _lists(st.builds(ir.OperatorSetId, domain=NAME, version=st.integers(0, 30) | INT64), 2)


@st.composite
def functions(draw):
    return ir.Function(name=draw(NAME), input=draw(_lists(NAME)), output=draw(_lists(NAME)),
                       attribute=draw(_lists(NAME)), attribute_proto=draw(_lists(attributes(1), 2)),
                       node=draw(_lists(nodes(1, in_function=True), 3)), doc_string=draw(TEXT),
                       opset_import=draw(OPSETS), domain=draw(NAME), overload=draw(st.sampled_from(["", "o"])),
                       value_info=draw(_lists(value_infos(), 2)), metadata_props=draw(entries()))


@st.composite
def models(draw):
    return ir.Model(
        ir_version=draw(st.integers(0, 14) | INT64), opset_import=draw(OPSETS), producer_name=draw(TEXT),
        producer_version=draw(TEXT), domain=draw(NAME), model_version=draw(INT64), doc_string=draw(TEXT),
        graph=draw(st.none() | graphs()), metadata_props=draw(entries()),
        training_info=draw(_lists(st.builds(ir.TrainingInfo, initialization=st.none() | graphs(1),
                                            algorithm=st.none() | graphs(1), initialization_binding=entries(),
                                            update_binding=entries()), 1)),
        functions=draw(_lists(functions(), 2)),
        configuration=draw(_lists(st.builds(ir.DeviceConfiguration, name=NAME, num_devices=INT32,
                                            device=_lists(NAME)), 2)))


# -- (a) round trips -----------------------------------------------------------------------------

@ROUND_TRIP
@given(models())
def test_random_model_round_trip(m):
    data = api.to_bytes(m)
    back = decode_message(data, "ModelProto")
    assert back == m
    assert api.to_bytes(back) == data
    # protobuf, the oracle, reads the octets and writes back exactly the same octets
    proto = onnx.ModelProto.FromString(data)
    assert proto.SerializeToString() == data
    # and a few fields as protobuf reads them
    assert proto.ir_version == m.ir_version and proto.producer_name == m.producer_name
    assert len(proto.functions) == len(m.functions) and proto.HasField("graph") == (m.graph is not None)
    if m.graph is not None:
        assert [n.op_type for n in proto.graph.node] == [n.op_type for n in m.graph.node]
    # the canonical form is a fixed point, and the same for the IR and for its octets
    canonical = api.canonical_bytes(data)
    assert api.canonical_bytes(canonical) == canonical == api.canonical_bytes(m)


@ROUND_TRIP
@given(tensors())
def test_random_tensor_round_trip(t):
    data = encode_message(t)
    back = decode_message(data, "TensorProto")
    assert back == t
    assert encode_message(back) == data
    proto = onnx.TensorProto.FromString(data)
    assert proto.SerializeToString() == data
    assert list(proto.dims) == [int(d) for d in t.dims]
    assert list(proto.int64_data) == t.int64_data.tolist() and list(proto.uint64_data) == t.uint64_data.tolist()
    assert proto.HasField("raw_data") == (t.raw_data is not None)


@ROUND_TRIP
@given(TYPES)
def test_random_type_round_trip(t):
    data = encode_message(t, "TypeProto")
    back = decode_message(data, "TypeProto")
    assert back == t and type(back) is type(t)
    assert encode_message(back, "TypeProto") == data
    assert onnx.TypeProto.FromString(data).SerializeToString() == data


@ROUND_TRIP
@given(attributes(0, in_function=True))
def test_random_attribute_round_trip(a):
    data = encode_message(a)
    back = decode_message(data, "AttributeProto")
    assert back == a
    assert encode_message(back) == data
    proto = onnx.AttributeProto.FromString(data)
    assert proto.SerializeToString() == data
    assert proto.type == int(a.type) and proto.name == a.name


# -- (b) robustness: only DecodeError / LimitExceeded ----------------------------------------------

MESSAGES = ["ModelProto", "GraphProto", "NodeProto", "AttributeProto", "TensorProto", "SparseTensorProto",
            "TypeProto", "ValueInfoProto", "FunctionProto", "SequenceProto", "MapProto", "OptionalProto",
            "TensorShapeProto.Dimension", "TrainingInfoProto", "NodeDeviceConfigurationProto", "OperatorSetProto"]


def _decode_only_fails_cleanly(data: bytes, message: str):
    """Decode; a failure must be DecodeError (with offset and path) or LimitExceeded.  On success the
    model re-encodes (or is refused with EncodeError) and the re-encoding is a fixed point."""
    try:
        obj = decode_message(data, message)
    except DecodeError as exc:
        assert isinstance(exc.offset, int) and 0 <= exc.offset <= len(data), (exc, exc.offset)
        assert exc.path.startswith(message), exc.path
        return None
    except LimitExceeded as exc:
        assert exc.limit in ("max_nesting_depth", "max_message_bytes")
        return None
    try:
        again = encode_message(obj, message)
    except EncodeError:
        return obj
    obj2 = decode_message(again, message)
    assert encode_message(obj2, message) == again
    return obj


@FUZZ
@given(st.binary(max_size=300), st.sampled_from(MESSAGES))
def test_random_octets(data, message):
    _decode_only_fails_cleanly(data, message)


def _uv(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


@st.composite
def field_soup(draw, depth=0):
    """Octets shaped like a message: keys of small tags with every wire type, plausible payloads."""
    out = bytearray()
    for _ in range(draw(st.integers(0, 6))):
        tag = draw(st.integers(0, 26) | st.integers(0, 2 ** 29))
        wt = draw(st.sampled_from([0, 0, 1, 2, 2, 2, 5, 3, 4, 6, 7]))
        out += _uv(tag * 8 + wt)
        if wt == 0:
            out += _uv(draw(st.integers(0, 2 ** 64 - 1) | st.integers(0, 300) | st.integers(2 ** 31 - 2, 2 ** 32)))
        elif wt == 1:
            out += draw(st.binary(min_size=8, max_size=8))
        elif wt == 5:
            out += draw(st.binary(min_size=4, max_size=4))
        elif wt == 2:
            payload = draw(field_soup(depth + 1)) if depth < 4 and draw(st.booleans()) else draw(st.binary(max_size=10))
            slack = draw(st.sampled_from([0, 0, 0, 1, -1, 1000]))
            out += _uv(max(0, len(payload) + slack)) + payload
    if draw(st.integers(0, 8)) == 0:
        out += draw(st.binary(max_size=4))  # trailing junk
    return bytes(out)


@FUZZ
@given(field_soup(), st.sampled_from(MESSAGES))
def test_field_soup(data, message):
    _decode_only_fails_cleanly(data, message)


SEEDS = ["node/test_if/model.onnx", "node/test_loop11/model.onnx", "node/test_scan_sum/model.onnx",
         "node/test_sequence_map_add_2_sequences/model.onnx", "node/test_ai_onnx_ml_tree_ensemble_set_membership/model.onnx",
         "node/test_range_float_type_positive_delta_expanded/model.onnx", "simple/test_gradient_of_add/model.onnx",
         "pytorch-converted/test_SELU/model.onnx", "node/test_identity_opt/model.onnx",
         "node/test_identity_opt/test_data_set_0/input_0.pb",
         "node/test_sequence_map_add_2_sequences/test_data_set_0/input_0.pb",
         "node/test_if/test_data_set_0/output_0.pb"]


@pytest.fixture(scope="module")
def seeds(onnx_vectors_dir):
    out = []
    for rel in SEEDS:
        p = onnx_vectors_dir / rel
        if p.exists():
            msg = "ModelProto" if p.suffix == ".onnx" else ("TensorProto" if "test_if" in rel else
                                                            "OptionalProto" if "identity_opt" in rel else "SequenceProto")
            data = p.read_bytes()
            decode_message(data, msg)  # the seed itself is valid
            out.append((rel, msg, data))
    assert len(out) >= 8, "the seed models of the ONNX 1-3 package are missing"
    return out


MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10 ** 6), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 10 ** 6), st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x0B, 0x0C, 0x08, 0x12])
              | st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10 ** 6), st.binary(min_size=1, max_size=11)),
    st.tuples(st.just("delete"), st.integers(0, 10 ** 6), st.integers(1, 8)),
    st.tuples(st.just("truncate"), st.integers(0, 10 ** 6), st.just(0)),
)


def _mutate(data: bytes, mutations) -> bytes:
    b = bytearray(data)
    for op, pos, arg in mutations:
        if not b:
            break
        pos %= len(b)
        if op == "flip":
            b[pos] ^= 1 << arg
        elif op == "set":
            b[pos] = arg
        elif op == "insert":
            b[pos:pos] = arg
        elif op == "delete":
            del b[pos:pos + arg]
        else:
            del b[pos:]
    return bytes(b)


@FUZZ
@given(data=st.data())
def test_mutated_vectors(seeds, data):
    rel, message, original = data.draw(st.sampled_from(seeds), label="seed")
    mutations = data.draw(st.lists(MUTATION, min_size=1, max_size=4), label="mutations")
    mutated = _mutate(original, mutations)
    assume(mutated != original)
    _decode_only_fails_cleanly(mutated, message)
    # the public API behaves the same: load() raises only onnxkit's own errors
    if message == "ModelProto":
        try:
            api.load(mutated)
        except (DecodeError, LimitExceeded, ExternalDataError):
            pass
