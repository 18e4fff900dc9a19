"""One-node models for the portable kernels' tests, run on a named backend (onnx.helper: tests only)."""

from __future__ import annotations

from onnx import helper

from onnxkit.dtypes import from_numpy_dtype
from onnxkit.runtime import InferenceSession

#: Every backend a portable kernel runs on (gpu: torch, its CPU device without CUDA).
BACKENDS = ["cpu", "gpu"]


def build(op, opset, inputs, attrs=None):
    """A model of one node ``n0`` (output ``y``, untyped) over ``inputs`` (None: an omitted
    optional input) and its feeds."""
    names = [f"x{k}" if v is not None else "" for k, v in enumerate(inputs)]
    node = helper.make_node(op, names, ["y"], name="n0", **(attrs or {}))
    ins = [helper.make_tensor_value_info(n, int(from_numpy_dtype(v.dtype).tag), list(v.shape))
           for n, v in zip(names, inputs) if v is not None]
    g = helper.make_graph([node], "g", ins, [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString(), {n: v for n, v in zip(names, inputs) if v is not None}


def run(backend, op, opset, inputs, attrs=None):
    """``(output y, the session)`` of the one-node model on ``backend``."""
    model, feed = build(op, opset, inputs, attrs)
    sess = InferenceSession(model, backend, validate=False)
    return sess.run(None, feed)[0], sess
