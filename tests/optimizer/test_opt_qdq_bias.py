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


def _gemm_with(bias_kind: str, off_grid: bool = False, per_column: bool = False, bias_per_channel: bool = False):
    """``Q(Gemm(DQ(x), DQ(w), bias))`` with the bias ``kind``: ``float`` (a float32 initializer),
    ``shared`` (a DQ of int32 whose scale is another product's), ``shared_zero`` (the same, all 0);
    ``bias_per_channel``: the shared bias's DQ per channel (axis 0, the other product's
    ``x_scale * w_scale[m]``, as the per-channel quantizer writes it)."""
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
        if bias_per_channel:
            others = (np.float32(0.021) * g.rng.uniform(0.005, 0.02, N)).astype(np.float32)
            g.inits += [init("c_q", ints), init("c_s", others), init("c_z", np.zeros(N, np.int32))]
            g.nodes.append(helper.make_node("DequantizeLinear", ["c_q", "c_s", "c_z"], ["c"], axis=0))
            c = "c"
        else:
            g.inits += [init("c_q", ints), _f32("c_s", other), init("c_z", np.zeros((), np.int32))]
            c = g.dq("c_q", "c_s", "c_z", "c")
    g.nodes.append(helper.make_node("Gemm", [a, b, c], ["m"]))
    g.output(g.quantize("m", "mq", 0.03), [3, N])
    return g


@pytest.mark.parametrize("per_column", [False, True])
def test_float_bias_on_the_product_grid_fuses(per_column):
    _fires(_gemm_with("float", per_column=per_column), 1, ["QuantizeLinear", "QGemm", "DequantizeLinear"])


@pytest.mark.parametrize("bias_per_channel", [False, True])
@pytest.mark.parametrize("per_column", [False, True])
def test_shared_zero_bias_of_another_scale_fuses(per_column, bias_per_channel):
    """A zero bias is integers of any scale: fused, its DQ per tensor or per channel."""
    _fires(_gemm_with("shared_zero", per_column=per_column, bias_per_channel=bias_per_channel), 1,
           ["QuantizeLinear", "QGemm", "DequantizeLinear"])


def test_float_bias_off_the_grid_is_not_fused():
    _left_alone(_gemm_with("float", off_grid=True))


@pytest.mark.parametrize("bias_per_channel", [False, True])
def test_shared_nonzero_bias_of_another_scale_is_not_fused(bias_per_channel):
    """Integers of 0.021 * 0.013 (or of per-channel scales of another product) are not integers
    of the product's scale."""
    _left_alone(_gemm_with("shared", per_column=bias_per_channel, bias_per_channel=bias_per_channel))


def test_shared_per_channel_bias_on_the_product_grid_fuses():
    """A per-channel bias DQ of another product's scales whose dequantized values are integers of
    this product's (each value a multiple of both): fused, the new integers its own."""
    g = _gemm_with("shared", per_column=True, bias_per_channel=True)
    product = (np.float32(0.021) * g.scales["w"]).astype(np.float32)
    k = g.rng.integers(-40, 40, N).astype(np.int32)
    values = (k.astype(np.float32) * product).astype(np.float32)
    g.inits = [t for t in g.inits if t.name not in ("c_q", "c_s")]
    g.inits += [init("c_q", k * 2), init("c_s", (product / np.float32(2)).astype(np.float32))]
    assert np.array_equal((k * 2).astype(np.float32) * (product / np.float32(2)), values)
    _fires(g, 1, ["QuantizeLinear", "QGemm", "DequantizeLinear"])


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
