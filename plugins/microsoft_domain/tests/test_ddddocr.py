"""ddddocr's three models (its wheel ships them: common_old.onnx — the default OCR model, with
com.microsoft DynamicQuantizeLSTM —, common.onnx — ``beta=True`` — and common_det.onnx, the
detector) on onnxkit's cpu and gpu backends with default options, compared with onnxruntime on
fixed inputs.  Skipped when ddddocr is not installed (the models are found through its package
folder; ddddocr itself, which needs OpenCV, is not imported)."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from onnxkit.runtime import InferenceSession

SPEC = importlib.util.find_spec("ddddocr")
FOLDER = Path(SPEC.origin).parent if SPEC is not None and SPEC.origin else None
pytestmark = pytest.mark.skipif(FOLDER is None, reason="ddddocr is not installed (pip install ddddocr: a 76 MB wheel)")

#: model -> (input shape, tolerance as a fraction of the output's largest magnitude)
MODELS = {
    "common_old": ((1, 1, 64, 160), 0.03),  # onnxruntime quantizes the LSTM's activations on the fly
    "common": ((1, 1, 64, 160), 1e-5),
    "common_det": ((1, 3, 416, 416), 1e-5),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_ddddocr_model_runs_on_both_backends_and_matches_onnxruntime(name):
    shape, rel = MODELS[name]
    path = FOLDER / f"{name}.onnx"
    x = (np.random.default_rng(0).random(shape, dtype=np.float32) - 0.5) / 0.5  # ddddocr's normalization
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    feed = {ref.get_inputs()[0].name: x}
    want = ref.run(None, feed)
    for backend in ("cpu", "gpu"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sess = InferenceSession(str(path), backend)
        assert not sess.fallbacks, sess.fallbacks
        got = sess.run(None, feed)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (name, backend)
            tol = rel * float(np.max(np.abs(w)))
            err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
            assert err <= tol, (name, backend, err, tol)
            if name == "common":  # float OCR logits: the same character at every step
                np.testing.assert_array_equal(np.argmax(g, -1), np.argmax(w, -1))
