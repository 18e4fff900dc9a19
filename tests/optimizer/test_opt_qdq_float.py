"""The qdq pass's float-output QGemm (``qdq-gemm-float``): ``DQ(a), DQ(b)[, bias] -> Gemm`` whose
float32 output no QuantizeLinear alone reads (the QOperator quantizer leaves GPT-2's Gemms so)
becomes com.microsoft QGemm without y_scale.  The optimized session agrees with the unoptimized
one and with onnxruntime (its optimizer off) within float32's tolerance (the integer sum is exact,
the float path rounds each product and sum); near misses stay: the output quantized (the Q-rooted
rule's), a bias no integer multiple of ``a_scale * b_scale``, a per-column B scale on the other
axis, alpha other than 1, A per channel."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnxkit  # noqa: E402
from onnxkit import InferenceSession  # noqa: E402
from onnxkit.runtime.optimizer import PASS_NAMES, optimize  # noqa: E402
from onnxkit.runtime.options import GraphOptimizationLevel  # noqa: E402
from optimizer_cases import TP, helper, init, off, only, ort_plain  # noqa: E402

RNG = np.random.default_rng(5)
M, K, N = 6, 40, 7
A_SCALE = np.float32(0.02)


def _model(trans_b=0, bias="exact", per_column=True, axis=None, alpha=1.0, quantized_out=False, dtype=np.uint8):
    zp = 128 if dtype == np.uint8 else 0
    shape = (N, K) if trans_b else (K, N)
    w_axis = (0 if trans_b else 1) if axis is None else axis
    w_scale = (RNG.uniform(0.005, 0.02, shape[w_axis]).astype(np.float32) if per_column
               else np.array(0.011, np.float32))
    inits = [init("a_s", A_SCALE), init("a_z", np.array(zp, dtype)),
             init("w_q", RNG.integers(-60, 61, shape).astype(np.int8)), init("w_s", w_scale),
             init("w_z", np.zeros(w_scale.shape, np.int8))]
    n = helper.make_node
    nodes = [n("DequantizeLinear", ["a", "a_s", "a_z"], ["ad"]),
             n("DequantizeLinear", ["w_q", "w_s", "w_z"], ["wd"], **({"axis": w_axis} if per_column else {}))]
    ins = ["ad", "wd"]
    if bias is not None:
        unit = (A_SCALE * (w_scale if per_column and w_axis == (0 if trans_b else 1) else w_scale.reshape(-1)[:1]))
        k = RNG.integers(-300, 300, N).astype(np.float32)
        b = (k * unit).astype(np.float32) if bias == "exact" else (k * unit + unit / 3).astype(np.float32)
        if bias == "zero":
            b = np.zeros(N, np.float32)
        inits.append(init("bias", b))
        ins.append("bias")
    nodes.append(n("Gemm", ins, ["y" if not quantized_out else "g"], transB=trans_b, alpha=alpha))
    outputs = [helper.make_tensor_value_info("y", TP.FLOAT if not quantized_out else TP.UINT8, [M, N])]
    if quantized_out:
        inits += [init("y_s", np.array(0.05, np.float32)), init("y_z", np.array(128, np.uint8))]
        nodes.append(n("QuantizeLinear", ["g", "y_s", "y_z"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TP.UINT8 if dtype == np.uint8
                                                                         else TP.INT8, [M, K])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _ops(proto):
    m = onnxkit.load(proto.SerializeToString())
    r = optimize(m, GraphOptimizationLevel.ORT_ENABLE_ALL, disabled=set(PASS_NAMES) - {"qdq"})
    assert onnxkit.check_model(r.model).ok
    return r.rewrites["qdq"], [n.op_type for n in r.model.graph.node]


def _agree(proto, dtype=np.uint8):
    info = np.iinfo(dtype)
    data = proto.SerializeToString()
    for seed in range(3):
        feed = {"a": np.random.default_rng(seed).integers(info.min, info.max + 1, (M, K)).astype(dtype)}
        want = ort_plain(proto, feed)[0]
        plain = InferenceSession(data, off()).run(None, feed)[0]
        for got in (InferenceSession(data, only("qdq")).run(None, feed)[0], InferenceSession(data).run(None, feed)[0]):
            assert got.dtype == want.dtype and got.shape == want.shape
            scale = np.abs(want).max() + 1e-30
            assert np.abs(got - want).max() <= 1e-5 * scale and np.abs(got - plain).max() <= 1e-5 * scale


@pytest.mark.parametrize("trans_b,bias,per_column,dtype", [(0, "exact", True, np.uint8), (1, "zero", True, np.uint8),
                                                           (0, None, False, np.int8), (1, "exact", False, np.uint8)])
def test_float_output_gemm_of_two_dqs_becomes_qgemm(trans_b, bias, per_column, dtype):
    proto = _model(trans_b, bias, per_column, dtype=dtype)
    assert _ops(proto) == (1, ["QGemm"])
    _agree(proto, dtype)


def test_a_quantized_output_is_the_q_rooted_rules():
    """A Gemm whose output a QuantizeLinear alone reads becomes one QGemm with that Q's y_scale."""
    m = onnxkit.load(_model(quantized_out=True).SerializeToString())
    r = optimize(m, GraphOptimizationLevel.ORT_ENABLE_ALL, disabled=set(PASS_NAMES) - {"qdq"})
    assert [(n.op_type, len(n.input)) for n in r.model.graph.node] == [("QGemm", 9)]


@pytest.mark.parametrize("case", ["inexact_bias", "other_axis", "alpha", "quantized_output"])
def test_near_misses_stay_float_gemms(case):
    kw = {"inexact_bias": {"bias": "inexact"}, "other_axis": {"axis": 0}, "alpha": {"alpha": 0.5},
          "quantized_output": {"bias": "inexact", "quantized_out": True}}[case]
    proto = _model(**kw)
    want = ["DequantizeLinear", "DequantizeLinear", "Gemm"] + (["QuantizeLinear"] if case == "quantized_output" else [])
    assert _ops(proto) == (0, want)
    if case != "quantized_output":
        _agree(proto)
