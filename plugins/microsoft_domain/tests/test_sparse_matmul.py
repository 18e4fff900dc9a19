"""SparseToDenseMatMul against onnxruntime 1.32's CPU kernel, the sparse A fed as an OrtValue
(COO and CSR), as onnxruntime's own test (onnxruntime_test_python_sparse_matmul.py) feeds it, and
against a numpy reference for the forms onnxruntime does not take (linear COO indices, a sparse
initializer)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxkit.ort as kort
from onnxkit.errors import OnnxkitError
from onnxkit.runtime import InferenceSession

RNG = np.random.default_rng(7)
TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.int32: TensorProto.INT32,
         np.int64: TensorProto.INT64, np.uint32: TensorProto.UINT32, np.uint64: TensorProto.UINT64}


def model(dtype, a_shape, b_shape, **attrs) -> bytes:
    """(Transposed operands undeclared: onnxruntime's shape inference ignores transA / transB.)"""
    et = TYPES[dtype]
    if attrs.get("transA") or attrs.get("transB"):
        a_shape = b_shape = None
    node = helper.make_node("SparseToDenseMatMul", ["A", "B"], ["Y"], name="n0", domain="com.microsoft", **attrs)
    g = helper.make_graph([node], "g", [helper.make_sparse_tensor_value_info("A", et, a_shape),
                                        helper.make_tensor_value_info("B", et, b_shape)],
                          [helper.make_tensor_value_info("Y", et, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString()


def sparse_matrix(dtype, shape, density=0.3):
    dense = np.zeros(shape, dtype)
    mask = RNG.random(shape) < density
    dense[mask] = RNG.integers(1, 9, mask.sum()).astype(dtype)
    return dense


def run_both(data, dense, b, fmt):
    rows, cols = np.nonzero(dense)
    vals = dense[rows, cols]
    results = []
    for mod in (ort, kort):
        dev = mod.OrtDevice.make("cpu", 0)
        if fmt == "coo":
            st = mod.SparseTensor.sparse_coo_from_numpy(list(dense.shape), vals, np.stack([rows, cols], 1), dev)
        else:
            outer = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))]).astype(np.int64)
            st = mod.SparseTensor.sparse_csr_from_numpy(list(dense.shape), vals, cols.astype(np.int64), outer, dev)
        feeds = {"A": mod.OrtValue.ort_value_from_sparse_tensor(st), "B": mod.OrtValue.ortvalue_from_numpy(b)}
        sess = (ort.InferenceSession(data, providers=["CPUExecutionProvider"]) if mod is ort
                else InferenceSession(data, "cpu"))
        results.append(sess.run_with_ort_values(["Y"], feeds)[0].numpy())
    return results


@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("fmt", ["coo", "csr"])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_sparse_to_dense_matmul_equals_onnxruntime(dtype, fmt, trans_a, trans_b):
    m, k, n = 6, 9, 4
    dense = sparse_matrix(dtype, (k, m) if trans_a else (m, k))
    b = RNG.integers(0, 7, (n, k) if trans_b else (k, n)).astype(dtype)
    data = model(dtype, list(dense.shape), list(b.shape), alpha=2.5, transA=trans_a, transB=trans_b)
    want, got = run_both(data, dense, b, fmt)
    assert got.dtype == want.dtype and got.shape == want.shape == (m, n)
    np.testing.assert_array_equal(got, want)
    # onnxruntime scales float32 products by alpha only (its CPU kernel ignores alpha otherwise)
    opa, opb = (dense.T if trans_a else dense), (b.T if trans_b else b)
    ref = opa.astype(np.float64) @ opb.astype(np.float64) * (2.5 if dtype == np.float32 else 1.0)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=1e-6)


def test_onnxruntimes_own_nine_by_nine_case():
    """The case of onnxruntime's testRunContribSparseMatMul (its sparse A and dense B patterns)."""
    a = np.zeros((9, 9), np.float32)
    pattern = [(r, c) for r in range(3) for c in (0, 1, 2, 6, 7, 8)] + [(r, c) for r in range(3, 6) for c in range(3, 9)]
    pattern += [(r, c) for r in range(6, 9) for c in range(6)]
    pattern = sorted(p for p in pattern if p != (0, 0))
    for i, (r, c) in enumerate(pattern):
        a[r, c] = i + 1
    b = RNG.integers(0, 54, (9, 9)).astype(np.float32)
    want, got = run_both(model(np.float32, [9, 9], [9, 9]), a, b, "coo")
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, a @ b)


def test_linear_coo_indices_and_a_sparse_initializer():
    dense = sparse_matrix(np.float32, (5, 7))
    b = RNG.standard_normal((7, 3)).astype(np.float32)
    rows, cols = np.nonzero(dense)
    data = model(np.float32, [5, 7], [7, 3], alpha=0.5)
    st = kort.SparseTensor.sparse_coo_from_numpy([5, 7], dense[rows, cols], rows * 7 + cols, None)
    got = InferenceSession(data, "cpu").run_with_ort_values(
        ["Y"], {"A": kort.OrtValue.ort_value_from_sparse_tensor(st), "B": kort.OrtValue.ortvalue_from_numpy(b)})
    np.testing.assert_allclose(got[0].numpy(), 0.5 * dense @ b, rtol=1e-6, atol=1e-6)
    # A a sparse initializer (the runtime expands it when the session is planned)
    node = helper.make_node("SparseToDenseMatMul", ["A", "B"], ["Y"], name="n0", domain="com.microsoft")
    sp = helper.make_sparse_tensor(numpy_helper.from_array(dense[rows, cols], "A"),
                                   numpy_helper.from_array(np.stack([rows, cols], 1).astype(np.int64), "A_idx"), [5, 7])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("B", TensorProto.FLOAT, [7, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], sparse_initializer=[sp])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    for backend in ("cpu", "gpu"):
        y = InferenceSession(m.SerializeToString(), backend).run(None, {"B": b})[0]
        np.testing.assert_allclose(np.asarray(y), dense @ b, rtol=1e-6, atol=1e-6)


def test_mismatched_extents_are_refused_by_name():
    dense = sparse_matrix(np.float32, (4, 5))
    b = np.ones((6, 2), np.float32)
    st = kort.SparseTensor.sparse_coo_from_numpy([4, 5], dense[np.nonzero(dense)], np.stack(np.nonzero(dense), 1), None)
    sess = InferenceSession(model(np.float32, [4, 5], [6, 2]), "cpu")
    with pytest.raises(OnnxkitError, match="inner extents differ"):
        sess.run_with_ort_values(["Y"], {"A": kort.OrtValue.ort_value_from_sparse_tensor(st),
                                         "B": kort.OrtValue.ortvalue_from_numpy(b)})
