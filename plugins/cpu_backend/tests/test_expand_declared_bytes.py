"""The cpu Expand declares its output bytes: a stream of new shape values (a decoder's growing
past) is size-checked without shape inference, and what exceeds the limits is refused before the
output is allocated."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.errors import LimitExceeded  # noqa: E402
from onnxkit.limits import Limits  # noqa: E402
from onnxkit.runtime import budget  # noqa: E402


def _model() -> bytes:
    g = h.make_graph([h.make_node("Expand", ["x", "shape"], ["y"], name="expand")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, "n"]),
                      h.make_tensor_value_info("shape", T.INT64, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)]).SerializeToString()


def test_a_stream_of_new_shapes_is_checked_without_inference(monkeypatch):
    asked = []
    real = budget.Guard._infer
    monkeypatch.setattr(budget.Guard, "_infer", lambda self, *a: asked.append(self.op) or real(self, *a))
    sess = onnxkit.InferenceSession(_model())
    x = np.arange(3, dtype=np.float32)[None]
    for rows in range(1, 8):
        (y,) = sess.run(None, {"x": x, "shape": np.array([rows, 1], np.int64)})
        np.testing.assert_array_equal(y, np.broadcast_to(x, (rows, 3)))
    (y,) = sess.run(None, {"x": x, "shape": np.array([1, 1], np.int64)})     # X itself: no new bytes
    np.testing.assert_array_equal(y, x)
    assert asked == []


def test_an_output_beyond_the_limit_is_refused_before_it_is_made():
    sess = onnxkit.InferenceSession(_model(), limits=Limits(max_value_bytes=1 << 20))
    x = np.ones((1, 1024), np.float32)
    sess.run(None, {"x": x, "shape": np.array([256, 1], np.int64)})           # exactly 1 MiB
    with pytest.raises(LimitExceeded, match="max_value_bytes") as e:
        sess.run(None, {"x": x, "shape": np.array([257, 1], np.int64)})
    assert "expand" in str(e.value)


def test_a_shape_that_does_not_broadcast_is_the_kernels_refusal():
    sess = onnxkit.InferenceSession(_model())
    with pytest.raises(onnxkit.errors.OnnxkitError, match="expand"):
        sess.run(None, {"x": np.ones((1, 3), np.float32), "shape": np.array([2, 4], np.int64)})
