"""The models onnxruntime 1.32's own weight-only quantizer writes (onnxruntime.quantization.
matmul_nbits_quantizer), in the configurations of onnxruntime's test_op_matmul_4bits.py that run on
its CPU provider: a 52 -> 288 MatMul quantized symmetric / with offsets, QOperator (MatMulNBits) and
QDQ (DequantizeLinear int4/uint4 + MatMul) formats, by the default quantizer and by HQQ; a 545 x 228
Gather quantized to GatherBlockQuantized (symmetric float32 with int32 indices, with offsets float16
with int64 indices); and beyond them accuracy_level 4 and 8 bits.  Each quantized model runs on
onnxkit and onnxruntime: their outputs agree to float rounding, and both are within that test's
tolerance of the float model (rtol 0.01, atol 0.05; the Gather's 0.2 / 0.5).  (Its RTN and GPTQ
cases need neural_compressor, which is not installed here.)"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxkit.runtime import InferenceSession

mnq = pytest.importorskip("onnxruntime.quantization.matmul_nbits_quantizer")
from onnxruntime.quantization import quant_utils  # noqa: E402

# (HQQ's torch conversion of a read-only array, inside onnxruntime's quantizer)
pytestmark = pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")


def fill_int4(shape, symmetric: bool) -> np.ndarray:
    """The weight pattern of test_op_matmul_4bits.py: a ramp over the 4-bit range (symmetric: -8..7
    skipping 0, -3 and 3; with offsets: 0..15)."""
    line = np.zeros(int(np.prod(shape)))
    v = -2.0 if symmetric else 0.0
    for i in range(line.size):
        if symmetric and v in (0, -3, 3):
            v += 1
        line[i] = v
        v += 1
        if v >= (8 if symmetric else 16):
            v = -8 if symmetric else 0
    return line.reshape(shape)


def matmul_model(symmetric: bool, k: int = 52, n: int = 288) -> onnx.ModelProto:
    w = numpy_helper.from_array(fill_int4((k, n), symmetric).astype(np.float32), "linear1.weight")
    node = helper.make_node("MatMul", ["input", "linear1.weight"], ["output"], "MatMul_0")
    g = helper.make_graph([node], "matmul_4bits_test", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [-1, k])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [-1, n])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def gather_model(symmetric: bool, tdata: int, tind: int, vocab: int = 545, dim: int = 228) -> onnx.ModelProto:
    dt = np.float32 if tdata == TensorProto.FLOAT else np.float16
    w = numpy_helper.from_array(fill_int4((vocab, dim), symmetric).astype(dt), "linear1.weight")
    node = helper.make_node("Gather", ["linear1.weight", "input"], ["output"], "Gather_0", axis=0)
    g = helper.make_graph([node], "gather_4bits_test", [helper.make_tensor_value_info("input", tind, [-1, 1000])],
                          [helper.make_tensor_value_info("output", tdata, [-1, 1000, dim])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    return m


def quantize(model, block_size, symmetric, fmt="QOperator", op_types=("MatMul",), bits=4, level=None,
             algo=None) -> bytes:
    quant_format = getattr(quant_utils.QuantFormat, fmt)
    if algo is None:
        algo = mnq.DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=symmetric,
                                                accuracy_level=level, quant_format=quant_format,
                                                op_types_to_quantize=op_types,
                                                quant_axes=(("MatMul", 0), ("Gather", 1)), bits=bits)
    q = mnq.MatMulNBitsQuantizer(model, bits=bits, block_size=block_size, is_symmetric=symmetric,
                                 accuracy_level=level, algo_config=algo)
    q.process()
    return q.model.model.SerializeToString()


def run_all(float_model: onnx.ModelProto, quantized: bytes, feeds: dict, expect_op: str, rtol=0.01, atol=0.05):
    assert any(n.op_type == expect_op for n in onnx.load_from_string(quantized).graph.node)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    base = ort.InferenceSession(float_model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    want = ort.InferenceSession(quantized, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = InferenceSession(quantized, "cpu").run(None, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    tight = 1e-3 if want.dtype == np.float16 else 2e-6
    got, want, base = (np.asarray(x, np.float32) for x in (got, want, base))  # (float16 exactly in float32)
    scale = float(np.abs(want).max()) or 1.0
    assert float(np.abs(got - want).max()) <= tight * scale
    assert bool(np.all(np.abs(got - base) <= atol + rtol * np.abs(base)))


MATMUL_FEEDS = {"input": np.random.default_rng(13).integers(-1, 2, (100, 52)).astype(np.float32)}


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("fmt", ["QOperator", "QDQ"])
def test_quantize_matmul_int4(symmetric, fmt):
    """test_quantize_matmul_int4_symmetric / _offsets / _symmetric_qdq / _offsets_qdq."""
    m = matmul_model(symmetric)
    run_all(m, quantize(m, 32, symmetric, fmt), MATMUL_FEEDS, "MatMulNBits" if fmt == "QOperator" else "DequantizeLinear")


@pytest.mark.parametrize("symmetric,tdata,tind", [(True, TensorProto.FLOAT, TensorProto.INT32),
                                                  (False, TensorProto.FLOAT16, TensorProto.INT64)])
def test_quantize_gather_int4(symmetric, tdata, tind):
    """test_quantize_gather_int4_symmetric / _offsets (rtol 0.2, atol 0.5: rounding of the ramp)."""
    m = gather_model(symmetric, tdata, tind)
    idx = np.random.default_rng(13).integers(-545, 535, (100, 1000)).astype(np.int32 if tind == TensorProto.INT32
                                                                               else np.int64)
    run_all(m, quantize(m, 32, symmetric, op_types=("Gather",)), {"input": idx}, "GatherBlockQuantized",
            rtol=0.2, atol=0.5)


def test_quantize_matmul_int4_using_hqq_algo():
    m = matmul_model(False)
    algo = mnq.HQQWeightOnlyQuantConfig(block_size=32)
    run_all(m, quantize(m, 32, False, algo=algo), MATMUL_FEEDS, "MatMulNBits")


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("bits,level", [(4, 4), (8, 0), (8, 4)])
def test_quantize_matmul_accuracy_level_and_8_bits(symmetric, bits, level):
    """Beyond onnxruntime's test: accuracy_level 4 (int8 A) and 8-bit weights, block 128 and 32."""
    m = matmul_model(symmetric, k=256, n=64)
    feeds = {"input": np.random.default_rng(5).standard_normal((3, 256)).astype(np.float32)}
    for block in (32, 128):
        run_all(m, quantize(m, block, symmetric, bits=bits, level=level), feeds, "MatMulNBits", rtol=0.05, atol=1.0)
