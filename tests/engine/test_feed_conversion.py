"""Feeds that need converting (onnxkit/runtime/feeds.py): Python integers never wrap into the
declared integer type (onnxruntime 1.32 refuses them too), a dict fed to a map input has its
Python / numpy scalar values converted to the value type (as onnxruntime does) and its keys
checked, and a big-endian array is read in the machine's byte order (values kept)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP, helper  # noqa: E402

from onnxkit import InferenceSession, InputError  # noqa: E402

NP = {TP.INT32: np.int32, TP.UINT8: np.uint8, TP.INT64: np.int64, TP.INT8: np.int8, TP.UINT64: np.uint64,
      TP.INT16: np.int16, TP.FLOAT: np.float32, TP.FLOAT16: np.float16, TP.BOOL: np.bool_}


def identity(elem, shape=(None,)) -> bytes:
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", elem, list(shape))],
                          [helper.make_tensor_value_info("y", elem, list(shape))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def ort_session(model: bytes):
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


# -- integers out of the declared range: refused, as onnxruntime refuses them -----------------
OUT_OF_RANGE = [
    (TP.INT32, [2 ** 40], 2 ** 40),
    (TP.UINT8, [-1, 300], -1),
    (TP.UINT8, [7, 300], 300),
    (TP.INT64, [2 ** 63], 2 ** 63),
    (TP.INT64, [2 ** 63, -1], 2 ** 63),        # numpy reads this list as float64
    (TP.INT8, [128], 128),
    (TP.INT8, [-129], -129),
    (TP.UINT64, [-1], -1),
    (TP.UINT64, [2 ** 64], 2 ** 64),           # numpy: an object array
    (TP.INT32, [2 ** 70, 1], 2 ** 70),
    (TP.INT16, [[1, 2], [3, 40000]], 40000),
]


@pytest.mark.parametrize("elem,value,bad", OUT_OF_RANGE, ids=[f"{TP.DataType.Name(e)}-{v}" for e, v, _ in OUT_OF_RANGE])
def test_an_integer_out_of_range_is_refused_naming_the_input(elem, value, bad):
    shape = (None,) * np.ndim(value) if not isinstance(value[0], list) else (None, None)
    model = identity(elem, shape)
    with pytest.raises(InputError, match=rf"input 'x': value {bad} is out of the range .*{np.dtype(NP[elem]).name}"):
        InferenceSession(model).run(None, {"x": value})
    with pytest.raises(Exception):               # the oracle refuses it too (never wraps)
        ort_session(model).run(None, {"x": value})


def test_a_python_int_scalar_out_of_range_is_refused():
    with pytest.raises(InputError, match="input 'x': value 1099511627776 is out of the range"):
        InferenceSession(identity(TP.INT32, ())).run(None, {"x": 2 ** 40})
    (y,) = InferenceSession(identity(TP.INT32, ())).run(None, {"x": -2 ** 31})
    assert y.dtype == np.int32 and int(y) == -2 ** 31


IN_RANGE = [
    (TP.INT64, [2 ** 63 - 1, -2 ** 63]),
    (TP.UINT64, [2 ** 64 - 1, 0]),
    (TP.UINT64, [2 ** 64 - 1, np.int64(5)]),   # numpy reads this list as float64: taken exactly
    (TP.INT8, [127, -128]),
    (TP.UINT8, [0, 255]),
    (TP.INT32, [True, 2 ** 31 - 1]),
    (TP.BOOL, [2, 0]),                         # non-zero is True (onnxruntime too)
]


@pytest.mark.parametrize("elem,value", IN_RANGE, ids=[f"{TP.DataType.Name(e)}-{v}" for e, v in IN_RANGE])
def test_the_range_bounds_are_taken_exactly(elem, value):
    (y,) = InferenceSession(identity(elem)).run(None, {"x": value})
    assert y.dtype == NP[elem]
    assert y.tolist() == [NP[elem](v).item() if elem == TP.BOOL else int(v) for v in value]
    if elem != TP.UINT64 or not isinstance(value[1], np.integer):
        (want,) = ort_session(identity(elem)).run(None, {"x": value})
        assert y.tolist() == want.tolist()


def test_floats_into_a_float_type_overflow_to_inf_as_onnxruntime_without_a_warning():
    for value in ([1e300], [2 ** 200], [-1e300, 1.5]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (y,) = InferenceSession(identity(TP.FLOAT)).run(None, {"x": value})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (want,) = ort_session(identity(TP.FLOAT)).run(None, {"x": value})
        assert y.dtype == np.float32 and y.tolist() == want.tolist()
    with pytest.raises(InputError, match="input 'x': an integer is too large for the declared element type float"):
        InferenceSession(identity(TP.FLOAT)).run(None, {"x": [2 ** 2000]})


def test_a_float_is_still_never_truncated_into_an_integer_input():
    with pytest.raises(InputError, match="declared an integer tensor"):
        InferenceSession(identity(TP.INT32)).run(None, {"x": [1.5]})


# -- dicts fed to map inputs --------------------------------------------------------------------
def dict_vectorizer(key, value, vocabulary, value_shape=(1,)) -> bytes:
    """A DictVectorizer model as skl2onnx writes it: map(key, tensor(value)[1]) -> [1, n]."""
    vt = helper.make_tensor_type_proto(value, list(value_shape))
    mt = helper.make_map_type_proto(key, vt)
    attr = {"string_vocabulary": vocabulary} if key == TP.STRING else {"int64_vocabulary": vocabulary}
    node = helper.make_node("DictVectorizer", ["m"], ["y"], domain="ai.onnx.ml", **attr)
    g = helper.make_graph([node], "dv", [helper.make_value_info("m", mt)],
                          [helper.make_tensor_value_info("y", value, [1, len(vocabulary)])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid("ai.onnx.ml", 1)],
                             ir_version=8).SerializeToString()


SCALARS = [1.5, 2, True, np.float32(1.5), np.float64(2.25), np.int64(3), np.int32(4),
           np.array(1.5, np.float32), np.array(2.25), 2 ** 70]


@pytest.mark.parametrize("key,k", [(TP.STRING, "b"), (TP.INT64, 7)])
@pytest.mark.parametrize("value", SCALARS, ids=[f"{type(v).__name__}-{v}" for v in SCALARS])
def test_map_float_values_are_converted_as_onnxruntime(key, k, value):
    vocabulary = ["a", "b", "c"] if key == TP.STRING else [5, 7, 9]
    model = dict_vectorizer(key, TP.FLOAT, vocabulary)
    (y,) = InferenceSession(model).run(None, {"m": {k: value}})
    (want,) = ort_session(model).run(None, {"m": {k: value}})
    assert y.dtype == np.float32
    assert np.ravel(y).tolist() == np.ravel(want).tolist()


@pytest.mark.parametrize("value", SCALARS, ids=[f"{type(v).__name__}-{v}" for v in SCALARS])
def test_map_double_values_are_converted(value):
    # onnxruntime's Python binding makes every dict map(., float) and so refuses map(., double);
    # onnxkit converts to the declared value type by the same rules
    (y,) = InferenceSession(dict_vectorizer(TP.INT64, TP.DOUBLE, [5, 7])).run(None, {"m": {7: value}})
    assert y.dtype == np.float64
    assert np.ravel(y).tolist() == [0.0, float(np.asarray(value, dtype=np.float64))]


def test_map_values_without_a_declared_shape_and_as_arrays():
    model = dict_vectorizer(TP.STRING, TP.FLOAT, ["a", "b"], value_shape=())
    (y,) = InferenceSession(model).run(None, {"m": {"a": 0.5, "b": np.float64(2.0)}})
    assert np.ravel(y).tolist() == [0.5, 2.0]
    model = dict_vectorizer(TP.STRING, TP.FLOAT, ["a", "b"])
    (y,) = InferenceSession(model).run(None, {"m": {"b": np.array([3.0], np.float32)}})
    assert np.ravel(y).tolist() == [0.0, 3.0]


def test_map_integer_values_keep_the_range_and_float_rules():
    model = dict_vectorizer(TP.STRING, TP.INT64, ["a", "b"])
    (y,) = InferenceSession(model).run(None, {"m": {"a": np.int32(-4), "b": 2 ** 63 - 1}})
    assert y.dtype == np.int64 and np.ravel(y).tolist() == [-4, 2 ** 63 - 1]
    with pytest.raises(InputError, match=r"input \"m\['a'\]\": value 9223372036854775808 is out of the range"):
        InferenceSession(model).run(None, {"m": {"a": 2 ** 63}})
    with pytest.raises(InputError, match="declared an integer tensor"):
        InferenceSession(model).run(None, {"m": {"a": np.float64(1.5)}})


def test_map_keys_are_checked_against_the_key_type():
    s = InferenceSession(dict_vectorizer(TP.STRING, TP.FLOAT, ["a"]))
    for bad in (1, np.int64(1), 1.0):
        with pytest.raises(InputError, match="input 'm': map key .* must be a string"):
            s.run(None, {"m": {bad: 1.0}})
    assert np.ravel(s.run(None, {"m": {b"a": 1.0}})[0]).tolist() == [1.0]
    s = InferenceSession(dict_vectorizer(TP.INT64, TP.FLOAT, [1]))
    for bad in ("a", b"a", 1.0, True):
        with pytest.raises(InputError, match="input 'm': map key .* must be an integer"):
            s.run(None, {"m": {bad: 1.0}})
    with pytest.raises(InputError, match="input 'm': map key 18446744073709551616 is out of the range"):
        s.run(None, {"m": {2 ** 64: 1.0}})
    assert np.ravel(s.run(None, {"m": {np.int64(1): 1.0}})[0]).tolist() == [1.0]


def test_map_string_values_are_refused_for_a_float_map():
    with pytest.raises(InputError, match="input \"m\\['a'\\]\""):
        InferenceSession(dict_vectorizer(TP.STRING, TP.FLOAT, ["a"])).run(None, {"m": {"a": "x"}})


# -- byte order ---------------------------------------------------------------------------------
def one_node(op, inputs, **attrs) -> bytes:
    names = [n for n, _ in inputs]
    g = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info(n, TP.FLOAT, list(s)) for n, s in inputs],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_big_endian_feeds_are_read_in_native_order(backend):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    cases = [("Relu", [("x", x.shape)], {"x": x}), ("Softmax", [("x", x.shape)], {"x": x}),
             ("Conv", [("x", x.shape), ("w", w.shape)], {"x": x, "w": w})]
    for op, inputs, feed in cases:
        s = InferenceSession(one_node(op, inputs), backend=backend)
        (want,) = s.run(None, feed)
        (got,) = s.run(None, {k: v.astype(">f4") for k, v in feed.items()})
        assert got.dtype == np.dtype("float32") and got.dtype.isnative, op
        np.testing.assert_array_equal(got, want, err_msg=op)
    s = InferenceSession(identity(TP.INT64), backend=backend)
    (y,) = s.run(None, {"x": np.array([1, -2, 2 ** 40], dtype=">i8")})
    assert y.dtype.isnative and y.tolist() == [1, -2, 2 ** 40]
