"""Shared checks of the optimizer pass tests (tests/test_opt_*.py).

:func:`check_pass` builds a session with only one pass enabled and one with the optimizer off,
and compares both with onnxruntime (its own optimizer off, so the oracle is the model as
written), within the tolerances of :mod:`onnxkit.tolerances`.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnxkit  # noqa: E402
from onnxkit import InferenceSession, SessionOptions  # noqa: E402
from onnxkit.runtime.optimizer import PASS_NAMES, optimize  # noqa: E402
from onnxkit.runtime.options import GraphOptimizationLevel  # noqa: E402
from onnxkit.tolerances import tolerance_for  # noqa: E402

helper = onnx.helper
TP = onnx.TensorProto


def within(actual, expected) -> bool:
    """``actual`` meets ``expected`` at onnxkit's guaranteed tolerance for its element type."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    tol = tolerance_for(expected.dtype)
    if tol is None or tol.exact:
        return bool(np.array_equal(actual, expected))
    return bool(np.all(np.abs(actual.astype(np.float64) - expected) <= tol.atol + tol.rtol * np.abs(expected)))


def model(nodes, inputs, outputs, initializers=(), opset=17, ir_version=8):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)


def init(name, array):
    return onnx.numpy_helper.from_array(np.asarray(array), name)


def only(pass_name: str) -> SessionOptions:
    """Session options running ``pass_name`` alone."""
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", ",".join(p for p in PASS_NAMES if p != pass_name))
    return so


def off() -> SessionOptions:
    so = SessionOptions()
    so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    return so


def optimized_ops(proto, pass_name: str):
    """``(rewrites by the pass, op types of the optimized graph)`` with ``pass_name`` alone."""
    m = onnxkit.load(proto.SerializeToString())
    r = optimize(m, GraphOptimizationLevel.ORT_ENABLE_ALL, disabled=set(PASS_NAMES) - {pass_name})
    report = onnxkit.check_model(r.model)
    assert report.ok and not report.warnings, [str(d) for d in report.diagnostics]
    return r.rewrites.get(pass_name, 0), [n.op_type for n in r.model.graph.node]


def check_pass(proto, feed: dict, pass_name: str, rewrites: int, ops: list, oracle: str = "onnxruntime") -> None:
    """``pass_name`` rewrites ``proto`` ``rewrites`` times into ``ops``, and the optimized session's
    outputs equal the unoptimized session's and the oracle's: onnxruntime, or ``oracle="reference"``
    (onnx.reference) where onnxruntime lacks a kernel (float64 Conv)."""
    got, got_ops = optimized_ops(proto, pass_name)
    assert (got, got_ops) == (rewrites, ops)
    data = proto.SerializeToString()
    optimized = InferenceSession(data, only(pass_name)).run(None, feed)
    plain = InferenceSession(data, off()).run(None, feed)
    if oracle == "reference":
        import onnx.reference

        expected = onnx.reference.ReferenceEvaluator(proto).run(None, feed)
    else:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        expected = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feed)
    assert len(optimized) == len(plain) == len(expected)
    for a, b, c in zip(optimized, plain, expected):
        assert within(a, b), (a, b)
        assert within(a, c), (a, c)
