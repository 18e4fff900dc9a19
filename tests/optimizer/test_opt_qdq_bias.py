"""The qdq pass's biases that are not a DequantizeLinear of the product's scale
(onnxkit/runtime/optimizer/qdq.py ``_float_bias``): a float32 constant bias, and a bias quantized
with another node's scale (torch's exporter shares one bias tensor between nodes, onnxruntime's
quantizer quantizes it once, for its first reader), fuse where their values are integers of
``x_scale * w_scale`` under the DequantizeLinear formula (``float32(k) * scale``), the integers a
new int32 initializer; the fused model agrees with the unoptimized one and onnxruntime (its
optimizer off) within one quantization step.  Near misses (a value off that grid, a bias of
another length) stay as they are."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from optimizer_cases import helper, init  # noqa: E402
from test_opt_qdq import Graph, _f32, _fires, _left_alone, every_rule  # noqa: E402,F401

N = 5


def _gemm_with(bias_kind: str, off_grid: bool = False, per_column: bool = False):
    """``Q(Gemm(DQ(x), DQ(w), bias))`` with the bias ``kind``: ``float`` (a float32 initializer),
    ``shared`` (a DQ of int32 whose scale is another product's), ``shared_zero`` (the same, all 0)."""
    g = Graph([3, 6])
    a = g.dq("xq", "xq_s", "xq_z", "ad")
    b = g.weight("w", (6, N), 1 if per_column else None)
    product = (np.float32(0.021) * g.scales["w"]).astype(np.float32)
    k = g.rng.integers(-400, 400, N)
    if bias_kind == "float":
        value = (k.astype(np.float32) * product).astype(np.float32)
        if off_grid:
            value[2] = np.float32(value[2] + product.reshape(-1)[0] * np.float32(0.5))
        g.inits.append(init("c", value))
        c = "c"
    else:
        other = np.float32(0.021 * 0.013)         # the scale of the node the quantizer made it for
        ints = np.zeros(N, np.int32) if bias_kind == "shared_zero" else g.rng.integers(-300, 300, N).astype(np.int32)
        g.inits += [init("c_q", ints), _f32("c_s", other), init("c_z", np.zeros((), np.int32))]
        c = g.dq("c_q", "c_s", "c_z", "c")
    g.nodes.append(helper.make_node("Gemm", [a, b, c], ["m"]))
    g.output(g.quantize("m", "mq", 0.03), [3, N])
    return g


@pytest.mark.parametrize("per_column", [False, True])
def test_float_bias_on_the_product_grid_fuses(per_column):
    _fires(_gemm_with("float", per_column=per_column), 1, ["QuantizeLinear", "QGemm", "DequantizeLinear"])


def test_shared_zero_bias_of_another_scale_fuses():
    _fires(_gemm_with("shared_zero"), 1, ["QuantizeLinear", "QGemm", "DequantizeLinear"])


def test_float_bias_off_the_grid_is_not_fused():
    _left_alone(_gemm_with("float", off_grid=True))


def test_shared_nonzero_bias_of_another_scale_is_not_fused():
    """Integers of 0.021 * 0.013 are not integers of 0.021 * 0.011 (the product's scale)."""
    _left_alone(_gemm_with("shared"))


def test_conv_float_bias_fuses_and_one_of_another_length_does_not():
    def conv(length):
        g = Graph([2, 3, 7, 7])
        x = g.dq("xq", "xq_s", "xq_z", "xd")
        w = g.weight("w", (4, 3, 3, 3))
        g.inits.append(init("b", np.zeros(length, np.float32)))
        g.nodes.append(helper.make_node("Conv", [x, w, "b"], ["c"], pads=[1, 1, 1, 1]))
        g.output(g.quantize("c", "cq", 0.06), [2, 4, 7, 7])
        return g

    _fires(conv(4), 1, ["QuantizeLinear", "QLinearConv", "DequantizeLinear"])
    _left_alone(conv(1), runs=False)
