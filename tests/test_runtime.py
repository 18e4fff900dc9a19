"""The run loop's planning: constant folding, defaults that may be overridden (7.2), lifetimes."""

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.runtime import InferenceSession, InputError


def model_with_default(ir_version=3):
    """Y = X + W * 2, where W (an initializer that is also an input) defaults to [1, 2, 3]."""
    two = ir.Tensor.from_numpy(np.array([2.0], np.float32), "two")
    w = ir.Tensor.from_numpy(np.array([1, 2, 3], np.float32), "W")
    g = ir.Graph(node=[ir.Node(["W", "two"], ["W2"], op_type="Mul"), ir.Node(["X", "W2"], ["Y"], op_type="Add")],
                 name="g", initializer=[w, two],
                 input=[ir.ValueInfo("X", ir.tensor_type(1, [3])), ir.ValueInfo("W", ir.tensor_type(1, [3])),
                        ir.ValueInfo("two", ir.tensor_type(1, [1]))],
                 output=[ir.ValueInfo("Y", ir.tensor_type(1, [3]))])
    return ir.Model(ir_version=ir_version, opset_import=[ir.OperatorSetId("", 13)], graph=g)


def test_defaults_are_folded_while_not_overridden_and_honoured_when_they_are():
    sess = InferenceSession(model_with_default())
    x = np.zeros(3, np.float32)
    assert sess.plan.folded is not None and len(sess.plan.folded[1]) < len(sess.plan.steps)
    np.testing.assert_array_equal(sess.run(None, {"X": x})[0], [2, 4, 6])
    np.testing.assert_array_equal(sess.run(None, {"X": x, "W": np.ones(3, np.float32)})[0], [2, 2, 2])
    np.testing.assert_array_equal(sess.run(None, {"X": x, "two": np.array([10], np.float32)})[0], [10, 20, 30])
    np.testing.assert_array_equal(sess.run(None, {"X": x})[0], [2, 4, 6])


def test_constants_that_are_not_inputs_are_folded_and_cannot_be_fed():
    m = model_with_default(ir_version=8)
    m.graph.input = [vi for vi in m.graph.input if vi.name == "X"]
    sess = InferenceSession(m)
    assert len(sess.plan.steps) == 1  # Mul of two constants was evaluated at planning
    np.testing.assert_array_equal(sess.run(None, {"X": np.ones(3, np.float32)})[0], [3, 5, 7])
    with pytest.raises(InputError, match="constant"):
        sess.run(None, {"X": np.ones(3, np.float32), "W": np.ones(3, np.float32)})


def test_random_operators_are_never_folded():
    g = ir.Graph(node=[ir.Node([], ["R"], op_type="RandomUniform",
                               attribute=[ir.Attribute.make("shape", [4]), ir.Attribute.make("dtype", 1)])],
                 name="g", output=[ir.ValueInfo("R", ir.tensor_type(1, [4]))])
    sess = InferenceSession(ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 13)], graph=g))
    assert len(sess.plan.steps) == 1
    a, b = sess.run(None, {})[0], sess.run(None, {})[0]
    assert a.shape == (4,) and not np.array_equal(a, b)  # Clause 8.5: non-deterministic without a seed
