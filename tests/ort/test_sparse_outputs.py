"""Graph outputs declared sparse tensors, and the session's outputs as views of their owners
(onnxkit/runtime/sparse.py ``coo_of_dense``, session.py ``_fetch``, feeds.py ``fresh_outputs``;
the checker's ``sparse-constant-output``), each against onnxruntime 1.32 on the same model.

onnxruntime returns an output that a sparse initializer (or a Constant holding a sparse value,
which it makes a sparse initializer) gives as a ``SparseTensor``: COO, the nonzero elements in
row-major order with linear indices, whatever order and layout the file gives them in."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import AttributeProto, TensorProto as TP, helper, numpy_helper  # noqa: E402

from onnxkit import InferenceSession, OrtValue, ValidationError  # noqa: E402
from onnxkit.errors import ConformanceWarning  # noqa: E402
from onnxkit.runtime.sparse import OrtSparseFormat, SparseTensor, coo_of_dense  # noqa: E402

VALUES = np.array([1.5, 0.0, -2.5, 4.0], np.float32)   # one explicit zero: onnxruntime drops it
LAYOUTS = {
    "linear-sorted": [1, 2, 5, 7],
    "linear-unsorted": [7, 2, 5, 1],
    "coordinates": [[0, 1], [0, 2], [1, 2], [2, 1]],
}


def _sparse(indices, values=VALUES, dims=(3, 3)):
    return helper.make_sparse_tensor(numpy_helper.from_array(values, "sv"),
                                     numpy_helper.from_array(np.array(indices, np.int64), "si"), list(dims))


def _out(name: str, elem: int = TP.FLOAT, dims=(3, 3), sparse: bool = True):
    if not sparse:
        return helper.make_tensor_value_info(name, elem, list(dims))
    vi = onnx.ValueInfoProto(name=name)
    vi.type.sparse_tensor_type.elem_type = elem
    for d in dims:
        vi.type.sparse_tensor_type.shape.dim.add().dim_value = d
    return vi


def _model(form: str, indices, elem: int = TP.FLOAT, sparse: bool = True, ir: int = 8, opset: int = 13,
           values=VALUES) -> bytes:
    sp = _sparse(indices, values)
    if form == "initializer":
        g = helper.make_graph([], "g", [], [_out("sv", elem, sparse=sparse)], sparse_initializer=[sp])
    else:
        if form == "sparse_value":
            node = helper.make_node("Constant", [], ["sv"], sparse_value=sp)
        else:  # "value": the attribute onnxruntime's own test model uses, holding a SPARSE_TENSOR
            node = helper.make_node("Constant", [], ["sv"])
            node.attribute.add(name="value", type=AttributeProto.SPARSE_TENSOR).sparse_tensor.CopyFrom(sp)
        g = helper.make_graph([node], "g", [], [_out("sv", elem, sparse=sparse)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m.SerializeToString()


def _ort_sparse(model: bytes):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    value = sess.run_with_ort_values(None, {})[0]
    assert value.is_sparse_tensor()
    return value.as_sparse_tensor(), value.data_type()


def _kit(model: bytes, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sess = InferenceSession(model, **options)
    return sess, [str(w.message) for w in caught if issubclass(w.category, ConformanceWarning)]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("form", ["initializer", "sparse_value", "value"])
def test_a_sparse_output_is_what_onnxruntime_returns(form, layout):
    model = _model(form, LAYOUTS[layout])
    theirs, their_type = _ort_sparse(model)
    sess, reported = _kit(model)
    if form == "initializer":
        assert not any("sparse-constant-output" in w for w in reported)
    else:
        assert any("sparse-constant-output" in w for w in reported), reported
    for _ in range(3):  # the first run and the runs of a feed signature seen before
        (mine,) = sess.run_with_ort_values(None, {})
        assert isinstance(mine, OrtValue) and mine.is_sparse_tensor() and not mine.is_tensor()
        assert mine.data_type() == their_type == "sparse_tensor(float)"
        st = mine.as_sparse_tensor()
        assert st.format() == OrtSparseFormat.ORT_SPARSE_COO
        assert st.dense_shape() == theirs.dense_shape() == [3, 3]
        np.testing.assert_array_equal(st.values(), theirs.values())
        assert st.values().dtype == theirs.values().dtype
        np.testing.assert_array_equal(st.as_coo_view().indices(), theirs.as_coo_view().indices())
        (plain,) = sess.run(None, {})
        assert isinstance(plain, SparseTensor)
        np.testing.assert_array_equal(plain.values(), theirs.values())
        (named,) = sess.run(["sv"], {})
        np.testing.assert_array_equal(named.as_coo_view().indices(), theirs.as_coo_view().indices())
    # independent of both: the nonzero entries of the dense value, in row-major order
    dense = np.zeros(9, np.float32)
    flat = np.array(LAYOUTS[layout]) if layout != "coordinates" else np.array([r * 3 + c for r, c in LAYOUTS[layout]])
    dense[flat] = VALUES
    np.testing.assert_array_equal(st.as_coo_view().indices(), np.flatnonzero(dense))
    np.testing.assert_array_equal(st.to_dense(), dense.reshape(3, 3))


def test_onnxruntimes_own_test_model_shape():
    """sparse_initializer_as_output.onnx: IR 7, opset 12, Constant's ``value`` holding a sparse tensor."""
    model = _model("value", [2, 3, 5], ir=7, opset=12, values=np.array([1.764052, 0.400157, 0.978738], np.float32))
    theirs, _ = _ort_sparse(model)
    sess, _ = _kit(model)
    st = sess.run_with_ort_values(["sv"], {})[0].as_sparse_tensor()
    assert st.dense_shape() == theirs.dense_shape()
    np.testing.assert_array_equal(st.as_coo_view().indices(), theirs.as_coo_view().indices())


@pytest.mark.parametrize("form", ["sparse_value", "value"])
def test_strict_refuses_a_constant_declared_sparse(form):
    with pytest.raises(ValidationError, match="sparse-constant-output"):
        InferenceSession(_model(form, [1, 2, 5, 7]), strict=True)


@pytest.mark.parametrize("form", ["sparse_value", "value"])
def test_a_sparse_declaration_of_another_element_type_stays_refused(form):
    """Near miss: declared sparse_tensor(int64) for a float value."""
    with pytest.raises(ValidationError) as info:
        _kit(_model(form, [1, 2, 5, 7], elem=TP.INT64))
    assert "sparse-constant-output" not in str(info.value)


@pytest.mark.parametrize("form", ["sparse_value", "value"])
def test_a_constant_declared_dense_stays_dense(form):
    """Near miss: the Constant's own type (onnxruntime returns a SparseTensor here too; onnxkit
    answers the declaration: docs/onnxruntime.md)."""
    model = _model(form, [7, 2, 5, 1], sparse=False)
    theirs, _ = _ort_sparse(model)
    sess, _ = _kit(model)
    (dense,) = sess.run(None, {})
    assert isinstance(dense, np.ndarray) and dense.shape == (3, 3)
    expect = np.zeros(9, np.float32)
    expect[theirs.as_coo_view().indices()] = theirs.values()
    np.testing.assert_array_equal(dense, expect.reshape(3, 3))


def test_a_sparse_tensor_fed_through_stays_itself():
    st = SparseTensor.sparse_coo_from_numpy([2, 3], np.array([5.0], np.float32), np.array([4], np.int64))
    assert coo_of_dense(st) is st
    made = coo_of_dense(np.array([["", "a"], ["", "b"]], dtype=object))
    np.testing.assert_array_equal(made.as_coo_view().indices(), [1, 3])
    assert list(made.values()) == ["a", "b"]


# -- outputs as views of their owners (onnxruntime_test_python.py: test_run_session_owned_output_is_zero_copy) --
def _mul_identity() -> bytes:
    g = helper.make_graph([helper.make_node("Mul", ["X", "X"], ["Y"]), helper.make_node("Identity", ["X"], ["Z"])],
                          "g", [helper.make_tensor_value_info("X", TP.FLOAT, [3, 2])],
                          [helper.make_tensor_value_info("Y", TP.FLOAT, [3, 2]),
                           helper.make_tensor_value_info("Z", TP.FLOAT, [3, 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def test_outputs_are_views_of_arrays_only_they_reach():
    model = _mul_identity()
    sess = InferenceSession(model)
    theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    earlier = []
    for _ in range(3):  # the first run and the runs of a feed signature seen before
        y, z = sess.run(None, {"X": x})
        ty, tz = theirs.run(None, {"X": x})
        assert ty.base is not None  # what onnxruntime's test asserts of onnxruntime
        for mine, other in ((y, ty), (z, tz)):
            assert mine.base is not None and isinstance(mine.base, np.ndarray)
            assert np.shares_memory(mine, mine.base)          # a view, not a copy
            assert mine.base.base is None and mine.base.flags.owndata
            assert mine.flags.writeable
            np.testing.assert_array_equal(mine, other)
        assert not np.shares_memory(z, x) and not np.shares_memory(y, z)
        assert not any(np.shares_memory(y, e) or np.shares_memory(z, e) for e in earlier)
        earlier += [y, z]
        y[...] = -1.0   # the caller's own: the next run is not reached
    (ov, _) = sess.run_with_ort_values(None, {"X": OrtValue.ortvalue_from_numpy(x)})
    arr = ov.numpy()
    assert arr.base is not None and np.shares_memory(arr, arr.base)
    np.testing.assert_array_equal(arr, x * x)
