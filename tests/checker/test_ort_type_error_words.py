"""An input whose type its operator's definition does not admit: the refusal (an ``InvalidGraph``)
carries onnxruntime's own sentence for it as well as onnxkit's, since callers written against
onnxruntime match its words (skl2onnx's test_algebra_complex skips complex Add on
``"Type Error: Type 'tensor(complex"``).  onnxruntime 1.32 is the oracle of the sentence."""

from __future__ import annotations

import re

import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.status import InvalidGraph  # noqa: E402


def _model(elem, op="Add", opset=14, node_name="the_add") -> bytes:
    n = helper.make_node(op, ["X", "Z"], ["Y"], name=node_name)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("X", elem, [2]),
                                     helper.make_tensor_value_info("Z", elem, [2])],
                          [helper.make_tensor_value_info("Y", elem, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _ort_sentence(data: bytes) -> str:
    with pytest.raises(Exception) as e:
        ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    m = re.search(r"Type Error: .*? is invalid\.", str(e.value))
    assert m, str(e.value)
    return m.group(0)


@pytest.mark.parametrize("elem,op,opset,node_name", [
    (TensorProto.COMPLEX64, "Add", 14, "the_add"),
    (TensorProto.COMPLEX128, "Add", 7, "n1"),
    (TensorProto.STRING, "Mul", 14, "mul_node"),
    (TensorProto.BOOL, "Sub", 13, ""),
])
def test_refusal_carries_onnxruntimes_sentence(elem, op, opset, node_name):
    data = _model(elem, op, opset, node_name)
    want = _ort_sentence(data)
    with pytest.raises(InvalidGraph) as e:
        onnxkit.InferenceSession(data)
    assert want in str(e.value)
    assert "type-constraint-violation" in str(e.value)  # onnxkit's own finding stays


def test_admitted_types_are_not_refused():
    """The near miss: the same graph in float runs, on onnxruntime and on onnxkit alike."""
    import numpy as np

    data = _model(TensorProto.FLOAT)
    feeds = {"X": np.array([1.0, 2.0], np.float32), "Z": np.array([3.0, -1.0], np.float32)}
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(onnxkit.InferenceSession(data).run(None, feeds)[0], want)
