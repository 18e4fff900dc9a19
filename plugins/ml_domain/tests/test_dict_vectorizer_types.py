"""DictVectorizer reads its output's type from the planner (NodeContext.output_types, filled
with the declared types; ``output_type`` adds what inference gives): an empty map has no value
to take the element type from, so the output's declared or inferred type decides it (issue 42:
``output_types`` was documented but never filled, and the kernel always fell back to float)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxkit.runtime import InferenceSession

ML = "ai.onnx.ml"
D, F, I64, S = TensorProto.DOUBLE, TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING


def _map(key, value):
    return helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, []))


def _session(value_elem, out_elem, declared: bool):
    """X: map(string, value_elem) -> DictVectorizer -> V -> Identity -> Y (out_elem).  ``declared``:
    V's type is declared (value_info); else only inference knows it."""
    nodes = [helper.make_node("DictVectorizer", ["X"], ["V"], domain=ML, string_vocabulary=["a", "b", "c"]),
             helper.make_node("Identity", ["V"], ["Y"])]
    vinfo = [helper.make_tensor_value_info("V", out_elem, [3])] if declared else []
    graph = helper.make_graph(nodes, "g", [helper.make_value_info("X", _map(S, value_elem))],
                              [helper.make_tensor_value_info("Y", out_elem, [3])], value_info=vinfo)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 1)],
                              ir_version=10)
    return InferenceSession(model.SerializeToString(), validate=False)


@pytest.mark.parametrize("declared", [True, False])
@pytest.mark.parametrize("elem,dtype", [(D, np.float64), (I64, np.int64), (F, np.float32)])
def test_an_empty_map_gives_the_outputs_type(elem, dtype, declared):
    sess = _session(elem, elem, declared)
    y = sess.run(None, {"X": {}})[0]
    assert y.dtype == dtype and y.tolist() == [0, 0, 0]
    full = sess.run(None, {"X": {"c": dtype(3), "zz": dtype(9)}})[0]
    assert full.dtype == dtype and full.tolist() == [0, 0, 3]


def test_the_kernel_is_told_the_declared_output_type(monkeypatch):
    from onnxkit.registry import get_registry

    reg = get_registry()
    key = ("ai.onnx.ml", "DictVectorizer", 1)
    real = reg.kernels["cpu"][key]
    told = []

    def spy(ctx):
        told.append((ctx.output_types, ctx.input_types))
        return real(ctx)

    monkeypatch.setitem(reg.kernels["cpu"], key, spy)
    _session(D, D, True)
    (out_types, in_types), = told
    assert len(out_types) == 1 and out_types[0].elem_type == D and out_types[0].shape.values == (3,)
    assert in_types[0] is not None and in_types[0].kind() == "map"
