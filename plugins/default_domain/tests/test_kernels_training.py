"""ai.onnx.preview.training, written once: the optimizers (kernels.training) run on torch on
``gpu``; Gradient (kernels.gradient) is host_only and runs on the gpu backend's cpu fallback.
Expected values are hand-computed."""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.runtime import InferenceSession
from one_node import BACKENDS

pytest.importorskip("torch")
A = ir.Attribute.make
F32, F64, I64 = 1, 11, 7
TRAIN = "ai.onnx.preview.training"


def vi(name, elem, shape=None):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def session(nodes, inputs, outputs, backend):
    g = ir.Graph(node=nodes, name="g", input=inputs, output=outputs)
    m = ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 13), ir.OperatorSetId(TRAIN, 1)], graph=g)
    return InferenceSession(m, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_momentum_and_adagrad_update_on_the_backend(backend):
    n = ir.Node(["r", "t", "x", "g", "v"], ["x2", "v2"], op_type="Momentum", domain=TRAIN, name="mom",
                attribute=[A("alpha", 0.5), A("beta", 1.0), A("norm_coefficient", 0.0), A("mode", "standard")])
    sess = session([n], [vi("r", F32, []), vi("t", I64, []), vi("x", F32, [2]), vi("g", F32, [2]), vi("v", F32, [2])],
                   [vi("x2", F32, [2]), vi("v2", F32, [2])], backend)
    assert sess.fallbacks == []
    x2, v2 = sess.run(None, {"r": np.array(0.1, np.float32), "t": np.array(1), "x": np.array([1.0, 2.0], np.float32),
                             "g": np.array([0.5, -1.0], np.float32), "v": np.array([2.0, 0.0], np.float32)})
    assert v2.dtype == np.float32 and v2.tolist() == [1.5, -1.0]          # 0.5 * v + g
    np.testing.assert_allclose(x2, [0.85, 2.1], rtol=1e-6)                # x - 0.1 * v2
    n = ir.Node(["r", "t", "x", "g", "h"], ["x2", "h2"], op_type="Adagrad", domain=TRAIN, name="ada",
                attribute=[A("epsilon", 0.0)])
    sess = session([n], [vi("r", F32, []), vi("t", I64, []), vi("x", F64, []), vi("g", F64, []), vi("h", F64, [])],
                   [vi("x2", F64, []), vi("h2", F64, [])], backend)
    assert sess.fallbacks == []
    x2, h2 = sess.run(None, {"r": np.array(1.0, np.float32), "t": np.array(0), "x": np.array(1.0), "g": np.array(3.0),
                             "h": np.array(16.0)})
    assert isinstance(x2, np.ndarray) and x2.shape == () and float(h2) == 25.0 and float(x2) == 1.0 - 3.0 / 5.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_runs_on_the_cpu_fallback_on_gpu(backend):
    """y = x * x: dy/dx = 2x."""
    nodes = [ir.Node(["x", "x"], ["y"], op_type="Mul", name="sq"),
             ir.Node(["x"], ["dx"], op_type="Gradient", domain=TRAIN, name="grad",
                     attribute=[A("xs", ["x"]), A("y", "y")])]
    sess = session(nodes, [vi("x", F32, [3])], [vi("dx", F32, [3])], backend)
    assert [f.op_type for f in sess.fallbacks] == (["Gradient"] if backend == "gpu" else [])
    (dx,) = sess.run(None, {"x": np.array([1.0, -2.0, 0.5], np.float32)})
    assert dx.dtype == np.float32 and dx.tolist() == [2.0, -4.0, 1.0]
