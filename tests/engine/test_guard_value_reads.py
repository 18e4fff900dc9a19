"""A size guard that asks shape inference remembers its answer per key, and a key holds the
values of only the inputs inference asked for: a Pad's data (a new audio chunk every call) is no
new key, its pads are.  Oracles: onnxruntime's outputs, the bytes the limit allows by hand."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.errors import LimitExceeded  # noqa: E402
from onnxkit.limits import Limits  # noqa: E402
from onnxkit.runtime import budget  # noqa: E402


def _pad_model() -> bytes:
    g = h.make_graph([h.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="reflect")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 64]), h.make_tensor_value_info("pads", T.INT64, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, None])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.fixture
def asked(monkeypatch):
    calls = []
    real = budget.Guard._infer
    monkeypatch.setattr(budget.Guard, "_infer", lambda self, *a: calls.append(self.op) or real(self, *a))
    return calls


def test_new_data_is_no_new_key_and_new_pads_are(asked):
    data = _pad_model()
    mine = onnxkit.InferenceSession(data)
    theirs = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    pads = np.array([0, 3, 0, 5], np.int64)
    for _ in range(20):  # a stream of chunks, as a VAD gets them
        feed = {"x": rng.standard_normal((1, 64)).astype(np.float32), "pads": pads}
        np.testing.assert_array_equal(mine.run(None, feed)[0], theirs.run(None, feed)[0])
    assert asked == ["Pad"]
    for p in ([0, 1, 0, 1], [0, 7, 0, 2], [0, 3, 0, 5]):
        feed = {"x": rng.standard_normal((1, 64)).astype(np.float32), "pads": np.array(p, np.int64)}
        np.testing.assert_array_equal(mine.run(None, feed)[0], theirs.run(None, feed)[0])
    assert asked == ["Pad"] * 3   # two new pads values; the third was seen


def test_the_limit_follows_the_pads_values_not_a_remembered_size():
    sess = onnxkit.InferenceSession(_pad_model(), limits=Limits(max_value_bytes=4 * 100))
    x = np.ones((1, 64), np.float32)
    assert sess.run(None, {"x": x, "pads": np.array([0, 1, 0, 1], np.int64)})[0].shape == (1, 66)
    assert sess.run(None, {"x": x, "pads": np.array([0, 18, 0, 18], np.int64)})[0].shape == (1, 100)  # 400 bytes
    with pytest.raises(LimitExceeded, match="max_value_bytes"):
        sess.run(None, {"x": x * 2, "pads": np.array([0, 18, 0, 19], np.int64)})


def _chain_of_large_values(n: int) -> bytes:
    """x [1, 1000] expanded to [100, 1000] (400,000 bytes, charged by Expand's guard) and averaged
    back, ``n`` times: each large value is freed by the ReduceMean reading it."""
    nodes, prev = [], "x"
    for i in range(n):
        nodes += [h.make_node("Expand", [prev, "rows"], [f"e{i}"]),
                  h.make_node("ReduceMean", [f"e{i}"], [f"r{i}"], axes=[0], keepdims=1)]
        prev = f"r{i}"
    rows = h.make_tensor("rows", T.INT64, [2], [100, 1000])
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 1000])],
                     [h.make_tensor_value_info(prev, T.FLOAT, [1, 1000])], [rows])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()


def test_the_bytes_of_a_freed_value_are_given_back_to_the_run():
    """max_run_bytes bounds the guarded values held at once: five 400,000-byte values made and
    freed in turn fit in 1,000,000 bytes; two held together at the end of a run do not."""
    x = np.ones((1, 1000), np.float32)
    sess = onnxkit.InferenceSession(_chain_of_large_values(5), limits=Limits(max_run_bytes=1_000_000))
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], x)
    g = h.make_graph([h.make_node("Expand", ["x", "rows"], ["a"]), h.make_node("Expand", ["x", "rows"], ["b"]),
                      h.make_node("Expand", ["x", "rows"], ["c"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 1000])],
                     [h.make_tensor_value_info(n, T.FLOAT, [100, 1000]) for n in "abc"],
                     [h.make_tensor("rows", T.INT64, [2], [100, 1000])])
    held = onnxkit.InferenceSession(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
                                    .SerializeToString(), limits=Limits(max_run_bytes=1_000_000))
    with pytest.raises(LimitExceeded, match="max_run_bytes"):
        held.run(None, {"x": x})
