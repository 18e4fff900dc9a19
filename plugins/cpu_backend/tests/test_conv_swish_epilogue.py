"""A Conv's Swish written as ``Mul(y, Sigmoid(y))`` (SiLU as the exporters write it) folded into
the Conv's step (onnxkit.runtime.optimizer.epilogue ``swish_op``, overrides/conv_epilogue.py
``swish``): the plan has one step where it had three, and the result is every bit the separate
kernels' (NaN, inf and -0 included), on each kind of prepared convolution, either operand order
of the Mul, float32, float64 and float16; onnxruntime agrees to rounding.  Near misses leave the
steps alone: ``y`` or the Sigmoid's result read by anything else, a Mul of other operands, an
activation other than Sigmoid."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

from onnxkit import InferenceSession, SessionOptions  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

RNG = np.random.default_rng(4403)
_TYPES = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.float16: TP.FLOAT16}


def model(w_shape, attrs, side=0, bias=True, dtype=np.float32, outputs=("z",), act="Sigmoid", other=False):
    """Conv -> act -> Mul(c, s) (side 0) or Mul(s, c) (side 1); ``outputs`` the graph's;
    ``other``: the Mul's second operand a graph input instead of the Conv's result."""
    w = RNG.standard_normal(w_shape).astype(dtype)
    w.reshape(-1)[0] = -0.0
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        b = RNG.standard_normal(w_shape[0]).astype(dtype)
        inits.append(numpy_helper.from_array(b, "b"))
        ins.append("b")
    first = "q" if other else "c"
    nodes = [helper.make_node("Conv", ins, ["c"], **attrs), helper.make_node(act, ["c"], ["s"]),
             helper.make_node("Mul", [first, "s"] if side == 0 else ["s", first], ["z"])]
    t = _TYPES[dtype]
    inputs = [helper.make_tensor_value_info("x", t, None)] + ([helper.make_tensor_value_info("q", t, None)]
                                                              if other else [])
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(o, t, None) for o in outputs],
                              initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def unfused(proto):
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "epilogue")
    return InferenceSession(proto, so, validate=False)


def specials(a):
    f = a.reshape(-1)
    f[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 30.0]
    return a


def bits(a):
    return a.view(f"u{a.itemsize}")


KINDS = [   # (w shape, attributes, x shape): the cpu Conv's prepared kinds
    ((6, 4, 1, 1), {}, (1, 4, 5, 7)),                                                # pointwise
    ((6, 4, 3, 3), dict(pads=[1, 1, 1, 1]), (2, 4, 6, 7)),                           # planes / columns
    ((8, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2], group=8), (1, 8, 9, 9)),  # depthwise
    ((16, 16, 3, 3), dict(pads=[1, 1, 1, 1]), (1, 16, 12, 12)),                      # winograd
    ((6, 4, 2, 2), dict(strides=[2, 2]), (1, 4, 8, 8)),                              # tiles
    ((5, 3, 3), dict(pads=[1, 1]), (2, 3, 11)),                                      # one axis
]


@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("w_shape,attrs,x_shape", KINDS)
def test_swish_folded_bit_identical_to_the_separate_kernels(w_shape, attrs, x_shape, side, bias):
    proto = model(w_shape, attrs, side, bias)
    s = InferenceSession(proto, validate=False)
    assert [st.op for st in s.plan.steps] == ["Conv"]
    x = specials(RNG.standard_normal(x_shape).astype(np.float32))
    for _ in range(2):
        got = s.run(None, {"x": x})[0]
    slow = unfused(proto)
    assert [st.op for st in slow.plan.steps] == ["Conv", "Sigmoid", "Mul"]
    want = slow.run(None, {"x": x})[0]
    assert got.dtype == np.float32 and np.isnan(got).any()
    assert np.array_equal(bits(got), bits(want))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    peer = ort.InferenceSession(proto, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    finite = np.isfinite(peer)
    np.testing.assert_allclose(got[finite], peer[finite], rtol=1e-5, atol=1e-5 * float(np.abs(peer[finite]).max()))


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_swish_folded_in_other_float_types(dtype):
    proto = model((6, 4, 3, 3), dict(pads=[1, 1, 1, 1]), 1, True, dtype)
    s = InferenceSession(proto, validate=False)
    assert [st.op for st in s.plan.steps] == ["Conv"]
    x = specials(RNG.standard_normal((1, 4, 6, 6)).astype(dtype))
    got, want = s.run(None, {"x": x})[0], unfused(proto).run(None, {"x": x})[0]
    assert got.dtype == dtype and np.array_equal(bits(got), bits(want))


def test_a_mul_of_the_sigmoid_and_another_value_is_not_a_swish():
    """y read by a Sigmoid and a Mul, but that Mul is Mul(y, q) and the Sigmoid's result goes to Mul(s, q)."""
    w = RNG.standard_normal((6, 4, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Sigmoid", ["c"], ["s"]),
             helper.make_node("Mul", ["s", "q"], ["z"]), helper.make_node("Mul", ["c", "q"], ["z2"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in ("x", "q")],
                              [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in ("z", "z2")],
                              initializer=[numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    proto = m.SerializeToString()
    s = InferenceSession(proto, validate=False)
    assert sorted(st.op for st in s.plan.steps) == ["Conv", "Mul", "Mul", "Sigmoid"]
    feed = {"x": RNG.standard_normal((1, 4, 5, 5)).astype(np.float32), "q": RNG.standard_normal((1, 6, 5, 5)).astype(np.float32)}
    for a, b in zip(s.run(None, feed), unfused(proto).run(None, feed)):
        assert np.array_equal(bits(a), bits(b))


@pytest.mark.parametrize("case", ["conv output", "sigmoid output", "other operand", "hard sigmoid"])
def test_near_misses_keep_their_steps(case):
    kw = {"conv output": dict(outputs=("z", "c")), "sigmoid output": dict(outputs=("z", "s")),
          "other operand": dict(other=True), "hard sigmoid": dict(act="HardSigmoid")}[case]
    proto = model((6, 4, 3, 3), dict(pads=[1, 1, 1, 1]), **kw)
    s = InferenceSession(proto, validate=False)
    assert [st.op for st in s.plan.steps] == ["Conv", kw.get("act", "Sigmoid"), "Mul"]
    x = RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)
    feed = {"x": x, "q": RNG.standard_normal((1, 6, 6, 6)).astype(np.float32)} if case == "other operand" else {"x": x}
    got, want = s.run(None, feed), unfused(proto).run(None, feed)
    for a, b in zip(got, want):
        assert np.array_equal(bits(a), bits(b))
