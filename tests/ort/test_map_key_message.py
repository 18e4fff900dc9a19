"""A map feed whose key is not of the declared key type: onnxkit's error names the input and the
key, and carries onnxruntime's wording, which onnxruntime's own tests match
(onnxkit/runtime/feeds.py's map-key check)."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP, helper  # noqa: E402

from onnxkit import InferenceSession  # noqa: E402
from onnxkit.runtime.feeds import InputError  # noqa: E402


def _vectorizer(key_type: int) -> bytes:
    map_type = helper.make_map_type_proto(key_type, helper.make_tensor_type_proto(TP.FLOAT, []))
    keys = {"int64_vocabulary": [0, 1, 2]} if key_type == TP.INT64 else {"string_vocabulary": ["a", "b", "c"]}
    node = helper.make_node("DictVectorizer", ["m"], ["y"], domain="ai.onnx.ml", **keys)
    g = helper.make_graph([node], "g", [helper.make_value_info("m", map_type)],
                          [helper.make_tensor_value_info("y", TP.FLOAT, ["n"])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)],
                             ir_version=8).SerializeToString()


def test_a_string_key_for_an_int64_map_is_refused_in_onnxruntime_s_words():
    model = _vectorizer(TP.INT64)
    wording = "Unexpected key type  <class 'str'>, it cannot be linked to C type int64_t"
    feed = {"m": {0: 1.0, "a": 5.6}}
    with pytest.raises(InputError) as kit:
        InferenceSession(model).run(None, feed)
    with pytest.raises(RuntimeError) as ref:
        ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    assert wording in str(ref.value) and wording in str(kit.value)
    assert str(kit.value).startswith("input 'm': map key 'a' must be an integer (declared key type int64), got str")
    assert isinstance(kit.value, RuntimeError)   # onnxruntime's tests catch RuntimeError
    # a well-keyed map still runs (the values only: onnxruntime gives [1, N], the operator's 1-D [N])
    got = InferenceSession(model).run(None, {"m": {0: 1.0, 2: 3.0}})[0]
    assert got.ravel().tolist() == ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"m": {0: 1.0, 2: 3.0}})[0].ravel().tolist() == [1.0, 0.0, 3.0]
