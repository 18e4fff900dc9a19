"""Col2Im on the cpu backend (overrides/col2im.py): a fold whose blocks tile the image is one
pass over a transposed view of X, bit-identical to the portable kernel (compared as unsigned
integers, -0 and NaN included) and equal to onnxruntime's; near misses (overlapping blocks,
pads, dilation, integer X) keep the portable kernel, whose result they must still give."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnxkit import SessionOptions  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu.overrides import col2im as fold  # noqa: E402
from onnxkit_default_domain.kernels import conv as portable_conv  # noqa: E402

RNG = np.random.default_rng(77)
UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}


def build(x_shape, dtype, image, block, **attrs):
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)
    inits = [numpy_helper.from_array(np.array(image, np.int64), "image"),
             numpy_helper.from_array(np.array(block, np.int64), "block")]
    graph = helper.make_graph([node], "fold", [helper.make_tensor_value_info("x", t, list(x_shape))],
                              [helper.make_tensor_value_info("y", t, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model.SerializeToString()


def options():
    so = SessionOptions()
    so.intra_op_num_threads = 1
    return so


@pytest.fixture
def portable_calls(monkeypatch):
    """Counts the calls of the portable kernel's node function under the override."""
    calls = []
    real = portable_conv.col2im

    def counted(ctx):
        run = real(ctx)

        def wrapped(*args):
            calls.append(1)
            return run(*args)
        return wrapped
    monkeypatch.setattr(portable_conv, "col2im", counted)
    return calls


def reference(model, x):
    """The portable kernel's result: the override's tiling plan disabled."""
    real = fold.tiling_plan
    fold.tiling_plan = lambda *a: None
    try:
        return InferenceSession(model, options()).run(None, {"x": x})[0]
    finally:
        fold.tiling_plan = real


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("c,image,block", [(3, (8, 6), (2, 2)), (5, (4, 9), (2, 3)), (2, (6, 4), (1, 1)),
                                           (4, (12,), (3,)), (2, (4, 4, 6), (2, 1, 3)), (1, (16, 256), (2, 2))])
def test_tiling_fold_is_the_portable_kernel_bit_for_bit(portable_calls, dtype, c, image, block):
    kp = int(np.prod(block))
    blocks = int(np.prod([i // b for i, b in zip(image, block)]))
    x = RNG.standard_normal((2, c * kp, blocks)).astype(dtype)
    x.reshape(-1)[::7] = -0.0
    x.reshape(-1)[5] = np.nan
    model = build(x.shape, dtype, image, block, strides=list(block))
    got = InferenceSession(model, options()).run(None, {"x": x})[0]
    assert not portable_calls                                   # the one-pass body ran
    want = reference(model, x)
    assert got.shape == want.shape == (2, c, *image) and got.dtype == want.dtype
    u = UINT[np.dtype(dtype)]
    np.testing.assert_array_equal(got.view(u), want.view(u))


def test_against_onnxruntime():
    x = RNG.standard_normal((1, 4 * 4, 3 * 5)).astype(np.float32)
    model = build(x.shape, np.float32, (6, 10), (2, 2), strides=[2, 2])
    got = InferenceSession(model, options()).run(None, {"x": x})[0]
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("attrs,image,blocks,dtype", [
    ({}, (5, 5), 16, np.float32),                                  # stride 1: overlapping blocks
    ({"strides": [2, 2], "pads": [1, 1, 1, 1]}, (6, 6), 16, np.float32),
    ({"strides": [3, 3]}, (8, 8), 9, np.float32),                  # spaced blocks: an image not a multiple
    ({"strides": [1, 3]}, (4, 6), 6, np.float32),                  # as many blocks as a tiling: overlapping rows
    ({"strides": [2, 2], "dilations": [2, 2]}, (6, 6), 4, np.float32),
    ({"strides": [2, 2]}, (4, 4), 4, np.int64),                    # integers: the portable kernel
])
def test_near_misses_keep_the_portable_kernel(portable_calls, attrs, image, blocks, dtype):
    x = (RNG.standard_normal((1, 3 * 4, blocks)) * 4).astype(dtype)
    model = build(x.shape, dtype, image, (2, 2), **attrs)
    got = InferenceSession(model, options()).run(None, {"x": x})[0]
    assert portable_calls
    if dtype is np.float32:
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
