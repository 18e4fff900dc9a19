"""One-node models for the portable kernel tests: built with onnx's helper, run on a backend
(on gpu the node must run on torch, not on the cpu fallback), compared with onnx.reference.

The node is named ``node0``; inputs ``x0, x1, ...`` (None in ``inputs``: an omitted optional
input); outputs ``y0, y1, ...``.
"""

from __future__ import annotations

import numpy as np
from onnx import helper, load_from_string
from onnx.reference import ReferenceEvaluator

from onnxkit.runtime import InferenceSession

BACKENDS = ["cpu", "gpu"]


def one_node(op, opset, inputs: list, attrs: dict, n_out: int = 1, ir_version: int = 10):
    """``(serialized model, feeds)`` of one node ``op`` of ``opset`` on ``inputs``."""
    names = [f"x{k}" if v is not None else "" for k, v in enumerate(inputs)]
    while names and not names[-1]:
        names.pop()
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, name="node0", **attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
           for n, v in zip(names, inputs) if n]
    graph = helper.make_graph([node], "g", ins, [helper.make_empty_tensor_value_info(o) for o in outs])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    return m.SerializeToString(), {n: v for n, v in zip(names, inputs) if n}


def run(backend, op, opset, inputs, attrs=None, n_out=1) -> list:
    """The node's outputs on ``backend``; on gpu, assert it is not planned on the fallback."""
    model, feeds = one_node(op, opset, inputs, attrs or {}, n_out)
    sess = InferenceSession(model, backend, validate=False)
    if backend == "gpu":
        assert not [f for f in sess.fallbacks if f.node == "node0"], sess.fallbacks
    return sess.run(None, feeds)


def reference(op, opset, inputs, attrs=None, n_out=1) -> list:
    """What onnx.reference computes for the same node."""
    model, feeds = one_node(op, opset, inputs, attrs or {}, n_out)
    return ReferenceEvaluator(load_from_string(model)).run(None, feeds)


def assert_close(got: list, want: list, rtol=1e-5, atol=1e-6) -> None:
    """Same number of outputs, each of the same dtype and shape and close in value."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


def check(backend, op, opset, inputs, attrs=None, n_out=1, rtol=1e-5, atol=1e-6) -> list:
    """Run on ``backend`` and compare with onnx.reference; returns the outputs."""
    got = run(backend, op, opset, inputs, attrs, n_out)
    assert_close(got, reference(op, opset, inputs, attrs, n_out), rtol, atol)
    return got
