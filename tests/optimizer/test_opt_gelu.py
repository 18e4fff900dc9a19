"""The ``gelu`` pass: the GELU expansions exporters emit become one Gelu node (ai.onnx from
opset 20, ai.onnxkit below), with results within tolerance of the expansion evaluated exactly
(float64).  The expansion evaluated node by node in float32 is not that accurate: in the
negative tail ``1 + erf(x / sqrt 2)`` cancels (at x = -3.8 it is off by 1.8e-3 relative), so
a fused result is compared with the exact function, a refused rewrite with the plain run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optimizer_cases import TP, helper, init, model, off, only, optimized_ops, within

import onnxkit
from onnxkit import InferenceSession
from onnxkit.runtime.optimizer import PASS_NAMES, optimize
from onnxkit.runtime.options import GraphOptimizationLevel

SHAPE = [2, 3, 16]
RNG = np.random.default_rng(7)
FEED = {"x": (RNG.standard_normal(SHAPE) * 3).astype(np.float32)}


def _exact(mode: str) -> np.ndarray:
    """GELU of the feed in float64, rounded to float32: what the expansion computes exactly."""
    x = FEED["x"].astype(np.float64)
    if mode == "tanh":
        y = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    else:
        y = 0.5 * x * np.array([math.erfc(-v / math.sqrt(2)) for v in x.ravel()]).reshape(x.shape)
    return y.astype(np.float32)


def check_pass(proto, feed, pass_name, rewrites, ops, mode=None):
    """``gelu`` rewrites ``proto`` ``rewrites`` times into ``ops``; a fused model's result meets
    the exact function (``mode``), a model left alone gives the plain run's result exactly."""
    assert optimized_ops(proto, pass_name) == (rewrites, ops)
    data = proto.SerializeToString()
    got = InferenceSession(data, only(pass_name)).run(None, feed)[0]
    if rewrites:
        assert within(got, _exact(mode))
    else:
        assert np.array_equal(got, InferenceSession(data, off()).run(None, feed)[0])


def _c(name, value):
    return init(name, np.array(value, np.float32))


def _erf(order: str, scale: str = "div", opset: int = 17, extra_output: bool = False, sqrt2=math.sqrt(2.0)):
    """An exact GELU expansion; ``order``: where the 0.5 and the x are multiplied in."""
    nodes = [helper.make_node("Div", ["x", "s"], ["t"]) if scale == "div" else helper.make_node("Mul", ["s", "x"], ["t"]),
             helper.make_node("Erf", ["t"], ["e"]), helper.make_node("Add", ["one", "e"], ["p"])]
    if order == "x_then_half":
        nodes += [helper.make_node("Mul", ["x", "p"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    elif order == "half_x_first":
        nodes += [helper.make_node("Mul", ["half", "x"], ["h"]), helper.make_node("Mul", ["h", "p"], ["y"])]
    else:  # half_then_x
        nodes += [helper.make_node("Mul", ["p", "half"], ["m"]), helper.make_node("Mul", ["m", "x"], ["y"])]
    inits = [_c("s", sqrt2 if scale == "div" else 1 / sqrt2), _c("one", 1.0), _c("half", 0.5)]
    outs = [helper.make_tensor_value_info("y", TP.FLOAT, SHAPE)]
    if extra_output:
        outs.append(helper.make_tensor_value_info("e", TP.FLOAT, SHAPE))
    return model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, SHAPE)], outs, inits, opset=opset)


def _tanh(cube: str = "pow", cubic=0.044715):
    """The tanh GELU expansion (GPT-2's NewGELU), x^3 as Pow or as two products; ``jax``:
    jax2tf's cubic term ``x * (x * (k * x))``, ``paired``: ``(k * x) * (x * x)``, ``four``: one
    x too many (``x * (x * (x * (k * x)))``, not GELU)."""
    if cube == "pow":
        nodes = [helper.make_node("Pow", ["x", "three"], ["x3"]), helper.make_node("Mul", ["x3", "k"], ["q"])]
    elif cube == "products":
        nodes = [helper.make_node("Mul", ["x", "x"], ["x2"]), helper.make_node("Mul", ["x2", "x"], ["x3"]),
                 helper.make_node("Mul", ["x3", "k"], ["q"])]
    elif cube == "jax":
        nodes = [helper.make_node("Mul", ["k", "x"], ["kx"]), helper.make_node("Mul", ["x", "kx"], ["kx2"]),
                 helper.make_node("Mul", ["x", "kx2"], ["q"])]
    elif cube == "paired":
        nodes = [helper.make_node("Mul", ["k", "x"], ["kx"]), helper.make_node("Mul", ["x", "x"], ["x2"]),
                 helper.make_node("Mul", ["kx", "x2"], ["q"])]
    else:
        nodes = [helper.make_node("Mul", ["k", "x"], ["kx"]), helper.make_node("Mul", ["x", "kx"], ["kx2"]),
                 helper.make_node("Mul", ["x", "kx2"], ["kx3"]), helper.make_node("Mul", ["x", "kx3"], ["q"])]
    nodes += [helper.make_node("Add", ["x", "q"], ["r"]),
              helper.make_node("Mul", ["r", "c"], ["u"]), helper.make_node("Tanh", ["u"], ["t"]),
              helper.make_node("Add", ["t", "one"], ["p"]), helper.make_node("Mul", ["x", "half"], ["h"]),
              helper.make_node("Mul", ["h", "p"], ["y"])]
    inits = [_c("three", 3.0), _c("k", cubic), _c("c", math.sqrt(2 / math.pi)), _c("one", 1.0), _c("half", 0.5)]
    return model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, SHAPE)],
                 [helper.make_tensor_value_info("y", TP.FLOAT, SHAPE)], inits)


def _fused_node(proto):
    m = optimize(onnxkit.load(proto.SerializeToString()), GraphOptimizationLevel.ORT_ENABLE_ALL,
                 disabled=set(PASS_NAMES) - {"gelu"}).model
    (node,) = m.graph.node
    return node, {o.domain: o.version for o in m.opset_import}


@pytest.mark.parametrize("order", ["x_then_half", "half_x_first", "half_then_x"])
@pytest.mark.parametrize("scale", ["div", "mul"])
def test_exact_gelu_expansions_become_one_node(order, scale):
    proto = _erf(order, scale)
    check_pass(proto, FEED, "gelu", 1, ["Gelu"], "none")
    node, opsets = _fused_node(proto)
    assert (node.domain, node.attr("approximate")) == ("ai.onnxkit", b"none")
    assert opsets == {"": 17, "ai.onnxkit": 1}


def test_from_opset_20_the_fused_node_is_ai_onnx_gelu():
    proto = _erf("x_then_half", opset=20)
    check_pass(proto, FEED, "gelu", 1, ["Gelu"], "none")
    node, opsets = _fused_node(proto)
    assert node.domain == "" and opsets == {"": 20}


@pytest.mark.parametrize("cube", ["pow", "products", "jax", "paired"])
def test_tanh_gelu_expansions_become_one_node(cube):
    proto = _tanh(cube)
    check_pass(proto, FEED, "gelu", 1, ["Gelu"], "tanh")
    node, _ = _fused_node(proto)
    assert node.attr("approximate") == b"tanh"


def test_an_intermediate_read_elsewhere_is_left_alone():
    check_pass(_erf("x_then_half", extra_output=True), FEED, "gelu", 0, ["Div", "Erf", "Add", "Mul", "Mul"])


def test_other_constants_are_left_alone():
    check_pass(_erf("x_then_half", sqrt2=1.5), FEED, "gelu", 0, ["Div", "Erf", "Add", "Mul", "Mul"])
    check_pass(_tanh(cubic=0.05), FEED, "gelu", 0, ["Pow", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Mul"])
    check_pass(_tanh("jax", cubic=0.05), FEED, "gelu", 0, ["Mul"] * 3 + ["Add", "Mul", "Tanh", "Add", "Mul", "Mul"])


def test_a_cubic_term_of_another_power_is_left_alone():
    check_pass(_tanh("four"), FEED, "gelu", 0, ["Mul"] * 4 + ["Add", "Mul", "Tanh", "Add", "Mul", "Mul"])


def test_a_cubic_term_whose_inner_product_is_read_elsewhere_is_left_alone():
    proto = _tanh("jax")
    proto.graph.output.append(helper.make_tensor_value_info("kx2", TP.FLOAT, SHAPE))
    ops = ["Mul"] * 3 + ["Add", "Mul", "Tanh", "Add", "Mul", "Mul"]
    assert optimized_ops(proto, "gelu") == (0, ops)


def test_the_basic_level_does_not_fuse():
    m = onnxkit.load(_erf("x_then_half").SerializeToString())
    assert optimize(m, GraphOptimizationLevel.ORT_ENABLE_BASIC).rewrites.get("gelu", 0) == 0
    assert optimize(m, GraphOptimizationLevel.ORT_ENABLE_EXTENDED).rewrites["gelu"] == 1


def test_a_product_with_another_tensor_is_left_alone():
    nodes = [helper.make_node("Div", ["x", "s"], ["t"]), helper.make_node("Erf", ["t"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["z", "p"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    vi = [helper.make_tensor_value_info(n, TP.FLOAT, SHAPE) for n in ("x", "z")]
    proto = model(nodes, vi, [helper.make_tensor_value_info("y", TP.FLOAT, SHAPE)],
                  [_c("s", math.sqrt(2)), _c("one", 1.0), _c("half", 0.5)])
    check_pass(proto, dict(FEED, z=FEED["x"][::-1].copy()), "gelu", 0, ["Div", "Erf", "Add", "Mul", "Mul"])
