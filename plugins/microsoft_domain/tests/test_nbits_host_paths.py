"""MatMulNBits' host (numpy) paths of the portable kernel: the blockwise dequantization (a table
of each octet's values, a few rows at a time) and the int8 quantization of a float32 numpy A in
few numpy calls give the bits of their definitions, written here independently; and the
kernel's MatMulNBits at accuracy_level 4 (the numpy bodies, as a cold plan's) keeps onnxruntime's results."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxkit.runtime import InferenceSession
from onnxkit_microsoft.kernels import nbits as portable

RNG = np.random.default_rng(4343)


class _Ctx:
    def fail(self, message):
        raise ValueError(message)


def _pack(q, bits):
    per = 8 // bits
    q = q.reshape(q.shape[:-1] + (q.shape[-1] // per, per)).astype(np.uint8)
    return np.bitwise_or.reduce(q << (np.arange(per, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


def _weight(n, k, bits, block, zp):
    """(B, scales, zero points, reference W float32): W per column as ``(q - zp) * scale`` in float32."""
    kb = -(-k // block)
    q = RNG.integers(0, 1 << bits, (n, kb * block))
    scales = RNG.standard_normal((n, kb)).astype(np.float32)
    if zp == "packed":
        per = 8 // bits
        z = RNG.integers(0, 1 << bits, (n, -(-kb // per) * per))
        zpin, zf = _pack(z, bits).reshape(-1), z[:, :kb].astype(np.float32)
    elif zp == "float":
        zf = (RNG.random((n, kb)) * (1 << bits)).astype(np.float32)
        zpin = zf.reshape(-1)
    else:
        zpin, zf = None, np.full((n, kb), 1 << (bits - 1), np.float32)
    w = np.empty((n, k), np.float32)
    for c in range(k):
        w[:, c] = (q[:, c].astype(np.float32) - zf[:, c // block]) * scales[:, c // block]
    return _pack(q.reshape(n, kb, block), bits), scales.reshape(-1), zpin, w


@pytest.mark.parametrize("n,k,bits,block,zp", [
    (300, 576, 4, 32, "none"),     # more rows than one chunk of the dequantization
    (300, 688, 4, 32, "packed"),   # K past a whole number of blocks
    (70, 100, 2, 16, "packed"),
    (40, 130, 8, 64, "float"),
    (5, 256, 4, 256, "float"),
])
def test_blockwise_dequantization_gives_the_columnwise_bits(n, k, bits, block, zp):
    b, scales, z, want = _weight(n, k, bits, block, zp)
    got = portable.dequantize(_Ctx(), b, scales, z, n, k, block, bits)
    assert got.dtype == np.float32 and got.shape == (n, k) and got.flags.c_contiguous
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def _q8(a, k, ab):
    """A as onnxruntime's int8 path sees it, block by block from its definition."""
    rows = a.reshape(-1, k)
    out = np.empty_like(rows)
    for r in range(rows.shape[0]):
        for lo in range(0, k, ab):
            blk = rows[r, lo:lo + ab]
            amax = np.float32(np.abs(blk).max())
            inv = np.float32(127) / amax if amax else np.float32(0)
            out[r, lo:lo + ab] = np.rint(blk * inv) * (amax / np.float32(127))
    return out.reshape(a.shape)


@pytest.mark.parametrize("shape,ab", [((1, 1, 256), 32), ((64, 576), 32), ((3, 5, 688), 32), ((2, 70), 16),
                                      ((4, 300), 256), ((1, 40), 32)])
def test_host_quantization_of_a_gives_the_definitions_bits(shape, ab):
    k = shape[-1]
    a = (RNG.standard_normal(shape) * RNG.choice([1.0, 1e-3, 1e20], size=shape)).astype(np.float32)
    a[..., :ab] = 0                      # a block of zeros: scale 0, values 0
    a.reshape(-1)[ab + 1] = np.float32(-0.0)
    a.reshape(-1)[-1] = np.float32(2.5)  # halves: rounded to even
    got = portable.quantize_a_host(a, k, ab)
    want = _q8(a, k, ab)
    assert got.shape == a.shape and got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def _model(b, scales, n, k, block):
    node = helper.make_node("MatMulNBits", ["A", "B", "scales"], ["Y"], name="n0", domain="com.microsoft", K=k, N=n,
                            bits=4, block_size=block, accuracy_level=4)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(b, "B"), numpy_helper.from_array(scales, "scales")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m.SerializeToString()


@pytest.mark.parametrize("rows", [1, 64])
def test_numpy_body_of_matmul_nbits_keeps_onnxruntimes_results(rows, monkeypatch):
    from onnxkit_cpu import compiled

    seen = []
    host = portable.quantize_a_host
    monkeypatch.setattr(portable, "quantize_a_host", lambda *args: seen.append(1) or host(*args))
    n, k, block = 200, 688, 32
    b, scales, _, _ = _weight(n, k, 4, block, "none")
    data = _model(b, scales.reshape(n, -1), n, k, block)
    a = RNG.standard_normal((rows, k)).astype(np.float32)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, {"A": a})[0]
    with compiled.disabled():  # the cpu backend's numpy bodies, as a cold plan's
        got = InferenceSession(data, "cpu").run(None, {"A": a})[0]
    assert seen, "the host quantization of A did not serve"
    assert np.abs(got - want).max() <= 4e-6 * np.abs(want).max()
