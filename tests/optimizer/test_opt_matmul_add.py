"""The ``matmul_add`` pass: ``Add(MatMul(A, W), C)`` with constant W and C becomes one Gemm."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer_cases import TP, check_pass, helper, init, model

RNG = np.random.default_rng(3)


def _mm_add(c_shape, a_shape=(5, 4), swap=False):
    a = helper.make_tensor_value_info("a", TP.FLOAT, list(a_shape))
    out_shape = list(a_shape[:-1]) + [3]
    y = helper.make_tensor_value_info("y", TP.FLOAT, out_shape)
    add_in = ["c", "m"] if swap else ["m", "c"]
    nodes = [helper.make_node("MatMul", ["a", "W"], ["m"]), helper.make_node("Add", add_in, ["y"])]
    inits = [init("W", RNG.standard_normal((4, 3)).astype(np.float32)),
             init("c", RNG.standard_normal(c_shape).astype(np.float32))]
    return model(nodes, [a], [y], inits), {"a": RNG.standard_normal(a_shape).astype(np.float32)}


@pytest.mark.parametrize("c_shape", [(3,), (1, 3), (1,)])
@pytest.mark.parametrize("swap", [False, True])
def test_fused_into_gemm(c_shape, swap):
    proto, feed = _mm_add(c_shape, swap=swap)
    check_pass(proto, feed, "matmul_add", 1, ["Gemm"])


def test_bias_that_would_broadcast_rows_not_fused_when_three_d():
    proto, feed = _mm_add((3,), a_shape=(2, 5, 4))  # A of rank 3: Gemm takes rank 2 only
    check_pass(proto, feed, "matmul_add", 0, ["MatMul", "Add"])


def test_full_bias_not_fused():
    proto, feed = _mm_add((5, 3))  # [M, N] bias: left alone (only [N]-like biases are rewritten)
    check_pass(proto, feed, "matmul_add", 0, ["MatMul", "Add"])
