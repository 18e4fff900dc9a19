"""The cpu Conv's 1x1 product in blocks of output columns (overrides/conv_blocks.py
``pointwise_columns``): one group, no stride, at most ``POINTWISE_C`` input channels, at least
``POINTWISE_L`` positions an image (the blocks split across the intra-op threads).

* Where it is taken (counted) the result is the same bits as the whole product ``W @ X`` (+ B)
  computed here by numpy, and agrees with onnxruntime to float rounding; near misses on each
  side of both bounds (channels 64 / 65, positions 2048 / 2047), a last block shorter than the
  rest, a batch, float64, a stride (not taken), a Relu / Add epilogue (the fused kernel's path).
* One, two and three intra-op threads give the same bits (the same blocks, split).
* The compiled path's products of at most 32 column rows over at least 2048 columns (3-channel
  stems, ``product_columns``), in one product and in row blocks: the same bits as one product
  per block (``POINTWISE_K`` set to 0), near misses (2025 columns, 37 rows), 1/2/3 threads.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides import conv as conv_override  # noqa: E402
from onnxkit_cpu.overrides import conv_blocks  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")]

RNG = np.random.default_rng(4404)
_TYPES = {np.dtype(np.float32): onnx.TensorProto.FLOAT, np.dtype(np.float64): onnx.TensorProto.DOUBLE}


def model(x, w, b, strides=(1, 1), tail=None) -> bytes:
    """A Conv (then ``tail``: "relu", or "add" of a second input ``r``)."""
    t = _TYPES[x.dtype]
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
    ins = ["x", "w"] + (["b"] if b is not None else [])
    nodes = [helper.make_node("Conv", ins, ["y" if tail is None else "c"], strides=list(strides))]
    inputs = [helper.make_tensor_value_info("x", t, x.shape)]
    if tail == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif tail == "add":
        nodes.append(helper.make_node("Add", ["c", "r"], ["y"]))
        inputs.append(helper.make_tensor_value_info("r", t, None))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", t, None)], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.fixture
def counted(monkeypatch):
    """The calls of ``pointwise_columns`` (X's shape each): the path planned for the node."""
    calls = []
    real = conv_blocks.pointwise_columns

    def spy(wg, xs):
        calls.append(xs.shape)
        return real(wg, xs)
    monkeypatch.setattr(conv_override, "pointwise_columns", spy)
    return calls


def run(data, feed, threads=1):
    so = SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.split_kernels", "1")
    return InferenceSession(data, so).run(None, feed)[0]


def whole(x, w, b, strides=(1, 1)):
    """``W @ X`` (+ B) as one numpy product, X subsampled by the strides."""
    xs = x[:, :, ::strides[0], ::strides[1]]
    n, c = xs.shape[:2]
    y = np.matmul(w.reshape(w.shape[0], c), np.ascontiguousarray(xs).reshape(n, c, -1))
    if b is not None:
        y += b.reshape(-1, 1)
    return y.reshape(n, w.shape[0], *xs.shape[2:])


CASES = [   # (x shape, output channels, strides, taken)
    ((1, 16, 96, 96), 96, (1, 1), True),        # efficientnet's expansion
    ((1, 64, 32, 64), 48, (1, 1), True),        # 64 channels, 2048 positions: both bounds
    ((1, 65, 32, 64), 8, (1, 1), False),        # 65 channels
    ((1, 8, 23, 89), 16, (1, 1), False),        # 2047 positions
    ((1, 5, 45, 50), 7, (1, 1), True),          # 2250 positions: a last block of 202
    ((2, 3, 40, 60), 9, (1, 1), True),          # a batch
    ((1, 4, 96, 96), 6, (2, 2), False),         # a stride
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape,m,strides,taken", CASES)
def test_pointwise_in_column_blocks_is_the_whole_product(x_shape, m, strides, taken, bias, counted):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal((m, x_shape[1], 1, 1)).astype(np.float32)
    b = RNG.standard_normal(m).astype(np.float32) if bias else None
    data = model(x, w, b, strides)
    got = run(data, {"x": x})
    assert bool(counted) == taken
    np.testing.assert_array_equal(got, whole(x, w, b, strides))
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())))


def test_float64_and_the_fused_epilogues(counted):
    x = RNG.standard_normal((1, 12, 50, 50))
    w, b = RNG.standard_normal((20, 12, 1, 1)), RNG.standard_normal(20)
    np.testing.assert_array_equal(run(model(x, w, b), {"x": x}), whole(x, w, b))
    x32, w32, b32 = x.astype(np.float32), w.astype(np.float32), b.astype(np.float32)
    ref = whole(x32, w32, b32)
    np.testing.assert_array_equal(run(model(x32, w32, b32, tail="relu"), {"x": x32}), np.maximum(ref, 0))
    r = RNG.standard_normal(ref.shape).astype(np.float32)
    np.testing.assert_array_equal(run(model(x32, w32, b32, tail="add"), {"x": x32, "r": r}), ref + r)
    assert len(counted) == 3


@pytest.mark.parametrize("x_shape,m", [((1, 16, 64, 64), 24), ((2, 8, 48, 50), 12)])
def test_one_two_three_intra_op_threads_give_the_same_bits(x_shape, m, counted):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w, b = RNG.standard_normal((m, x_shape[1], 1, 1)).astype(np.float32), RNG.standard_normal(m).astype(np.float32)
    data = model(x, w, b)
    one = run(data, {"x": x}, 1)
    for threads in (2, 3):
        np.testing.assert_array_equal(run(data, {"x": x}, threads), one)
    np.testing.assert_array_equal(one, whole(x, w, b))


# -- the compiled path's products of few rows (product_columns): stems of three channels --------


@pytest.fixture
def blocked(monkeypatch):
    """Whether each call of ``product_columns`` (the Planes product and the row blocks') made blocks."""
    made = []
    real = conv_blocks.product_columns

    def spy(wb, mat, out, serial=False):
        made.append(real(wb, mat, out, serial))
        return made[-1]
    monkeypatch.setattr(conv_override, "product_columns", spy)
    monkeypatch.setattr(conv_blocks, "product_columns", spy)
    return made


STEMS = [   # (x shape, w shape, strides, pads, blocks made per call)
    ((1, 3, 256, 256), (16, 3, 3, 3), (2, 2), (1, 1, 1, 1), [True, True]),     # row blocks: 28 rows
    ((1, 3, 128, 128), (16, 3, 3, 3), (2, 2), (1, 1, 1, 1), [True]),           # one product, 4096 columns
    ((1, 3, 92, 92), (8, 3, 3, 3), (2, 2), (1, 1, 1, 1), [True]),              # 2116 columns
    ((1, 3, 90, 90), (8, 3, 3, 3), (2, 2), (1, 1, 1, 1), [False]),             # 2025 columns
    ((1, 4, 128, 128), (8, 4, 3, 3), (2, 2), (1, 1, 1, 1), [False]),           # 37 rows
    ((1, 2, 70, 77), (5, 2, 3, 5), (1, 1), (1, 2, 0, 1), [True]),              # 31 rows, a short last block
]


@pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off")
@pytest.mark.usefixtures("warm_bodies")
@pytest.mark.parametrize("x_shape,w_shape,strides,pads,made", STEMS)
def test_compiled_products_of_few_rows_in_column_blocks(x_shape, w_shape, strides, pads, made, blocked,
                                                        monkeypatch):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w, b = RNG.standard_normal(w_shape).astype(np.float32), RNG.standard_normal(w_shape[0]).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=list(strides), pads=list(pads))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    data = m.SerializeToString()
    got = run(data, {"x": x})
    assert blocked == made
    monkeypatch.setattr(conv_blocks, "POINTWISE_K", 0)       # the same path, one product a block
    np.testing.assert_array_equal(got, run(data, {"x": x}))
    assert blocked[len(made):] == [False] * len(made)
    for threads in (2, 3):
        np.testing.assert_array_equal(run(data, {"x": x}, threads), got)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(want).max())))
