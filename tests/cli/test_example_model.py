"""The bundled example model that the README's set-up command runs."""

import subprocess
import sys
from pathlib import Path

import numpy as np

import onnxkit
from onnxkit.runtime import InferenceSession

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_bundled_model_is_what_the_script_builds(tmp_path):
    sys.path.insert(0, str(EXAMPLES))
    try:
        from make_example_model import build
    finally:
        sys.path.remove(str(EXAMPLES))
    path = tmp_path / "digits.onnx"
    onnxkit.save(build(), path)
    assert path.read_bytes() == (EXAMPLES / "digits.onnx").read_bytes()


def test_the_bundled_model_conforms_and_agrees_with_onnxruntime():
    import onnxruntime as ort

    assert onnxkit.check_model(EXAMPLES / "digits.onnx").ok
    images = np.load(EXAMPLES / "digits_input.npy")
    (ours,) = InferenceSession(EXAMPLES / "digits.onnx").run(None, {"image": images})
    (theirs,) = ort.InferenceSession(str(EXAMPLES / "digits.onnx")).run(None, {"image": images})
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ours.sum(axis=1), 1.0, rtol=1e-6)


def test_onnxkit_run_writes_the_outputs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "onnxkit", "run", str(EXAMPLES / "digits.onnx"),
                          "--input", f"image={EXAMPLES / 'digits_input.npy'}", "--output-dir", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "probabilities: float32[2, 10]" in out.stdout
    assert np.load(tmp_path / "probabilities.npy").shape == (2, 10)
