"""What the gpu backend's parity tests share (test_elementwise.py, test_cast_shape.py): one-node
models built with ``onnx.helper`` (tests only), evaluated on the cpu and gpu backends, checked
against each other and against onnx's ReferenceEvaluator (gpu_oracle.py), and the seeded random
inputs.  Callers import ``torch`` and ``onnx`` with ``pytest.importorskip`` first."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import gpu_oracle
from onnxkit.dtypes import from_numpy_dtype
from onnxkit.errors import ValidationError
from onnxkit.runtime import InferenceSession

BF16 = np.dtype(ml_dtypes.bfloat16)


def tag(a) -> int:
    return int(from_numpy_dtype(np.asarray(a).dtype).tag)


def ir_version(opset: int) -> int:
    try:
        return helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    except ValueError:               # opsets 2-4 are missing from onnx's table: IR 3 covers them
        return 3


def model(op, inputs, attrs=None, opset=13, n_out=1, outputs=None):
    """A one-node model; ``inputs``: arrays or None (an omitted optional input).  ``outputs``:
    arrays whose element types and ranks the graph outputs declare (None: untyped outputs)."""
    names, graph_inputs = [], []
    for k, v in enumerate(inputs):
        if v is None:
            names.append("")
            continue
        names.append(f"x{k}")
        v = np.asarray(v)
        graph_inputs.append(helper.make_tensor_value_info(f"x{k}", tag(v), list(v.shape)))
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    if outputs is None:
        graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outs]
    else:
        graph_outputs = [helper.make_tensor_value_info(o, tag(a), [f"{o}_{j}" for j in range(a.ndim)])
                         for o, a in zip(outs, outputs)]
    opsets = [helper.make_opsetid("", opset)]
    g = helper.make_graph([node], "g", graph_inputs, graph_outputs)
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = ir_version(opset)
    feed = {f"x{k}": np.asarray(v) for k, v in enumerate(inputs) if v is not None}
    return m.SerializeToString(), feed


def _run(backend, op, inputs, attrs, opset, n_out, outputs=None):
    """Evaluate on ``backend``: first unchecked with untyped outputs (to learn their types),
    then the model declaring them, checked (Clause 15.5) and evaluated."""
    if outputs is None:
        data, feed = model(op, inputs, attrs, opset, n_out)
        outputs = InferenceSession(data, backend, validate=False).run(None, feed)
    data, feed = model(op, inputs, attrs, opset, n_out, outputs)
    return InferenceSession(data, backend).run(None, feed)


def run(backend, op, inputs, attrs=None, opset=13, n_out=1):
    got = _run(backend, op, inputs, attrs, opset, n_out)
    return got[0] if n_out == 1 else got


def _tol(dt):
    return {np.dtype(np.float16): 1e-3, BF16: 8e-3, np.dtype(np.float32): 2e-6}.get(np.dtype(dt), 1e-12)


def same(op, inputs, attrs=None, opset=13, n_out=1, rtol=None, atol=None):
    """Run on both backends; the gpu result must equal the cpu one (dtype, shape, values) and
    agree with onnx.reference (gpu_oracle.py).  A combination the definition does not admit (an
    element type outside its type constraints, e.g. bfloat16 before 13) must be refused by both
    backends alike; None is returned then."""
    try:
        wants = _run("cpu", op, inputs, attrs, opset, n_out)
    except ValidationError as exc:
        codes = sorted({d.code for d in exc.diagnostics})
        if codes != ["type-constraint-violation"]:
            raise
        data, feed = model(op, inputs, attrs, opset, n_out, _untyped_outputs(op, inputs, attrs, opset, n_out))
        with pytest.raises(ValidationError) as refused:
            InferenceSession(data, "gpu").run(None, feed)
        assert sorted({d.code for d in refused.value.diagnostics}) == codes
        return None
    gots = _run("gpu", op, inputs, attrs, opset, n_out, wants)
    for w, g in zip(wants, gots):
        r = _tol(w.dtype) if rtol is None else rtol
        gpu_oracle.assert_close(g, w, r, r * 1e-3 if atol is None else atol)
    data, feed = model(op, inputs, attrs, opset, n_out, wants)
    r = _tol(wants[0].dtype) if rtol is None else rtol
    a = r * 1e-3 if atol is None else atol
    gpu_oracle.check_against_reference(data, feed, gots, op, opset, max(r, 2e-6), max(a, 1e-6))
    return gots[0] if n_out == 1 else gots


def _untyped_outputs(op, inputs, attrs, opset, n_out):
    """What the gpu backend computes unchecked, to declare the outputs of the checked model."""
    data, feed = model(op, inputs, attrs, opset, n_out)
    return InferenceSession(data, "gpu", validate=False).run(None, feed)


RNG = np.random.default_rng(7)


def reseed():
    """The same random inputs for a test however the suite is selected or ordered (each test
    module's autouse fixture calls it)."""
    global RNG
    RNG = np.random.default_rng(7)


def rand(shape, dtype=np.float32, lo=-3.0, hi=3.0):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return RNG.integers(max(info.min, int(lo) * 10), min(info.max, int(hi) * 10) + 1, size=shape).astype(dt)
    if dt == np.bool_:
        return RNG.random(shape) < 0.5
    return RNG.uniform(lo, hi, size=shape).astype(dt)


FLOATS = [np.float32, np.float64, np.float16, BF16]
INTS = [np.int8, np.uint8, np.int16, np.int32, np.int64]
