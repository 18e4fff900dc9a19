"""The ``channel_affine`` pass: a per-channel Mul/Add after a Conv or a BatchNormalization folded in."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer_cases import TP, check_pass, helper, init, model, optimized_ops

RNG = np.random.default_rng(21)
C = 4


def _bn_scale(dtype=np.float32, ops=("Mul", "Add"), shape=(C, 1, 1), unsqueezed=False, producer="BatchNormalization"):
    """x -> producer -> Mul(s) -> Add(t) -> Relu, the scale and shift of ``shape`` (Caffe's Scale layer)."""
    tag = TP.FLOAT if dtype == np.float32 else TP.DOUBLE
    x = helper.make_tensor_value_info("x", tag, [2, C, 5, 5])
    y = helper.make_tensor_value_info("y", tag, [2, C, 5, 5] if producer != "Conv" else [2, C, 3, 3])
    inits = [init("scale", RNG.uniform(0.5, 2, C).astype(dtype)), init("bias", RNG.standard_normal(C).astype(dtype)),
             init("mean", RNG.standard_normal(C).astype(dtype)), init("var", RNG.uniform(0.1, 3, C).astype(dtype)),
             init("W", RNG.standard_normal((C, C, 3, 3)).astype(dtype))]
    if producer == "Conv":
        nodes = [helper.make_node("Conv", ["x", "W"], ["p"])]
    else:
        nodes = [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["p"])]
    current = "p"
    for op in ops:
        size = C if unsqueezed else int(np.prod(shape))
        value = RNG.uniform(0.5, 2, size) if op == "Mul" else RNG.standard_normal(size)
        if unsqueezed:      # what the Caffe exporters write: Unsqueeze of a (C,) constant
            inits.append(init(f"{op}_v", value.astype(dtype)))
            inits.append(init(f"{op}_axes", np.array([1, 2], np.int64)))
            nodes.append(helper.make_node("Unsqueeze", [f"{op}_v", f"{op}_axes"], [f"{op}_c"]))
        else:
            inits.append(init(f"{op}_c", value.reshape(shape).astype(dtype)))
        nodes.append(helper.make_node(op, [current, f"{op}_c"], [f"{op}_out"]))
        current = f"{op}_out"
    nodes.append(helper.make_node("Relu", [current], ["y"]))
    return model(nodes, [x], [y], inits), {"x": RNG.standard_normal((2, C, 5, 5)).astype(dtype)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_and_shift_folded_into_batch_norm(dtype):
    proto, feed = _bn_scale(dtype)
    check_pass(proto, feed, "channel_affine", 1, ["BatchNormalization", "Relu"],
               oracle="onnxruntime" if dtype == np.float32 else "reference")


def test_unsqueezed_constants_folded_and_unused_unsqueeze_dropped():
    proto, feed = _bn_scale(unsqueezed=True)
    got, ops = optimized_ops(proto, "channel_affine")
    assert got == 1 and ops.count("Mul") == 0 and ops.count("Add") == 0 and "BatchNormalization" in ops
    check_pass(proto, feed, "channel_affine", 1, ops)


@pytest.mark.parametrize("ops,left", [(("Mul",), ["Conv", "Relu"]), (("Add",), ["Conv", "Relu"]),
                                      (("Mul", "Add"), ["Conv", "Relu"])])
def test_folded_into_conv(ops, left):
    proto, feed = _bn_scale(ops=ops, producer="Conv")
    check_pass(proto, feed, "channel_affine", 1, left)


@pytest.mark.parametrize("shape", [(1, C, 1, 1), (1,)])
def test_full_rank_and_scalar_constants_fold(shape):
    proto, feed = _bn_scale(shape=shape)
    check_pass(proto, feed, "channel_affine", 1, ["BatchNormalization", "Relu"])


@pytest.mark.parametrize("shape", [(C, 5, 1), (1, 1, 5), (1, C, 5, 1)])
def test_constants_varying_along_other_axes_not_folded(shape):
    proto, _ = _bn_scale(shape=shape, ops=("Mul",))
    assert optimized_ops(proto, "channel_affine") == (0, ["BatchNormalization", "Mul", "Relu"])


def test_producer_output_read_elsewhere_not_folded():
    proto, _ = _bn_scale(ops=("Mul",))
    proto.graph.node.append(helper.make_node("Abs", ["p"], ["z"]))
    proto.graph.output.append(helper.make_tensor_value_info("z", TP.FLOAT, [2, C, 5, 5]))
    assert optimized_ops(proto, "channel_affine")[0] == 0
