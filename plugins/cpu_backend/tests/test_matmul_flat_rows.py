"""Short slices by a large W as one product (onnxkit_cpu.overrides.linalg.flat_rows).

* A case the rule takes (A of rank 3+ C-contiguous, slices of fewer than ``FLAT_ROWS`` rows, W of
  rank 2 with at least ``FLAT_WEIGHT`` elements) gives the bits of numpy's product of A's rows
  flattened (the same BLAS call), agrees with the stacked product, a float64 reference written
  here and onnxruntime within float32 rounding.  Which path ran is counted.
* Near misses keep numpy's stacked product bit for bit: slices of exactly ``FLAT_ROWS`` rows, W one
  element short of ``FLAT_WEIGHT``, one slice, a W of rank 3, A non-contiguous (a Transpose's view),
  W given as a graph input (the rule holds all the same: counted), float64.
* A bias Add after the product (broadcast [N], [1, N]) and one, two and three intra-op threads give
  the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu.overrides import linalg  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
RNG = np.random.default_rng(4444)
ROWS, WEIGHT = linalg.FLAT_ROWS, linalg.FLAT_WEIGHT


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def model(a_shape, w, bias=None, w_input=False, perm=None, elem=TensorProto.FLOAT) -> bytes:
    """``Y = MatMul(A', W) (+ bias)`` with ``A' = Transpose(A, perm)`` when perm is given."""
    inits = [] if w_input else [numpy_helper.from_array(w, "w")]
    nodes, src = [], "a"
    if perm is not None:
        nodes.append(helper.make_node("Transpose", ["a"], ["at"], perm=list(perm)))
        src = "at"
    nodes.append(helper.make_node("MatMul", [src, "w"], ["m" if bias is not None else "y"]))
    if bias is not None:
        inits.append(numpy_helper.from_array(bias, "b"))
        nodes.append(helper.make_node("Add", ["m", "b"], ["y"]))
    inputs = [helper.make_tensor_value_info("a", elem, a_shape)]
    if w_input:
        inputs.append(helper.make_tensor_value_info("w", elem, w.shape))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", elem, None)], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.fixture
def taken(monkeypatch):
    """The number of products the rule took (a list of one count)."""
    count = [0]
    real = linalg.flat_rows

    def spy(a, b):
        took = real(a, b)
        count[0] += took
        return took
    monkeypatch.setattr(linalg, "flat_rows", spy)
    return count


def run(data, feeds, threads=1):
    so = SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.split_kernels", "1")
    return InferenceSession(data, so).run(None, feeds)[0]


def peer(data, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def reference(a, w):
    """Each slice's product in float64."""
    return np.matmul(a.astype(np.float64), w.astype(np.float64))


def close(got, want, k):
    tol = 4 * k * np.finfo(np.float32).eps * (np.abs(want).max() + 1)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)


TAKEN = [
    ((1, 7, 7, 320), (320, 1280)),            # ConvNeXt's last stage
    ((1, 14, 14, 160), (160, 640)),
    ((3, 5, 256), (256, WEIGHT // 256)),        # W at the threshold
    ((2, ROWS - 1, 128), (128, 512)),           # slices one row short of the threshold
    ((2, 3, 4, 5, 300), (300, 300)),            # rank 5
    ((4, 1, 512), (512, 130)),                  # one-row slices
]


@pytest.mark.parametrize("a_shape, w_shape", TAKEN)
def test_taken_cases_are_one_product_of_the_rows(a_shape, w_shape, taken):
    a, w = randn(*a_shape), randn(*w_shape)
    got = run(model(a.shape, w), {"a": a})
    assert taken[0] == 1
    assert got.shape == a.shape[:-1] + w.shape[1:] and got.dtype == np.float32
    flat = np.matmul(a.reshape(-1, a.shape[-1]), w).reshape(got.shape)
    assert np.array_equal(got, flat)
    k = a.shape[-1]
    close(got, reference(a, w), k)
    close(got, np.matmul(a, w), k)
    close(got, peer(model(a.shape, w), {"a": a}), k)


NEAR_MISSES = [
    ((2, ROWS, 128), (128, 512)),               # slices of exactly FLAT_ROWS rows
    ((3, 5, 255), (255, 257)),                  # W one element short of FLAT_WEIGHT
    ((1, 7, 320), (320, 1280)),                 # one slice
    ((7, 320), (320, 1280)),                    # rank 2
]


@pytest.mark.parametrize("a_shape, w_shape", NEAR_MISSES)
def test_near_misses_keep_the_stacked_product(a_shape, w_shape, taken):
    assert (WEIGHT - 1) == 255 * 257
    a, w = randn(*a_shape), randn(*w_shape)
    got = run(model(a.shape, w), {"a": a})
    assert taken[0] == 0
    assert np.array_equal(got, np.matmul(a, w))
    close(got, peer(model(a.shape, w), {"a": a}), a.shape[-1])


def test_a_w_of_rank_3_keeps_the_stacked_product(taken):
    a, w = randn(2, 7, 320), randn(1, 320, 256)
    got = run(model(a.shape, w), {"a": a})
    assert taken[0] == 0 and np.array_equal(got, np.matmul(a, w))


def test_a_non_contiguous_input_keeps_the_stacked_product(taken):
    a, w = randn(7, 2, 320), randn(320, 256)
    data = model(a.shape, w, perm=(1, 0, 2))
    got = run(data, {"a": a})
    assert taken[0] == 0
    at = np.transpose(a, (1, 0, 2))
    assert np.array_equal(got, np.matmul(at, w))
    close(got, np.matmul(at, w), 320)
    close(got, peer(data, {"a": a}), 320)


def test_w_as_a_graph_input(taken):
    a, w = randn(4, 9, 256), randn(256, 300)
    data = model(a.shape, w, w_input=True)
    got = run(data, {"a": a, "w": w})
    assert taken[0] == 1
    assert np.array_equal(got, np.matmul(a.reshape(-1, 256), w).reshape(got.shape))
    w2 = randn(256, 300)
    sess = InferenceSession(data, SessionOptions())
    assert np.array_equal(sess.run(None, {"a": a, "w": w2})[0], np.matmul(a.reshape(-1, 256), w2).reshape(got.shape))
    close(got, peer(data, {"a": a, "w": w}), 256)


def test_float64(taken):
    a, w = randn(3, 6, 256, dtype=np.float64), randn(256, 256, dtype=np.float64)
    got = run(model(a.shape, w, elem=TensorProto.DOUBLE), {"a": a})
    assert taken[0] == 1 and got.dtype == np.float64
    assert np.array_equal(got, np.matmul(a.reshape(-1, 256), w).reshape(got.shape))
    np.testing.assert_allclose(got, np.matmul(a, w), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bias_shape", [(640,), (1, 640), (1,)])
def test_a_bias_add_after_the_product(bias_shape, taken):
    a, w, b = randn(1, 14, 14, 160), randn(160, 640), randn(*bias_shape)
    data = model(a.shape, w, bias=b)
    got = run(data, {"a": a})
    assert taken[0] == 1
    want = np.matmul(a.reshape(-1, 160), w).reshape(1, 14, 14, 640) + b
    assert np.array_equal(got, want)
    close(got, peer(data, {"a": a}), 160)


@pytest.mark.parametrize("a_shape, w_shape", [((1, 7, 7, 320), (320, 1280)), ((2, 14, 14, 160), (160, 640))])
def test_one_two_three_intra_op_threads_give_the_same_bits(a_shape, w_shape, taken):
    a, w = randn(*a_shape), randn(*w_shape)
    data = model(a.shape, w)
    results = [run(data, {"a": a}, threads=t) for t in (1, 2, 3)]
    assert taken[0] == 3
    assert all(np.array_equal(results[0], r) for r in results[1:])
