"""ai.onnx SimplifiedLayerNormalization-1, the extension operator onnxkit-microsoft adds to ai.onnx
(where onnxruntime registers it): one node against onnxruntime on cpu and gpu over shapes, element
types and attributes; how the checker, ``strict=True`` and ``onnxkit unsupported`` report it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from ms_harness import assert_same, build, rand, run_onnxkit, run_ort

from onnxkit.cli import main as cli_main
from onnxkit.runtime import InferenceSession

OP = "SimplifiedLayerNormalization"


def _check(inputs, attrs=None, n_out=2, rtol=1e-5, atol=1e-5):
    model, feed = build(OP, inputs, attrs, n_out, domain="")
    want = run_ort(model, feed)
    for backend in ("cpu", "gpu"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = run_onnxkit(model, feed, backend)
        assert_same(got, want, rtol, atol, f"{OP} {attrs or {}} on {backend}")
    return want


@pytest.mark.parametrize("x_shape,scale_shape,attrs", [
    ((2, 3, 8), (8,), {}),
    ((4, 16), (16,), {"epsilon": 1e-6}),
    ((2, 3, 4), (3, 4), {"axis": 1}),
    ((2, 3, 4), (4,), {"axis": -2}),      # scale broadcast against the normalized axes [3, 4]
    ((2, 3, 4), (1, 4), {"axis": 1}),
    ((2, 3, 4), (2, 3, 4), {"axis": 0}),
    ((5,), (5,), {"epsilon": 0.5}),
])
def test_simplified_layer_normalization_matches_onnxruntime(x_shape, scale_shape, attrs):
    rng = np.random.default_rng(len(x_shape) * 7 + len(scale_shape))
    y, inv = _check([rand(rng, x_shape, scale=3.0), rand(rng, scale_shape)], attrs)
    assert inv.dtype == np.float32


@pytest.mark.parametrize("x_dtype,scale_dtype,tol", [
    (np.float16, np.float16, 2e-3), (np.float16, np.float32, 1e-4), (np.float64, np.float64, 1e-9)])
def test_simplified_layer_normalization_element_types(x_dtype, scale_dtype, tol):
    rng = np.random.default_rng(11)
    y, inv = _check([rand(rng, (3, 5, 16), x_dtype), rand(rng, (16,), scale_dtype)], rtol=tol, atol=tol)
    assert y.dtype == scale_dtype and inv.dtype == np.float32


def test_simplified_layer_normalization_without_its_optional_output():
    rng = np.random.default_rng(5)
    (y,) = _check([rand(rng, (2, 6)), rand(rng, (6,))], n_out=1)
    assert y.shape == (2, 6)


@pytest.mark.parametrize("attrs,x_shape,scale_shape,fragment", [
    ({"stash_type": 0}, (2, 4), (4,), "stash_type 0 is not supported"),
    ({"axis": 2}, (2, 4), (4,), "axis 2 is outside [-2, 1]"),
    ({}, (2, 4), (3,), "scale has shape [3]; it must broadcast to X's normalized axes [4]"),
])
def test_simplified_layer_normalization_bad_input_is_a_clear_error(attrs, x_shape, scale_shape, fragment):
    from onnxkit.errors import OnnxkitError

    rng = np.random.default_rng(2)
    model, feed = build(OP, [rand(rng, x_shape), rand(rng, scale_shape)], attrs, 1, domain="")
    for backend in ("cpu", "gpu"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(OnnxkitError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
                InferenceSession(model, backend).run(None, feed)


def _model():
    rng = np.random.default_rng(1)
    return build(OP, [rand(rng, (2, 4)), rand(rng, (4,))], {}, 1, domain="")


def test_the_checker_reports_the_extension_naming_its_distribution_and_strict_refuses_it():
    import onnxkit
    from onnxkit.errors import OnnxkitError

    model, feed = _model()
    report = onnxkit.check_model(model)
    found = [d for d in report.diagnostics if d.code == "extension-operator"]
    assert len(found) == 1 and found[0].severity == "warning", report.diagnostics
    assert "binds to the extension ai.onnx::SimplifiedLayerNormalization-1 of onnxkit-microsoft" in found[0].message
    assert not [d for d in report.diagnostics if d.severity == "error"]
    with pytest.warns(onnxkit.ConformanceWarning, match="extension-operator"):
        InferenceSession(model, "cpu")
    with pytest.raises(OnnxkitError, match="extension-operator"):
        InferenceSession(model, "cpu", strict=True)


def test_the_checker_still_checks_the_node_against_the_extension_definition():
    import onnxkit

    rng = np.random.default_rng(1)
    model, _ = build(OP, [rand(rng, (2, 4)), rand(rng, (4,))], {"bogus": 1}, 1, domain="")
    codes = {d.code for d in onnxkit.check_model(model).diagnostics}
    assert {"extension-operator", "unknown-attribute"} <= codes, codes


def test_onnxkit_unsupported_lists_the_extension_and_its_distribution(tmp_path, capsys):
    model, _ = _model()
    path = tmp_path / "sln.onnx"
    path.write_bytes(model)
    for backend in ("cpu", "gpu"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert cli_main(["unsupported", str(path), "--backend", backend]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == "1 operator(s) bound to an extension (not part of their domain's standard):"
        assert out[1].split() == ["ai.onnx", "SimplifiedLayerNormalization-1", "provided", "by", "onnxkit-microsoft"]
        assert out[2].startswith("every operator of ") and out[2].endswith(f"is supported on {backend}")
