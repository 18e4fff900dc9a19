"""Running one ai.onnx node on a backend, for the portable kernel tests (tests only).

:func:`run` evaluates a one-node model through an :class:`InferenceSession` (what a user gets:
the backend's override where it has one, else the portable kernel); :func:`portable` calls the
portable kernel itself on a backend's namespace (numpy on ``cpu``, torch on ``gpu``), so a
body a backend overrides is still tested on every namespace.  ``onnx`` builds the models.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from onnxkit.functions import schema_defaults  # noqa: E402
from onnxkit.registry import get_registry  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit.runtime.kernel import NodeContext  # noqa: E402

BACKENDS = ["cpu", "gpu"]


def _tag(a) -> int:
    return helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype)


def model(op, inputs, attrs=None, opset=13, out_types=None, out_ranks=None):
    """A one-node model (serialized) and its feed; ``inputs``: arrays or None (omitted).
    ``out_types`` / ``out_ranks``: the outputs' element types and ranks (default: one output
    of the first input's type and rank)."""
    names, graph_inputs, feed = [], [], {}
    for k, v in enumerate(inputs):
        if v is None:
            names.append("")
            continue
        v = np.asarray(v)
        names.append(f"x{k}")
        graph_inputs.append(helper.make_tensor_value_info(f"x{k}", _tag(v), list(v.shape)))
        feed[f"x{k}"] = v
    out_types = out_types or [_tag(inputs[0])]
    out_ranks = out_ranks or [np.asarray(inputs[0]).ndim] * len(out_types)
    outs = [f"y{i}" for i in range(len(out_types))]
    node = helper.make_node(op, names, outs, name="the_node", **(attrs or {}))
    graph = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_tensor_value_info(o, t, [f"{o}_{j}" for j in range(r)])
                               for o, t, r in zip(outs, out_types, out_ranks)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        m.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    except ValueError:               # opsets 2-4 are missing from onnx's table: IR 3 covers them
        m.ir_version = 3
    return m.SerializeToString(), feed


def session(backend, op, inputs, attrs=None, opset=13, out_types=None, out_ranks=None):
    data, feed = model(op, inputs, attrs, opset, out_types, out_ranks)
    return InferenceSession(data, backend), feed


def run(backend, op, inputs, attrs=None, opset=13, out_types=None, out_ranks=None):
    """The first output of ``op`` on ``backend``."""
    sess, feed = session(backend, op, inputs, attrs, opset, out_types, out_ranks)
    return sess.run(None, feed)[0]


def portable(backend, op, since_version, attrs=None):
    """The node function of the *portable* kernel of ``op`` (definition ``since_version``) on
    ``backend``'s namespace, taking and returning numpy arrays."""
    reg = get_registry()
    b = reg.backends[backend]
    attrs = dict(attrs or {})
    node = types.SimpleNamespace(name="the_node", attribute=[types.SimpleNamespace(name=k) for k in attrs],
                                 input=[], output=["y"])
    schema = reg.bind("", op, since_version)
    # the node's attributes over its definition's defaults, as the planner gives them (kernels
    # leave the defaults to the schema)
    ctx = NodeContext(node=node, domain="", op_type=op, since_version=since_version, opset_version=since_version,
                      schema=None, attributes={**schema_defaults(schema), **attrs}, backend=b)
    fn = reg.portable[("", op, since_version)](ctx)
    to_backend = b.asarray or (lambda a: a)
    to_numpy = b.to_numpy or np.asarray

    def call(*inputs):
        out = fn(*[None if v is None else to_backend(np.asarray(v)) for v in inputs])
        return np.asarray(to_numpy(out))
    return call
