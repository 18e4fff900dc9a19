"""Issue 45 item 4: an attribute its operator's schema does not define (onnxsim's
``onnxsim_transient_constant`` on Constant) is a warning naming it, ignored by the kernel, and
refused under ``strict=True``; a defined attribute of the wrong type stays an error.

onnxruntime 1.32 is not a uniform oracle here: it refuses an unknown attribute on Relu
("Unrecognized attribute"), and its Constant kernel takes the *first* attribute as the value
(``onnxsim_transient_constant=1`` listed before ``value`` gives int64 1).  The comparison uses
``value`` listed first, where onnxruntime returns the tensor; onnxkit is order-independent.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

from onnxkit import ConformanceWarning, InferenceSession, ValidationError, check_model  # noqa: E402

ATTR = "onnxsim_transient_constant"
VALUE = np.array([[1.5, -2.0], [3.25, 4.0]], np.float32)


def _model(value_first=True, extra=None):
    n = h.make_node("Constant", [], ["C"], name="const0")
    value = h.make_attribute("value", h.make_tensor("v", T.FLOAT, [2, 2], VALUE.ravel().tolist()))
    other = extra if extra is not None else h.make_attribute(ATTR, 1)
    n.attribute.extend([value, other] if value_first else [other, value])
    add = h.make_node("Add", ["X", "C"], ["Y"])
    g = h.make_graph([n, add], "g", [h.make_tensor_value_info("X", T.FLOAT, [2, 2])],
                     [h.make_tensor_value_info("Y", T.FLOAT, [2, 2])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


X = np.arange(4, dtype=np.float32).reshape(2, 2)


def test_transient_constant_runs_with_one_warning_and_equals_onnxruntime():
    b = _model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (y,) = InferenceSession(b).run(None, {"X": X})
    mine = [w for w in caught if issubclass(w.category, ConformanceWarning)]
    assert len(mine) == 1
    text = str(mine[0].message)
    assert "1 warning(s) [unknown-attribute]" in text
    assert ATTR in text and "Constant" in text and "node 0 'const0'" in text
    (want,) = ort.InferenceSession(b).run(None, {"X": X})
    assert y.dtype == want.dtype and np.array_equal(y, want)
    assert np.array_equal(y, X + VALUE)


def test_the_kernel_ignores_it_in_any_position():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConformanceWarning)
        (y,) = InferenceSession(_model(value_first=False)).run(None, {"X": X})
    assert y.dtype == np.float32 and np.array_equal(y, X + VALUE)


def test_check_model_reports_it_as_a_warning():
    r = check_model(_model())
    assert not r.errors
    (d,) = [d for d in r.diagnostics if d.code == "unknown-attribute"]
    assert d.severity == "warning" and ATTR in d.message and ATTR in d.location and "Constant" in d.message


def test_strict_refuses_it_naming_the_attribute():
    with pytest.raises(ValidationError) as e:
        InferenceSession(_model(), strict=True)
    assert "unknown-attribute" in str(e.value) and ATTR in str(e.value) and "strict=True" in str(e.value)


def test_a_defined_attribute_of_the_wrong_type_is_still_an_error():
    n = h.make_node("LeakyRelu", ["X"], ["Y"])
    n.attribute.extend([h.make_attribute("alpha", 2)])  # alpha is FLOAT; INT given
    g = h.make_graph([n], "g", [h.make_tensor_value_info("X", T.FLOAT, [2, 2])],
                     [h.make_tensor_value_info("Y", T.FLOAT, [2, 2])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    r = check_model(m.SerializeToString())
    assert [d.code for d in r.errors] == ["attribute-wrong-type"]
    with pytest.raises(ValidationError) as e:
        InferenceSession(m.SerializeToString())
    assert "attribute-wrong-type" in str(e.value) and "alpha" in str(e.value)
