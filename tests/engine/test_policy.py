"""The validation policy (issue #11): what refuses a model, what is reported and run.

One focused model per refusal class real exporters produce, built with ``onnx.helper`` as
those exporters write them: each must run by default (reported once as a
``ConformanceWarning`` and on the ``onnxkit.check`` logger) and be refused under
``strict=True``, naming the condition.  Then the feed check, the declared-vs-computed check
after a run, and the CLI's ``--strict``.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

from onnxkit import ConformanceWarning, EvaluationError, InferenceSession, ValidationError, check_model  # noqa: E402
from onnxkit.runtime import InputError  # noqa: E402

F = T.FLOAT


def _model(nodes, inputs, outputs, value_info=(), opset=17, ir_version=8, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = ir_version
    return m.SerializeToString()


def _vi(name, shape, elem=F):
    return h.make_tensor_value_info(name, elem, shape)


def _if_model(then_out_type=None, then_value="t", outer_output="Y"):
    """Y = If(C) then Relu(X) else Neg(X); the then-branch output's TypeProto is ``then_out_type``."""
    then_out = onnx.ValueInfoProto(name=then_value)
    if then_out_type is not None:
        then_out.type.CopyFrom(then_out_type)
    then_g = h.make_graph([h.make_node("Relu", ["X"], [then_value])], "then", [], [then_out])
    else_g = h.make_graph([h.make_node("Neg", ["X"], ["e"])], "else", [], [_vi("e", [2])])
    node = h.make_node("If", ["C"], [outer_output], then_branch=then_g, else_branch=else_g)
    return _model([node], [_vi("X", [2]), _vi("C", [], T.BOOL)], [_vi(outer_output, [2])])


def _stale_shape_model():
    """The torch exporter's stale declarations: value_info and output say [1, 3]; Add gives [2, 3]."""
    nodes = [h.make_node("Relu", ["X"], ["r"]), h.make_node("Add", ["r", "X"], ["Y"])]
    return _model(nodes, [_vi("X", [2, 3])], [_vi("Y", [1, 3])], value_info=[_vi("r", [1, 3])])


def _paddle_model():
    """paddle2onnx: ``dim_value: -1`` for the dynamic batch extent, in the input and the output."""
    return _model([h.make_node("Relu", ["X"], ["Y"])], [_vi("X", [-1, 3])], [_vi("Y", [-1, 3])])


def _duplicate_names_model():
    nodes = [h.make_node("Relu", ["X"], ["a"], name="n"), h.make_node("Neg", ["a"], ["Y"], name="n")]
    return _model(nodes, [_vi("X", [2])], [_vi("Y", [2])])


def _sklearn_like_model():
    """skl2onnx's 2-target regressor declared [?, 1]: the operators produce [N, 2]."""
    w = h.make_tensor("W", F, [3, 2], np.arange(6, dtype=np.float32).tolist())
    return _model([h.make_node("MatMul", ["X", "W"], ["Y"])], [_vi("X", [None, 3])], [_vi("Y", [None, 1])],
                  inits=[w])


X2 = {"X": np.array([-1.0, 2.0], np.float32), "C": np.array(True)}
X23 = {"X": np.arange(6, dtype=np.float32).reshape(2, 3) - 2}

#: (model builder, feed, the code that makes strict=True refuse it, expected output 0)
CLASSES = {
    "stale-declared-shape": (_stale_shape_model, X23, "inferred-shape-mismatch",
                             np.maximum(X23["X"], 0) + X23["X"]),
    "dim-value-minus-one": (_paddle_model, X23, "negative-dim-value", np.maximum(X23["X"], 0)),
    "empty-typeproto-subgraph-output": (lambda: _if_model(onnx.TypeProto()), X2, "type-kind-missing", [0.0, 2.0]),
    "duplicate-node-names": (_duplicate_names_model, {"X": X2["X"]}, "duplicate-node-name", [0.0, -2.0]),
    "subgraph-value-named-like-node-output": (lambda: _if_model(then_value="Y"), X2, "shadowed-node-output",
                                              [0.0, 2.0]),
    "sklearn-declared-shape": (_sklearn_like_model, {"X": np.ones((4, 3), np.float32)}, "inferred-shape-mismatch",
                               np.ones((4, 3), np.float32) @ np.arange(6, dtype=np.float32).reshape(3, 2)),
}


@pytest.mark.parametrize("name", CLASSES)
def test_runs_by_default_and_reports_once(name, caplog):
    build, feed, code, want = CLASSES[name]
    data = build()
    report = check_model(data)
    assert report.ok and code in {d.code for d in report.warnings}, "\n".join(map(str, report.diagnostics))
    with caplog.at_level(logging.WARNING, logger="onnxkit.check"), warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        sess = InferenceSession(data)
    created = [w for w in got if issubclass(w.category, ConformanceWarning)]
    assert len(created) == 1 and code in str(created[0].message) and "\n" not in str(created[0].message)
    assert [r.name for r in caplog.records] == ["onnxkit.check"] and code in caplog.records[0].getMessage()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConformanceWarning)
        out = sess.run(None, feed)[0]
    np.testing.assert_allclose(out, want)


@pytest.mark.parametrize("name", CLASSES)
def test_strict_refuses_naming_the_condition(name):
    build, _feed, code, _want = CLASSES[name]
    with pytest.raises(ValidationError) as exc:
        InferenceSession(build(), strict=True)
    assert code in {d.code for d in exc.value.diagnostics} and code in str(exc.value)
    assert all(d.severity == "warning" for d in exc.value.diagnostics)  # violations, not errors


def test_errors_still_refuse_by_default():
    data = _model([h.make_node("Relux", ["X"], ["Y"])], [_vi("X", [2])], [_vi("Y", [2])])
    with pytest.raises(ValidationError, match="unknown-operator"):
        InferenceSession(data)


def test_advisory_warnings_are_not_refused_under_strict():
    """A deprecated operator conforms (14.5: a consumer SHALL continue to evaluate it)."""
    data = _model([h.make_node("Upsample", ["X", "s"], ["Y"], mode="nearest")], [_vi("X", [1, 2]), _vi("s", [2])],
                  [_vi("Y", [2, 4])], opset=10)
    report = check_model(data)
    assert "deprecated-operator" in report.codes() and report.ok
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConformanceWarning)
        y = InferenceSession(data, strict=True).run(None, {"X": np.ones((1, 2), np.float32),
                                                           "s": np.array([2, 2], np.float32)})[0]
    assert y.shape == (2, 4)


# -- the feed check -------------------------------------------------------------------------------

def test_minus_one_extent_is_unknown_in_the_feed_check_without_validation():
    sess = InferenceSession(_paddle_model(), validate=False)
    assert sess.run(None, {"X": np.ones((5, 3), np.float32)})[0].shape == (5, 3)
    with pytest.raises(InputError, match="axis 1 must be 3"):
        sess.run(None, {"X": np.ones((5, 4), np.float32)})


def test_static_extent_and_element_type_contradictions_are_input_errors():
    sess = InferenceSession(_model([h.make_node("Relu", ["X"], ["Y"])], [_vi("X", ["N", 3])], [_vi("Y", ["N", 3])]))
    with pytest.raises(InputError, match="axis 1 must be 3"):
        sess.run(None, {"X": np.ones((2, 4), np.float32)})
    with pytest.raises(InputError, match="declared tensor\\(float\\)"):
        sess.run(None, {"X": np.ones((2, 3), np.float64)})


def _two_inputs_one_variable():
    nodes = [h.make_node("Relu", ["A"], ["Y"]), h.make_node("Relu", ["B"], ["Z"])]
    return _model(nodes, [_vi("A", ["N"]), _vi("B", ["N"])], [_vi("Y", ["N"]), _vi("Z", ["N"])])


def test_a_dimension_variable_fed_two_extents_is_a_warning_by_default_and_an_error_under_strict(caplog):
    feed = {"A": np.ones(2, np.float32), "B": np.ones(3, np.float32)}
    sess = InferenceSession(_two_inputs_one_variable())
    with caplog.at_level(logging.WARNING, logger="onnxkit.check"), warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        y, z = sess.run(None, feed)
        first = len(got)
        sess.run(None, feed)  # each condition is reported once per session
    assert y.shape == (2,) and z.shape == (3,)
    # the feed (input 'B') and the result (output 'Z', declared [N] too) each bind N to 3 after 2
    assert first == len(got) == 2 and all(issubclass(w.category, ConformanceWarning) for w in got)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("dimension-variable-conflict" in m and "'N' is 3 here but 2" in m for m in lines)
    assert "input 'B' axis 0" in lines[0] and "output 'Z' axis 0" in lines[1]
    with pytest.raises(InputError, match="6.5.2"):
        InferenceSession(_two_inputs_one_variable(), strict=True).run(None, feed)


# -- declared vs computed after a run -------------------------------------------------------------

def test_an_output_contradicting_its_declared_shape_is_returned_with_a_warning():
    sess = InferenceSession(_sklearn_like_model(), validate=False)
    x = np.ones((4, 3), np.float32)
    with pytest.warns(ConformanceWarning, match=r"output 'Y'.*declared shape \[None, 1\], computed shape \[4, 2\]"):
        y = sess.run(None, {"X": x})[0]
    assert y.shape == (4, 2)
    with pytest.raises(EvaluationError, match=r"output 'Y'.*computed shape \[4, 2\].*strict"):
        InferenceSession(_sklearn_like_model(), validate=False, strict=True).run(None, {"X": x})


def test_an_output_binding_a_feed_variable_to_another_extent_is_reported():
    """Y is declared [N] with N the input's extent, but Concat doubles it (6.5.2 across feed and result)."""
    data = _model([h.make_node("Concat", ["X", "X"], ["Y"], axis=0)], [_vi("X", ["N"])], [_vi("Y", ["N"])])
    sess = InferenceSession(data, validate=False, strict=True)
    with pytest.raises(EvaluationError, match="dimension variable 'N' is 4 here but 2"):
        sess.run(None, {"X": np.ones(2, np.float32)})


def test_two_outputs_binding_a_variable_of_their_own_to_two_extents_are_reported():
    """M appears only among the outputs: the first binds it, the second contradicts it (6.5.2);
    equal extents, and a fixed extent that holds, pass without a report."""
    nodes = [h.make_node("Relu", ["X"], ["Y"]), h.make_node("Concat", ["X", "X"], ["Z"], axis=0),
             h.make_node("Relu", ["X"], ["W"])]
    data = _model(nodes, [_vi("X", ["N"])], [_vi("Y", ["M"]), _vi("Z", ["M"]), _vi("W", [2])])
    with pytest.raises(EvaluationError, match=r"dimension variable 'M' is 4 here but 2 in output 'Y' axis 0"):
        InferenceSession(data, validate=False, strict=True).run(None, {"X": np.ones(2, np.float32)})
    same = _model(nodes[:1] + [h.make_node("Neg", ["X"], ["Z"])] + nodes[2:], [_vi("X", ["N"])],
                  [_vi("Y", ["M"]), _vi("Z", ["M"]), _vi("W", [2])])
    y, z, w = InferenceSession(same, validate=False, strict=True).run(None, {"X": np.ones(2, np.float32)})
    assert y.shape == z.shape == w.shape == (2,)
    with pytest.raises(EvaluationError, match=r"output 'W'.*declared shape \[2\], computed shape \[3\]"):
        InferenceSession(same, validate=False, strict=True).run(None, {"X": np.ones(3, np.float32)})


def test_no_declared_output_type_means_no_output_check():
    data = _model([h.make_node("Relu", ["X"], ["Y"])], [_vi("X", [2])], [onnx.ValueInfoProto(name="Y")])
    sess = InferenceSession(data, validate=False)
    assert sess._output_check.checks == {}
    assert sess.run(None, {"X": np.ones(2, np.float32)})[0].shape == (2,)


def test_an_output_of_the_wrong_element_type_is_reported():
    data = _model([h.make_node("Cast", ["X"], ["Y"], to=T.INT64)], [_vi("X", [2])], [_vi("Y", [2])])
    with pytest.raises(EvaluationError, match="declared element type FLOAT, computed numpy dtype int64"):
        InferenceSession(data, validate=False, strict=True).run(None, {"X": np.ones(2, np.float32)})


def test_a_name_of_the_outer_carrying_node_inside_a_nested_subgraph_is_a_warning():
    """The torch exporter inside nested If: the inner branch defines Y, the outer If's output."""
    inner_then = h.make_graph([h.make_node("Relu", ["X"], ["Y"])], "inner_then", [], [_vi("Y", [2])])
    inner_else = h.make_graph([h.make_node("Neg", ["X"], ["n"])], "inner_else", [], [_vi("n", [2])])
    inner = h.make_node("If", ["C"], ["t"], then_branch=inner_then, else_branch=inner_else)
    then_g = h.make_graph([inner], "then", [], [_vi("t", [2])])
    else_g = h.make_graph([h.make_node("Neg", ["X"], ["e"])], "else", [], [_vi("e", [2])])
    data = _model([h.make_node("If", ["C"], ["Y"], then_branch=then_g, else_branch=else_g)],
                  [_vi("X", [2]), _vi("C", [], T.BOOL)], [_vi("Y", [2])])
    report = check_model(data)
    assert report.ok and [d.code for d in report.warnings] == ["shadowed-node-output"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConformanceWarning)
        np.testing.assert_array_equal(InferenceSession(data).run(None, X2)[0], [0.0, 2.0])
