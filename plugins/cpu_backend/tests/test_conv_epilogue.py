"""The cpu Conv's fused epilogues (overrides/conv_epilogue.py): B, an Add and a Relu in one
compiled pass (onnxkit_cpu.compiled.conv.finish) must give every bit the separate kernels give
(NaN, inf, -0 included), on each kind of prepared convolution, either side of the Add; and
where the pass cannot run (a broadcasting Add, compiled loops off) the numpy steps run."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

from onnxkit import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import conv as loops  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies")]  # the compiled loops, from the first run

RNG = np.random.default_rng(2718)


def specials(a):
    """``a`` with a NaN, +-inf, -0 and a few exact zeros of either sign written in."""
    f = a.reshape(-1)
    f[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, -0.0]
    return a


def run_finish(y, b, r, side, relu):
    fin = loops.finish.get()
    out = y.copy()
    fin(out, np.empty(0, y.dtype) if b is None else b, np.empty((0, 0), y.dtype) if r is None else r, side, relu)
    return out


def numpy_steps(y, b, r, side, relu):
    """The separate passes the unfused kernels make, written out here."""
    out = y.copy()
    if b is not None:
        out += np.tile(b, out.shape[0] // b.size).reshape(-1, 1)
    if r is not None:
        out = out + r if side == 0 else r + out
    return np.maximum(out, 0) if relu else out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("add", [None, 0, 1])
@pytest.mark.parametrize("relu", [False, True])
def test_finish_loop_bit_for_bit(dtype, bias, add, relu):
    y = specials(RNG.standard_normal((6, 37)).astype(dtype))
    b = RNG.standard_normal(3).astype(dtype) if bias else None
    if b is not None:
        b[1] = -0.0
    r = RNG.standard_normal((6, 37)).astype(dtype) if add is not None else None
    if r is not None:
        r[0, 3:5] = [-0.0, np.nan]      # -0 + -0, and a NaN meeting a number (one NaN: its bits)
        r[1, :2] = [np.inf, -np.inf]
    side = add or 0
    got, want = run_finish(y, b, r, side, relu), numpy_steps(y, b, r, side, relu)
    assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def model(kernel, bias, side, relu, x_shape, dtype=TP.FLOAT, r_shape=None):
    c = x_shape[1]
    w = RNG.standard_normal((5, c, kernel, kernel)).astype(np.float32)
    w[2] = -0.0
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        b = RNG.standard_normal(5).astype(np.float32)
        b[1] = -0.0
        inits.append(numpy_helper.from_array(b, "b"))
        ins.append("b")
    pad = kernel // 2
    nodes = [helper.make_node("Conv", ins, ["c"], pads=[pad] * 4)]
    inputs = [helper.make_tensor_value_info("x", dtype, list(x_shape))]
    last = "c"
    if side is not None:
        inputs.append(helper.make_tensor_value_info("r", dtype, None))
        nodes.append(helper.make_node("Add", ["c", "r"] if side == 0 else ["r", "c"], ["a"]))
        last = "a"
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", dtype, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def unfused(proto):
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "epilogue")
    return InferenceSession(proto, so, validate=False)


CASES = [(1, True), (1, False), (3, True), (3, False)]    # 1x1: the pointwise path; 3x3: the compiled planes


@pytest.mark.parametrize("kernel,bias", CASES)
@pytest.mark.parametrize("side,relu", [(None, True), (0, False), (0, True), (1, True)])
@pytest.mark.parametrize("batch", [1, 2])
def test_fused_conv_bit_identical_to_separate_kernels(kernel, bias, side, relu, batch, count_calls):
    spy = count_calls(loops, "finish")
    x_shape = (batch, 3, 6, 7)
    proto = model(kernel, bias, side, relu, x_shape)
    s = InferenceSession(proto, validate=False)
    assert [st.op for st in s.plan.steps] == ["Conv"]
    x = specials(RNG.standard_normal(x_shape).astype(np.float32))
    feed = {"x": x}
    if side is not None:
        feed["r"] = specials(RNG.standard_normal((batch, 5, 6, 7)).astype(np.float32))
    got = s.run(None, feed)[0]
    want = unfused(proto).run(None, feed)[0]
    assert spy.calls == 1
    assert np.isnan(got).any()
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_broadcasting_add_and_non_contiguous_operand_take_numpy_steps(count_calls):
    spy = count_calls(loops, "finish")
    x = RNG.standard_normal((1, 3, 6, 7)).astype(np.float32)
    for r in (RNG.standard_normal((5, 1, 1)).astype(np.float32),                    # broadcasting
              RNG.standard_normal((1, 5, 7, 6)).astype(np.float32).transpose(0, 1, 3, 2)):   # a view
        proto = model(3, True, 0, True, (1, 3, 6, 7))
        s = InferenceSession(proto, validate=False)
        got = s.run(None, {"x": x, "r": r})[0]
        want = unfused(proto).run(None, {"x": x, "r": r})[0]
        assert np.array_equal(got, want)
    assert spy.calls == 0


def test_float64_and_compiled_off(count_calls):
    spy = count_calls(loops, "finish")
    proto = model(1, True, 1, True, (1, 3, 4, 4), dtype=TP.DOUBLE)
    feed = {"x": RNG.standard_normal((1, 3, 4, 4)), "r": RNG.standard_normal((1, 5, 4, 4))}
    # W and B are float32 initializers in a float64 graph: not a valid Conv; build a float64 one
    m = onnx.load_from_string(proto)
    for t in m.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    proto = m.SerializeToString()
    got = InferenceSession(proto, validate=False).run(None, feed)[0]
    assert spy.calls == 1
    with compiled.disabled():
        off = InferenceSession(proto, validate=False).run(None, feed)[0]
    assert spy.calls == 1
    np.testing.assert_array_equal(got, unfused(proto).run(None, feed)[0])
    np.testing.assert_allclose(got, off, rtol=1e-12, atol=1e-12)
