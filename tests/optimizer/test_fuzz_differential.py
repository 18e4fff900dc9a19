"""The differential fuzzer's bounded run: fixed seeds, every model family, 0 failures.

``python tools/fuzz_differential.py`` is the long run; this one keeps the suite's share small
(one process, 1000 small models, ~20 s)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from fuzz.differential.driver import families, run_many  # noqa: E402
from fuzz.differential.oracle import check  # noqa: E402

MODELS = 1000


def test_bounded_run_has_no_failures():
    report = run_many(MODELS, seed=7, jobs=1, minimize=False)
    assert report.models == MODELS
    assert set(report.by_family) == set(families())      # every family took part
    assert not report.failures, "\n".join(o.summary for o in report.failures)


def test_the_oracle_catches_a_wrong_rank():
    """The oracle is able to fail: a model whose declared output onnxkit computes is checked
    against onnxruntime; a GELU expansion whose constant is [1,1,1,1,1] must keep rank 5."""
    import numpy as np
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper

    from fuzz.differential.build import Builder
    from fuzz.differential.oracle import close

    assert close(np.zeros(3, np.float32), np.zeros((1, 1, 1, 1, 3), np.float32)) is not None
    assert close(np.array([np.nan]), np.array([1.0])) is not None
    assert close(np.array([1.0 + 1e-3], np.float32), np.array([1.0], np.float32)) is not None
    b = Builder(np.random.default_rng(0))
    x = b.input(TP.FLOAT, [3])
    d = b.node("Div", [x, b.const(np.array(1.4142135, np.float32), "init")])
    e = b.node("Erf", [d])
    f = b.node("Add", [e, b.const(np.ones((1, 1, 1, 1, 1), np.float32), "init")])
    g = b.node("Mul", [x, f])
    b.output(b.node("Mul", [g, b.const(np.array(0.5, np.float32), "init")]))
    m = b.model()
    assert isinstance(m, onnx.ModelProto) and helper is not None
    assert check(m, 0).status == "ok"     # onnxkit keeps the rank (issue 29, item 1)


def test_the_group_norm_tie_break_is_a_float64_two_pass_computation():
    """The oracle's own GroupNormalization (where onnxruntime's float32 E[x^2] - E[x]^2 cancels)
    is the float64 two-pass formula: a nearly constant group normalizes to its deviations, not 0."""
    import numpy as np
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper

    from fuzz.differential.exclusions import direct_group_norm

    scale, bias = np.array([2.0, 1.0]), np.array([0.5, -1.0])
    g = helper.make_graph([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=1, epsilon=0.0)],
                          "g", [helper.make_tensor_value_info("x", TP.DOUBLE, [1, 2, 2])],
                          [helper.make_tensor_value_info("y", TP.DOUBLE, [1, 2, 2])],
                          initializer=[numpy_helper.from_array(scale, "s"), numpy_helper.from_array(bias, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    x = 1e4 + np.array([[[-1.0, -1.0], [1.0, 1.0]]]) * 1e-6     # mean 1e4, standard deviation 1e-6
    y = direct_group_norm(m, {"x": x})
    np.testing.assert_allclose(y, [[[-2.0 + 0.5, -1.5], [0.0, 0.0]]], atol=1e-6)
    x32 = np.array([[[1.0, 2.0], [3.0, 5.5]]], np.float32)
    y32 = direct_group_norm(m, {"x": x32})       # float32 X: computed in float64, rounded once
    assert y32.dtype == np.float32
    np.testing.assert_array_equal(y32, direct_group_norm(m, {"x": x32.astype(np.float64)}).astype(np.float32))
    assert direct_group_norm(m, {"x": x}, ill_conditioned=True) is not None   # variance 1e-12 against mean^2 1e8
    assert direct_group_norm(m, {"x": np.array([[[-1.0, 1.0], [2.0, -2.0]]])}, ill_conditioned=True) is None


def _one_node(op, elem, opset, rank, inits=(), **attrs):
    import onnx
    from onnx import helper

    node = helper.make_node(op, ["x"] + [t.name for t in inits], ["y"], **attrs)
    dims = [f"d{i}" for i in range(rank)]
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, dims)],
                          [helper.make_tensor_value_info("y", elem, dims)], initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    assert isinstance(m, onnx.ModelProto)
    return m


def _ort_run(m, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def test_float64_hard_swish_set_aside_only_where_onnxkit_computes_the_formula():
    """Fuzzer seed 20261207, models 4560, 5304, 6456: float64 HardSwish at opset 18 (onnxruntime's
    one float64 kernel for it) near x = -3 differs by ~4e-8 from onnxruntime, which (as
    onnx.reference) runs the function body: HardSigmoid with the float attribute alpha = 1/6
    rounded to float32.  onnxkit computes Part 2's x * max(0, min(1, x / 6 + 1 / 2)); the
    exclusion needs onnxkit equal to that formula and the oracle to the float32 alpha's."""
    import onnxkit
    from onnx import TensorProto as TP

    from fuzz.differential.exclusions import direct_reason
    from fuzz.differential.oracle import close

    m = _one_node("HardSwish", TP.DOUBLE, 18, 2)
    x = np.array([[-2.86627782], [2.96608425], [-2.99], [-0.5]])
    alpha32 = float(np.float32(1 / 6))
    formula, body = x * np.clip(x / 6 + 0.5, 0, 1), x * np.clip(x * alpha32 + 0.5, 0, 1)
    got, want = onnxkit.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0], _ort_run(m, {"x": x})
    assert close(got, want) is not None                 # the disagreement (beyond float64's tolerance)
    assert close(got, formula) is None and close(want, body) is None
    assert direct_reason(m, {"x": x}, got, want) == "hardswish-float32-alpha"
    # not set aside: an onnxkit result off the formula (float32 arithmetic), or an oracle off the body
    assert direct_reason(m, {"x": x}, got.astype(np.float32).astype(np.float64) * (1 + 1e-6), want) == ""
    assert direct_reason(m, {"x": x}, got, formula * (1 + 1e-6)) == ""
    assert direct_reason(_one_node("HardSigmoid", TP.DOUBLE, 18, 2), {"x": x}, got, want) == ""


def test_float32_group_norm_set_aside_only_where_onnxkit_computes_the_formula():
    """Fuzzer seed 20261207, model 6470: float32 GroupNormalization-21, a group of two values
    (-1.6956544, -1.7595865: variance 1e-3, mean squared 3): onnxruntime's (and onnx.reference's)
    float32 E[x^2] - E[x]^2 cancels, 2.3e-4 off; onnxkit's two-pass variance agrees with the
    direct float64 computation, which the exclusion requires."""
    import onnxkit
    from onnx import TensorProto as TP
    from onnx import numpy_helper

    from fuzz.differential.exclusions import direct_reason
    from fuzz.differential.oracle import close

    scale = numpy_helper.from_array(np.array([1.9542453, 1.9204028, 1.44538, 0.86136186], np.float32), "s")
    bias = numpy_helper.from_array(np.array([-0.04346937, 0.5283728, 0.7772724, -1.4533442], np.float32), "b")
    m = _one_node("GroupNormalization", TP.FLOAT, 21, 3, (scale, bias), num_groups=4)
    x = np.array([[[2.1136353, -0.32704905], [-1.6956544, -1.7595865], [-0.34110552, 1.854729],
                   [1.2460711, 0.6527275]]], np.float32)
    got, want = onnxkit.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0], _ort_run(m, {"x": x})
    assert close(got, want) is not None
    # by hand: +-0.99514243 (the group's two values normalized in float64) * 1.9204028 + 0.5283728
    np.testing.assert_allclose(got[0, 1], [2.4394471, -1.3827015], rtol=2e-5)
    assert direct_reason(m, {"x": x}, got, want) == "group-norm-cancellation"
    assert direct_reason(m, {"x": x}, want, got) == ""      # onnxruntime's cancelled values are no formula
    assert direct_reason(m, {"x": x * np.float32(0.5) + np.float32(3)}, got, want) == ""
