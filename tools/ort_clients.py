"""Run libraries that import onnxruntime, unchanged, with onnxruntime and with onnxkit standing in.

    python3 tools/ort_clients.py [NAME ...]          compare (all clients when no name is given)
    python3 tools/ort_clients.py --job NAME          one client's job; prints its results as JSON

Each client (:data:`JOBS`) is a small job written here that drives the library's public API on
inputs made here (drawn text, synthetic audio, a tiny random-weight transformer exported
locally: nothing is downloaded) and prints what the library returned.  ``compare`` runs every
job twice, each in its own process: ``python tools/ort_clients.py --job NAME`` (the real
onnxruntime) and ``python -m onnxkit.ort tools/ort_clients.py --job NAME`` (the runner, so the
library's ``import onnxruntime`` gets onnxkit), and compares the two: strings and integers
exactly, floats within :data:`RTOL` / :data:`ATOL`.  A library that is not importable is
reported as ``skipped``.  Each job's JSON names the ``onnxruntime`` module it ran on, so a
comparison of onnxruntime with itself cannot pass unnoticed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile

RTOL, ATOL = 1e-4, 1e-5
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _text_image(text: str, size=(320, 96), scale: float = 1.6):
    """A white BGR image (uint8) with ``text`` drawn in black."""
    import cv2
    import numpy as np

    img = np.full((size[1], size[0], 3), 255, np.uint8)
    cv2.putText(img, text, (10, size[1] * 2 // 3), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 3, cv2.LINE_AA)
    return img


def job_magika() -> dict:
    from magika import Magika

    m = Magika()
    samples = {
        "python": b"import os\n\ndef main():\n    print(os.getcwd())\n\nif __name__ == '__main__':\n    main()\n",
        "json": b'{"name": "onnxkit", "version": [1, 2, 3], "nested": {"ok": true, "items": [1, 2]}}\n' * 4,
        "html": b"<!DOCTYPE html><html><head><title>t</title></head><body><p>hello</p></body></html>\n" * 3,
        "c": b"#include <stdio.h>\nint main(void) {\n  printf(\"hi\\n\");\n  return 0;\n}\n" * 2,
    }
    out = {}
    for name, data in samples.items():
        r = m.identify_bytes(data)
        out[name] = {"label": str(r.output.label), "score": float(r.score)}
    return out


def job_rapidocr() -> dict:
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR()
    result, _ = engine(_text_image("ONNX 2026"))
    return {"lines": [{"box": [[float(v) for v in p] for p in box], "text": text, "score": float(score)}
                      for box, text, score in (result or [])]}


def job_silero_vad() -> dict:
    import numpy as np
    import torch
    from silero_vad import get_speech_timestamps, load_silero_vad

    model = load_silero_vad(onnx=True)
    rng = np.random.default_rng(0)
    t = np.arange(16000 * 2) / 16000
    voiced = (np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t)) * 0.3).astype(np.float32)
    audio = np.concatenate([rng.normal(0, 0.01, 16000).astype(np.float32), voiced,
                            rng.normal(0, 0.01, 8000).astype(np.float32)])
    wav = torch.from_numpy(audio)
    probs = [float(model(wav[i:i + 512], 16000)) for i in range(0, 512 * 24, 512)]
    model.reset_states()
    stamps = get_speech_timestamps(wav, model, sampling_rate=16000)
    return {"probs": probs, "timestamps": [dict(s) for s in stamps]}


def job_nudenet() -> dict:
    import cv2
    import numpy as np
    from nudenet import NudeDetector

    rng = np.random.default_rng(0)
    img = (rng.random((240, 320, 3)) * 255).astype(np.uint8)
    cv2.circle(img, (160, 120), 60, (180, 150, 120), -1)
    path = os.path.join(tempfile.mkdtemp(prefix="onnxkit-clients-"), "img.png")
    cv2.imwrite(path, img)
    from nudenet.nudenet import _read_image

    detector = NudeDetector()
    dets = detector.detect(path)
    raw = detector.onnx_session.run(None, {detector.input_name: _read_image(path, detector.input_width)[0]})[0]
    top = np.sort(raw[0, 4:].ravel())[-8:]   # the highest class scores, below the library's 0.2 cut too
    return {"detections": [{"class": d["class"], "score": float(d["score"]), "box": [int(v) for v in d["box"]]}
                           for d in dets], "top_class_scores": [float(v) for v in top]}


def job_ddddocr() -> dict:
    import cv2
    import ddddocr

    out = {}
    ok, png = cv2.imencode(".png", _text_image("x7Kq", (160, 60), 1.5))
    for label, kwargs in (("beta", {"beta": True}), ("default", {})):
        try:
            ocr = ddddocr.DdddOcr(show_ad=False, **kwargs)
            out[label] = ocr.classification(png.tobytes())
        except Exception as e:  # noqa: BLE001 - the failure is the result compared
            out[label] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return out


def _tiny_transformers(folder: str) -> tuple:
    """A tiny random-weight BERT classifier and GPT-2, saved with ``save_pretrained`` (seeded)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    bert = BertForSequenceClassification(BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2,
                                                    num_attention_heads=2, intermediate_size=48,
                                                    max_position_embeddings=64, num_labels=3))
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=120, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                     bos_token_id=1, eos_token_id=2, pad_token_id=0))
    paths = os.path.join(folder, "bert"), os.path.join(folder, "gpt2")
    bert.save_pretrained(paths[0])
    gpt.save_pretrained(paths[1])
    return paths


def job_optimum() -> dict:
    import numpy as np
    import torch
    from optimum.onnxruntime import ORTModelForCausalLM, ORTModelForSequenceClassification

    folder = os.environ.get("ONNXKIT_CLIENTS_DIR") or tempfile.mkdtemp(prefix="onnxkit-optimum-")
    bert_dir, gpt_dir = _tiny_transformers(folder)
    ids = torch.tensor([[5, 17, 33, 8, 91, 4], [7, 7, 12, 64, 3, 0]])
    mask = torch.tensor([[1] * 6, [1] * 5 + [0]])
    cls = ORTModelForSequenceClassification.from_pretrained(bert_dir, export=True)
    logits = cls(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).logits
    lm = ORTModelForCausalLM.from_pretrained(gpt_dir, export=True, use_cache=True)
    gen = lm.generate(input_ids=ids[:1], attention_mask=mask[:1], max_new_tokens=8, do_sample=False)
    return {"logits": np.asarray(logits).tolist(), "generated": gen.tolist(), "use_cache": bool(lm.use_cache)}


JOBS = {"magika": job_magika, "rapidocr": job_rapidocr, "silero_vad": job_silero_vad, "nudenet": job_nudenet,
        "ddddocr": job_ddddocr, "optimum": job_optimum}
#: The module each job needs importable (else the client is skipped).
NEEDS = {"magika": "magika", "rapidocr": "rapidocr_onnxruntime", "silero_vad": "silero_vad", "nudenet": "nudenet",
         "ddddocr": "ddddocr", "optimum": "optimum.onnxruntime"}


def run_job(name: str) -> dict:
    import onnxruntime

    result = JOBS[name]()
    return {"onnxruntime": getattr(onnxruntime, "__file__", "") or "", "result": result}


def differences(a, b, where: str = "") -> list:
    """Where ``a`` and ``b`` differ: strings, ints and bools exactly, floats within RTOL/ATOL."""
    if isinstance(a, dict) and isinstance(b, dict):
        if sorted(a) != sorted(b):
            return [f"{where}: keys {sorted(a)} vs {sorted(b)}"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
                and math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL):
            return []
        return [f"{where}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


def run_side(name: str, standin: bool, python: str = sys.executable, timeout: int = 900) -> dict:
    """One job in a fresh process: ``{"ok", "onnxruntime", "result"}`` or ``{"ok": False, "error"}``."""
    cmd = [python, *(["-m", "onnxkit.ort"] if standin else []), os.path.abspath(__file__), "--job", name]
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tempfile.gettempdir())
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode != 0 or not last.startswith("{"):
        return {"ok": False, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:400]}
    return {"ok": True, **json.loads(last)}


def importable(module: str, python: str = sys.executable) -> bool:
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module.split('.')[0]!r}) else 1)"
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def compare(name: str, python: str = sys.executable) -> dict:
    """``{"status": "equal" | "different" | "failed" | "skipped", "detail": ...}`` for one client."""
    if not importable(NEEDS[name], python):
        return {"status": "skipped", "detail": f"{NEEDS[name]} is not importable"}
    ort = run_side(name, False, python)
    kit = run_side(name, True, python)
    if not ort["ok"]:
        return {"status": "skipped", "detail": f"fails on onnxruntime itself: {ort['error']}"}
    if not kit["ok"]:
        return {"status": "failed", "detail": kit["error"]}
    if "onnxkit" not in kit["onnxruntime"] or "onnxkit" in ort["onnxruntime"]:
        return {"status": "failed", "detail": f"modules used: {ort['onnxruntime']} / {kit['onnxruntime']}"}
    diffs = differences(ort["result"], kit["result"])
    return {"status": "different" if diffs else "equal", "detail": diffs[:5] or kit["result"]}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--job"]:
        print(json.dumps(run_job(argv[1])))
        return 0
    names = argv or list(JOBS)
    unknown = [n for n in names if n not in JOBS]
    if unknown:
        print(f"unknown client(s) {unknown}; known: {list(JOBS)}", file=sys.stderr)
        return 2
    bad = 0
    for name in names:
        r = compare(name)
        bad += r["status"] in ("different", "failed")
        print(f"{name:12} {r['status']:10} {json.dumps(r['detail'])[:600]}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
