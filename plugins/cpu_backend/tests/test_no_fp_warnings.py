"""Products with an inf times a zero give NaN, as onnxruntime does, without numpy's
RuntimeWarning ("invalid value encountered in matmul") reaching the caller: the cpu MatMul,
Gemm and Conv kernels (and the Conv's fused epilogues) run with numpy's floating-point
warnings off."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper  # noqa: E402

from onnxkit import InferenceSession  # noqa: E402

A = np.array([[np.inf, 1.0], [0.0, 2.0]], np.float32)
B = np.array([[0.0, 1.0], [1.0, np.inf]], np.float32)
X = np.zeros((1, 2, 4, 4), np.float32)
X[0, 0, 0, 0] = np.inf
R = np.ones((1, 3, 4, 4), np.float32)


def run(nodes, feed):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TP.FLOAT, None) for n in feed],
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    s = InferenceSession(model.SerializeToString(), validate=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # any warning fails the test
        return s.run(None, feed)[0]


@pytest.mark.parametrize("case", ["matmul", "gemm", "conv3x3", "conv1x1", "conv_relu", "conv_add_relu"])
def test_inf_times_zero_is_nan_without_a_warning(case):
    if case == "matmul":
        y = run([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": A, "b": B})
    elif case == "gemm":
        y = run([helper.make_node("Gemm", ["a", "b", "c"], ["y"], beta=1.0)], {"a": A, "b": B, "c": -np.full((2, 2), np.inf, np.float32)})
    else:
        k = 1 if case == "conv1x1" else 3
        conv = helper.make_node("Conv", ["x", "w"], ["c" if case.startswith("conv_") else "y"], pads=[k // 2] * 4)
        feed = {"x": X, "w": np.zeros((3, 2, k, k), np.float32)}
        nodes = [conv]
        if case == "conv_relu":
            nodes.append(helper.make_node("Relu", ["c"], ["y"]))
        if case == "conv_add_relu":
            nodes += [helper.make_node("Add", ["c", "r"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
            feed["r"] = R
        y = run(nodes, feed)
    assert np.isnan(y).any()
