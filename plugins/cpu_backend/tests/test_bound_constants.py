"""Kernels specialized on their constant inputs (onnxkit.runtime.kernel.binds_constants, taken
by the run loop's layout; the cpu overrides' IntPlans.fixed).

Each operator is run twice on the same data: with its shape / axes / starts... inputs as
initializers (the layout calls the function the kernel bound to them) and fed as graph inputs
(the kernel's own function, reading them each run); both must equal numpy's result computed
here, and the test checks which function the layout took, so it fails if binding silently
stops or happens where it must not.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit.runtime import loop  # noqa: E402
from onnxkit.runtime.kernel import binds_constants  # noqa: E402

X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) - 7.5
I64 = np.int64

# op, small inputs (name, value) after X ("" for an absent optional), attributes, numpy's result
CASES = [
    ("Reshape", [("shape", np.array([4, -1], I64))], {}, X.reshape(4, -1)),
    ("Unsqueeze", [("axes", np.array([0, -1], I64))], {}, X[None, ..., None]),
    ("Squeeze", [("axes", np.array([0], I64))], {}, X[:1].reshape(3, 4)),
    ("Slice", [("starts", np.array([1, -1], I64)), ("ends", np.array([3, -5], I64)),
               ("axes", np.array([1, 2], I64)), ("steps", np.array([1, -2], I64))], {}, X[:, 1:3, -1:-5:-2]),
    ("Slice", [("starts", np.array([1], I64)), ("ends", np.array([99], I64))], {}, X[1:]),
    ("Pad", [("pads", np.array([0, 1, 0, 0, 2, 1], I64)), ("value", np.array(3.5, np.float32))], {"mode": "constant"},
     np.pad(X, [(0, 0), (1, 2), (0, 1)], constant_values=3.5)),
    ("Pad", [("pads", np.array([1, 1, 1, 1], I64)), ("", None), ("axes", np.array([1, 2], I64))], {"mode": "edge"},
     np.pad(X, [(0, 0), (1, 1), (1, 1)], mode="edge")),
    ("ReduceMean", [("axes", np.array([-1], I64))], {"keepdims": 0}, X.mean(axis=-1)),
    ("ReduceSum", [("axes", np.array([0, 2], I64))], {}, X.sum(axis=(0, 2), keepdims=True)),
    ("Expand", [("shape", np.array([3, 1, 1, 4], I64))], {}, np.broadcast_to(X, (3, 2, 3, 4))),
    ("Split", [("split", np.array([1, 3], I64))], {"axis": 2}, None),
    ("Pow", [("y", np.array([2.0], np.float32))], {}, X * X),
    ("Pow", [("y", np.array(3.0, np.float32))], {}, X * X * X),
]


def _model(op, small, attrs, as_initializers: bool, dynamic: bool = False):
    names = ["X"] + [n for n, _ in small]
    if op == "Squeeze":
        names[0] = "X1"
    outs = ["Y", "Z"] if op == "Split" else ["Y"]
    node = helper.make_node(op, names, outs, **attrs)
    x_in = X[:1] if op == "Squeeze" else X
    dims = [None] * x_in.ndim if dynamic else list(x_in.shape)
    inputs = [helper.make_tensor_value_info(names[0], onnx.TensorProto.FLOAT, dims)]
    inits, feed = [], {names[0]: x_in}
    for n, v in small:
        if not n:
            continue
        if as_initializers:
            inits.append(numpy_helper.from_array(v, n))
        else:
            inputs.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
            feed[n] = v
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None)
                                                   for o in outs], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m.SerializeToString(), feed


def _session(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return InferenceSession(model)


def _loop_functions(s):
    """(the function the plan's layout calls, the step's kernel function) of each step."""
    plan = s.plan
    layout = plan._layout(0, plan.constants, plan.steps)
    return [(laid.call, laid.step.fn) for laid in layout.laid_steps()]


@pytest.mark.parametrize("op,small,attrs,want", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_constant_and_fed_inputs_give_numpys_result(op, small, attrs, want):
    if want is None:                                 # Split: two outputs
        want = [X[..., :1], X[..., 1:]]
    want = want if isinstance(want, list) else [want]
    for as_init in (True, False):
        m, feed = _model(op, small, attrs, as_init)
        s = _session(m)
        for _ in range(2):                           # the second run: the bound function's plan kept
            got = s.run(None, feed)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape
                assert np.array_equal(g, w), (op, as_init)
        (called, own), = _loop_functions(s)
        assert (called is not own) == as_init, f"{op}: bound only where the inputs are constants"


def test_a_fed_shape_is_read_every_run():
    m, feed = _model("Reshape", [("shape", np.array([4, -1], I64))], {}, as_initializers=False)
    s = _session(m)
    shape = feed["shape"]
    assert s.run(None, feed)[0].shape == (4, 6)
    shape[:] = [-1, 2]                               # the caller's array, changed in place
    assert s.run(None, feed)[0].shape == (12, 2)


def test_a_refused_constant_fails_naming_the_node_at_every_run():
    m, feed = _model("Reshape", [("shape", np.array([5, -1], I64))], {}, as_initializers=True, dynamic=True)
    s = _session(m)
    for _ in range(2):
        with pytest.raises(OnnxkitError, match="Reshape"):
            s.run(None, feed)


class _Step:
    def __init__(self, fn, inputs):
        self.fn, self.inputs, self.scope = fn, inputs, False


def test_the_loop_binds_only_constants_and_absent_inputs_and_ignores_a_failing_bind():
    seen = []

    def fn(*args):
        return "own"

    def bind(a, b):
        seen.append((a, b))
        return lambda *args: "bound"

    binds_constants(fn, bind, 1, 2)
    c = np.array([1], I64)
    assert loop._bound(_Step(fn, ["x", "c", ""]), {"c": c})() == "bound"
    assert seen[-1][0] is c and seen[-1][1] is None  # the constant itself; absent: None
    assert loop._bound(_Step(fn, ["x", "c"]), {"c": c})() == "bound"   # a trailing input not named
    assert loop._bound(_Step(fn, ["x", "c", "fed"]), {"c": c}) is fn
    assert len(seen) == 2

    def failing(a, b):
        raise ValueError("cannot decide")

    binds_constants(fn, failing, 1, 2)
    assert loop._bound(_Step(fn, ["x", "c", ""]), {"c": c}) is fn
    binds_constants(fn, lambda a, b: None, 1, 2)
    assert loop._bound(_Step(fn, ["x", "c", ""]), {"c": c}) is fn
