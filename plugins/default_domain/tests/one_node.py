"""One-node models for the portable kernels' tests, run on a named backend (onnx.helper: tests only)."""

from __future__ import annotations

import numpy as np
from onnx import helper, load_from_string
from onnx.reference import ReferenceEvaluator

from onnxkit.dtypes import from_numpy_dtype
from onnxkit.runtime import InferenceSession

#: Every backend a portable kernel runs on (gpu: torch, its CPU device without CUDA).
BACKENDS = ["cpu", "gpu"]


def build(op, opset, inputs, attrs=None, n_out=1):
    """A model of one node ``n0`` (outputs ``y``, ``y1``... ``n_out`` of them, untyped) over
    ``inputs`` (None: an omitted optional input) and its feeds."""
    names = [f"x{k}" if v is not None else "" for k, v in enumerate(inputs)]
    while names and not names[-1]:
        names.pop()
    outs = ["y"] + [f"y{k}" for k in range(1, n_out)]
    node = helper.make_node(op, names, outs, name="n0", **(attrs or {}))
    ins = [helper.make_tensor_value_info(n, int(from_numpy_dtype(v.dtype).tag), list(v.shape))
           for n, v in zip(names, inputs) if v is not None]
    g = helper.make_graph([node], "g", ins, [helper.make_empty_tensor_value_info(o) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString(), {n: v for n, v in zip(names, inputs) if v is not None}


def run(backend, op, opset, inputs, attrs=None):
    """``(output y, the session)`` of the one-node model on ``backend``."""
    model, feed = build(op, opset, inputs, attrs)
    sess = InferenceSession(model, backend, validate=False)
    return sess.run(None, feed)[0], sess


def run_outputs(backend, op, opset, inputs, attrs=None, n_out=1):
    """``(every output, the session)`` of the one-node model with ``n_out`` outputs on ``backend``."""
    model, feed = build(op, opset, inputs, attrs, n_out)
    sess = InferenceSession(model, backend, validate=False)
    return sess.run(None, feed), sess


def outputs(backend, op, opset, inputs, attrs=None, n_out=1) -> list:
    """Every output of the one-node model on ``backend``; on gpu, first assert that ``n0`` runs
    on torch, not on the cpu fallback."""
    model, feed = build(op, opset, inputs, attrs, n_out)
    sess = InferenceSession(model, backend, validate=False)
    if backend == "gpu":
        assert not [f for f in sess.fallbacks if f.node == "n0"], sess.fallbacks
    return sess.run(None, feed)


def reference(op, opset, inputs, attrs=None, n_out=1) -> list:
    """What onnx.reference computes for the same model."""
    model, feed = build(op, opset, inputs, attrs, n_out)
    return ReferenceEvaluator(load_from_string(model)).run(None, feed)


def assert_close(got: list, want: list, rtol=1e-5, atol=1e-6) -> None:
    """As many outputs, each of the same dtype and shape and close in value."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)
