"""The qdq pass (onnxkit/runtime/optimizer/qdq.py): each rule fires on a hand-built QDQ group and on a
model onnxruntime's quantizer makes from the corpus; its near misses are left as they are; the
optimized session, the unoptimized one and onnxruntime (optimizer off) agree within one
quantization step of the output on random inputs."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from optimizer_cases import TP, helper, init, off, only

import onnxkit
from onnxkit import InferenceSession
from onnxkit.registry import get_registry
from onnxkit.runtime.optimizer import PASS_NAMES, optimize, qdq
from onnxkit.runtime.options import GraphOptimizationLevel

ort = pytest.importorskip("onnxruntime")

I8, U8 = np.int8, np.uint8


def _f32(name, value):
    return init(name, np.asarray(value, np.float32))


def _q(value, dtype, name):
    return init(name, np.asarray(value, dtype))


class Graph:
    """A QDQ model under construction: float input x quantized by Q(xq_s, xq_z) into xq, the groups,
    and the outputs: an 8-bit value dequantized by its own parameters."""

    def __init__(self, x_shape, dtype=I8, opset=17, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.dtype, self.opset = [], [], dtype, opset
        self.x_shape = x_shape
        self.outputs, self.scales, self.steps = [], {}, {"xq": 0.021}
        self.x_zero = 125 if dtype == U8 else -3
        self.inits += [_f32("xq_s", 0.021), _q(self.x_zero, dtype, "xq_z")]
        self.nodes.append(helper.make_node("QuantizeLinear", ["x", "xq_s", "xq_z"], ["xq"]))

    def dq(self, q, scale, zero, out, axis=None):
        extra = {} if axis is None else {"axis": axis}
        self.nodes.append(helper.make_node("DequantizeLinear", [q, scale, zero], [out], **extra))
        return out

    def quantize(self, value, out, scale=0.05, zero=5, dtype=None):
        """``QuantizeLinear(value)`` into ``out`` with its own parameters ``out_s`` / ``out_z``."""
        self.inits += [_f32(out + "_s", scale), _q(zero, dtype or self.dtype, out + "_z")]
        self.steps[out] = scale
        self.nodes.append(helper.make_node("QuantizeLinear", [value, out + "_s", out + "_z"], [out]))
        return out

    def weight(self, name, shape, per_channel_axis=None, dtype=I8):
        """A constant 8-bit weight and its DequantizeLinear (per tensor, or per ``per_channel_axis``)."""
        values = self.rng.integers(-60, 61, size=shape).astype(dtype)
        self.inits.append(init(name + "_q", values))
        if per_channel_axis is None:
            self.scales[name] = np.float32(0.011)
            self.inits += [_f32(name + "_s", self.scales[name]), _q(0, dtype, name + "_z")]
            return self.dq(name + "_q", name + "_s", name + "_z", name)
        m = shape[per_channel_axis]
        self.scales[name] = self.rng.uniform(0.005, 0.02, m).astype(np.float32)
        self.inits += [_f32(name + "_s", self.scales[name]), _q(np.zeros(m), dtype, name + "_z")]
        return self.dq(name + "_q", name + "_s", name + "_z", name, axis=per_channel_axis)

    def bias(self, name, weight, n, scale_factor=1.0):
        """An int32 bias of ``n`` values and its DequantizeLinear of scale ``xq_s * w_s`` (times ``scale_factor``)."""
        scale = (np.float32(0.021) * self.scales[weight] * np.float32(scale_factor)).astype(np.float32)
        self.inits += [init(name + "_q", self.rng.integers(-500, 500, n).astype(np.int32)), _f32(name + "_s", scale),
                       _q(np.zeros(scale.shape), np.int32, name + "_z")]
        return self.dq(name + "_q", name + "_s", name + "_z", name, axis=0 if scale.ndim else None)

    def output(self, q, shape, name="y"):
        """The graph output ``name``: ``q`` dequantized by its own parameters (one step: its scale)."""
        self.nodes.append(helper.make_node("DequantizeLinear", [q, q + "_s", q + "_z"], [name]))
        self.outputs.append(helper.make_tensor_value_info(name, TP.FLOAT, shape))
        self.step = max(getattr(self, "step", 0.0), self.steps.get(q, 0.021))

    def model(self, extra_outputs=(), extra_inputs=(), opsets=()):
        g = helper.make_graph(self.nodes, "qdq", [helper.make_tensor_value_info("x", TP.FLOAT, self.x_shape)]
                              + list(extra_inputs), self.outputs + list(extra_outputs), self.inits)
        imports = [helper.make_opsetid("", self.opset)] + [helper.make_opsetid(d, v) for d, v in opsets]
        return helper.make_model(g, opset_imports=imports, ir_version=8 if self.opset < 21 else 10)

    def feed(self, seed):
        return {"x": np.random.default_rng(seed).uniform(-2.5, 2.5, self.x_shape).astype(np.float32)}


def rewritten(proto, registry=None):
    """``(qdq rewrites, op types of the optimized graph)`` with the qdq pass alone."""
    m = onnxkit.load(proto.SerializeToString())
    r = optimize(m, GraphOptimizationLevel.ORT_ENABLE_ALL, registry=registry, disabled=set(PASS_NAMES) - {"qdq"})
    report = onnxkit.check_model(r.model)
    assert report.ok, [str(d) for d in report.diagnostics]
    return r.rewrites["qdq"], sorted(n.op_type for n in r.model.graph.node)


def agree_within_a_step(proto, feeds, step):
    """Optimized (qdq alone, and every pass), unoptimized and onnxruntime (its optimizer off) agree within
    one ``step`` on each feed; the optimized and unoptimized sessions' largest difference is returned."""
    data = proto.SerializeToString()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    sessions = [InferenceSession(data, only("qdq")), InferenceSession(data), InferenceSession(data, off())]
    worst = 0.0
    for feed in feeds:
        want = ref.run(None, feed)
        got = [s.run(None, feed) for s in sessions]
        for k, w in enumerate(want):
            for g in got:
                assert g[k].shape == w.shape and g[k].dtype == w.dtype
                err = float(np.max(np.abs(g[k].astype(np.float64) - w))) if w.size else 0.0
                assert err <= 1.001 * step, (k, err, step)
            worst = max(worst, float(np.max(np.abs(got[0][k].astype(np.float64) - got[2][k]))) if w.size else 0.0)
    return worst




# -- the groups ------------------------------------------------------------------------------------
def conv_group(per_channel=False, bias=True, dtype=I8, w_axis=0, bias_factor=1.0, opset=17):
    g = Graph([2, 3, 7, 7], dtype, opset)
    x = g.dq("xq", "xq_s", "xq_z", "xd")
    w = g.weight("w", (4, 3, 3, 3), w_axis if per_channel else None)
    ins = [x, w] + ([g.bias("b", "w", 4, bias_factor)] if bias else [])
    g.nodes.append(helper.make_node("Conv", ins, ["c"], pads=[1, 1, 1, 1], strides=[1, 2]))
    g.output(g.quantize("c", "cq", 0.06), [2, 4, 7, 4])
    return g


def matmul_group(per_column=False):
    g = Graph([3, 2, 6])
    a = g.dq("xq", "xq_s", "xq_z", "ad")
    b = g.weight("w", (6, 5), 1 if per_column else None)
    g.nodes.append(helper.make_node("MatMul", [a, b], ["m"]))
    g.output(g.quantize("m", "mq", 0.02), [3, 2, 5])
    return g


def gemm_group(trans_b=1, bias=True, alpha=1.0, per_column=False):
    g = Graph([3, 6])
    a = g.dq("xq", "xq_s", "xq_z", "ad")
    shape = (5, 6) if trans_b else (6, 5)
    b = g.weight("w", shape, (0 if trans_b else 1) if per_column else None)
    ins = [a, b] + ([g.bias("c", "w", 5)] if bias else [])
    g.nodes.append(helper.make_node("Gemm", ins, ["m"], transB=trans_b, alpha=alpha))
    g.output(g.quantize("m", "mq", 0.03), [3, 5])
    return g


def binary_group(op_type="Add", other_dtype=None, read_twice=False):
    """``op(DQ(xq), DQ(Q(x2)))``; ``read_twice``: DQ(xq) also read by a second output."""
    g = Graph([2, 3, 4])
    a = g.dq("xq", "xq_s", "xq_z", "ad")
    g.inits += [_f32("x2_s", 0.017), _q(4, other_dtype or g.dtype, "x2_z")]
    g.nodes.append(helper.make_node("QuantizeLinear", ["x", "x2_s", "x2_z"], ["x2q"]))
    b = g.dq("x2q", "x2_s", "x2_z", "bd")
    g.nodes.append(helper.make_node(op_type, [a, b], ["s"]))
    g.output(g.quantize("s", "sq", 0.04 if op_type == "Add" else 0.05), [2, 3, 4])
    if read_twice:
        g.nodes.append(helper.make_node("Relu", [a], ["r"]))
        g.outputs.append(helper.make_tensor_value_info("r", TP.FLOAT, [2, 3, 4]))
    return g


def pool_group():
    g = Graph([2, 3, 4, 5])
    g.nodes.append(helper.make_node("GlobalAveragePool", [g.dq("xq", "xq_s", "xq_z", "xd")], ["p"]))
    g.output(g.quantize("p", "pq", 0.01), [2, 3, 1, 1])
    return g


def move_group(op_type, same=True, opset=17, zero=None, q_dtype=None):
    """``Q(op(DQ(xq)))``, Q with DQ's parameters (``same``) or others."""
    g = Graph([2, 3, 4, 4], opset=opset)
    if zero is not None:
        g.x_zero = zero
        g.inits = [t for t in g.inits if t.name != "xq_z"] + [_q(zero, g.dtype, "xq_z")]
    extra, attrs = [], {}
    if op_type == "Reshape":
        g.inits.append(init("shape", np.array([2, -1], np.int64)))
        extra, out = ["shape"], [2, 48]
    elif op_type == "Transpose":
        attrs, out = {"perm": [0, 2, 3, 1]}, [2, 4, 4, 3]
    elif op_type == "MaxPool":
        attrs, out = {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]}, [2, 3, 4, 4]
    elif op_type == "Flatten":
        out = [2, 48]
    else:
        out = [2, 3, 4, 4]
    g.nodes.append(helper.make_node(op_type, [g.dq("xq", "xq_s", "xq_z", "xd")] + extra, ["m"], **attrs))
    if same and q_dtype is None:
        g.nodes.append(helper.make_node("QuantizeLinear", ["m", "xq_s", "xq_z"], ["mq"]))
        g.inits += [_f32("mq_s", 0.021), _q(g.x_zero, g.dtype, "mq_z")]
        g.steps["mq"] = 0.021
    else:
        g.quantize("m", "mq", 0.021 if same else 0.03, 5, q_dtype)
    g.output("mq", out)
    return g


def cancel_group(q_dtype=None, output_is_q=False):
    """``DQ(xq) -> Q`` with DQ's parameters (Q of another type with ``q_dtype``), then a Relu group."""
    g = Graph([2, 5])
    g.inits = [t for t in g.inits if t.name != "xq_z"] + [_q(5, g.dtype, "xq_z")]
    d = g.dq("xq", "xq_s", "xq_z", "xd")
    if q_dtype is None:
        g.nodes.append(helper.make_node("QuantizeLinear", [d, "xq_s", "xq_z"], ["rq"]))
    else:       # the same zero point value in another type
        g.inits += [_q(5, q_dtype, "rq_zz")]
        g.nodes.append(helper.make_node("QuantizeLinear", [d, "xq_s", "rq_zz"], ["rq"]))
    g.inits += [_f32("rq_s", 0.021), _q(5, q_dtype or g.dtype, "rq_z")]
    g.steps["rq"] = 0.021
    g.output("rq", [2, 5])
    extra = [helper.make_tensor_value_info("rq", TP.UINT8 if q_dtype == U8 else TP.INT8, [2, 5])] if output_is_q else []
    return g, extra


FEEDS = 3


@pytest.fixture(autouse=True)
def every_rule(monkeypatch):
    """The qdq pass with every rule, the integer-kernel fusions off by default included (the
    default rules' test sets them back)."""
    monkeypatch.setattr(qdq, "ACTIVE", qdq.RULES)


def _fires(g, rewrites, ops, **kw):
    proto = g.model(**kw)
    assert rewritten(proto) == (rewrites, sorted(ops))
    return agree_within_a_step(proto, [g.feed(s) for s in range(FEEDS)], g.step)


# -- each rule fires on a hand-built group -----------------------------------------------------------
@pytest.mark.parametrize("per_channel,bias,dtype", [(False, True, I8), (True, True, I8), (False, False, U8),
                                                    (True, False, I8)])
def test_conv_group_becomes_qlinear_conv(per_channel, bias, dtype):
    _fires(conv_group(per_channel, bias, dtype), 1, ["QuantizeLinear", "QLinearConv", "DequantizeLinear"])


@pytest.mark.parametrize("per_column", [False, True])
def test_matmul_group_becomes_qlinear_matmul(per_column):
    _fires(matmul_group(per_column), 1, ["QuantizeLinear", "QLinearMatMul", "DequantizeLinear"])


@pytest.mark.parametrize("trans_b,bias,per_column", [(1, True, False), (0, True, True), (1, False, True)])
def test_gemm_group_becomes_qgemm(trans_b, bias, per_column):
    _fires(gemm_group(trans_b, bias, per_column=per_column), 1, ["QuantizeLinear", "QGemm", "DequantizeLinear"])


@pytest.mark.parametrize("op_type", ["Add", "Mul"])
def test_add_and_mul_groups_become_com_microsoft_qlinear_ops(op_type):
    _fires(binary_group(op_type), 1, ["QuantizeLinear", "QuantizeLinear", "QLinear" + op_type, "DequantizeLinear"])


def test_global_average_pool_group_becomes_qlinear_global_average_pool():
    _fires(pool_group(), 1, ["QuantizeLinear", "QLinearGlobalAveragePool", "DequantizeLinear"])


@pytest.mark.parametrize("op_type", ["Reshape", "Transpose", "MaxPool", "Flatten", "Identity"])
def test_pair_around_a_value_move_is_dropped_and_the_result_is_equal(op_type):
    worst = _fires(move_group(op_type), 1, ["QuantizeLinear", op_type, "DequantizeLinear"])
    assert worst == 0.0       # exact (the module docstring's proof)


def test_relu_pair_drops_where_the_zero_point_is_the_minimum():
    assert _fires(move_group("Relu", zero=-128), 1, ["QuantizeLinear", "Identity", "DequantizeLinear"]) == 0.0


def test_dq_q_pair_with_equal_parameters_cancels():
    g, _ = cancel_group()
    assert _fires(g, 1, ["QuantizeLinear", "DequantizeLinear"]) == 0.0


def test_a_dq_read_twice_feeds_the_fused_node_and_stays_for_its_other_reader():
    g = binary_group(read_twice=True)
    _fires(g, 1, ["QuantizeLinear", "QuantizeLinear", "DequantizeLinear", "QLinearAdd", "DequantizeLinear", "Relu"])


# -- near misses are left as they are ------------------------------------------------------------------
def _left_alone(g, runs=True, registry=None, **kw):
    proto = g.model(**kw)
    count, _ = rewritten(proto, registry)
    assert count == 0
    if runs:
        agree_within_a_step(proto, [g.feed(0)], g.step)


def test_float_result_read_outside_the_group_is_not_fused():
    g = conv_group()
    g.outputs.append(helper.make_tensor_value_info("c", TP.FLOAT, [2, 4, 7, 4]))
    _left_alone(g, runs=False)


def test_per_channel_weight_on_another_axis_is_not_fused():
    _left_alone(conv_group(per_channel=True, bias=False, w_axis=1), runs=False)


def test_non_constant_scale_is_not_fused():
    g = matmul_group()
    g.inits = [t for t in g.inits if t.name != "w_s"]
    _left_alone(g, extra_inputs=[helper.make_tensor_value_info("w_s", TP.FLOAT, [])], runs=False)


def test_int16_quantization_is_not_fused():
    g = Graph([3, 6], opset=21)
    a = g.dq("xq", "xq_s", "xq_z", "ad")
    g.inits += [init("w_q", np.ones((6, 5), np.int16)), _f32("w_s", 0.01), _q(0, np.int16, "w_z")]
    b = g.dq("w_q", "w_s", "w_z", "w")
    g.nodes.append(helper.make_node("MatMul", [a, b], ["m"]))
    g.output(g.quantize("m", "mq", 0.02), [3, 5])
    _left_alone(g)


def test_int4_weight_is_not_fused():
    g = Graph([3, 6], opset=21)
    a = g.dq("xq", "xq_s", "xq_z", "ad")
    w4 = helper.make_tensor("w_q", TP.INT4, [6, 5], np.ones(30, np.int8).tolist())
    g.inits += [w4, _f32("w_s", 0.01), helper.make_tensor("w_z", TP.INT4, [], [0])]
    b = g.dq("w_q", "w_s", "w_z", "w")
    g.nodes.append(helper.make_node("MatMul", [a, b], ["m"]))
    g.output(g.quantize("m", "mq", 0.02), [3, 5])
    _left_alone(g, runs=False)


def test_zero_point_of_another_shape_than_its_scale_is_not_fused():
    g = conv_group(per_channel=True, bias=False)
    g.inits = [t for t in g.inits if t.name != "w_z"] + [_q(0, I8, "w_z")]
    _left_alone(g, runs=False)


def test_bias_of_another_scale_is_not_fused():
    _left_alone(conv_group(bias_factor=1.5))


def test_gemm_with_alpha_is_not_fused():
    _left_alone(gemm_group(alpha=0.5))


def test_pair_of_other_parameters_is_not_dropped():
    _left_alone(move_group("Transpose", same=False))


def test_q_writing_another_type_is_neither_dropped_nor_cancelled():
    _left_alone(move_group("Reshape", q_dtype=U8, zero=5))      # zero points 5 (int8) and 5 (uint8)
    g, _ = cancel_group(q_dtype=U8)
    _left_alone(g)


def test_cancel_keeps_a_q_that_is_a_graph_output():
    g, extra = cancel_group(output_is_q=True)
    _left_alone(g, extra_outputs=extra)


def test_relu_with_a_zero_point_above_the_minimum_and_int8_maxpool_before_opset_12_stay():
    _left_alone(move_group("Relu"))
    _left_alone(move_group("MaxPool", opset=11))


class _WithoutMicrosoft:
    """The registry as if onnxkit-microsoft were not installed."""

    def __init__(self, registry):
        self._registry = registry

    def operator_set(self, domain, version):
        return None if domain == "com.microsoft" else self._registry.operator_set(domain, version)

    def __getattr__(self, name):
        return getattr(self._registry, name)


def test_com_microsoft_groups_stay_without_that_domain():
    registry = _WithoutMicrosoft(get_registry())
    for g in (binary_group("Add"), gemm_group(), pool_group()):
        _left_alone(g, runs=False, registry=registry)
    assert rewritten(conv_group().model(), registry)[0] == 1     # ai.onnx QLinearConv still


# -- a model onnxruntime's quantizer makes from the corpus ---------------------------------------------
def quantized_corpus_resnet(tmp_path):
    """``(model, feeds)``: the corpus' small ResNet quantized by onnxruntime's ``quantize_static``
    (QDQ, calibrated on its own corpus inputs), and those inputs."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "corpus"))
    from corpus_cache import ensure_corpus, load_inputs

    folder, _ = ensure_corpus(log=lambda line: print(line, file=sys.stderr))
    feeds = load_inputs(folder, "small_resnet_ts")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([feeds])

        def get_next(self):
            return next(self.feeds, None)

    path = tmp_path / "qdq.onnx"
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)        # the quantizer's progress warnings; the level is put back for later tests
    try:
        quantize_static(str(folder / "small_resnet_ts.onnx"), str(path), Reader(), quant_format=QuantFormat.QDQ)
    finally:
        root.setLevel(level)
    return onnx.load(str(path)), feeds


def _output_step(proto) -> float:
    return float(onnx.numpy_helper.to_array(next(t for t in proto.graph.initializer if t.name == "62_scale")))


def test_corpus_resnet_quantized_qdq_default_rules_leave_adds_in_float(tmp_path, monkeypatch):
    monkeypatch.setattr(qdq, "ACTIVE", qdq.DEFAULT_RULES)
    proto, feeds = quantized_corpus_resnet(tmp_path)
    count, ops = rewritten(proto)       # every group on integer kernels but the residual Adds (float, between Q/DQ)
    assert count == 10                  # of 27 DequantizeLinear and 13 QuantizeLinear nodes
    assert ops.count("QLinearConv") == 6 and ops.count("Add") == 2 and "QLinearAdd" not in ops
    assert {"MaxPool", "Flatten", "QGemm", "QLinearGlobalAveragePool"} <= set(ops) and "Conv" not in ops
    out_scale = _output_step(proto)
    rng = np.random.default_rng(5)
    randoms = [{"x": (feeds["x"] + rng.normal(0, 0.3, feeds["x"].shape)).astype(np.float32)} for _ in range(2)]
    agree_within_a_step(proto, [feeds] + randoms, out_scale)


def test_corpus_resnet_with_every_rule_runs_every_group_on_integer_kernels(tmp_path):
    proto, feeds = quantized_corpus_resnet(tmp_path)
    count, ops = rewritten(proto)
    assert count == 12
    assert ops == sorted(["QuantizeLinear"] + ["QLinearConv"] * 6 + ["MaxPool", "Flatten", "QLinearAdd", "QLinearAdd",
                                                                     "QLinearGlobalAveragePool", "QGemm",
                                                                     "DequantizeLinear"])
    out_scale = _output_step(proto)
    agree_within_a_step(proto, [feeds], out_scale)
