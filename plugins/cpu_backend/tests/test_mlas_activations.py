"""float32 Sigmoid and Tanh on the cpu backend are onnxruntime's, bit for bit (docs/decisions.md):
a dense sweep of float32 bit patterns (every 4099th over the whole space, so every binade, both
signs, subnormals, the saturated ranges, infinities and NaNs) plus the special values, through
the compiled loops and the numpy bodies, against onnxruntime 1.32's own Sigmoid and Tanh.  The
equality is asserted bit for bit on x86-64 (onnxruntime's FMA3 kernels, the sequence
``onnxkit_default_domain.kernels._mlas`` reproduces); elsewhere onnxruntime's generic kernels
may round differently, and the values are compared within the approximations' absolute error.
float64 stays the correctly rounded function (numpy's tanh, ``1 / (1 + exp(-x))``).
"""

from __future__ import annotations

import math
import platform

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_default_domain.api import mlas_logistic, mlas_tanh  # noqa: E402

X86 = platform.machine().lower() in ("x86_64", "amd64")
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1.1754944e-38, -1.1754942e-38,
                     1e-30, -1e-30, 9.0, -9.0, 18.0, -18.0, 17.631031, -17.631031, 8.999999, 40.0, -40.0, 3.4028235e38,
                     -3.4028235e38], np.float32)


def sweep():
    bits = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([SPECIALS, bits.view(np.float32)])


def model(op, elem=TP.FLOAT, opset=13):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", elem, [None])],
                          [helper.make_tensor_value_info("y", elem, [None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def onnxruntime_result(op, x, opset=13):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model(op, opset=opset), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def assert_onnxruntimes(got, want, nan_payloads=True):
    """Bit for bit on x86-64 (NaN payloads too unless ``nan_payloads`` is False: then a NaN
    matches a NaN)."""
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    if X86:
        diff = got.view(np.uint32) != want.view(np.uint32)
        if not nan_payloads:
            assert np.array_equal(np.isnan(got), np.isnan(want))
            diff &= ~np.isnan(want)
        assert not diff.any(), (int(diff.sum()), got[diff][:5], want[diff][:5])
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=5e-7)


@pytest.mark.parametrize("opset", [6, 13])
@pytest.mark.parametrize("op", ["Sigmoid", "Tanh"])
@pytest.mark.parametrize("body", ["compiled", "numpy"])
def test_float32_sigmoid_tanh_are_onnxruntimes_bit_for_bit(op, opset, body):
    x = sweep()
    want = onnxruntime_result(op, x, opset)
    if body == "numpy":
        with compiled.disabled():
            sess = InferenceSession(model(op, opset=opset), "cpu")
    else:
        if not compiled.available():
            pytest.skip("numba is not installed: the numpy body serves (its own case)")
        sess = InferenceSession(model(op, opset=opset), "cpu")
    for _ in range(2):          # the cold plan (numpy bodies) and the warm one alike
        assert_onnxruntimes(sess.run(None, {"x": x})[0], want)


def test_the_shared_functions_are_onnxruntimes_and_keep_shapes():
    x = sweep()
    for fn, op in ((mlas_logistic, "Sigmoid"), (mlas_tanh, "Tanh")):
        assert_onnxruntimes(fn(np, x), onnxruntime_result(op, x))
        assert_onnxruntimes(fn(np, x[:1000].reshape(10, 100)).reshape(-1), onnxruntime_result(op, x[:1000]))
        z = fn(np, np.array(-0.0, np.float32))
        assert z.shape == () and z.dtype == np.float32


def test_the_ends_of_the_ranges_are_onnxruntimes_not_clamped():
    """onnxruntime's FMA3 logistic has no upper clamp and its tanh none at all: the sweep holds
    inputs where they exceed 1 by a unit or two in the last place; the signs of zero are kept
    by tanh, NaN passes, the infinities saturate."""
    x = np.linspace(-20, 20, 400001, dtype=np.float32)
    s, t = mlas_logistic(np, x), mlas_tanh(np, x)
    assert s.max() > 1.0 and s.min() == 0.0 and np.abs(t).max() > 1.0
    sp = mlas_logistic(np, SPECIALS)
    tp = mlas_tanh(np, SPECIALS)
    assert sp[0] == sp[1] == 0.5 and sp[2] == np.float32(mlas_logistic(np, np.float32([18.0]))[0]) and sp[3] == 0.0
    assert np.isnan(sp[4]) and np.isnan(tp[4]) and np.isnan(tp[5])
    assert tp[0] == 0 and not np.signbit(tp[0]) and tp[1] == 0 and np.signbit(tp[1])
    if X86:
        assert_onnxruntimes(s, onnxruntime_result("Sigmoid", x))
        assert_onnxruntimes(t, onnxruntime_result("Tanh", x))


def test_float64_stays_correctly_rounded():
    x = np.concatenate([np.linspace(-30, 30, 2001), [0.0, -0.0, 1e-300, np.inf, -np.inf]])
    sess = {op: InferenceSession(helper.make_model(
        helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TP.DOUBLE, [None])],
                          [helper.make_tensor_value_info("y", TP.DOUBLE, [None])]),
        opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString(), "cpu") for op in ("Sigmoid", "Tanh")}
    s = sess["Sigmoid"].run(None, {"x": x})[0]
    t = sess["Tanh"].run(None, {"x": x})[0]
    want_s = np.array([1 / (1 + math.exp(-v)) if v > -700 else 0.0 for v in x])
    np.testing.assert_allclose(s, want_s, rtol=4e-16, atol=1e-300)
    assert np.array_equal(t, np.tanh(x))


# ---------------------------------------------------------------------------- fused activations
def graph(nodes, opset, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [None])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [None])], initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m.SerializeToString()


def both_bodies(data, x):
    with compiled.disabled():
        numpy_sess = InferenceSession(data, "cpu")
    return [InferenceSession(data, "cpu").run(None, {"x": x})[0], numpy_sess.run(None, {"x": x})[0]]


def test_swish_and_its_expansion_are_onnxruntimes():
    """Swish-24 (``x sigmoid(alpha x)``) fused, and its expansion Mul, Sigmoid, Mul node by node:
    the same bits in onnxkit's both bodies, and onnxruntime's (which runs Swish-24 as that
    expansion, its Sigmoid MLAS's)."""
    x = np.concatenate([sweep(), np.linspace(-30, 30, 20001, dtype=np.float32)])
    alpha = np.float32(1.5)
    fused = graph([helper.make_node("Swish", ["x"], ["y"], alpha=float(alpha))], 24)
    expanded = graph([helper.make_node("Mul", ["x", "a"], ["ax"]), helper.make_node("Sigmoid", ["ax"], ["s"]),
                      helper.make_node("Mul", ["x", "s"], ["y"])], 24, [helper.make_tensor("a", TP.FLOAT, [], [alpha])])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(expanded, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for got in both_bodies(fused, x) + both_bodies(expanded, x):
        assert_onnxruntimes(got, want)


def test_mish_takes_onnxruntimes_tanh_of_its_softplus():
    """Mish-18 is ``x tanh(softplus(x))``: its tanh is onnxruntime's, bit for bit (the Softplus
    underneath is onnxkit's own, correctly rounded where onnxruntime's is Eigen's: the oracle is
    onnxruntime's Tanh applied to onnxkit's Softplus), in both bodies and as the expansion."""
    x = np.concatenate([sweep(), np.linspace(-30, 30, 20001, dtype=np.float32)])
    softplus = both_bodies(graph([helper.make_node("Softplus", ["x"], ["y"])], 18), x)[0]
    with np.errstate(all="ignore"):
        want = onnxruntime_result("Tanh", softplus) * x
    fused = graph([helper.make_node("Mish", ["x"], ["y"])], 18)
    expanded = graph([helper.make_node("Softplus", ["x"], ["sp"]), helper.make_node("Tanh", ["sp"], ["t"]),
                      helper.make_node("Mul", ["x", "t"], ["y"])], 18)
    for got in both_bodies(fused, x) + both_bodies(expanded, x):
        assert_onnxruntimes(got, want, nan_payloads=False)


def test_conv_swish_epilogue_fused_and_not_is_onnxruntimes_sigmoid():
    """A Conv then ``Mul(y, Sigmoid(y))`` (SiLU, which the optimizer fuses into the Conv's
    epilogue) and a near miss (``Mul(x2, Sigmoid(y))``, another operand: not fused): optimized and
    unoptimized give the same bits, and they are onnxkit's Conv output ``y`` times onnxruntime's
    Sigmoid of it, bit for bit; within the float32 tolerance of onnxruntime's whole model."""
    from onnxkit import SessionOptions
    from onnxkit.runtime.options import GraphOptimizationLevel

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((1, 8, 12, 12)) * 3).astype(np.float32)
    w = rng.standard_normal((6, 8, 3, 3)).astype(np.float32)
    x2 = rng.standard_normal((1, 6, 10, 10)).astype(np.float32)
    inits = [helper.make_tensor("w", TP.FLOAT, list(w.shape), w.ravel())]
    ins = [helper.make_tensor_value_info("x", TP.FLOAT, list(x.shape)),
           helper.make_tensor_value_info("x2", TP.FLOAT, list(x2.shape))]

    def proto(nodes, out="z"):
        g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info(out, TP.FLOAT, None)], initializer=inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m.SerializeToString()

    conv = helper.make_node("Conv", ["x", "w"], ["y"])
    feeds = {"x": x, "x2": x2}
    y = InferenceSession(proto([conv], "y"), "cpu").run(None, feeds)[0]
    s = onnxruntime_result("Sigmoid", y.ravel()).reshape(y.shape)
    off = SessionOptions()
    off.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    for other, want in (("y", y * s), ("x2", x2 * s)):
        data = proto([conv, helper.make_node("Sigmoid", ["y"], ["s"]), helper.make_node("Mul", [other, "s"], ["z"])])
        fused = InferenceSession(data, "cpu").run(None, feeds)[0]
        plain = InferenceSession(data, off, backend="cpu").run(None, feeds)[0]
        assert_onnxruntimes(fused.ravel(), plain.ravel())
        assert_onnxruntimes(fused.ravel(), want.ravel())
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        ref = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_allclose(fused, ref, rtol=1e-3, atol=1e-5)
