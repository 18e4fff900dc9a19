"""The ``epilogue`` plan pass: Relu / Add / Add + Relu folded into the cpu Conv's step,
bit-identical to the unfused plan, off with the level and ``session.disable_passes``."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer_cases import TP, helper, init, model, off, only, ort

from onnxkit import InferenceSession, SessionOptions
from onnxkit.runtime.options import GraphOptimizationLevel

# the fused step is the Conv body the plan took: numpy on a cold plan, compiled on a warm one
pytestmark = pytest.mark.usefixtures("first_run_policy")

RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
X = helper.make_tensor_value_info("x", TP.FLOAT, ["N", 3, 6, 6])
R = helper.make_tensor_value_info("r", TP.FLOAT, [2, 4, 6, 6])
Y = helper.make_tensor_value_info("y", TP.FLOAT, ["N", 4, 6, 6])
FEED = {"x": RNG.standard_normal((2, 3, 6, 6)).astype(np.float32),
        "r": RNG.standard_normal((2, 4, 6, 6)).astype(np.float32)}
XF = {"x": FEED["x"]}


def conv(out="c", bias=True):
    return helper.make_node("Conv", ["x", "w", "b" if bias else ""][:3 if bias else 2], [out], pads=[1, 1, 1, 1])


def build(nodes, inputs=(X,), outputs=(Y,)):
    return model(nodes, list(inputs), list(outputs), [init("w", W), init("b", B)]).SerializeToString()


def sessions(proto, feed):
    """``(fused session, its outputs, outputs with the pass off)``; both plain and with
    everything off must agree bit for bit."""
    s = InferenceSession(proto, only("epilogue"))
    got = s.run(None, feed)
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "epilogue")
    ref = InferenceSession(proto, so).run(None, feed)
    plain = InferenceSession(proto, off()).run(None, feed)
    for a, b, c in zip(got, ref, plain):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True) and np.array_equal(a, c, equal_nan=True)
    return s, got, ref


def ops(s):
    return [st.op for st in s.plan.steps]


def test_conv_relu_fused_bit_identical():
    s, got, _ = sessions(build([conv(), helper.make_node("Relu", ["c"], ["y"])]), XF)
    assert ops(s) == ["Conv"]
    expect = ort.InferenceSession(build([conv(), helper.make_node("Relu", ["c"], ["y"])]),
                                  providers=["CPUExecutionProvider"]).run(None, XF)[0]
    np.testing.assert_allclose(got[0], expect, rtol=1e-5, atol=1e-5)
    assert (got[0] >= 0).all()


@pytest.mark.parametrize("side", [0, 1])
def test_conv_add_relu_fused_either_side(side):
    add = helper.make_node("Add", ["c", "r"] if side == 0 else ["r", "c"], ["a"])
    s, _, _ = sessions(build([conv(), add, helper.make_node("Relu", ["a"], ["y"])], (X, R)), FEED)
    assert ops(s) == ["Conv"] and s.plan.steps[0].inputs == ["x", "w", "b", "r"]


def test_add_operand_computed_after_the_conv():
    """Add's other operand is made after the Conv (a ResNet's downsample branch): the fused step
    runs where the Add was."""
    nodes = [conv(), helper.make_node("Neg", ["r"], ["n"]), helper.make_node("Add", ["c", "n"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    s, _, _ = sessions(build(nodes, (X, R)), FEED)
    assert ops(s) == ["Neg", "Conv"]


def test_add_of_two_convs_taken_by_the_first_only():
    """Add(Conv, Conv) (a ResNet block's residual with a downsample conv): one producer takes it."""
    second = helper.make_node("Conv", ["x", "w"], ["d"], pads=[1, 1, 1, 1])
    for tail in ([], [helper.make_node("Relu", ["a"], ["y"])]):
        out = "a" if tail else "y"
        nodes = [conv(), second, helper.make_node("Add", ["c", "d"], [out])] + tail
        s, _, _ = sessions(build(nodes), XF)
        assert ops(s) == ["Conv", "Conv"] and s.plan.steps[1].inputs == ["x", "w", "b", "d"]


@pytest.mark.parametrize("opset", [6, 17])
def test_sum_of_two_fused_as_an_add(opset):
    """A residual written as Sum (ResNet-era exporters): a Sum of two inputs is taken as an Add
    (then its Relu), bit-identical; a Sum of three is left alone."""
    x6 = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3, 6, 6])
    for side in (0, 1):
        add = helper.make_node("Sum", ["c", "r"] if side == 0 else ["r", "c"], ["a"])
        nodes = [conv(), add, helper.make_node("Relu", ["a"], ["y"])]
        proto = model(nodes, [x6, R], [Y], [init("w", W), init("b", B)], opset=opset).SerializeToString()
        s, got, _ = sessions(proto, FEED)
        assert ops(s) == ["Conv"] and s.plan.steps[0].inputs == ["x", "w", "b", "r"]
        expect = np.maximum(ort.InferenceSession(
            model([conv("y")], [x6], [Y], [init("w", W), init("b", B)]).SerializeToString(),
            providers=["CPUExecutionProvider"]).run(None, XF)[0] + FEED["r"], 0)
        np.testing.assert_allclose(got[0], expect, rtol=1e-5, atol=1e-5)
    three = [conv(), helper.make_node("Sum", ["c", "r", "r"], ["y"])]
    s, _, _ = sessions(model(three, [x6, R], [Y], [init("w", W), init("b", B)], opset=opset).SerializeToString(), FEED)
    assert ops(s) == ["Conv", "Sum"]


def test_conv_without_bias_and_add_alone():
    nodes = [conv(bias=False), helper.make_node("Add", ["c", "r"], ["y"])]
    s, _, _ = sessions(build(nodes, (X, R)), FEED)
    assert ops(s) == ["Conv"] and s.plan.steps[0].inputs == ["x", "w", "", "r"]


def test_broadcasting_and_nan_take_the_consumers_kernels():
    feed = {"x": FEED["x"].copy(), "r": RNG.standard_normal((4, 1, 1)).astype(np.float32)}
    r1 = helper.make_tensor_value_info("r", TP.FLOAT, [4, 1, 1])
    feed["x"][0, 0, 2, 2] = np.nan
    feed["x"][1, 1, 0, 0] = np.inf
    nodes = [conv(), helper.make_node("Add", ["r", "c"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    s, got, _ = sessions(build(nodes, (X, r1)), feed)
    assert ops(s) == ["Conv"] and np.isnan(got[0]).any()


def test_not_fused_when_the_value_is_read_elsewhere_or_an_output():
    c_out = helper.make_tensor_value_info("c", TP.FLOAT, [2, 4, 6, 6])
    s, _, _ = sessions(build([conv(), helper.make_node("Relu", ["c"], ["y"])], outputs=(Y, c_out)), XF)
    assert ops(s) == ["Conv", "Relu"]
    z = helper.make_tensor_value_info("z", TP.FLOAT, [2, 4, 6, 6])
    nodes = [conv(), helper.make_node("Relu", ["c"], ["y"]), helper.make_node("Neg", ["c"], ["z"])]
    s, _, _ = sessions(build(nodes, outputs=(Y, z)), XF)
    assert ops(s) == ["Conv", "Relu", "Neg"]
    s, _, _ = sessions(build([conv(), helper.make_node("Add", ["c", "c"], ["y"])]), XF)
    assert ops(s) == ["Conv", "Add"]


def test_switched_off_by_level_and_by_name():
    proto = build([conv(), helper.make_node("Relu", ["c"], ["y"])])
    so = SessionOptions()
    so.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert ops(InferenceSession(proto, so)) == ["Conv", "Relu"]
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "epilogue")
    assert ops(InferenceSession(proto, so)) == ["Conv", "Relu"]
    assert ops(InferenceSession(proto)) == ["Conv"]


def test_fused_kernel_in_place_only_on_its_own_array(monkeypatch):
    """The in-place Relu runs on the Conv's fresh result (the consumer's kernel is not called);
    an empty Conv (the portable path) calls the Relu's own kernel."""
    from onnxkit.runtime.optimizer import epilogue

    calls = []
    real = epilogue.guarded

    def spy(fn, guard):
        inner = real(fn, guard)
        return lambda *a: calls.append(1) or inner(*a)
    monkeypatch.setattr(epilogue, "guarded", spy)
    proto = build([conv(), helper.make_node("Relu", ["c"], ["y"])])
    s = InferenceSession(proto, only("epilogue"))
    s.run(None, XF)
    assert calls == []
    empty = {"x": np.zeros((0, 3, 6, 6), np.float32)}
    assert s.run(None, empty)[0].shape == (0, 4, 6, 6) and calls == [1]


@pytest.mark.parametrize("batch", [1, 2])
def test_pointwise_conv_relu_bit_for_bit_with_specials(batch):
    # the 1x1 Conv folds B and the Relu into one pass: every bit as the separate kernels give it
    # (NaN payloads, -0 -> +0, inf), rows of W of -0 and B of -0 included
    w = RNG.standard_normal((5, 3, 1, 1)).astype(np.float32)
    w[1] = -0.0
    b = RNG.standard_normal(5).astype(np.float32)
    b[1] = -0.0
    x = RNG.standard_normal((batch, 3, 4, 4)).astype(np.float32)
    x[0, 0, 0, :2] = [np.nan, np.inf]
    x[0, 1, 1, 0] = -np.inf
    x[0, :, 2, 2] = np.abs(x[0, :, 2, 2])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    proto = model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 3, 4, 4])],
                  [helper.make_tensor_value_info("y", TP.FLOAT, ["N", 5, 4, 4])], [init("w", w), init("b", b)]).SerializeToString()
    s = InferenceSession(proto, only("epilogue"))
    assert ops(s) == ["Conv"]
    got = s.run(None, {"x": x})[0]
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "epilogue")
    ref = InferenceSession(proto, so).run(None, {"x": x})[0]
    assert np.isnan(got).any() and np.isinf(got).any()
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))
