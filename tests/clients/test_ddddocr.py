"""ddddocr's three models through the library unchanged (issue 45's bar): its own API
(``classification(..., probability=True)`` with the default model and with ``beta=True``, and
``detection`` with ``det=True``) on drawn captcha-like images (tests/clients/ddddocr_job.py), run
twice, each in a fresh process: with onnxruntime, and under ``python -m onnxkit.ort``.  The texts
and the detector's boxes are equal, and every probability the library returns (the OCR models'
per-step softmax; the detector's objectness times class score) is within :data:`PROBABILITY` of
onnxruntime's.  Skipped when ddddocr is not installed (the ``clients`` extra, its own venv).

The largest differences measured (x86-64 with AVX-512 VNNI, the figures in the commit that set
this file): default model 0 (bit-equal: its Sigmoid and DynamicQuantizeLSTM are onnxruntime's),
beta model a few 1e-6, detector a few 1e-6.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
if importlib.util.find_spec("ddddocr") is None:
    pytest.skip("ddddocr is not installed (pip install -e '.[clients]')", allow_module_level=True)

JOB = Path(__file__).resolve().with_name("ddddocr_job.py")
REPO = JOB.parents[2]
#: the largest difference allowed in any probability the library returns
PROBABILITY = 1e-3


def _side(folder: Path, standin: bool) -> tuple:
    folder.mkdir()
    cmd = [sys.executable, *(["-m", "onnxkit.ort"] if standin else []), str(JOB), str(folder)]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=str(folder))
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    with np.load(folder / "arrays.npz") as arrays:
        return result, {k: arrays[k] for k in arrays.files}


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddddocr")
    return _side(root / "onnxruntime", False), _side(root / "onnxkit", True)


def _scores(raw):
    """The detector's probabilities as the library forms them: objectness times class score."""
    return raw[..., 4:5].astype(np.float64) * raw[..., 5:]


def test_the_stand_in_ran_onnxkit_and_the_reference_onnxruntime(sides):
    (ort_result, _), (kit_result, _) = sides
    assert "onnxkit" in kit_result["onnxruntime"] and "onnxkit" not in ort_result["onnxruntime"]


@pytest.mark.parametrize("model", ["default", "beta"])
def test_ocr_texts_equal_and_probabilities_within_1e_3(sides, model):
    (ort_result, ort_arrays), (kit_result, kit_arrays) = sides
    assert kit_result["texts"][model] == ort_result["texts"][model]
    assert len(ort_result["texts"][model]) == 8 and any(ort_result["texts"][model])
    worst = 0.0
    for k in range(8):
        want, got = ort_arrays[f"{model}_{k}"], kit_arrays[f"{model}_{k}"]
        assert got.shape == want.shape and want.ndim == 3
        worst = max(worst, float(np.abs(got - want).max()))
    assert worst <= PROBABILITY, (model, worst)


def test_detector_boxes_equal_and_scores_within_1e_3(sides):
    (ort_result, ort_arrays), (kit_result, kit_arrays) = sides
    assert kit_result["boxes"] == ort_result["boxes"] and len(ort_result["boxes"]) >= 3
    want, got = ort_arrays["det_raw"], kit_arrays["det_raw"]
    assert got.shape == want.shape
    worst = float(np.abs(_scores(got) - _scores(want)).max())
    assert worst <= PROBABILITY, worst
