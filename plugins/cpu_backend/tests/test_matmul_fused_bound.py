"""A MatMul's fused epilogue step (MatMul + Add, then Relu: the epilogue pass) bound to a constant
B as the plain product is (overrides/linalg.py ``fuse_epilogue``'s ``bind_fused``, through the
epilogue pass's ``guarded_first``, which keeps the binding and guards the bound function alike):
the fused step's products made by the bound function (counted), every bit the unfused plan's
(``session.disable_passes=epilogue``: NaN, inf and -0 included) and B fed as a graph input (the
general path, not bound), float32 and float64, in either operand order of the Add;
onnxruntime agrees to rounding.  An A whose inner extent is not B's fails naming the MatMul,
bound or not; MatMul's size guard still refuses a product over ``max_value_bytes`` in the bound
fused step.  A Swish after the product is declined: its three steps stay."""

from __future__ import annotations

import sys

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

from onnxkit.errors import EvaluationError, LimitExceeded  # noqa: E402
from onnxkit.limits import Limits  # noqa: E402
from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
RNG = np.random.default_rng(4346)
TYPES = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE}
K, N = 64, 48


def model(dtype=np.float32, side=0, relu=True, w_input=False, swish=False):
    """MatMul(a, w) + bias (``side`` 1: bias + MatMul) then Relu; ``swish``: Mul(m, Sigmoid(m)) instead."""
    t = TYPES[dtype]
    w = RNG.standard_normal((K, N)).astype(dtype)
    bias = RNG.standard_normal(N).astype(dtype)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"], name="the_matmul")]
    if swish:
        nodes += [helper.make_node("Sigmoid", ["m"], ["s"]), helper.make_node("Mul", ["m", "s"], ["z"])]
    else:
        nodes.append(helper.make_node("Add", ["m", "bias"] if side == 0 else ["bias", "m"], ["r" if relu else "z"]))
        if relu:
            nodes.append(helper.make_node("Relu", ["r"], ["z"]))
    inputs = [helper.make_tensor_value_info("a", t, None)]
    inits = [numpy_helper.from_array(bias, "bias")]
    if w_input:
        inputs.append(helper.make_tensor_value_info("w", t, (K, N)))
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("z", t, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString(), w


def session(proto, fused=True, limits=None):
    so = SessionOptions()
    so.intra_op_num_threads = 1
    if not fused:
        so.add_session_config_entry("session.disable_passes", "epilogue")
    kw = {} if limits is None else {"limits": limits}
    return InferenceSession(proto, so, validate=False, **kw)


def bits(a):
    return a.view(f"u{a.itemsize}")


@pytest.fixture
def bound_products(monkeypatch):
    """The products the function bound to a constant B made (np.matmul called from ``with_weight``)."""
    from onnxkit_cpu.overrides import linalg

    count = [0]
    real = np.matmul

    class _Np:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def matmul(*args, **kw):
            count[0] += sys._getframe(1).f_code.co_name == "with_weight"
            return real(*args, **kw)

    monkeypatch.setattr(linalg, "np", _Np())
    return count


SHAPES = [(1, 1, K), (1, 5, K), (2, 3, K), (4, K)]


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("w_input", [False, True])
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_fused_step_is_bound_and_gives_the_unfused_bits(dtype, side, w_input, relu, bound_products):
    proto, w = model(dtype, side, relu, w_input)
    fast, slow = session(proto), session(proto, fused=False)
    assert [st.op for st in fast.plan.steps] == ["MatMul"]
    assert len(slow.plan.steps) == (3 if relu else 2)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    peer = ort.InferenceSession(proto, so, providers=["CPUExecutionProvider"])
    for shape in SHAPES:
        a = RNG.standard_normal(shape).astype(dtype)
        rows = a.reshape(-1, K)
        if len(rows) > 1:  # a -0 row and a NaN row
            rows[0, :] = -0.0
            rows[1, 0] = np.nan
        feed = {"a": a, "w": w} if w_input else {"a": a}
        first = fast.run(None, feed)[0]  # the first product of a float type: the portable check's
        before = bound_products[0]
        got = fast.run(None, feed)[0]
        assert bound_products[0] - before == (0 if w_input else 1)
        want = slow.run(None, feed)[0]
        assert got.shape == shape[:-1] + (N,) and got.dtype == dtype
        assert np.array_equal(bits(first), bits(got)) and np.array_equal(bits(got), bits(want))
        theirs = peer.run(None, feed)[0]
        ok = np.isfinite(theirs)
        np.testing.assert_allclose(got[ok], theirs[ok], rtol=1e-4, atol=1e-4 * float(np.abs(theirs[ok]).max()))


@pytest.mark.parametrize("w_input", [False, True])
def test_an_inner_extent_not_bs_fails_naming_the_matmul(w_input):
    proto, w = model(w_input=w_input)
    fast = session(proto)
    feed = {"a": RNG.standard_normal((1, 1, K)).astype(np.float32)}
    if w_input:
        feed["w"] = w
    fast.run(None, feed)
    feed["a"] = RNG.standard_normal((1, 1, K - 1)).astype(np.float32)
    with pytest.raises(EvaluationError, match="the_matmul"):
        fast.run(None, feed)


def test_the_size_guard_refuses_in_the_bound_fused_step():
    proto, _ = model()
    fast = session(proto, limits=Limits(max_value_bytes=40 * N * 4))
    fast.run(None, {"a": RNG.standard_normal((1, 30, K)).astype(np.float32)})
    with pytest.raises(LimitExceeded, match="the_matmul"):
        fast.run(None, {"a": RNG.standard_normal((1, 50, K)).astype(np.float32)})


def test_a_swish_after_the_product_keeps_its_steps():
    proto, _ = model(swish=True)
    fast, slow = session(proto), session(proto, fused=False)
    assert [st.op for st in fast.plan.steps] == ["MatMul", "Sigmoid", "Mul"]
    a = RNG.standard_normal((2, 1, K)).astype(np.float32)
    assert np.array_equal(bits(fast.run(None, {"a": a})[0]), bits(slow.run(None, {"a": a})[0]))
