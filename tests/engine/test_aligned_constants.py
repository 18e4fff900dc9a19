"""A session keeps aligned constants: tensors whose raw data starts at an offset of the model's
octets that is no multiple of the element size are copied when the session owns its data
(numpy and BLAS skip unaligned operands), and kept as views with ``own_data=False``."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnxkit import InferenceSession  # noqa: E402


def _model() -> bytes:
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    # a one-octet name before the tensor's raw data, as in real files: offsets are arbitrary
    odd = numpy_helper.from_array(np.array([1], np.uint8), "o")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [odd, w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


def _find_unaligned_layout() -> bytes:
    """The model bytes with ``w``'s raw data at an odd offset (padding the graph's name until it is)."""
    data = _model()
    for k in range(8):
        m = onnx.load_from_string(data)
        m.graph.name = "g" + "x" * k
        b = m.SerializeToString()
        raw = numpy_helper.to_array(m.graph.initializer[1]).tobytes()
        if b.find(raw) % 4:
            return b
    raise AssertionError("no layout puts w at an unaligned offset")


def test_unaligned_initializers_are_copied_aligned_when_the_session_owns_its_data():
    data = _find_unaligned_layout()
    x = {"x": np.ones((2, 3), np.float32)}
    owned = InferenceSession(data)
    assert owned.plan.constants["w"].flags.aligned
    views = InferenceSession(data, own_data=False)
    assert not views.plan.constants["w"].flags.aligned  # the zero-copy view, as asked
    expected = x["x"] @ np.arange(12, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(owned.run(None, x)[0], expected)
    assert np.array_equal(views.run(None, x)[0], expected)


def test_the_aligned_copy_is_made_once_and_handed_to_every_run():
    data = _find_unaligned_layout()
    sess = InferenceSession(data)
    step = sess.plan.steps[0]
    real, seen = step.fn, []

    def spy(x, w):
        seen.append(w)
        return real(x, w)

    step.fn = spy
    x = {"x": np.ones((2, 3), np.float32)}
    for _ in range(3):
        sess.run(None, x)
    assert len(seen) == 3 and all(w is seen[0] for w in seen)   # one copy, made at planning
    assert seen[0].flags.aligned and not seen[0].flags.writeable
    np.testing.assert_array_equal(seen[0], np.arange(12, dtype=np.float32).reshape(3, 4))
    views = InferenceSession(data, own_data=False)
    step = views.plan.steps[0]
    real_v, seen_v = step.fn, []
    step.fn = lambda x, w: (seen_v.append(w), real_v(x, w))[1]
    views.run(None, x)
    assert not seen_v[0].flags.aligned   # zero-copy as asked: the view itself reaches the kernel


def _folded_model() -> bytes:
    """y = (w * 2) and z = x @ (w * 2): ``w * 2`` is folded at planning."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    g = helper.make_graph([helper.make_node("Mul", ["w", "two"], ["y"]), helper.make_node("MatMul", ["x", "y"], ["z"])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])], [w, two])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()


def test_folded_constants_are_read_only_and_outputs_stay_the_callers():
    s = InferenceSession(_folded_model())
    assert not s.plan.constants["y"].flags.writeable
    x = np.ones((2, 3), np.float32)
    y, z = s.run(None, {"x": x})
    assert y.flags.writeable        # the caller's own copy, not the plan's read-only constant
    y[...] = -1
    y2, z2 = s.run(None, {"x": x})
    np.testing.assert_array_equal(y2, np.arange(12, dtype=np.float32).reshape(3, 4) * 2)
    np.testing.assert_array_equal(z2, z)
