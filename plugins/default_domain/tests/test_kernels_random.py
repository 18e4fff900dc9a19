"""Random operators, written once (onnxkit_default_domain.kernels.random): drawn on the host from the
node's generator, so a seeded node gives the very same values on both backends, and runs on
``gpu`` without a fallback."""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.runtime import InferenceSession

pytest.importorskip("torch")
A = ir.Attribute.make
F32, F64, I32, I64 = 1, 11, 6, 7


def vi(name, elem, shape=None):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def sessions(op, inputs, out_type, **attrs):
    """The node planned on cpu and on gpu (asserting it runs on torch there)."""
    n = ir.Node([i[0] for i in inputs], ["y"], name="r", op_type=op, attribute=[A(k, v) for k, v in attrs.items()])
    g = ir.Graph(node=[n], name="g", input=[vi(*i) for i in inputs], output=[vi("y", *out_type)])
    m = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 22)], graph=g)
    cpu, gpu = InferenceSession(m, "cpu"), InferenceSession(m, "gpu")
    assert gpu.fallbacks == []
    return cpu, gpu


@pytest.mark.parametrize("op,attrs", [("RandomNormal", dict(mean=2.0, scale=0.5)), ("RandomUniform", dict(low=-1.0, high=3.0))])
def test_seeded_generators_give_one_stream_on_both_backends(op, attrs):
    cpu, gpu = sessions(op, [], (F64, [3, 4]), shape=[3, 4], dtype=F64, seed=7.0, **attrs)
    for _ in range(2):  # the stream continues across runs, alike on both
        a, b = cpu.run(None, {})[0], gpu.run(None, {})[0]
        assert a.dtype == b.dtype == np.float64 and a.shape == (3, 4)
        np.testing.assert_array_equal(a, b)
    if op == "RandomUniform":
        assert a.min() >= -1.0 and a.max() < 3.0


def test_like_operators_take_the_input_s_shape_and_type():
    x = np.zeros((2, 5), np.float32)
    cpu, gpu = sessions("RandomUniformLike", [("x", F32, [2, 5])], (F32, [2, 5]), seed=3.0)
    a, b = cpu.run(None, {"x": x})[0], gpu.run(None, {"x": x})[0]
    assert a.dtype == b.dtype == np.float32 and b.shape == (2, 5)
    np.testing.assert_array_equal(a, b)


def test_multinomial_and_bernoulli_on_both_backends():
    logits = np.log(np.array([[0.0001, 0.9998, 0.0001], [0.5, 0.0, 0.5]], np.float32) + 1e-30)
    cpu, gpu = sessions("Multinomial", [("x", F32, [2, 3])], (I64, [2, 6]), sample_size=6, dtype=I64, seed=1.0)
    a, b = cpu.run(None, {"x": logits})[0], gpu.run(None, {"x": logits})[0]
    assert b.dtype == np.int64 and b.shape == (2, 6)
    np.testing.assert_array_equal(a, b)
    assert set(b[1].tolist()) <= {0, 2}          # class 1 has probability 0 in row 1
    p = np.array([0.0, 1.0, 0.0, 1.0], np.float32)
    cpu, gpu = sessions("Bernoulli", [("p", F32, [4])], (F32, [4]), seed=5.0)
    a, b = cpu.run(None, {"p": p})[0], gpu.run(None, {"p": p})[0]
    assert b.dtype == np.float32 and b.tolist() == a.tolist() == [0.0, 1.0, 0.0, 1.0]
