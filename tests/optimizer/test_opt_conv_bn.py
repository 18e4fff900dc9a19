"""The ``conv_bn`` pass: an inference-mode BatchNormalization folded into the Conv before it."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer_cases import TP, check_pass, helper, init, model, optimized_ops

RNG = np.random.default_rng(14)


def _conv_bn(dtype=np.float32, bias=True, group=1, epsilon=1e-5, extra_reader=False):
    tag = TP.FLOAT if dtype == np.float32 else TP.DOUBLE
    c, m = 4, 6
    x = helper.make_tensor_value_info("x", tag, [2, c, 7, 7])
    y = helper.make_tensor_value_info("y", tag, [2, m, 5, 5])
    inits = [init("W", RNG.standard_normal((m, c // group, 3, 3)).astype(dtype)),
             init("s", RNG.uniform(0.5, 2, m).astype(dtype)), init("b", RNG.standard_normal(m).astype(dtype)),
             init("mean", RNG.standard_normal(m).astype(dtype)), init("var", RNG.uniform(0.1, 3, m).astype(dtype))]
    conv_in = ["x", "W"]
    if bias:
        inits.append(init("B", RNG.standard_normal(m).astype(dtype)))
        conv_in.append("B")
    nodes = [helper.make_node("Conv", conv_in, ["c"], group=group),
             helper.make_node("BatchNormalization", ["c", "s", "b", "mean", "var"], ["n"], epsilon=epsilon),
             helper.make_node("Relu", ["n"], ["y"])]
    outputs = [y]
    if extra_reader:
        nodes.append(helper.make_node("Abs", ["c"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", tag, [2, m, 5, 5]))
    feed = {"x": RNG.standard_normal((2, c, 7, 7)).astype(dtype)}
    return model(nodes, [x], outputs, inits), feed


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_folded_within_tolerance(dtype, bias):
    proto, feed = _conv_bn(dtype, bias)
    check_pass(proto, feed, "conv_bn", 1, ["Conv", "Relu"],
               oracle="onnxruntime" if dtype == np.float32 else "reference")  # onnxruntime: no float64 Conv


def test_grouped_conv_folded():
    proto, feed = _conv_bn(group=2, epsilon=1e-3)
    check_pass(proto, feed, "conv_bn", 1, ["Conv", "Relu"])


def test_conv_output_read_elsewhere_not_folded():
    proto, feed = _conv_bn(extra_reader=True)
    check_pass(proto, feed, "conv_bn", 0, ["Conv", "BatchNormalization", "Relu", "Abs"])


def test_weights_shared_or_fed_not_folded():
    proto, _ = _conv_bn()
    proto.graph.input.append(helper.make_tensor_value_info("W", TP.FLOAT, [6, 4, 3, 3]))  # overridable (IR 8)
    assert optimized_ops(proto, "conv_bn") == (0, ["Conv", "BatchNormalization", "Relu"])


def test_ir3_default_fed_runs_the_model_as_given():
    """Under IR < 4 initializers are inputs read as constants; a run that feeds one gets the
    model as written (the session plans it unoptimized on demand)."""
    import onnxkit
    from optimizer_cases import off, only

    proto, feed = _conv_bn(bias=False)
    del proto.graph.input[:]
    proto.graph.input.append(helper.make_tensor_value_info("x", TP.FLOAT, [2, 4, 7, 7]))
    for t in proto.graph.initializer:
        proto.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    proto.ir_version = 3
    proto.opset_import[0].version = 9
    data = proto.SerializeToString()
    sess = onnxkit.InferenceSession(data, only("conv_bn"))
    assert sess.optimized.rewrites["conv_bn"] == 1
    plain = onnxkit.InferenceSession(data, off())
    from optimizer_cases import within

    assert within(sess.run(None, feed)[0], plain.run(None, feed)[0])
    for name, value in (("var", np.full(6, 4.0, np.float32)), ("W", np.full((6, 4, 3, 3), 0.5, np.float32))):
        fed = {**feed, name: value}   # a BatchNormalization parameter, the Conv's weights
        assert within(sess.run(None, fed)[0], plain.run(None, fed)[0]), name
        assert not within(plain.run(None, fed)[0], plain.run(None, feed)[0]), name


def _with_variance(proto, var):
    for t in proto.graph.initializer:
        if t.name == "var":
            t.CopyFrom(init("var", var))
    return proto


def test_zero_variance_with_zero_epsilon_not_folded():
    """A zero variance with epsilon 0 makes ``scale / sqrt(var + eps)`` infinite: unfused, each
    output of such a channel is the Conv's sum times +-inf (``x * inv + shift``, as onnxruntime);
    folded it would be ``conv(X, W * inf)``, a sum of infinities of both signs, NaN (the
    differential fuzzer's conv_bn family, ``bn:zero-var``).  The pass declines; the result is
    onnxruntime's, infinities and NaN in the same places."""
    from optimizer_cases import ort_plain

    import onnxkit

    proto, feed = _conv_bn(epsilon=0.0)
    _with_variance(proto, np.array([0.0, 1.0, 0.5, 0.0, 2.0, 0.0], np.float32))
    assert optimized_ops(proto, "conv_bn") == (0, ["Conv", "BatchNormalization", "Relu"])
    expected = ort_plain(proto, feed)[0]
    assert np.isinf(expected).any() and np.isfinite(expected).any()      # the premise: channels 0, 3, 5 infinite
    got = onnxkit.InferenceSession(proto.SerializeToString()).run(None, feed)[0]      # every pass on
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_zero_variance_with_an_epsilon_still_folded():
    """The same zero variances with epsilon 1e-5: the scale is finite (316 * scale), the fold holds."""
    proto, feed = _conv_bn(epsilon=1e-5)
    _with_variance(proto, np.array([0.0, 1.0, 0.5, 0.0, 2.0, 0.0], np.float32))
    check_pass(proto, feed, "conv_bn", 1, ["Conv", "Relu"])
