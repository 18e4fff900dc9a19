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


def _local_function_model():
    """Model-local functions (8.4): Scale(x) = x * alpha (+ beta where the overload says so)."""
    A = ir.Attribute
    mul = ir.Node(["x", "a"], ["y"], op_type="Mul")
    const_a = ir.Node([], ["a"], op_type="Constant", attribute=[A("value_float", 1, ref_attr_name="alpha")])
    plain = ir.Function(name="Scale", domain="com.example", input=["x"], output=["y"], attribute=["alpha"],
                        node=[const_a, mul], opset_import=[ir.OperatorSetId("", 18)])
    const_b = ir.Node([], ["b"], op_type="Constant", attribute=[A("value_float", 1, ref_attr_name="beta")])
    add = ir.Node(["y0", "b"], ["y"], op_type="Add")
    mul0 = ir.Node(["x", "a"], ["y0"], op_type="Mul")
    shifted = ir.Function(name="Scale", domain="com.example", overload="shifted", input=["x"], output=["y"],
                          attribute=["alpha"], attribute_proto=[ir.Attribute.make("beta", 100.0)],
                          node=[const_a, const_b, mul0, add], opset_import=[ir.OperatorSetId("", 18)])
    nodes = [
        ir.Node(["X"], ["Y1"], op_type="Scale", domain="com.example", attribute=[ir.Attribute.make("alpha", 3.0)]),
        ir.Node(["X"], ["Y2"], op_type="Scale", domain="com.example", overload="shifted",
                attribute=[ir.Attribute.make("alpha", 2.0)]),
        ir.Node(["X"], ["Y3"], op_type="Scale", domain="com.example", overload="shifted",
                attribute=[ir.Attribute.make("alpha", 2.0), ir.Attribute.make("beta", -1.0)]),
    ]
    vi = lambda n: ir.ValueInfo(n, ir.tensor_type(1, [2]))  # noqa: E731
    g = ir.Graph(node=nodes, name="g", input=[vi("X")], output=[vi("Y1"), vi("Y2"), vi("Y3")])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 18), ir.OperatorSetId("com.example", 1)],
                    graph=g, functions=[plain, shifted])


def test_model_local_functions_with_attribute_references_defaults_and_overloads():
    y1, y2, y3 = InferenceSession(_local_function_model()).run(None, {"X": np.array([1, 2], np.float32)})
    np.testing.assert_array_equal(y1, [3, 6])          # alpha from the call site
    np.testing.assert_array_equal(y2, [102, 104])      # overload "shifted", beta from its default
    np.testing.assert_array_equal(y3, [1, 3])          # beta from the call site


def test_a_part2_function_body_is_evaluated_when_the_backend_has_no_kernel():
    from onnxkit.registry import build_registry

    reg = build_registry()
    assert reg.bind("", "Selu", 18).has_function
    del reg.kernels["cpu"][("", "Selu", 6)]
    g = ir.Graph(node=[ir.Node(["X"], ["Y"], op_type="Selu", attribute=[ir.Attribute.make("alpha", 2.0)])], name="g",
                 input=[ir.ValueInfo("X", ir.tensor_type(1, [4]))], output=[ir.ValueInfo("Y", ir.tensor_type(1, [4]))])
    sess = InferenceSession(ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 18)], graph=g), registry=reg)
    x = np.array([-2.0, -0.5, 0.0, 3.0], np.float32)
    gamma = 1.0507009873554804934193349852946  # Selu's default gamma; alpha from the node
    expected = np.where(x > 0, gamma * x, gamma * (2.0 * np.exp(x) - 2.0))
    np.testing.assert_allclose(sess.run(None, {"X": x})[0], expected, rtol=1e-6)


def test_a_kernel_failing_at_run_time_is_an_evaluation_error_naming_the_node():
    from onnxkit.errors import EvaluationError

    g = ir.Graph(node=[ir.Node(["X", "I"], ["Y"], name="pick", op_type="Gather")], name="g",
                 input=[ir.ValueInfo("X", ir.tensor_type(1, [3])), ir.ValueInfo("I", ir.tensor_type(7, [1]))],
                 output=[ir.ValueInfo("Y", ir.tensor_type(1, [1]))])
    sess = InferenceSession(ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 13)], graph=g))
    with pytest.raises(EvaluationError) as info:
        sess.run(None, {"X": np.zeros(3, np.float32), "I": np.array([7], np.int64)})
    assert "pick" in str(info.value) and "Gather" in str(info.value)
