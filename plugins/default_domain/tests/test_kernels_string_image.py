"""String and image operators (kernels.string, kernels.image): host_only, so the gpu backend runs
them on its cpu fallback, listed in ``sess.fallbacks``; RegexFullMatch without the RE2 binding
is refused when the session is created, on both backends.  Expected values are hand-computed."""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.errors import UnsupportedOperatorError
from onnxkit.runtime import InferenceSession
from one_node import BACKENDS

pytest.importorskip("torch")
A = ir.Attribute.make
F32, I64, STR, BOOL = 1, 7, 8, 9


def vi(name, elem, shape=None):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def model(nodes, inputs, outputs, opset=20):
    g = ir.Graph(node=nodes, name="g", input=inputs, output=outputs)
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", opset)], graph=g)


def regex_model():
    return model([ir.Node(["x"], ["y"], op_type="RegexFullMatch", name="re", attribute=[A("pattern", "a+b")])],
                 [vi("x", STR, [2])], [vi("y", BOOL, [2])])


@pytest.mark.parametrize("backend", BACKENDS)
def test_strings_run_on_the_host(backend):
    sess = InferenceSession(regex_model(), backend)
    assert [(f.op_type, f.runs_on) for f in sess.fallbacks] == ([("RegexFullMatch", "cpu")] if backend == "gpu" else [])
    (y,) = sess.run(None, {"x": np.array(["aab", "ba"], dtype=object)})
    assert y.dtype == np.bool_ and y.tolist() == [True, False]


@pytest.mark.parametrize("backend", BACKENDS)
def test_regex_without_re2_is_unsupported_at_session_creation(backend, monkeypatch):
    from onnxkit_default_domain.kernels import string

    monkeypatch.setattr(string, "_re2", None)
    with pytest.raises(UnsupportedOperatorError, match="RegexFullMatch"):
        InferenceSession(regex_model(), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_max_suppression_runs_on_the_cpu_fallback_on_gpu(backend):
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], np.float32)
    n = ir.Node(["b", "s", "m", "iou"], ["sel"], op_type="NonMaxSuppression", name="nms")
    sess = InferenceSession(model([n], [vi("b", F32, [1, 3, 4]), vi("s", F32, [1, 1, 3]), vi("m", I64, [1]),
                                        vi("iou", F32, [1])], [vi("sel", I64, [None, 3])], opset=11), backend)
    assert [f.op_type for f in sess.fallbacks] == (["NonMaxSuppression"] if backend == "gpu" else [])
    (sel,) = sess.run(None, {"b": boxes, "s": scores, "m": np.array([3]), "iou": np.array([0.5], np.float32)})
    assert sel.dtype == np.int64 and sel.tolist() == [[0, 0, 0], [0, 0, 2]]   # box 1 overlaps box 0 (IOU 0.82)
