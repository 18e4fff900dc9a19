"""Expand's and Range's size guards without inference (issue 43 item 1; :mod:`onnxkit.runtime.value_sizes`).

A decoder feeds a new past length every token: the guard of each ``Expand`` (its shape input's
value) and ``Range`` (its limit) missed the inference memo every run.  Their bytes are now read
off the numpy inputs.  Checked: the bytes equal the output's (numpy's broadcasting and arange as
the independent references, onnxruntime's outputs where installed), inference is no longer asked
on new shapes, and what exceeds ``max_value_bytes`` is still refused before the kernel runs.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxkit
from onnxkit import ir
from onnxkit.errors import LimitExceeded
from onnxkit.limits import Limits
from onnxkit.runtime import budget
from onnxkit.runtime.value_sizes import expand_bytes, range_bytes

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

EXPANDS = [((1, 4), [3, 1]), ((3, 1), [2, 1, 5]), ((2, 3), [3]), ((1,), [0]), ((4, 1, 2), [1, 6, 1]),
           ((), [2, 2]), ((2, 1), [1, 1, 1, 1])]
BAD_EXPANDS = [((2, 3), [4]), ((3,), [-1]), ((2,), [2, 2.0])]
RANGES = [(0, 10, 3), (10, 0, -3), (5, 5, 1), (5, 0, 2), (-7, 8, 4), (3, 100, 1)]


@pytest.mark.parametrize("shape, target", EXPANDS)
def test_expand_bytes_are_the_outputs(shape, target):
    x = np.ones(shape, np.float32)
    reference = (x * np.ones(target, np.float32)).nbytes  # numpy's bidirectional broadcasting (ONNX 6.6.2's rule)
    assert expand_bytes([x, np.array(target, np.int64)]) == reference


@pytest.mark.parametrize("shape, target", BAD_EXPANDS)
def test_expand_bytes_leave_what_they_cannot_read_to_inference(shape, target):
    assert expand_bytes([np.ones(shape, np.float32), np.array(target)]) is None


@pytest.mark.parametrize("start, limit, delta", RANGES)
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_range_bytes_are_the_outputs(start, limit, delta, dtype):
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    assert range_bytes(args) == np.arange(start, limit, delta, dtype=dtype).nbytes


def test_range_bytes_leave_floats_and_zero_steps_to_inference():
    assert range_bytes([np.array(0.0, np.float32), np.array(1.0, np.float32), np.array(0.1, np.float32)]) is None
    assert range_bytes([np.array(0), np.array(4), np.array(0)]) is None


def _model():
    """y = Expand(x, shape), r = Range(0, n, 1): the shapes and the limit fed each run."""
    nodes = [ir.Node(["x", "shape"], ["y"], op_type="Expand", name="expand"),
             ir.Node(["zero", "n", "one"], ["r"], op_type="Range", name="range")]
    g = ir.Graph(node=nodes, name="g",
                 input=[ir.ValueInfo("x", ir.tensor_type(1, [1, "t"])), ir.ValueInfo("shape", ir.tensor_type(7, [3])),
                        ir.ValueInfo("n", ir.tensor_type(7, []))],
                 output=[ir.ValueInfo("y", ir.tensor_type(1, None)), ir.ValueInfo("r", ir.tensor_type(7, None))],
                 initializer=[ir.Tensor.from_numpy(np.array(0, np.int64), "zero"),
                              ir.Tensor.from_numpy(np.array(1, np.int64), "one")])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g)


def _feeds(t: int):
    return {"x": np.arange(t, dtype=np.float32)[None, :], "shape": np.array([2, 1, t], np.int64),
            "n": np.array(t + 3, np.int64)}


def test_a_stream_of_new_shapes_asks_inference_nothing(monkeypatch):
    asked = []
    infer = budget.Guard._infer
    monkeypatch.setattr(budget.Guard, "_infer", lambda self, *a: asked.append(self.op) or infer(self, *a))
    sess = onnxkit.InferenceSession(_model())
    for t in range(1, 12):  # a new extent every run, as a decoder's past
        feeds = _feeds(t)
        y, r = sess.run(None, feeds)
        np.testing.assert_array_equal(y, np.broadcast_to(feeds["x"], (2, 1, t)))
        np.testing.assert_array_equal(r, np.arange(t + 3))
    assert asked == []


def test_what_exceeds_the_limit_is_still_refused_before_the_kernel():
    sess = onnxkit.InferenceSession(_model(), limits=Limits(max_value_bytes=1 << 20))
    feeds = _feeds(4)
    feeds["shape"] = np.array([1 << 10, 1 << 10, 4], np.int64)  # 16 MiB of float32
    with pytest.raises(LimitExceeded, match="expand"):
        sess.run(None, feeds)
    feeds = _feeds(4)
    feeds["n"] = np.array(1 << 20, np.int64)  # 8 MiB of int64
    with pytest.raises(LimitExceeded, match="range"):
        sess.run(None, feeds)


def test_the_outputs_are_onnxruntimes():
    ort = pytest.importorskip("onnxruntime")
    sess = onnxkit.InferenceSession(_model())
    theirs = ort.InferenceSession(onnxkit.to_bytes(_model()), providers=["CPUExecutionProvider"])
    for t in (1, 5, 9):
        mine, ref = sess.run(None, _feeds(t)), theirs.run(None, _feeds(t))
        for a, b in zip(mine, ref):
            assert a.shape == b.shape and a.nbytes == b.nbytes
            np.testing.assert_array_equal(a, b)
