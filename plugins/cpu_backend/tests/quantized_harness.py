"""One quantized node run three ways, for the tests of the cpu quantization overrides
(tests only; ``onnx`` builds the models, ``onnxruntime`` is the outside oracle).

:func:`three_ways` gives the node's outputs from the cpu override (an ordinary session), from
the *portable* kernel (a session planned while the registry's cpu table maps the operator to
the portable kernel: the reference the override must equal bit for bit) and from onnxruntime
(one thread).  Inputs named in ``constants`` become initializers (weights: the overrides keep
what they derive from those).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

from onnxkit.registry import get_registry  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

MS = "com.microsoft"


def build(op, inputs, attrs=None, opset=21, out_types=(), constants=(), domain=""):
    """A serialized one-node model and its feed; ``inputs`` a list of arrays (None: omitted)."""
    names, graph_inputs, inits, feed = [], [], [], {}
    for k, v in enumerate(inputs):
        if v is None:
            names.append("")
            continue
        v = np.asarray(v)
        name = f"x{k}"
        names.append(name)
        if k in constants:
            inits.append(numpy_helper.from_array(v, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
            feed[name] = v
    outs = [f"y{i}" for i in range(len(out_types))]
    node = helper.make_node(op, names, outs, name="qnode", domain=domain, **(attrs or {}))
    graph = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, out_types)],
                              initializer=inits)
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(MS, 1)] if domain else [])
    m = helper.make_model(graph, opset_imports=imports)
    m.ir_version = 10
    return m.SerializeToString(), feed


@contextlib.contextmanager
def portable_kernels(op, domain=""):
    """While inside, sessions planned on cpu run the portable kernel of every definition of ``op``."""
    reg = get_registry()
    table = reg.kernels["cpu"]
    saved = {k: v for k, v in table.items() if k[0] == domain and k[1] == op}
    assert saved, f"no cpu kernel for {op}"
    try:
        for k in saved:
            table[k] = reg.portable[k]
        yield
    finally:
        table.update(saved)


def onnxkit_outputs(data, feed):
    return InferenceSession(data, validate=False).run(None, feed)


def three_ways(op, inputs, attrs=None, opset=21, out_types=(), constants=(), domain="", ort=True):
    """``(override, portable, onnxruntime or None)`` outputs of one node (lists of arrays)."""
    data, feed = build(op, inputs, attrs, opset, out_types, constants, domain)
    fast = onnxkit_outputs(data, feed)
    with portable_kernels(op, domain):
        ref = onnxkit_outputs(data, feed)
    theirs = None
    if ort:
        import onnxruntime

        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = 1
        so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        theirs = onnxruntime.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feed)
    return fast, ref, theirs


def identical(a, b) -> None:
    """Same dtype, shape and bits (NaN payloads included)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert a.tobytes() == b.tobytes(), f"differ at {np.argwhere(a.view(np.uint8) != b.view(np.uint8))[:5]}"


def within_one_step(a, b) -> None:
    """Quantized outputs at most one quantization step apart (onnxruntime's rounding may differ
    where its float arithmetic differs from the definition's)."""
    a, b = np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)
    assert a.shape == b.shape
    assert np.abs(a - b).max(initial=0) <= 1


def count_products(monkeypatch, module, name: str = "exact_product") -> dict:
    """Counts of ``module.<name>`` calls (the float32 product of a fast path): taken in float32
    (``exact``) or handed to the portable kernel (``wide``, the product returned None)."""
    seen = {"exact": 0, "wide": 0}
    real = getattr(module, name)

    def counted(*args):
        out = real(*args)
        seen["wide" if out is None else "exact"] += 1
        return out
    monkeypatch.setattr(module, name, counted)
    return seen
