"""GatherBlockQuantized and MatMulBnb4 against onnxruntime 1.32's CPU kernels (one-node models,
the quantized tables as initializers, random data) and against references written here."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxkit.errors import OnnxkitError
from onnxkit.runtime import InferenceSession

RNG = np.random.default_rng(43)


def one_node(op, inits: dict, feeds: dict, outs=1, **attrs) -> bytes:
    names = list(inits) + list(feeds)
    order = attrs.pop("order", names)
    node = helper.make_node(op, order, [f"y{i}" for i in range(outs)], name="n0", domain="com.microsoft", **attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()]
    g = helper.make_graph([node], "g", ins, [helper.make_empty_tensor_value_info(f"y{i}") for i in range(outs)],
                          initializer=[numpy_helper.from_array(v, n) for n, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m.SerializeToString()


def ort_run(data, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def kit_run(data, feeds, backend="cpu"):
    return InferenceSession(data, backend).run(None, feeds)


def pack_last(q, bits):
    per = 8 // bits
    q = q.reshape(q.shape[:-1] + (q.shape[-1] // per, per)).astype(np.uint8)
    return np.bitwise_or.reduce(q << (np.arange(per, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


# -- GatherBlockQuantized ----------------------------------------------------------------------

@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zp", [False, True])
@pytest.mark.parametrize("scale_type", [np.float32, np.float16])
@pytest.mark.parametrize("ind_type", [np.int32, np.int64])
def test_gather_block_quantized_uint8(bits, zp, scale_type, ind_type):
    vocab, dim, block = 37, 96, 32
    per = 8 // bits
    q = RNG.integers(0, 1 << bits, (vocab, dim))
    nb = -(-dim // block)
    scales = (RNG.random((vocab, nb)) + 0.1).astype(scale_type)
    inits = {"data": pack_last(q, bits), "scales": scales}
    order = ["data", "idx", "scales"]
    zf = np.full((vocab, nb), 1 << (bits - 1), np.float64)
    if zp:
        z = RNG.integers(0, 1 << bits, (vocab, -(-nb // per) * per))
        inits["zp"] = pack_last(z, bits)
        zf = z[:, :nb].astype(np.float64)
        order.append("zp")
    idx = np.array([[0, 5, -1], [36, 7, 7]], ind_type)
    data = one_node("GatherBlockQuantized", inits, {"idx": idx}, order=order, bits=bits, block_size=block)
    want = ort_run(data, {"idx": idx})[0]
    col = np.arange(dim) // block
    ref = ((q - zf[:, col]) * scales.astype(np.float64)[:, col])[np.where(idx < 0, idx + vocab, idx)]
    np.testing.assert_allclose(want.astype(np.float64), ref, rtol=2e-3 if scale_type == np.float16 else 1e-6)
    for backend in ("cpu", "gpu"):
        got = kit_run(data, {"idx": idx}, backend)[0]
        assert got.dtype == want.dtype and got.shape == want.shape == (2, 3, dim)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["int4", "uint4"])
@pytest.mark.parametrize("zp", [False, True])
@pytest.mark.parametrize("axes", [(0, 1), (1, 0), (0, 2), (2, 1), (1, 2)])
def test_gather_block_quantized_int4(kind, zp, axes):
    ga, qa = axes
    shape = [6, 40, 5] if max(axes) == 2 else [12, 40]
    dt = ml_dtypes.int4 if kind == "int4" else ml_dtypes.uint4
    lo, hi = (-8, 8) if kind == "int4" else (0, 16)
    q = RNG.integers(lo, hi, shape)
    block = 16
    sshape = list(shape)
    sshape[qa] = -(-shape[qa] // block)
    scales = (RNG.random(sshape) + 0.1).astype(np.float32)
    inits = {"data": q.astype(dt), "scales": scales}
    order = ["data", "idx", "scales"]
    zf = np.zeros(sshape)
    if zp:
        zq = RNG.integers(lo, hi, sshape)
        inits["zp"] = zq.astype(dt)
        zf = zq.astype(np.float64)
        order.append("zp")
    idx = np.array([1, -2, 3, 0], np.int64)
    data = one_node("GatherBlockQuantized", inits, {"idx": idx}, order=order, block_size=block, gather_axis=ga,
                    quantize_axis=qa)
    want = ort_run(data, {"idx": idx})[0]
    col = np.arange(shape[qa]) // block
    w = (q - np.take(zf, col, axis=qa)) * np.take(scales.astype(np.float64), col, axis=qa)
    ref = np.take(w, np.where(idx < 0, idx + shape[ga], idx), axis=ga)
    np.testing.assert_allclose(want, ref, rtol=1e-6)
    got = kit_run(data, {"idx": idx})[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("code", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn"])
@pytest.mark.parametrize("block,rows", [(0, 9), (16, 9), (16, 1)])
def test_gather_block_quantized_float_codes(code, block, rows):
    """float8 / float4 data: ``value * scale``, block_size 0 one block per row, scales of one row
    broadcast over the gathered axis."""
    q = (RNG.standard_normal((9, 32)) * 3).astype(getattr(ml_dtypes, code))
    scales = (RNG.random((rows, 1 if block == 0 else 2)) + 0.5).astype(np.float32)
    idx = np.array([8, 0, -3], np.int32)
    data = one_node("GatherBlockQuantized", {"data": q, "scales": scales}, {"idx": idx},
                    order=["data", "idx", "scales"], block_size=block)
    want = ort_run(data, {"idx": idx})[0]
    got = kit_run(data, {"idx": idx})[0]
    np.testing.assert_array_equal(got, want)


def test_gather_block_quantized_out_of_range_index_gives_zeros_as_onnxruntime():
    q = RNG.integers(0, 256, (5, 32)).astype(np.uint8)
    scales = np.ones((5, 1), np.float32)
    idx = np.array([0, 9, -6], np.int64)
    data = one_node("GatherBlockQuantized", {"data": q, "scales": scales}, {"idx": idx},
                    order=["data", "idx", "scales"], bits=8, block_size=32)
    want = ort_run(data, {"idx": idx})[0]
    assert not want[1:].any()
    np.testing.assert_array_equal(kit_run(data, {"idx": idx})[0], want)


def test_gather_block_quantized_refuses_uint8_on_another_axis_by_name():
    q = RNG.integers(0, 256, (5, 32)).astype(np.uint8)
    data = one_node("GatherBlockQuantized", {"data": q, "scales": np.ones((1, 32), np.float32)},
                    {"idx": np.array([0], np.int64)}, order=["data", "idx", "scales"], bits=8, block_size=16,
                    gather_axis=1, quantize_axis=0)
    with pytest.raises(OnnxkitError, match="gather_axis must be 0"):
        kit_run(data, {"idx": np.array([0], np.int64)})


# -- MatMulBnb4 ----------------------------------------------------------------------------------

FP4 = [0.0, 0.005208333333, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25,
       -0.0, -0.005208333333, -0.66666667, -1.0, -0.33333333, -0.5, -0.16666667, -0.25]
NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]


@pytest.mark.parametrize("quant_type", [0, 1])
@pytest.mark.parametrize("block", [16, 64, 256])
@pytest.mark.parametrize("n,k", [(8, 32), (7, 33), (24, 100)])
def test_matmul_bnb4(quant_type, block, n, k):
    numel = n * k
    codes = RNG.integers(0, 16, numel + (numel & 1))
    b = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8)
    absmax = (RNG.random(-(-numel // block)) + 0.5).astype(np.float32)
    table = np.array(NF4 if quant_type else FP4)
    w = (table[codes[:numel]] * np.repeat(absmax.astype(np.float64), block)[:numel]).reshape(n, k)
    a = RNG.standard_normal((2, 3, k)).astype(np.float32)
    data = one_node("MatMulBnb4", {"B": b, "absmax": absmax}, {"A": a}, order=["A", "B", "absmax"], K=k, N=n,
                    block_size=block, quant_type=quant_type)
    want = ort_run(data, {"A": a})[0]
    np.testing.assert_allclose(want, a @ w.T, rtol=1e-5, atol=1e-5)
    for backend in ("cpu", "gpu"):
        got = kit_run(data, {"A": a}, backend)[0]
        assert got.shape == want.shape == (2, 3, n)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_matmul_bnb4_refuses_trans_b_0_by_name():
    data = one_node("MatMulBnb4", {"B": np.zeros(64, np.uint8), "absmax": np.ones(2, np.float32)},
                    {"A": np.zeros((1, 16), np.float32)}, order=["A", "B", "absmax"], K=16, N=8, block_size=64,
                    quant_type=1, transB=0)
    with pytest.raises(OnnxkitError, match="transB 0"):
        kit_run(data, {"A": np.zeros((1, 16), np.float32)})


@pytest.mark.parametrize("kind", ["uint8", "int4"])
def test_gather_block_quantized_table_path_equals_slice_path(kind):
    """More indices than table rows take the dequantize-the-table-once path, fewer the gathered
    slices' path: the same rows agree exactly between the two, and with onnxruntime."""
    rows, dim, block = 6, 64, 32
    if kind == "uint8":
        q = RNG.integers(0, 256, (rows, dim // 2)).astype(np.uint8)
        zp = RNG.integers(0, 256, (rows, 1)).astype(np.uint8)
        attrs = dict(bits=4, block_size=block)
    else:
        q = RNG.integers(-8, 8, (rows, dim)).astype(ml_dtypes.int4)
        zp = RNG.integers(-8, 8, (rows, dim // block)).astype(ml_dtypes.int4)
        attrs = dict(block_size=block)
    scales = (RNG.random((rows, dim // block)) + 0.1).astype(np.float32)
    inits = {"data": q, "scales": scales, "zp": zp}
    few = np.array([4, -1, 0], np.int64)
    many = np.concatenate([few, RNG.integers(-rows, rows, 20)]).astype(np.int64)
    outs = []
    for idx in (few, many):
        data = one_node("GatherBlockQuantized", inits, {"idx": idx}, order=["data", "idx", "scales", "zp"], **attrs)
        want = ort_run(data, {"idx": idx})[0]
        got = kit_run(data, {"idx": idx})[0]
        np.testing.assert_array_equal(got, want)
        outs.append(got)
    np.testing.assert_array_equal(outs[1][:3], outs[0])
