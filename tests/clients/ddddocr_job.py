"""ddddocr's three models through its own public API, run by tests/clients/test_ddddocr.py twice,
each in a fresh process: with onnxruntime, and under ``python -m onnxkit.ort`` (the library
unchanged, its ``import onnxruntime`` given onnxkit).

    python [-m onnxkit.ort] tests/clients/ddddocr_job.py OUTDIR

Writes ``OUTDIR/result.json`` (the ``onnxruntime`` module the library ran on, each image's text
from the default model — common_old.onnx, with com.microsoft DynamicQuantizeLSTM — and from the
``beta=True`` model — common.onnx —, and the detector's boxes — common_det.onnx, ``det=True``)
and ``OUTDIR/arrays.npz`` (the per-step probabilities ``classification(..., probability=True)``
returns, and the detector's raw output as the library's session returned it).  The inputs are
drawn here with OpenCV (captcha-like text in several fonts, sizes and slants, with noise lines):
nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import sys

#: (text, font, scale, thickness, slant in pixels, noise seed) of each OCR image
OCR_IMAGES = (("x7Kq", 0, 1.5, 3, 0, 1), ("ab3D", 2, 1.3, 2, 6, 2), ("9fGh2", 3, 1.1, 2, -5, 3),
              ("Wm8p", 1, 1.4, 3, 4, 4), ("kT4z", 4, 1.2, 2, 0, 5), ("Q2rY", 6, 1.4, 2, -8, 6),
              ("h6Jn", 0, 1.0, 2, 10, 7), ("5sVb", 2, 1.6, 3, -3, 8))
DET_WORDS = (("ONNX", (20, 90)), ("kit", (240, 60)), ("2026", (60, 250)), ("ocr", (260, 330)), ("Det", (150, 170)))


def ocr_image(text, font, scale, thickness, slant, seed):
    """A 160 x 60 BGR captcha-like image, PNG bytes."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(seed)
    img = np.full((60, 160, 3), 255, np.uint8)
    cv2.putText(img, text, (8, 44), font, scale, (30, 30, 30), thickness, cv2.LINE_AA)
    if slant:
        m = np.float32([[1, slant / 60.0, -slant / 2.0], [0, 1, 0]])
        img = cv2.warpAffine(img, m, (160, 60), borderValue=(255, 255, 255))
    for _ in range(3):
        p, q = rng.integers(0, [160, 60], 2), rng.integers(0, [160, 60], 2)
        cv2.line(img, tuple(int(v) for v in p), tuple(int(v) for v in q), tuple(int(v) for v in rng.integers(80, 200, 3)), 1)
    return cv2.imencode(".png", img)[1].tobytes()


def det_image():
    import cv2
    import numpy as np

    img = np.full((400, 420, 3), 245, np.uint8)
    for k, (word, at) in enumerate(DET_WORDS):
        cv2.putText(img, word, at, k % 4, 1.8, (20, 20 + 40 * k, 200 - 30 * k), 3, cv2.LINE_AA)
    return cv2.imencode(".png", img)[1].tobytes()


def main(out: str) -> int:
    import ddddocr
    import numpy as np
    import onnxruntime

    result = {"onnxruntime": getattr(onnxruntime, "__file__", "") or "", "texts": {}, "boxes": None}
    arrays = {}
    for label, kwargs in (("default", {}), ("beta", {"beta": True})):
        ocr = ddddocr.DdddOcr(show_ad=False, **kwargs)
        texts = []
        for k, spec in enumerate(OCR_IMAGES):
            r = ocr.classification(ocr_image(*spec), probability=True)
            texts.append(r["text"])
            arrays[f"{label}_{k}"] = np.asarray(r["probabilities"], np.float64)
        result["texts"][label] = texts
    det = ddddocr.DdddOcr(det=True, ocr=False, show_ad=False)
    session = det.detection_engine.session
    run, seen = session.run, []

    def recording_run(*args, **kwargs):
        outputs = run(*args, **kwargs)
        seen.append(np.asarray(outputs[0]))
        return outputs
    session.run = recording_run
    result["boxes"] = [[int(v) for v in b] for b in det.detection(det_image())]
    arrays["det_raw"] = seen[-1]
    np.savez(os.path.join(out, "arrays.npz"), **arrays)
    with open(os.path.join(out, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
