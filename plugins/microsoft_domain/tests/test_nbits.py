"""MatMulNBits against onnxruntime 1.32's CPU kernel: 2, 4 and 8 bits, every zero-point form,
bias, g_idx, float16 A, constant and fed weights, and accuracy_level 4 (A quantized blockwise to
int8): there onnxkit's result equals onnxruntime's to within float rounding of the same int8
algorithm, far closer than the float product is to either.

Models are one node with the weights as initializers (constants, which onnxruntime prepacks:
its int8 path needs that) or as graph inputs (its float path)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxkit.runtime import InferenceSession

RNG = np.random.default_rng(2026)


def pack(q, bits):
    per = 8 // bits
    q = q.reshape(q.shape[:-1] + (q.shape[-1] // per, per)).astype(np.uint8)
    return np.bitwise_or.reduce(q << (np.arange(per, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


def weights(n, k, bits, block, zp, dtype=np.float32, g_idx=False):
    """``(inputs {name: array}, reference W (N, K) float64)``; W computed here, independently."""
    kb = -(-k // block)
    q = RNG.integers(0, 1 << bits, (n, kb * block))
    q[:, k:] = 0
    scales = (RNG.random((n, kb)) * 0.1 + 0.01).astype(dtype)
    ins = {"B": pack(q.reshape(n, kb, block), bits), "scales": scales.reshape(-1)}
    if zp == "packed":
        per = 8 // bits
        z = RNG.integers(0, 1 << bits, (n, -(-kb // per) * per))
        ins["zp"] = pack(z, bits).reshape(-1)
        zf = z[:, :kb].astype(np.float64)
    elif zp == "float":
        zf = (RNG.random((n, kb)) * (1 << bits)).astype(dtype)
        ins["zp"] = zf.reshape(-1)
        zf = zf.astype(np.float64)
    else:
        zf = np.full((n, kb), 1 << (bits - 1), np.float64)
    col = np.arange(k) // block
    if g_idx:
        col = RNG.integers(0, kb, k)
        ins["g"] = col.astype(np.int32)
    w = (q[:, :k] - zf[:, col]) * scales.astype(np.float64)[:, col]
    return ins, w


def model(ins, k, n, bits, block, level, a_dtype, const=True, bias=None, m_shape=("M", None)):
    names = ["A", "B", "scales", "zp" if "zp" in ins else "", "g" if "g" in ins else ""]
    feeds_extra = dict(ins)
    if bias is not None:
        names.append("bias")
        feeds_extra["bias"] = bias
    while not names[-1]:
        names.pop()
    et = TensorProto.FLOAT if a_dtype == np.float32 else TensorProto.FLOAT16
    node = helper.make_node("MatMulNBits", names, ["Y"], name="n0", domain="com.microsoft", K=k, N=n, bits=bits,
                            block_size=block, accuracy_level=level)
    graph_ins = [helper.make_tensor_value_info("A", et, None)]
    inits, feeds = [], {}
    for name, v in feeds_extra.items():
        if const:
            inits.append(numpy_helper.from_array(v, name))
        else:
            graph_ins.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
            feeds[name] = v
    g = helper.make_graph([node], "g", graph_ins, [helper.make_tensor_value_info("Y", et, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m.SerializeToString(), feeds


def ort_run(data, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def kit_run(data, feeds, backend="cpu"):
    sess = InferenceSession(data, backend)
    if backend == "gpu":
        assert not [f for f in sess.fallbacks if f.node == "n0"], sess.fallbacks
    return sess.run(None, feeds)[0]


def q8_reference(a, block):
    """A as onnxruntime's int8 path sees it, written here from its definition (not onnxkit's code)."""
    a = a.astype(np.float32)
    m, k = a.reshape(-1, a.shape[-1]).shape
    ab = min(block, 256)
    kb = -(-k // ab)
    p = np.zeros((m, kb * ab), np.float32)
    p[:, :k] = a.reshape(m, k)
    p = p.reshape(m, kb, ab)
    out = np.empty_like(p)
    for r in range(m):
        for b in range(kb):
            amax = np.float32(np.abs(p[r, b]).max())
            inv = np.float32(127) / amax if amax else np.float32(0)
            out[r, b] = np.rint(p[r, b] * inv) * (amax / np.float32(127))
    return out.reshape(m, -1)[:, :k].reshape(a.shape)


CASES = [(bits, block, zp) for bits in (2, 4, 8) for block in (16, 32, 64, 128, 256)
         for zp in ("none", "packed", "float") if (bits, zp) != (8, "float")]


@pytest.mark.parametrize("bits,block,zp", CASES)
def test_float_path_equals_onnxruntime_and_the_dequantized_product(bits, block, zp):
    n, k = 24, 200
    ins, w = weights(n, k, bits, block, zp)
    bias = RNG.standard_normal(n).astype(np.float32)
    a = RNG.standard_normal((2, 3, k)).astype(np.float32)
    for const in (True, False):
        data, feeds = model(ins, k, n, bits, block, 0, np.float32, const=const, bias=bias)
        want = ort_run(data, {"A": a, **feeds})
        np.testing.assert_allclose(want, a @ w.T + bias, rtol=1e-4, atol=1e-4)
        for backend in ("cpu", "gpu"):
            got = kit_run(data, {"A": a, **feeds}, backend)
            assert got.dtype == np.float32 and got.shape == (2, 3, n)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def _int8_cases():
    for bits in (2, 4, 8):
        for block in (16, 32, 64, 128, 256, 512):
            if bits == 2 and block > 256:
                continue  # onnxruntime refuses 2-bit blocks over 256
            for zp in ("none", "packed"):
                yield bits, block, zp


@pytest.mark.parametrize("bits,block,zp", list(_int8_cases()))
@pytest.mark.parametrize("m,k", [(1, 256), (3, 300), (1, 1100)])
def test_accuracy_level_4_is_onnxruntimes_int8_computation(bits, block, zp, m, k):
    """Where onnxruntime quantizes A (x86-64: 4 and 8 bits, 2 bits at blocks 32-128), onnxkit's
    output is within float rounding of onnxruntime's (and of the int8 reference written here),
    and the float product is far off; elsewhere level 4 is the float product, as onnxruntime's."""
    n = 20
    ins, w = weights(n, k, bits, block, zp)
    a = RNG.standard_normal((m, k)).astype(np.float32)
    data, feeds = model(ins, k, n, bits, block, 4, np.float32)
    want = ort_run(data, {"A": a}).astype(np.float64)
    got = kit_run(data, {"A": a}).astype(np.float64)
    floatp = a.astype(np.float64) @ w.T
    int8p = q8_reference(a, block).astype(np.float64) @ w.T
    scale = np.abs(floatp).max()
    int8_path = not (bits == 2 and block in (16, 256))
    ref = int8p if int8_path else floatp
    assert np.abs(want - ref).max() <= 2e-6 * scale * np.sqrt(k / 256)
    assert np.abs(got - want).max() <= 2e-6 * scale * np.sqrt(k / 256)
    if int8_path:  # the two computations really differ here: the test tells them apart
        assert np.abs(floatp - want).max() > 100 * max(np.abs(got - want).max(), 1e-6 * scale)
    # the same on the torch backend
    np.testing.assert_allclose(kit_run(data, {"A": a}, "gpu"), got, rtol=1e-5, atol=1e-5 * scale)


def test_accuracy_level_4_with_weights_fed_is_the_float_product():
    """onnxruntime prepacks (and quantizes A for) constant weights only."""
    n, k, bits, block = 16, 128, 4, 32
    ins, w = weights(n, k, bits, block, "packed")
    a = RNG.standard_normal((2, k)).astype(np.float32)
    data, feeds = model(ins, k, n, bits, block, 4, np.float32, const=False)
    want = ort_run(data, {"A": a, **feeds})
    np.testing.assert_allclose(want, a @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kit_run(data, {"A": a, **feeds}), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", [0, 4])
@pytest.mark.parametrize("bits,zp", [(4, "none"), (4, "packed"), (8, "packed"), (4, "float")])
def test_float16_a(level, bits, zp):
    n, k, block = 16, 96, 32
    ins, w = weights(n, k, bits, block, zp, dtype=np.float16)
    a = RNG.standard_normal((3, k)).astype(np.float16)
    bias = RNG.standard_normal(n).astype(np.float16)
    data, _ = model(ins, k, n, bits, block, level, np.float16, bias=bias)
    want = ort_run(data, {"A": a})
    for backend in ("cpu", "gpu"):
        got = kit_run(data, {"A": a}, backend)
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("zp", ["none", "float"])
def test_g_idx_gives_each_column_its_block(zp):
    n, k, bits, block = 8, 64, 4, 16
    ins, w = weights(n, k, bits, block, zp, g_idx=True)
    a = RNG.standard_normal((2, k)).astype(np.float32)
    for level in (0, 4):  # g_idx: the float path at every level
        data, _ = model(ins, k, n, bits, block, level, np.float32)
        want = ort_run(data, {"A": a})
        np.testing.assert_allclose(want, a @ w.T, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(kit_run(data, {"A": a}), want, rtol=1e-5, atol=1e-5)


def test_g_idx_with_packed_zero_points_applies_them():
    """onnxruntime 1.32's CPU kernel drops packed uint8 zero points when g_idx is given (it uses
    2^(bits-1)); onnxkit applies them, as the operator's definition says: checked against the
    reference written here."""
    n, k, bits, block = 8, 64, 4, 16
    ins, w = weights(n, k, bits, block, "packed", g_idx=True)
    a = RNG.standard_normal((2, k)).astype(np.float32)
    data, _ = model(ins, k, n, bits, block, 0, np.float32)
    np.testing.assert_allclose(kit_run(data, {"A": a}), a @ w.T, rtol=1e-4, atol=1e-4)


def test_bad_g_idx_and_shapes_are_refused_by_name():
    from onnxkit.errors import OnnxkitError

    n, k, bits, block = 8, 64, 4, 16
    ins, _ = weights(n, k, bits, block, "none", g_idx=True)
    ins["g"] = np.full(k, 7, np.int32)
    data, _ = model(ins, k, n, bits, block, 0, np.float32)
    with pytest.raises(OnnxkitError, match="g_idx holds a block index"):
        kit_run(data, {"A": np.zeros((1, k), np.float32)})
    ins, _ = weights(n, k, bits, block, "none")
    data, _ = model(ins, k, n, bits, block, 0, np.float32)
    with pytest.raises(OnnxkitError, match="last extent must be K"):
        kit_run(data, {"A": np.zeros((1, k + 1), np.float32)})


def test_fed_weights_are_read_again_at_every_run():
    """A weight fed (not a constant) is dequantized per call: the same array object written
    between runs gives the new product."""
    n, k, bits, block = 8, 32, 4, 16
    ins, w = weights(n, k, bits, block, "none")
    data, feeds = model(ins, k, n, bits, block, 0, np.float32, const=False)
    sess = InferenceSession(data, "cpu")
    a = RNG.standard_normal((1, k)).astype(np.float32)
    first = sess.run(None, {"A": a, **feeds})[0]
    feeds["scales"] *= 2
    second = sess.run(None, {"A": a, **feeds})[0]
    np.testing.assert_allclose(second, 2 * first, rtol=1e-5, atol=1e-6)
