"""The cpu Relu against a row of zeros (onnxkit_cpu.overrides.linalg.rectify: a C-contiguous X of at
least RELU_ROW_MIN_SIZE elements whose last axis holds at least RELU_ROW_MIN_LAST): the bits of
``np.maximum(x, 0)`` (ONNX Relu: ``max(0, x)``; NaN keeps its payload, -0 gives +0, subnormals
kept) for every native type, at the thresholds and beside them (a last axis one short, one
element short, a transposed X), and onnxruntime's values on finite inputs."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu.overrides import linalg  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
RNG = np.random.default_rng(9271)
ELEM = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16,
        np.int8: TensorProto.INT8, np.int32: TensorProto.INT32, np.int64: TensorProto.INT64}
BITS = {np.float32: np.uint32, np.float64: np.uint64, np.float16: np.uint16}
MIN, LAST = linalg.RELU_ROW_MIN_SIZE, linalg.RELU_ROW_MIN_LAST


def relu_model(dtype, shape, transposed=False) -> bytes:
    nodes = [helper.make_node("Relu", ["xt" if transposed else "x"], ["y"])]
    if transposed:   # the Relu reads a Transpose's output: a view that is not C-contiguous on the cpu
        nodes.insert(0, helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]))
    out_shape = shape[::-1] if transposed else shape
    g = helper.make_graph(nodes, "relu", [helper.make_tensor_value_info("x", ELEM[dtype], shape)],
                          [helper.make_tensor_value_info("y", ELEM[dtype], out_shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def values(dtype, shape):
    if np.dtype(dtype).kind == "i":
        x = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype)
        x.reshape(-1)[:2] = [np.iinfo(dtype).min, 0]
        return x
    x = RNG.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    info = np.finfo(dtype)
    flat[:7] = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, info.tiny / 4, -info.tiny / 4], dtype)
    payloads = {np.float32: [0x7fc00123, 0xffc00456, 0x7f800001, 0xff800001],
                np.float64: [0x7ff8000000000123, 0xfff8000000000456, 0x7ff0000000000001, 0xfff0000000000001],
                np.float16: [0x7e12, 0xfe34, 0x7c01, 0xfc01]}[dtype]
    flat[7:11] = np.array(payloads, BITS[dtype]).view(dtype)
    return x


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind == "f":
        bits = BITS[want.dtype.type]
        return got.dtype == want.dtype and np.array_equal(got.view(bits), want.view(bits))
    return got.dtype == want.dtype and np.array_equal(got, want)


SHAPES = [((MIN // LAST, LAST), True), ((MIN // 64, 64), True), ((MIN // 16, LAST - 1 + 16), True),
          ((MIN // (LAST - 1) + 1, LAST - 1), False), ((MIN // LAST - 1, LAST), False), ((3, 8), False)]


@pytest.mark.parametrize("dtype", list(ELEM))
@pytest.mark.parametrize("shape, takes_row", SHAPES)
def test_relu_is_the_scalar_maximum_bit_for_bit(dtype, shape, takes_row, monkeypatch):
    taken = []
    real = linalg.zero_row
    monkeypatch.setattr(linalg, "zero_row", lambda y: taken.append(y.shape) or real(y))
    x = values(dtype, shape)
    so = SessionOptions()
    so.intra_op_num_threads = 1
    got = InferenceSession(relu_model(dtype, shape), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert same_bits(got, np.maximum(x, np.zeros((), dtype)))
    assert bool(taken) == (takes_row and np.prod(shape) >= MIN)


def test_a_transposed_x_gives_the_scalar_maximum_s_bits():
    x = values(np.float32, (64, 128))
    so = SessionOptions()
    so.intra_op_num_threads = 1
    s = InferenceSession(relu_model(np.float32, (64, 128), transposed=True), so, providers=["CPUExecutionProvider"])
    assert same_bits(s.run(None, {"x": x})[0], np.maximum(x.T, np.float32(0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_on_large_rows_matches_onnxruntime(dtype):
    x = RNG.standard_normal((96, 256)).astype(dtype)
    x[0, :3] = [-0.0, 0.0, -1e-30]
    m = relu_model(dtype, x.shape)
    want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.array_equal(got, want) and got.dtype == want.dtype
