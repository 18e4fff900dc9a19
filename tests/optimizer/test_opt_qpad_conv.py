"""8-bit Pads before the integer convolutions: the qdq pass's ``qdq-drop-pad`` (DQ -> Pad -> Q run
as an 8-bit Pad whose value is the code of the float Pad's value) and the ``qpad_conv`` pass (an
8-bit Pad of the X zero point folded into QLinearConv / ConvInteger's pads).  The fold is exact:
optimized, unoptimized and onnxruntime (its optimizer off) outputs are equal bit for bit; the
QDQ model agrees within one quantization step (its other rules' bound).  Near misses (a value
other than the zero point, pads on the channel axis, another mode, auto_pad SAME_UPPER, a float
Pad value that is no code's dequantization) stay as they are."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from optimizer_cases import TP, check_pass, helper, init, optimized_ops  # noqa: E402
from test_opt_qdq import Graph, _f32, _fires, every_rule  # noqa: E402,F401

RNG = np.random.default_rng(77)


def _qop_model(value=3, pads=(0, 0, 1, 2, 0, 0, 2, 1), mode="constant", auto_pad=None, op_type="QLinearConv",
               x_zp=3, dtype=np.uint8):
    """``op(Pad(x, pads, value), w ...)`` on an 8-bit input ``x`` (a graph input)."""
    tp = TP.UINT8 if dtype == np.uint8 else TP.INT8
    h, w = 9 + pads[2] + pads[6], 8 + pads[3] + pads[7]
    shape = [2, 4, h, w] if auto_pad else [2, 4, h - 1, w - 1]
    inits = [init("pads", np.array(pads, np.int64)), init("w", RNG.integers(-50, 50, (4, 3, 3, 3)).astype(np.int8)),
             init("x_zp", np.array(x_zp, dtype))]
    pad_inputs = ["x", "pads"]
    if value is not None:
        inits.append(init("v", np.array(value, dtype)))
        pad_inputs.append("v")
    nodes = [helper.make_node("Pad", pad_inputs, ["xp"], mode=mode)]
    conv_attrs = {"pads": [1, 0, 0, 1]} if auto_pad is None else {"auto_pad": auto_pad}
    if op_type == "QLinearConv":
        inits += [init("x_s", np.array(0.02, np.float32)), init("w_s", np.array(0.01, np.float32)),
                  init("w_zp", np.array(0, np.int8)), init("y_s", np.array(0.3, np.float32)),
                  init("y_zp", np.array(7, dtype))]
        nodes.append(helper.make_node("QLinearConv", ["xp", "x_s", "x_zp", "w", "w_s", "w_zp", "y_s", "y_zp"], ["y"],
                                      **conv_attrs))
        out = helper.make_tensor_value_info("y", tp, shape)
    else:
        nodes.append(helper.make_node("ConvInteger", ["xp", "w", "x_zp"], ["y"], **conv_attrs))
        out = helper.make_tensor_value_info("y", TP.INT32, shape)
    graph = helper.make_graph(nodes, "qpad", [helper.make_tensor_value_info("x", tp, [2, 3, 9, 8])], [out], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _feed(dtype=np.uint8):
    info = np.iinfo(dtype)
    return {"x": RNG.integers(info.min, info.max + 1, (2, 3, 9, 8)).astype(dtype)}


@pytest.mark.parametrize("op_type", ["QLinearConv", "ConvInteger"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_pad_of_the_zero_point_folds_into_the_convolution(op_type, dtype):
    check_pass(_qop_model(op_type=op_type, dtype=dtype, x_zp=-4 if dtype == np.int8 else 3,
                          value=-4 if dtype == np.int8 else 3), _feed(dtype), "qpad_conv", 1, [op_type])


def test_conv_integer_without_zero_point_takes_a_pad_without_value():
    proto = _qop_model(op_type="ConvInteger", value=None, x_zp=0)
    conv = proto.graph.node[1]
    del conv.input[2:]
    check_pass(proto, _feed(), "qpad_conv", 1, ["ConvInteger"])


@pytest.mark.parametrize("case", ["other_value", "channel_pads", "reflect", "same_upper", "no_value"])
def test_near_misses_stay(case):
    kw = {"other_value": {"value": 4}, "channel_pads": {"pads": (0, 1, 1, 2, 0, 0, 2, 1)},
          "reflect": {"mode": "reflect", "value": None}, "same_upper": {"auto_pad": "SAME_UPPER"},
          "no_value": {"value": None}}[case]
    proto = _qop_model(**kw)
    rewrites, ops = optimized_ops(proto, "qpad_conv")
    assert rewrites == 0 and ops == ["Pad", "QLinearConv"]
    if case != "channel_pads":      # (a QLinearConv of 4 channels on a padded 4: a model onnxruntime refuses)
        check_pass(proto, _feed(), "qpad_conv", 0, ["Pad", "QLinearConv"])


def _qdq_pad_conv(value_kind="dq_zero"):
    """``Q(Conv(DQ(Q(Pad(DQ(xq), pads, value))), DQ(w)))``: the quantizer's QDQ form of a Pad
    before a Conv, its value ``DQ(zero point)`` (``dq_zero``), a float 0.0 constant (``zero``), or
    a float constant between two codes (``off_grid``)."""
    g = Graph([2, 3, 9, 8], np.uint8)
    x = g.dq("xq", "xq_s", "xq_z", "xd")
    g.inits.append(init("pads", np.array([0, 0, 1, 0, 0, 0, 1, 2], np.int64)))
    if value_kind == "edge":
        g.nodes.append(helper.make_node("Pad", [x, "pads"], ["p"], mode="edge"))
    elif value_kind in ("dq_zero", "other_q"):
        g.inits.append(init("v_q", np.array(g.x_zero, np.uint8)))
        value = g.dq("v_q", "xq_s", "xq_z", "vd")
    else:
        g.inits.append(_f32("vf", 0.0 if value_kind == "zero" else 0.5 * 0.021))
        value = "vf"
    if value_kind != "edge":
        g.nodes.append(helper.make_node("Pad", [x, "pads", value], ["p"]))
    if value_kind == "other_q":         # the Pad's Q of another scale: the pair stays around the Pad
        g.inits.append(_f32("pq_s", 0.03))
        g.nodes.append(helper.make_node("QuantizeLinear", ["p", "pq_s", "xq_z"], ["pq"]))
        pd = g.dq("pq", "pq_s", "xq_z", "pd")
    else:
        g.nodes.append(helper.make_node("QuantizeLinear", ["p", "xq_s", "xq_z"], ["pq"]))
        pd = g.dq("pq", "xq_s", "xq_z", "pd")
    w = g.weight("w", (4, 3, 3, 3))
    g.nodes.append(helper.make_node("Conv", [pd, w], ["c"], pads=[1, 1, 1, 1]))
    g.output(g.quantize("c", "cq", 0.06, 5, np.uint8), [2, 4, 11, 10])
    return g


@pytest.mark.parametrize("value_kind", ["dq_zero", "zero"])
def test_qdq_pad_runs_on_the_codes_and_folds(value_kind):
    g = _qdq_pad_conv(value_kind)
    _fires(g, 2, ["QuantizeLinear", "Pad", "QLinearConv", "DequantizeLinear"])
    import onnxkit
    from onnxkit.runtime.optimizer import PASS_NAMES, optimize
    from onnxkit.runtime.options import GraphOptimizationLevel

    r = optimize(onnxkit.load(g.model().SerializeToString()), GraphOptimizationLevel.ORT_ENABLE_ALL,
                 disabled=set(PASS_NAMES) - {"qdq", "qpad_conv"})
    assert r.rewrites["qpad_conv"] == 1 and "Pad" not in [n.op_type for n in r.model.graph.node]
    assert optimized_ops(g.model(), "qpad_conv")[0] == 0        # alone: the QDQ Pad is float, nothing to fold


def test_qdq_edge_pad_runs_on_the_codes_and_stays_a_pad():
    """An edge Pad moves values too (the pair drops); it inserts no zero point, so it does not fold."""
    _fires(_qdq_pad_conv("edge"), 2, ["QuantizeLinear", "Pad", "QLinearConv", "DequantizeLinear"])


@pytest.mark.parametrize("kind", ["off_grid", "other_q"])
def test_qdq_pad_of_a_value_between_codes_or_between_other_parameters_stays_float(kind):
    g = _qdq_pad_conv(kind)
    kept = ["DequantizeLinear"] * (3 if kind == "other_q" else 2)      # (other_q: the Pad value's DQ too)
    _fires(g, 1, ["QuantizeLinear", "Pad", "QuantizeLinear", "QLinearConv"] + kept)
