"""The differential fuzzer's bounded run: fixed seeds, every model family, 0 failures.

``python tools/fuzz_differential.py`` is the long run; this one keeps the suite's share small
(one process, 1000 small models, ~20 s)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parent.parent
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
    assert direct_group_norm(m, {"x": x.astype(np.float32)}) is None          # float64 only
