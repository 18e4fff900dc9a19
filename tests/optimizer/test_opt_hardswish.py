"""The ``hardswish`` pass: ``x * Clip(x + 3, 0, 6) / 6`` becomes one HardSwish node (ai.onnx from
opset 14, ai.onnxkit below), within tolerance of the expansion evaluated exactly (float64)."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer_cases import TP, helper, init, model, off, only, optimized_ops, within

import onnxkit
from onnxkit import InferenceSession
from onnxkit.runtime.optimizer import PASS_NAMES, optimize
from onnxkit.runtime.options import GraphOptimizationLevel

SHAPE = [2, 4, 5]
FEED = {"x": (np.random.default_rng(5).standard_normal(SHAPE) * 4).astype(np.float32)}


def _c(name, value):
    return init(name, np.array(value, np.float32))


def _expansion(order="product_first", divide="div", opset=12, swap_add=False, three=3.0, extra_output=False):
    add = helper.make_node("Add", ["three", "x"] if swap_add else ["x", "three"], ["s"])
    clip = (helper.make_node("Clip", ["s", "lo", "hi"], ["c"]) if opset >= 11
            else helper.make_node("Clip", ["s"], ["c"], min=0.0, max=6.0))
    def six(src, dst):
        return (helper.make_node("Div", [src, "six"], [dst]) if divide == "div"
                else helper.make_node("Mul", ["sixth", src], [dst]))
    if order == "product_first":   # (x * Clip) / 6
        tail = [helper.make_node("Mul", ["x", "c"], ["m"]), six("m", "y")]
    else:                          # x * (Clip / 6)
        tail = [six("c", "h"), helper.make_node("Mul", ["h", "x"], ["y"])]
    inits = [_c("three", three), _c("six", 6.0), _c("sixth", 1 / 6)] + ([_c("lo", 0.0), _c("hi", 6.0)] if opset >= 11 else [])
    outs = [helper.make_tensor_value_info("y", TP.FLOAT, SHAPE)]
    if extra_output:
        outs.append(helper.make_tensor_value_info("c", TP.FLOAT, SHAPE))
    return model([add, clip] + tail, [helper.make_tensor_value_info("x", TP.FLOAT, SHAPE)], outs, inits, opset=opset)


def _exact():
    x = FEED["x"].astype(np.float64)
    return (x * np.clip(x + 3, 0, 6) / 6).astype(np.float32)


def _check(proto, rewrites, ops):
    assert optimized_ops(proto, "hardswish") == (rewrites, ops)
    data = proto.SerializeToString()
    got = InferenceSession(data, only("hardswish")).run(None, FEED)[0]
    if rewrites:
        assert within(got, _exact())
    else:
        assert np.array_equal(got, InferenceSession(data, off()).run(None, FEED)[0])


@pytest.mark.parametrize("order", ["product_first", "scale_first"])
@pytest.mark.parametrize("divide", ["div", "mul"])
@pytest.mark.parametrize("swap_add", [False, True])
def test_the_expansion_becomes_one_node(order, divide, swap_add):
    proto = _expansion(order, divide, swap_add=swap_add)
    _check(proto, 1, ["HardSwish"])
    m = optimize(onnxkit.load(proto.SerializeToString()), GraphOptimizationLevel.ORT_ENABLE_ALL,
                 disabled=set(PASS_NAMES) - {"hardswish"}).model
    assert m.graph.node[0].domain == "ai.onnxkit"
    assert {o.domain: o.version for o in m.opset_import} == {"": 12, "ai.onnxkit": 1}


def test_clip_bounds_as_attributes_before_11():
    _check(_expansion(opset=10), 1, ["HardSwish"])


def test_from_opset_14_the_fused_node_is_ai_onnx_hardswish():
    proto = _expansion(opset=14)
    _check(proto, 1, ["HardSwish"])
    m = optimize(onnxkit.load(proto.SerializeToString()), GraphOptimizationLevel.ORT_ENABLE_ALL).model
    assert m.graph.node[0].domain == ""


def test_other_constants_or_shared_values_are_left_alone():
    _check(_expansion(three=2.0), 0, ["Add", "Clip", "Mul", "Div"])
    _check(_expansion(extra_output=True), 0, ["Add", "Clip", "Mul", "Div"])
