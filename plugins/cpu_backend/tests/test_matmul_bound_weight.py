"""MatMul bound to a constant B (onnxkit_cpu.overrides.linalg: ``bind``): the function the run
loop calls for a constant float32 / float64 matrix B gives the bits of the general kernel (B fed
as a graph input: ``run``'s path) and agrees with onnxruntime, on the As it takes (rank 2, 3, 4,
one row or many, a large B's flat rows, a transposed view) and the near misses it hands to the
general path (a vector A, a B of rank 3, a B of another type than float); an A whose inner
extent is not B's fails naming the node, as the general path does.  A spy counts the products
the bound function made itself.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnxkit.errors import EvaluationError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
RNG = np.random.default_rng(4343)
ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
        np.dtype(np.int32): TensorProto.INT32}


def _model(w: np.ndarray, w_input: bool, perm=None) -> bytes:
    elem = ELEM[w.dtype]
    nodes, src = [], "a"
    if perm is not None:
        nodes.append(helper.make_node("Transpose", ["a"], ["at"], perm=list(perm)))
        src = "at"
    nodes.append(helper.make_node("MatMul", [src, "w"], ["y"], name="product"))
    inputs = [helper.make_tensor_value_info("a", elem, None)]
    if w_input:
        inputs.append(helper.make_tensor_value_info("w", elem, w.shape))
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", elem, None)],
                          initializer=[] if w_input else [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.fixture
def bound_products(monkeypatch):
    """The products the bound function made itself (np.matmul calls from ``with_weight``)."""
    from onnxkit_cpu.overrides import linalg

    count = [0]
    real = linalg.np.matmul

    class _Np:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def matmul(*args, **kw):
            import sys

            if sys._getframe(1).f_code.co_name == "with_weight":
                count[0] += 1
            return real(*args, **kw)

    monkeypatch.setattr(linalg, "np", _Np())
    return count


def _both(w, feeds, perm=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bound = InferenceSession(_model(w, False, perm))
        general = InferenceSession(_model(w, True, perm))
    out = []
    for a in feeds:
        got = bound.run(None, {"a": a})[0]
        want = general.run(None, {"a": a, "w": w})[0]
        out.append((a, got, want))
    return out


CASES = [  # (K, N, A shapes, dtype, perm)
    (128, 256, [(1, 1, 128), (1, 2, 128), (1, 1, 128), (3, 5, 128), (2, 3, 4, 128)], np.float32, None),
    (64, 32, [(1, 64), (7, 64), (7, 64)], np.float32, None),
    (128, 1024, [(1, 1, 128), (4, 3, 128), (2, 70, 128)], np.float32, None),  # a large B: flat rows, or not
    (16, 8, [(1, 3, 16), (2, 1, 16)], np.float64, None),
    (16, 8, [(3, 4, 16)], np.float32, (1, 0, 2)),  # a transposed view of A
]


@pytest.mark.parametrize("k,n,shapes,dtype,perm", CASES)
def test_bound_weight_gives_the_general_kernels_bits(k, n, shapes, dtype, perm, bound_products):
    w = RNG.standard_normal((k, n)).astype(dtype)
    feeds = [RNG.standard_normal(s).astype(dtype) for s in shapes]
    for a, got, want in _both(w, feeds, perm):
        assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
        ref = ort.InferenceSession(_model(w, False, perm), providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
        np.testing.assert_allclose(got, ref, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
    # every run but the first of each element type (the portable check, then the general path)
    assert bound_products[0] == len(shapes) - 1


def test_near_misses_take_the_general_path(bound_products):
    w = RNG.standard_normal((16, 8)).astype(np.float32)
    vec = RNG.standard_normal(16).astype(np.float32)
    for a, got, want in _both(w, [RNG.standard_normal((2, 16)).astype(np.float32), vec]):
        assert got.shape == want.shape and got.tobytes() == want.tobytes()
    assert bound_products[0] == 0  # the first run checks the type, the vector is not of rank 2
    w3 = RNG.standard_normal((2, 16, 8)).astype(np.float32)  # B of rank 3: not bound
    feeds = [RNG.standard_normal((2, 3, 16)).astype(np.float32) for _ in range(3)]
    for a, got, want in _both(w3, feeds):
        assert got.tobytes() == want.tobytes()
    wi = RNG.integers(-5, 5, (16, 8)).astype(np.int32)  # an integer B: not bound
    for a, got, want in _both(wi, [RNG.integers(-5, 5, (3, 16)).astype(np.int32) for _ in range(3)]):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, a.astype(np.int64) @ wi)
    assert bound_products[0] == 0


def test_an_inner_extent_not_the_weights_fails_naming_the_node():
    w = RNG.standard_normal((16, 8)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = InferenceSession(_model(w, False))
    for _ in range(3):
        sess.run(None, {"a": RNG.standard_normal((2, 16)).astype(np.float32)})
    for shape, inner in (((2, 15), 15), ((1, 1, 17), 17)):  # the general path's check, by name
        with pytest.raises(EvaluationError, match=f"'product' \\(MatMul\\): MatMul: inner extents differ: {inner} != 16"):
            sess.run(None, {"a": np.ones(shape, np.float32)})
