"""A pool whose one window covers the whole input (onnxkit_cpu.overrides.pool.Whole): one reduction
over the spatial axes instead of kernel-extent taps (transformers' EfficientNet pooler is
AvgPool2d(1280, ceil_mode=True) on 7x7), the portable kernel's bits (torch's CPU device,
onnxkit-gpu; tests/test_conv_fast.py checks the padded fold's, NaN, inf and -0 included) and
onnxruntime's values."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit_cpu.overrides import pool  # noqa: E402

RNG = np.random.default_rng(31)
WHOLE = [
    ("AveragePool", dict(kernel_shape=[1280, 1280], strides=[1280, 1280], ceil_mode=1, count_include_pad=1), (1, 8, 7, 7)),
    ("AveragePool", dict(kernel_shape=[9, 9], strides=[9, 9], ceil_mode=1, pads=[1, 1, 0, 0]), (2, 3, 7, 7)),
    ("AveragePool", dict(kernel_shape=[8, 9], pads=[1, 1, 0, 1], count_include_pad=1), (2, 3, 7, 7)),
    ("AveragePool", dict(kernel_shape=[7]), (2, 3, 7)),
    ("MaxPool", dict(kernel_shape=[1280, 1280], strides=[1280, 1280], ceil_mode=1), (1, 8, 7, 7)),
    ("MaxPool", dict(kernel_shape=[8, 7, 9], pads=[1, 0, 1, 0, 0, 0]), (1, 2, 7, 7, 8)),
]
NOT_WHOLE = [
    ("AveragePool", dict(kernel_shape=[6, 7]), (1, 4, 7, 7)),                      # two windows on axis 2
    ("AveragePool", dict(kernel_shape=[7, 7], pads=[1, 0, 0, 0]), (1, 4, 7, 7)),   # misses the last row
    ("MaxPool", dict(kernel_shape=[4, 4], dilations=[2, 2]), (1, 4, 7, 7)),        # dilated
    ("AveragePool", dict(kernel_shape=[5, 5], strides=[3, 3]), (1, 4, 7, 7)),      # one window, short of the input
    ("MaxPool", dict(kernel_shape=[7, 5], strides=[1, 3]), (1, 4, 7, 7)),
]


def _model(op, attrs, shape, dtype=TP.FLOAT):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", dtype, list(shape))],
                          [helper.make_tensor_value_info("y", dtype, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString()


def _calls(monkeypatch) -> list:
    seen, call = [], pool.Whole.__call__
    monkeypatch.setattr(pool.Whole, "__call__", lambda self, x: (seen.append(x.shape), call(self, x))[1])
    return seen


@pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
@pytest.mark.parametrize("op,attrs,shape", WHOLE)
def test_one_window_over_the_input_is_one_reduction_with_the_portable_values(op, attrs, shape, monkeypatch):
    pytest.importorskip("torch")
    seen = _calls(monkeypatch)
    data = _model(op, attrs, shape)
    x = RNG.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[3] = np.inf if op == "MaxPool" else x.reshape(-1)[3]
    got = onnxkit.InferenceSession(data).run(None, {"x": x})[0]
    assert seen == [shape]
    portable = onnxkit.InferenceSession(data, backend="gpu").run(None, {"x": x})[0]
    assert got.shape == portable.shape
    np.testing.assert_array_equal(got, portable)                      # the taps' order: the same bits


@pytest.mark.parametrize("op,attrs,shape", WHOLE[:2] + WHOLE[4:5])
def test_onnxruntime_agrees(op, attrs, shape):
    ort = pytest.importorskip("onnxruntime")
    data = _model(op, attrs, shape)
    x = RNG.standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(onnxkit.InferenceSession(data).run(None, {"x": x})[0], want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op,attrs,shape", NOT_WHOLE)
def test_windows_that_do_not_cover_the_input_take_the_taps(op, attrs, shape, monkeypatch):
    seen = _calls(monkeypatch)
    data = _model(op, attrs, shape)
    onnxkit.InferenceSession(data).run(None, {"x": RNG.standard_normal(shape).astype(np.float32)})
    assert seen == []


def test_the_pads_count_only_where_the_node_says():
    x = np.ones((1, 1, 7, 7), np.float32)
    plain = _model("AveragePool", dict(kernel_shape=[9, 9], pads=[1, 1, 1, 1]), (1, 1, 7, 7))
    counted = _model("AveragePool", dict(kernel_shape=[9, 9], pads=[1, 1, 1, 1], count_include_pad=1), (1, 1, 7, 7))
    np.testing.assert_array_equal(onnxkit.InferenceSession(plain).run(None, {"x": x})[0], np.ones((1, 1, 1, 1)))
    np.testing.assert_allclose(onnxkit.InferenceSession(counted).run(None, {"x": x})[0], np.full((1, 1, 1, 1), 49 / 81),
                               rtol=1e-7)


def test_a_window_with_pads_gives_the_tap_folds_positive_zero():
    """The tap fold adds the pads' +0 to a window of -0s (+0); a window of X's own -0s stays -0."""
    x = np.full((1, 2, 7, 7), -0.0, np.float32)
    padded = _model("AveragePool", dict(kernel_shape=[9, 9], pads=[1, 1, 1, 1]), (1, 2, 7, 7))
    plain = _model("AveragePool", dict(kernel_shape=[7, 7]), (1, 2, 7, 7))
    assert not np.signbit(onnxkit.InferenceSession(padded).run(None, {"x": x})[0]).any()
    assert np.signbit(onnxkit.InferenceSession(plain).run(None, {"x": x})[0]).all()
