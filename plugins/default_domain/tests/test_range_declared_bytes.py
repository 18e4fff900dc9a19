"""Range declares its output bytes: a stream of new limits (a decoder's positions) is
size-checked without shape inference, the count is the kernel's own (onnxruntime's values,
every element type, either sign of delta, empty ranges), and what exceeds the limits is refused
before the output is allocated."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.errors import LimitExceeded, OnnxkitError  # noqa: E402
from onnxkit.limits import Limits  # noqa: E402
from onnxkit.runtime import budget  # noqa: E402

TYPES = {np.int64: T.INT64, np.int32: T.INT32, np.int16: T.INT16, np.float32: T.FLOAT, np.float64: T.DOUBLE}


def _model(dtype, opset: int = 17) -> bytes:
    t = TYPES[dtype]
    g = h.make_graph([h.make_node("Range", ["s", "l", "d"], ["y"], name="range")], "g",
                     [h.make_tensor_value_info(k, t, []) for k in "sld"], [h.make_tensor_value_info("y", t, [None])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8).SerializeToString()


def _feed(dtype, s, l, d) -> dict:
    return {k: np.array(v, dtype) for k, v in zip("sld", (s, l, d))}


def test_a_stream_of_new_limits_is_checked_without_inference(monkeypatch):
    asked = []
    real = budget.Guard._infer
    monkeypatch.setattr(budget.Guard, "_infer", lambda self, *a: asked.append(self.op) or real(self, *a))
    sess = onnxkit.InferenceSession(_model(np.int64))
    for limit in range(0, 40):
        (y,) = sess.run(None, _feed(np.int64, 0, limit, 1))
        np.testing.assert_array_equal(y, np.arange(limit, dtype=np.int64))
    assert asked == []


@pytest.mark.parametrize("dtype", list(TYPES))
def test_values_and_counts_are_onnxruntimes(dtype):
    data = _model(dtype)
    so = ort.SessionOptions()
    so.log_severity_level = 4
    theirs = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    mine = onnxkit.InferenceSession(data)
    cases = [(0, 10, 1), (3, 17, 4), (10, 0, -3), (5, 5, 1), (5, 2, 1), (-7, 7, 2), (2, -9, -1)]
    if np.dtype(dtype).kind == "f":
        cases += [(0.5, 3.25, 0.5), (1.0, -2.0, -0.7), (0.1, 0.3, 0.1)]
    for s, l, d in cases:
        feed = _feed(dtype, s, l, d)
        want = theirs.run(None, feed)[0]
        got = mine.run(None, feed)[0]
        assert got.dtype == want.dtype and got.shape == want.shape, (s, l, d)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_output_beyond_the_limit_is_refused_before_it_is_made():
    sess = onnxkit.InferenceSession(_model(np.int64), limits=Limits(max_value_bytes=1 << 20))
    sess.run(None, _feed(np.int64, 0, 1 << 17, 1))                       # exactly 1 MiB
    with pytest.raises(LimitExceeded, match="max_value_bytes") as e:
        sess.run(None, _feed(np.int64, 0, (1 << 17) + 1, 1))
    assert "range" in str(e.value)
    sess = onnxkit.InferenceSession(_model(np.float32), limits=Limits(max_value_bytes=1 << 20))
    with pytest.raises(LimitExceeded, match="max_value_bytes"):
        sess.run(None, _feed(np.float32, 0, 1e9, 0.5))


def test_inputs_the_kernel_refuses_are_its_refusal_by_name():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ints = onnxkit.InferenceSession(_model(np.int64))
        floats = onnxkit.InferenceSession(_model(np.float32))
    with pytest.raises(OnnxkitError, match="range.*delta"):
        ints.run(None, _feed(np.int64, 0, 5, 0))
    with pytest.raises(OnnxkitError, match="range.*finite"):
        floats.run(None, _feed(np.float32, 0, np.inf, 1))
    with pytest.raises(OnnxkitError, match="range.*finite"):
        floats.run(None, _feed(np.float32, np.nan, 1, 1))
