"""The linear-algebra family (kernels/linalg.py) on both backends: cpu (numpy) and gpu (torch;
its CPU device here).  Expected values are numpy's own products, in float64 or exact integers.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import onnxkit  # noqa: E402
from one_node import BACKENDS, build, run  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.inference import infer_model  # noqa: E402
from onnxkit_default_domain.kernels.linalg import einsum_broadcast, int_matmul  # noqa: E402

RNG = np.random.default_rng(1313)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sa, sb", [((4,), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul_promotes_and_broadcasts_like_numpy(backend, sa, sb):
    a, b = randn(*sa), randn(*sb)
    y, sess = run(backend, "MatMul", 13, [a, b])
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == np.shape(want)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    assert not sess.fallbacks
    ai, bi = RNG.integers(-2**31, 2**31 - 1, sa).astype(np.int32), RNG.integers(-2**31, 2**31 - 1, sb).astype(np.int32)
    yi, _ = run(backend, "MatMul", 13, [ai, bi])
    np.testing.assert_array_equal(yi, np.matmul(ai, bi))          # wraps modulo 2**32


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_types_and_shapes_are_checked_naming_the_node(backend):
    with pytest.raises(OnnxkitError, match=r"n0.*int32"):          # integer types from MatMul-9
        run(backend, "MatMul", 1, [np.ones((2, 2), np.int32), np.ones((2, 2), np.int32)])
    with pytest.raises(OnnxkitError, match=r"n0.*inner extents differ"):
        run(backend, "MatMul", 13, [randn(2, 3), randn(4, 2)])
    with pytest.raises(OnnxkitError, match=r"n0.*B has element type float64"):
        run(backend, "MatMul", 13, [randn(2, 3), randn(3, 2, dtype=np.float64)])
    bf, _ = run(backend, "MatMul", 13, [randn(2, 3, dtype="bfloat16"), randn(3, 2, dtype="bfloat16")])
    assert str(bf.dtype) == "bfloat16"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opset", [6, 11, 13])
def test_gemm(backend, opset):
    a, b, c = randn(4, 3), randn(5, 4), randn(5)
    attrs = {"transA": 1, "transB": 1, "alpha": -1.5, "beta": 0.5}
    if opset < 7:
        attrs["broadcast"] = 1
    y, sess = run(backend, "Gemm", opset, [a, b, c], attrs)
    np.testing.assert_allclose(y, -1.5 * (a.T @ b.T) + 0.5 * c, rtol=1e-5, atol=1e-5)
    assert not sess.fallbacks
    ai, bi = RNG.integers(-9, 9, (3, 4)).astype(np.int64), RNG.integers(-9, 9, (4, 2)).astype(np.int64)
    if opset >= 9:
        yi, _ = run(backend, "Gemm", opset, [ai, bi, np.int64([1, 2])], {"alpha": 0.5, "beta": 3.0})
        want = (ai @ bi * 0.5).astype(np.int64) + np.int64([3, 6])   # each scaled term truncated toward zero
        np.testing.assert_array_equal(yi, want)
    with pytest.raises(OnnxkitError, match=r"n0.*does not broadcast"):
        run(backend, "Gemm", opset, [a, b, randn(2, 5)], attrs)
    if opset < 7:
        with pytest.raises(OnnxkitError, match="broadcast = 0"):
            run(backend, "Gemm", opset, [a, b, c], dict(attrs, broadcast=0))


def test_gemm_inference_uses_the_kernels_shape_rule():
    model, _ = build("Gemm", 13, [randn(4, 3), randn(5, 4), randn(5)], {"transA": 1, "transB": 1})
    assert list(infer_model(onnxkit.load(model)).type_of("y").shape.values) == [3, 5]
    model, _ = build("Gemm", 13, [randn(4, 3), randn(5, 4), randn(2, 5)], {"transA": 1, "transB": 1})
    assert any("does not broadcast" in str(d) for d in infer_model(onnxkit.load(model)).errors)


@pytest.mark.parametrize("backend", BACKENDS)
def test_einsum_and_its_broadcast_form(backend):
    x, y, z = randn(2, 3, 3), randn(3, 4), randn(3, 3)
    for eq, ops in (("bij,jk->bik", (x, y)), ("bii->bi", (x,)), ("...ij,jk", (x, y)), ("ij,jk,bki->b", (z, z.T, x)),
                    ("Bab->baB", (x,))):
        got, sess = run(backend, "Einsum", 12, list(ops), {"equation": eq})
        np.testing.assert_allclose(got, np.einsum(eq, *[o.astype(np.float64) for o in ops]), rtol=1e-5, atol=1e-5)
        assert not sess.fallbacks
        ints = [RNG.integers(-5, 5, o.shape).astype(np.int64) for o in ops]
        np.testing.assert_array_equal(einsum_broadcast(eq, [torch.from_numpy(o) for o in ints]).numpy(),
                                      np.einsum(eq, *ints))
    with pytest.raises(OnnxkitError, match=r"n0.*bfloat16"):          # bfloat16 from Einsum-28
        run(backend, "Einsum", 12, [randn(2, 2, dtype="bfloat16")], {"equation": "ii"})
    with pytest.raises(OnnxkitError, match=r"n0.*does not apply"):
        run(backend, "Einsum", 12, [randn(2, 3)], {"equation": "ijk->i"})


def test_integer_matmul_without_a_native_product_wraps_like_numpy():
    for sa, sb in (((4,), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2))):
        a = RNG.integers(-2**31, 2**31 - 1, sa).astype(np.int32)
        b = RNG.integers(-2**31, 2**31 - 1, sb).astype(np.int32)
        for wrap in (np.asarray, torch.from_numpy):
            got = np.asarray(int_matmul(wrap(a), wrap(b), force_broadcast=True))
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, np.matmul(a, b))


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_integer_and_det(backend):
    a = RNG.integers(0, 255, (2, 3, 4)).astype(np.uint8)
    b = RNG.integers(-128, 127, (4, 5)).astype(np.int8)
    za, zb = np.array([1, 2, 3], np.uint8), np.array([1, -2, 3, 0, 5], np.int8)
    y, sess = run(backend, "MatMulInteger", 10, [a, b, za, zb])
    want = np.matmul(a.astype(np.int64) - za.reshape(-1, 1), b.astype(np.int64) - zb)
    assert y.dtype == np.int32 and not sess.fallbacks
    np.testing.assert_array_equal(y, want)
    with pytest.raises(OnnxkitError, match=r"n0.*a_zero_point has 2 values"):
        run(backend, "MatMulInteger", 10, [a, b, np.array([1, 2], np.uint8)])
    m = randn(2, 4, 4, dtype=np.float64)
    d, sess = run(backend, "Det", 11, [m])
    np.testing.assert_allclose(d, np.linalg.det(m), rtol=1e-10)
    d0, _ = run(backend, "Det", 22, [m[0]])
    assert isinstance(d0, np.ndarray) and d0.shape == ()
    with pytest.raises(OnnxkitError, match=r"n0.*bfloat16"):          # bfloat16 from Det-22
        run(backend, "Det", 11, [randn(3, 3, dtype="bfloat16")])
