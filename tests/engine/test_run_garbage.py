"""A run leaves no reference cycle behind (issue 43: a decoder's tokens each made a few objects
only the cyclic collector could free — the output fetch's recursive closure — so its young
generation filled and was collected every few tokens)."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402


def _session():
    """A growing past concatenated with a new row, the result twice (one output a copy of the
    other must be handed out as its own), and the new row passed through (a feed handed back)."""
    g = h.make_graph([h.make_node("Concat", ["past", "new"], ["cat"], axis=0),
                      h.make_node("Mul", ["cat", "cat"], ["sq"]),
                      h.make_node("Identity", ["cat"], ["cat2"]),
                      h.make_node("Identity", ["new"], ["same"])], "g",
                     [h.make_tensor_value_info("past", T.FLOAT, ["n", 2]), h.make_tensor_value_info("new", T.FLOAT, [1, 2])],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in ("cat", "sq", "cat2", "same")])
    data = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnxkit.InferenceSession(data)


def test_runs_with_new_extents_leave_nothing_for_the_cyclic_collector():
    sess = _session()
    new = np.full((1, 2), 3.0, np.float32)
    for n in range(20):  # planned, specialized, compiled: what happens once is done
        sess.run(None, {"past": np.ones((n, 2), np.float32), "new": new})
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        outs = None
        for n in range(20, 60):
            past = np.ones((n, 2), np.float32)
            outs = sess.run(None, {"past": past, "new": new})
        found = gc.collect()
    finally:
        if was:
            gc.enable()
    assert found == 0, f"{found} objects in reference cycles after 40 runs"
    cat, sq, cat2, same = outs
    assert cat.shape == (60, 2) and np.array_equal(cat, cat2) and np.array_equal(sq, cat * cat)
    cat[0, 0] = 7.0  # each output the caller's own: writing one changes no other, nor the feed
    assert cat2[0, 0] == 1.0 and same is not new and np.array_equal(same, new)
    same[0, 0] = 0.0
    assert new[0, 0] == 3.0
