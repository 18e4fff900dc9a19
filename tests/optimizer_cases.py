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


def ort_plain(proto, feed: dict) -> list:
    """onnxruntime's outputs for ``proto`` with its own optimizer off (the model as written).
    onnxruntime reads an IR < 4 model's initializers as constants and refuses a feed for one:
    such a model is given to it as IR 8 with the fed initializers dropped (plain inputs then),
    what onnxkit's IR < 4 override means."""
    if proto.ir_version < 4 and any(t.name in feed for t in proto.graph.initializer):
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)
        copy.ir_version = 8
        kept = [t for t in copy.graph.initializer if t.name not in feed]
        del copy.graph.initializer[:]
        copy.graph.initializer.extend(kept)
        proto = copy
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feed)


def legacy(proto, opset=None):
    """``proto`` as an IR 3 model: every initializer also listed as a graph input (a feed may
    override it; the optimizer reads it as a constant)."""
    for t in proto.graph.initializer:
        proto.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    proto.ir_version = 3
    if opset is not None:
        proto.opset_import[0].version = opset
    return proto


def agree(proto, feed: dict, oracle: bool = True) -> list:
    """The default session's outputs (every pass on) for ``proto`` and ``feed``, asserted to equal
    the unoptimized session's and (``oracle``) onnxruntime's with its optimizer off, shapes and
    element types included, within onnxkit's tolerances; returns them."""
    data = proto.SerializeToString()
    optimized = InferenceSession(data).run(None, feed)
    plain = InferenceSession(data, off()).run(None, feed)
    expected = ort_plain(proto, feed) if oracle else plain
    assert len(optimized) == len(plain) == len(expected)
    for a, b, c in zip(optimized, plain, expected):
        assert np.shape(a) == np.shape(b) == np.shape(c), (np.shape(a), np.shape(b), np.shape(c))
        assert within(a, b), (a, b)
        assert within(a, c), (a, c)
    return optimized
