"""The cpu QLinearAdd / QLinearMul / QGemm / QLinearGlobalAveragePool declare their output bytes
(overrides/quantized_microsoft.py): the run loop's size guard asks no inference per call, and an
output beyond the limits is refused before the kernel runs (the byte counts written here)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxkit_microsoft")
pytest.importorskip("onnx")
from quantized_harness import build  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.errors import LimitExceeded  # noqa: E402
from onnxkit.limits import Limits  # noqa: E402
from onnxkit.runtime import budget  # noqa: E402

from onnx import TensorProto as TP  # noqa: E402

MS = "com.microsoft"
RNG = np.random.default_rng(7)


def _add(a_shape, b_shape):
    a = RNG.integers(0, 256, a_shape).astype(np.uint8)
    b = RNG.integers(0, 256, b_shape).astype(np.uint8)
    inputs = [a, np.float32(0.02), np.uint8(128), b, np.float32(0.03), np.uint8(120), np.float32(0.05), np.uint8(128)]
    return build("QLinearAdd", inputs, domain=MS, out_types=[TP.UINT8], constants=(1, 2, 4, 5, 6, 7))


def test_qlinear_add_asks_no_inference_and_its_bytes_are_the_broadcast_shape(monkeypatch):
    asked = []
    real = budget.Guard._infer
    monkeypatch.setattr(budget.Guard, "_infer", lambda self, *a: asked.append(self.op) or real(self, *a))
    data, feed = _add((4, 1, 64), (1, 8, 64))
    sess = onnxkit.InferenceSession(data, limits=Limits(max_value_bytes=4 * 8 * 64))     # exactly the output
    (y,) = sess.run(None, feed)
    assert y.shape == (4, 8, 64) and y.dtype == np.uint8 and asked == []
    small = onnxkit.InferenceSession(data, limits=Limits(max_value_bytes=4 * 8 * 64 - 1))
    with pytest.raises(LimitExceeded, match="max_value_bytes"):
        small.run(None, feed)


def test_qlinear_add_bytes_follow_each_pair_of_shapes():
    """The kept broadcast sizes: pairs of shapes met in turn, again, and a pair that does not
    broadcast (the ValueError the kernel reports), against numpy's broadcast written here."""
    from onnxkit_cpu.overrides import quantized_microsoft as qm

    one, int8 = np.float32(1), np.array(0, np.int8)
    pairs = [((4, 1, 64), (1, 8, 64)), ((3, 5), (5,)), ((4, 1, 64), (1, 8, 64)), ((2, 1), (1, 7)), ((2, 1), (1, 3)),
             ((3, 5), (5,))]
    for a_shape, b_shape in pairs:
        a, b = np.zeros(a_shape, np.uint8), np.zeros(b_shape, np.uint8)
        want = int(np.prod(np.broadcast_shapes(a_shape, b_shape)))
        assert qm._binary_bytes(a, one, None, b, one, None, one) == want
        assert qm._binary_bytes(a, one, None, b, one, None, one, int8) == want
    with pytest.raises(ValueError):
        qm._binary_bytes(np.zeros((3, 4), np.uint8), one, None, np.zeros((5,), np.uint8), one, None, one)


def test_qgemm_float_output_bytes():
    a = RNG.integers(0, 256, (5, 16)).astype(np.uint8)
    b = RNG.integers(-128, 128, (7, 16)).astype(np.int8)
    inputs = [a, np.float32(0.02), np.uint8(128), b, np.float32(0.03), np.int8(0)]
    data, feed = build("QGemm", inputs, {"transB": 1}, domain=MS, out_types=[TP.FLOAT], constants=(1, 2, 3, 4, 5))
    (y,) = onnxkit.InferenceSession(data, limits=Limits(max_value_bytes=5 * 7 * 4)).run(None, feed)
    assert y.shape == (5, 7) and y.dtype == np.float32
    with pytest.raises(LimitExceeded, match="max_value_bytes"):
        onnxkit.InferenceSession(data, limits=Limits(max_value_bytes=5 * 7 * 4 - 1)).run(None, feed)
