"""transformers' image models beyond the corpus: onnxkit-cpu vs onnxruntime, one thread each.

Exports MobileNetV1/V2, EfficientNet-B0, MobileViT-S and ConvNeXt-tiny from their transformers
configurations (random weights, ``torch.manual_seed(0)``; no download) with torch's TorchScript
exporter at opset 17 into ``--out`` (default ``.cache/image_models``; kept between runs), then
times each model: onnxkit (``intra_op_num_threads=1``, ``ONNXKIT_FIRST_RUN=warm``) against
onnxruntime (one intra-op and one inter-op thread), two warm-up calls, then ``--repeat`` rounds of
one call each, interleaved (the order alternating), median; prints both times, the ratio and
the largest difference relative to onnxruntime's largest output.  Set
``OPENBLAS_NUM_THREADS=1`` for onnxkit's BLAS.
Run: ``python benchmarks/image_models.py [--repeat N] [-k NAME]``.  Needs torch, transformers,
onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import timing  # noqa: F401  (ONNXKIT_FIRST_RUN=warm: steady-state runs)

ROOT = Path(__file__).resolve().parent.parent


def configs():
    import transformers as t

    return {
        "mobilenet_v2": (t.MobileNetV2Config(image_size=224), t.MobileNetV2ForImageClassification, 224),
        "mobilenet_v1": (t.MobileNetV1Config(image_size=224), t.MobileNetV1ForImageClassification, 224),
        "efficientnet_b0": (t.EfficientNetConfig(image_size=224, width_coefficient=1.0, depth_coefficient=1.0,
                                                 hidden_dim=1280), t.EfficientNetForImageClassification, 224),
        "mobilevit_s": (t.MobileViTConfig(image_size=256), t.MobileViTForImageClassification, 256),
        "convnext_tiny": (t.ConvNextConfig(), t.ConvNextForImageClassification, 224),
    }


def export(name: str, out: Path) -> Path:
    path = out / f"{name}.onnx"
    if path.exists():
        return path
    import torch

    torch.manual_seed(0)
    cfg, cls, size = configs()[name]
    model = cls(cfg).eval()
    x = torch.randn(1, 3, size, size)
    torch.onnx.export(model, (x,), str(path), input_names=["pixel_values"], output_names=["logits"], dynamo=False,
                      opset_version=17)
    np.savez(out / f"{name}.inputs.npz", pixel_values=x.numpy())
    return path


def compare(path: Path, feed: dict, repeat: int) -> tuple:
    import onnxruntime as ort

    import onnxkit

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
    peer = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    ko = onnxkit.SessionOptions()
    ko.intra_op_num_threads = 1
    kit = onnxkit.InferenceSession(str(path), ko)
    want, got = peer.run(None, feed)[0], kit.run(None, feed)[0]
    err = float(np.abs(want - got).max() / (np.abs(want).max() + 1e-30))
    for _ in range(2):
        peer.run(None, feed), kit.run(None, feed)
    times = {"ort": [], "kit": []}
    for i in range(repeat):
        for who in (("ort", "kit") if i % 2 == 0 else ("kit", "ort")):
            sess = peer if who == "ort" else kit
            t = time.perf_counter()
            sess.run(None, feed)
            times[who].append(time.perf_counter() - t)
    return statistics.median(times["kit"]), statistics.median(times["ort"]), err


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("-k", default="")
    parser.add_argument("--out", default=str(ROOT / ".cache" / "image_models"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"{os.cpu_count()} CPUs, load average {load}; one thread each; interleaved, median of {args.repeat}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    for name in configs():
        if args.k not in name:
            continue
        path = export(name, out)
        feed = dict(np.load(out / f"{name}.inputs.npz"))
        kit, ort_s, err = compare(path, feed, args.repeat)
        print(f"{name:18} onnxkit {kit * 1e3:8.2f} ms  onnxruntime {ort_s * 1e3:8.2f} ms  ratio {kit / ort_s:5.2f}  "
              f"max diff / max |ort| {err:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
