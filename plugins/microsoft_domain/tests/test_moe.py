"""MoE and QMoE against onnxruntime 1.32's CPU kernels: every activation (swiglu with its limit,
alpha and beta), k 1-3, normalized and raw routing weights, biases or none; QMoE's 2 / 4 / 8-bit
weights with per-row and blockwise scales, zero points or none, float32 / float16 inputs and
accuracy_level 0 / 4 (where onnxruntime quantizes the experts' inputs to int8: blockwise 8-bit,
and 4-bit at level 4, for inner extents that are multiples of block_size).  The configurations
of onnxruntime's test_moe_cpu.py (swiglu, k 2, 4 experts, hidden 64, inter 256, 16-64 tokens)
are among them."""

from __future__ import annotations

import itertools

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from onnxkit.errors import OnnxkitError
from onnxkit.runtime import InferenceSession

RNG = np.random.default_rng(1234)


def build(op, inits, feeds, order, **attrs) -> bytes:
    while not order[-1]:
        order = order[:-1]
    node = helper.make_node(op, order, ["y"], name="n0", domain="com.microsoft", **attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()]
    out = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(feeds["x"].dtype), feeds["x"].shape)
    g = helper.make_graph([node], "g", ins, [out], initializer=[numpy_helper.from_array(v, n) for n, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m.SerializeToString()


def ort_run(data, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def compare(data, feeds, rtol=2e-6):
    want = ort_run(data, feeds)
    for backend in ("cpu", "gpu"):
        got = InferenceSession(data, backend).run(None, feeds)[0]
        assert got.dtype == want.dtype and got.shape == want.shape
        scale = float(np.abs(want.astype(np.float64)).max())
        assert np.abs(got.astype(np.float64) - want).max() <= rtol * scale + (1e-3 * scale if want.dtype == np.float16
                                                                                 else 0), backend
    return want


def pack(q, bits):
    per = 8 // bits
    q = q.reshape(q.shape[:-1] + (q.shape[-1] // per, per)).astype(np.uint8)
    return np.bitwise_or.reduce(q << (np.arange(per, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


# -- MoE -----------------------------------------------------------------------------------------

def moe_case(act, k, norm, bias, experts=4, hidden=16, inter=24, tokens=7, limit=None, lead=None):
    fo = 2 * inter if act == "swiglu" else inter
    inits = {"w1": (RNG.standard_normal((experts, fo, hidden)) * 0.3).astype(np.float32),
             "w2": (RNG.standard_normal((experts, hidden, inter)) * 0.3).astype(np.float32)}
    order = ["x", "r", "w1", "", "w2", ""]
    if bias:
        inits["b1"] = RNG.standard_normal((experts, fo)).astype(np.float32)
        inits["b2"] = RNG.standard_normal((experts, hidden)).astype(np.float32)
        order = ["x", "r", "w1", "b1", "w2", "b2"]
    feeds = {"x": RNG.standard_normal((*(lead or (tokens,)), hidden)).astype(np.float32),
             "r": RNG.standard_normal((tokens, experts)).astype(np.float32)}
    attrs = dict(k=k, activation_type=act, normalize_routing_weights=norm)
    if act == "swiglu":
        attrs.update(swiglu_fusion=1, activation_alpha=1.702, activation_beta=1.0)
        if limit is not None:
            attrs["swiglu_limit"] = limit
    return build("MoE", inits, feeds, order, **attrs), feeds


@pytest.mark.parametrize("act,k,norm,bias", list(itertools.product(["relu", "gelu", "silu", "identity", "swiglu"],
                                                                   [1, 2, 3], [0, 1], [0, 1])))
def test_moe_equals_onnxruntime(act, k, norm, bias):
    compare(*moe_case(act, k, norm, bias, limit=2.0 if bias else None))


@pytest.mark.parametrize("tokens", [16, 32, 64])
def test_moe_onnxruntimes_swiglu_configuration(tokens):
    """test_moe_cpu.py's: 4 experts, k 2, hidden 64, inter 256, normalized, swiglu (alpha 1.702, beta 1)."""
    compare(*moe_case("swiglu", 2, 1, 1, experts=4, hidden=64, inter=256, tokens=tokens, limit=7.0))


def test_moe_routes_ties_to_the_higher_expert_as_onnxruntime():
    data, feeds = moe_case("relu", 1, 0, 1, tokens=3)
    feeds["r"] = np.zeros_like(feeds["r"])  # every expert ties
    compare(data, feeds)


def test_moe_input_of_rank_3():
    compare(*moe_case("silu", 2, 1, 1, tokens=6, lead=(2, 3)))


@pytest.mark.parametrize("attrs,inputs,message", [
    ({"use_sparse_mixer": 1, "k": 1}, {}, "use_sparse_mixer needs k 2"),
    ({"activation_type": "swiglu", "swiglu_fusion": 2}, {}, "swiglu_fusion"),
    ({"activation_type": "tanh"}, {}, "activation_type"),
    ({}, {"w3": True}, "fc3"),
])
def test_moe_refusals_are_onnxruntimes_and_named(attrs, inputs, message):
    experts, hidden, inter = 4, 8, 8
    fo = 2 * inter if attrs.get("activation_type") == "swiglu" else inter
    inits = {"w1": np.ones((experts, fo, hidden), np.float32), "w2": np.ones((experts, hidden, inter), np.float32)}
    order = ["x", "r", "w1", "", "w2"]
    if inputs.get("w3"):
        inits["w3"] = np.ones((experts, inter, hidden), np.float32)
        order += ["", "w3"]
    feeds = {"x": np.ones((2, hidden), np.float32), "r": np.ones((2, experts), np.float32)}
    data = build("MoE", inits, feeds, order, **{"k": 1, **attrs})
    with pytest.raises(Exception):
        ort_run(data, feeds)
    with pytest.raises(OnnxkitError, match=message):
        InferenceSession(data, "cpu").run(None, feeds)


@pytest.mark.parametrize("op", ["MoE", "QMoE"])
def test_attributes_onnxruntimes_cpu_kernels_do_not_apply(op):
    """use_sparse_mixer (k 2) routes as plain top-2 on onnxruntime's CPU kernels, and QMoE normalizes
    its routing weights with normalize_routing_weights 0: onnxkit computes the same, and the plain
    model's result shows the attributes changed nothing there."""
    import onnx

    data, feeds = moe_case("relu", 2, 0, 1) if op == "MoE" else qmoe_case(4, 0, 0, np.float32, "silu")
    m = onnx.load_from_string(data)
    node = m.graph.node[0]
    node.attribute.append(helper.make_attribute("use_sparse_mixer", 1))
    if op == "QMoE":
        for a in node.attribute:
            if a.name == "normalize_routing_weights":
                a.i = 0
    changed = m.SerializeToString()
    np.testing.assert_array_equal(ort_run(changed, feeds), ort_run(data, feeds))
    compare(changed, feeds)


# -- QMoE ----------------------------------------------------------------------------------------

def qmoe_case(bits, block, zp, dtype, act, level=0, experts=4, hidden=64, inter=64, tokens=5, k=2, weights=False):
    """A QMoE model and feeds (and with ``weights`` its dequantized float32 weights, made here)."""
    per = 8 // bits
    fo = 2 * inter if act == "swiglu" else inter
    q1, q2 = RNG.integers(0, 1 << bits, (experts, fo, hidden)), RNG.integers(0, 1 << bits, (experts, hidden, inter))
    nb1, nb2 = (1, 1) if block == 0 else (-(-hidden // block), -(-inter // block))
    amp = 0.05 if bits < 8 else 0.002
    s1 = (RNG.random((experts, fo, nb1)) * amp + amp / 5).astype(dtype)
    s2 = (RNG.random((experts, hidden, nb2)) * amp + amp / 5).astype(dtype)
    if block == 0:
        s1, s2 = s1[..., 0], s2[..., 0]
    inits = {"w1": pack(q1, bits), "s1": s1, "w2": pack(q2, bits), "s2": s2}
    order = ["x", "r", "w1", "s1", "", "w2", "s2", ""]
    zf1 = zf2 = np.float32(1 << (bits - 1))
    if zp:
        if block:
            z1 = RNG.integers(0, 1 << bits, (experts, fo, -(-nb1 // per) * per))
            z2 = RNG.integers(0, 1 << bits, (experts, hidden, -(-nb2 // per) * per))
        else:
            z1 = RNG.integers(0, 1 << bits, (experts, -(-fo // per) * per))
            z2 = RNG.integers(0, 1 << bits, (experts, -(-hidden // per) * per))
        inits["z1"], inits["z2"] = pack(z1, bits), pack(z2, bits)
        order += ["", "", "", "z1", "z2"]
        zf1 = z1[..., :nb1] if block else z1[:, :fo, None]
        zf2 = z2[..., :nb2] if block else z2[:, :hidden, None]
    feeds = {"x": RNG.standard_normal((tokens, hidden)).astype(dtype),
             "r": RNG.standard_normal((tokens, experts)).astype(dtype)}
    attrs = dict(k=k, activation_type=act, normalize_routing_weights=1, expert_weight_bits=bits, accuracy_level=level)
    if block:
        attrs["block_size"] = block
    if act == "swiglu":
        attrs.update(swiglu_fusion=1, activation_alpha=1.702, activation_beta=1.0)
    data = build("QMoE", inits, feeds, order, **attrs)
    if not weights:
        return data, feeds

    def deq(q, s, z, cols):
        col = np.arange(cols) // (block or cols)
        s3 = s.astype(np.float32).reshape(s.shape[0], s.shape[1], -1)
        z3 = np.broadcast_to(np.asarray(z, np.float32), s3.shape)
        return ((q - z3[..., col]) * s3[..., col]).astype(np.float32)

    return data, feeds, (deq(q1, s1, zf1, hidden), deq(q2, s2, zf2, inter))


@pytest.mark.parametrize("bits,block,zp,dtype,act", list(itertools.product(
    [2, 4, 8], [0, 32], [0, 1], [np.float32, np.float16], ["silu", "swiglu"])))
def test_qmoe_equals_onnxruntime(bits, block, zp, dtype, act):
    """(2-bit blockwise experts with 128k rows — swiglu's fc1 here — run onnxruntime's T-MAC
    lookup-table kernel, which quantizes the activations' partial sums in its own way that onnxkit
    does not reproduce: compared there within 1% of the output's range, not float rounding.)"""
    lut = bits == 2 and block and act == "swiglu"
    compare(*qmoe_case(bits, block, zp, dtype, act), rtol=1e-2 if lut else 2e-6)


@pytest.mark.parametrize("bits,block,level", list(itertools.product([2, 4, 8], [32, 64], [0, 4])))
@pytest.mark.parametrize("inter", [64, 48])
def test_qmoe_int8_activations_where_onnxruntime_quantizes_them(bits, block, level, inter):
    """Blockwise 8-bit experts (every level) and 4-bit at accuracy_level 4 take int8 inputs in
    onnxruntime (MatMulNBits' kernels) where the inner extent is a multiple of block_size (inter
    48 with block 32 / 64: fc2 is the float product).  Where they do, onnxruntime's float MoE over
    the same dequantized weights (weights dequantized here) is far farther from QMoE's result than
    onnxkit is: the test tells the two computations apart."""
    data, feeds, (w1, w2) = qmoe_case(bits, block, 1, np.float32, "silu", level=level, inter=inter, weights=True)
    want = compare(data, feeds)
    floatp = ort_run(build("MoE", {"w1": w1, "w2": w2}, feeds, ["x", "r", "w1", "", "w2"], k=2,
                           activation_type="silu", normalize_routing_weights=1), feeds)
    got = InferenceSession(data, "cpu").run(None, feeds)[0]
    scale = float(np.abs(want).max())
    if bits == 8 or (bits == 4 and level == 4):
        assert np.abs(floatp - want).max() > 100 * max(np.abs(got - want).max(), 1e-7 * scale)
    else:
        assert np.abs(floatp - want).max() <= 2e-6 * scale


def test_qmoe_hidden_not_a_multiple_of_the_block():
    compare(*qmoe_case(8, 32, 0, np.float32, "relu", hidden=80, inter=64))


@pytest.mark.parametrize("attrs,message", [({"quant_type": "fp4"}, "quant_type"), ({"block_size": 24}, "block_size")])
def test_qmoe_refusals_are_named(attrs, message):
    data, feeds = qmoe_case(4, 32, 0, np.float32, "silu")
    import onnx

    m = onnx.load_from_string(data)
    for name, v in attrs.items():
        m.graph.node[0].attribute.append(helper.make_attribute(name, v)) if name != "block_size" else None
        if name == "block_size":
            for a in m.graph.node[0].attribute:
                if a.name == "block_size":
                    a.i = v
    with pytest.raises(OnnxkitError, match=message):
        InferenceSession(m.SerializeToString(), "cpu").run(None, feeds)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("rank,k,norm", [(2, 2, 1), (3, 2, 1), (2, 1, 0), (3, 2, 0)])
def test_qmoe_onnxruntimes_cpu_test_configuration(bits, dtype, rank, k, norm):
    """test_cpu_qmoe.py's: swiglu (alpha 1.702, beta 1), per-row scales with the default zero point,
    biases, 3 experts, hidden 8, inter 6 (4-bit fc2 rows of 3 octets), 4 tokens as (4, 8) or (1, 4, 8),
    router values in [0, 1)."""
    experts, hidden, inter, per = 3, 8, 6, 8 // bits
    rng = np.random.default_rng(2025)
    q1 = rng.integers(0, 1 << bits, (experts, 2 * inter, hidden))
    q2 = rng.integers(0, 1 << bits, (experts, hidden, inter))
    inits = {"w1": pack(q1, bits), "s1": (rng.random((experts, 2 * inter)) * 0.02 + 0.005).astype(dtype),
             "b1": (rng.standard_normal((experts, 2 * inter)) * 0.01).astype(dtype),
             "w2": pack(q2, bits), "s2": (rng.random((experts, hidden)) * 0.02 + 0.005).astype(dtype),
             "b2": (rng.standard_normal((experts, hidden)) * 0.01).astype(dtype)}
    assert inits["w2"].shape == (experts, hidden, inter // per)
    x = rng.standard_normal((4, hidden)).astype(dtype)
    feeds = {"x": x if rank == 2 else x[None], "r": rng.random((4, experts)).astype(dtype)}
    data = build("QMoE", inits, feeds, ["x", "r", "w1", "s1", "b1", "w2", "s2", "b2"], k=k, activation_type="swiglu",
                 normalize_routing_weights=norm, expert_weight_bits=bits, activation_alpha=1.702, activation_beta=1.0,
                 swiglu_fusion=1)
    compare(data, feeds)
