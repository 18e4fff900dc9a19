"""MatMul's checks over a stream of new extents (a decoder's attention products: new extents
every token, the same element types): products of every rank agree with onnxruntime, and
extents that are not a MatMul's are refused by the inference geometry's own words, whether or
not the key is new."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit_default_domain.kernels.linalg import plain_product  # noqa: E402


def _sessions():
    g = h.make_graph([h.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "g",
                     [h.make_tensor_value_info("a", T.FLOAT, None), h.make_tensor_value_info("b", T.FLOAT, None)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    data = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8).SerializeToString()
    so = ort.SessionOptions()
    so.log_severity_level = 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnxkit.InferenceSession(data), ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def test_a_stream_of_new_extents_agrees_with_onnxruntime():
    mine, theirs = _sessions()
    rng = np.random.default_rng(0)
    for t in range(1, 30):  # the attention of a growing past: [1, H, 1, D] @ [1, H, D, T], then [1, H, 1, T] @ [1, H, T, D]
        for sa, sb in (((1, 4, 1, 8), (1, 4, 8, t)), ((1, 4, 1, t), (1, 4, t, 8)), ((2, 1, 3, t), (4, t, 2)),
                       ((t,), (t, 3)), ((3, t), (t,))):
            feed = {"a": rng.standard_normal(sa).astype(np.float32), "b": rng.standard_normal(sb).astype(np.float32)}
            want = theirs.run(None, feed)[0]
            got = mine.run(None, feed)[0]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa, sb, why", [((2, 3, 4), (3, 4, 5), "broadcast"), ((1, 4, 2, 8), (1, 3, 8, 5), "broadcast"),
                                         ((2, 3), (4, 5), "inner extents differ"), ((3,), (4,), "inner extents differ")])
def test_extents_that_are_no_product_are_refused_by_the_geometry(sa, sb, why):
    mine, theirs = _sessions()
    feed = {"a": np.ones(sa, np.float32), "b": np.ones(sb, np.float32)}
    with pytest.raises(Exception):  # noqa: B017  (onnxruntime refuses them too)
        theirs.run(None, feed)
    for _ in range(2):  # the refused key is not remembered: refused again
        with pytest.raises(OnnxkitError, match=f"mm.*{why}"):
            mine.run(None, feed)


def test_the_plain_rule():
    assert plain_product((1, 4, 1, 8), (1, 4, 8, 9)) and plain_product((2, 1, 3, 5), (4, 5, 2))
    assert plain_product((3, 5), (5, 2)) and plain_product((7, 1, 3, 5), (1, 6, 5, 2))
    assert not plain_product((3,), (3, 2)) and not plain_product((2, 3), (3,))   # rank 1: the geometry's
    assert not plain_product((2, 3, 4), (3, 4, 5)) and not plain_product((2, 3), (4, 5))
