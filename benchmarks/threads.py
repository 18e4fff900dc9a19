"""Intra-op thread scaling, onnxkit-cpu vs onnxruntime: each model timed at 1 and 2 intra-op
threads and at the default (onnxkit: ``intra_op_num_threads=0``, the free physical cores by the
busy-machine rule of ``onnxkit/runtime/threads.py``; onnxruntime: its default pools).

Six sessions per model (``kit-1``, ``kit-2``, ``kit-dflt``, ``ort-1``, ``ort-2``, ``ort-dflt``;
onnxruntime with ``inter_op_num_threads=1`` where the intra count is set) are timed interleaved,
one call each per round after a garbage collection (onnxkit's compiled loops planned from the
first run: ``ONNXKIT_FIRST_RUN=warm`` unless set), each timing once the process's other threads
are idle (``timing.settle``), median of ``--repeat`` rounds after the warm-up.  Printed per
model: the medians, the scaling ``1 -> 2`` threads of each runtime (t1 / t2), and kit/ort at 1,
2 and default threads; then geometric means, and first the conditions (CPUs, load average: the
scaling a shared machine shows depends on it).

Models: the corpus models of ``models.py`` (``.cache/corpus``) whose runs are short, and a few
conv / attention ones; ``-k WORD`` keeps the names containing a word.  To time another tree (the
code before a change), run this file with ``PYTHONPATH`` set to that tree and its plugins, as
``tools/mutation_smoke.py`` does.

``--kernels`` times single-node models of the kernels onnxkit splits across its threads instead
(Gelu, LayerNormalization, Softmax, depthwise Conv, the Conv paths split across threads: row blocks,
Winograd, 1x1 column blocks with a Swish; MaxPool, Resize, Attention), onnxkit and
onnxruntime at 1 and 2 threads, back to back, and prints the *fastest* of ``--repeat`` timings of
each: on a shared machine the fastest is the run whose threads all found a core, which is what
the split can give; the medians of a loaded machine mostly measure the other processes.
Run: ``python benchmarks/threads.py [--repeat N] [-k WORD] [--kernels]``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import warnings
from pathlib import Path

from models import conditions
from timing import interleaved_samples, medians

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("hf_bert_ts", "hf_vit_ts", "hf_gpt2_ts", "lstm_tagger_ts", "small_resnet_ts", "rapidocr_rec_v4",
          "magika_standard_v3_3", "silero_vad_16k_op15", "unet_resize_ts", "attention_encoder_ts",
          "conv1d_audio_ts", "hf_distilbert_ts", "rapidocr_det_v4", "nudenet_320n")


def main() -> int:
    os.environ.setdefault("ONNXKIT_FIRST_RUN", "warm")     # compiled loops from the first run: a warm server
    import numpy as np
    import onnxruntime as ort

    import onnxkit
    from onnxkit import InferenceSession, SessionOptions

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("-k", dest="words", action="append", default=[])
    parser.add_argument("--kernels", action="store_true")
    args = parser.parse_args()
    if args.kernels:
        return kernels(args.repeat)
    ort.set_default_logger_severity(3)
    warnings.simplefilter("ignore")
    print("conditions:", conditions())
    print("onnxkit from", Path(onnxkit.__file__).resolve().parent.parent)
    print(f"interleaved, median of {args.repeat} timings of one call each after a garbage collection\n")
    head = f"{'model':24s} " + " ".join(f"{k:>9s}" for k in ("kit-1", "kit-2", "kit-dflt", "ort-1", "ort-2", "ort-dflt"))
    print(head + f"  {'kit 1/2':>7s} {'ort 1/2':>7s} {'k/o 1':>6s} {'k/o 2':>6s} {'k/o d':>6s}")
    rows = []
    for name in MODELS:
        if args.words and not any(w in name for w in args.words):
            continue
        path = ROOT / ".cache" / "corpus" / f"{name}.onnx"
        if not path.exists():
            continue
        feed = dict(np.load(ROOT / ".cache" / "corpus" / f"{name}.inputs.npz"))
        sessions = {}
        for key, n in (("kit-1", 1), ("kit-2", 2), ("kit-dflt", 0)):
            so = SessionOptions()
            so.intra_op_num_threads = n
            sessions[key] = InferenceSession(str(path), so)
        for key, n in (("ort-1", 1), ("ort-2", 2), ("ort-dflt", 0)):
            so = ort.SessionOptions()
            if n:
                so.intra_op_num_threads, so.inter_op_num_threads = n, 1
            sessions[key] = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        fns = {k: (lambda s=s: s.run(None, feed)) for k, s in sessions.items()}
        t = medians(interleaved_samples(fns, args.repeat, 1, quiesce=True))
        rows.append(t)
        print(f"{name:24s} " + " ".join(f"{t[k] * 1e3:9.2f}" for k in t)
              + f"  {t['kit-1'] / t['kit-2']:7.2f} {t['ort-1'] / t['ort-2']:7.2f} {t['kit-1'] / t['ort-1']:6.2f}"
              f" {t['kit-2'] / t['ort-2']:6.2f} {t['kit-dflt'] / t['ort-dflt']:6.2f}", flush=True)

    def gmean(values):
        values = list(values)
        return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan

    print(f"\ngeometric means over {len(rows)} models: scaling 1 -> 2 threads kit "
          f"{gmean(r['kit-1'] / r['kit-2'] for r in rows):.2f}, ort {gmean(r['ort-1'] / r['ort-2'] for r in rows):.2f}; "
          f"kit/ort at 1 thread {gmean(r['kit-1'] / r['ort-1'] for r in rows):.2f}, at 2 "
          f"{gmean(r['kit-2'] / r['ort-2'] for r in rows):.2f}, default {gmean(r['kit-dflt'] / r['ort-dflt'] for r in rows):.2f} "
          f"(worst {max(r['kit-dflt'] / r['ort-dflt'] for r in rows):.2f})")
    print("end conditions:", conditions())
    return 0


def _kernel_models():
    """``(name, onnxkit model, onnxruntime model, feeds)`` of single-node models (onnx's helper)."""
    import numpy as np
    from onnx import TensorProto as TP
    from onnx import helper

    rng = np.random.default_rng(0)
    F = TP.FLOAT

    def model(node, feeds, inits=(), opset=20, extra=()):
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, F, a.shape) for n, a in feeds.items()],
                              [helper.make_tensor_value_info("y", F, None)], list(inits))
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra], ir_version=10).SerializeToString()

    x = rng.standard_normal((8, 512, 768)).astype(np.float32)
    yield "Gelu 8x512x768", *[model(helper.make_node("Gelu", ["x"], ["y"]), {"x": x})] * 2, {"x": x}
    ln = [helper.make_tensor(n, F, [768], rng.standard_normal(768).astype(np.float32)) for n in "sb"]
    m = model(helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"]), {"x": x}, ln)
    yield "LayerNorm 4096x768", m, m, {"x": x}
    r = rng.standard_normal((8, 12, 128, 128)).astype(np.float32)
    m = model(helper.make_node("Softmax", ["x"], ["y"]), {"x": r})
    yield "Softmax rows of 128", m, m, {"x": r}
    img = rng.standard_normal((1, 256, 56, 56)).astype(np.float32)
    w = helper.make_tensor("w", F, [256, 1, 3, 3], rng.standard_normal((256, 1, 3, 3)).astype(np.float32))
    m = model(helper.make_node("Conv", ["x", "w"], ["y"], group=256, pads=[1] * 4), {"x": img}, [w])
    yield "depthwise Conv 256x56x56", m, m, {"x": img}
    for name, xs, ws, attrs, swish in (
            ("Conv 3->16 3x3/2 256x256 (row blocks)", (1, 3, 256, 256), (16, 3, 3, 3), {"strides": [2, 2]}, False),
            ("Conv 64->1 3x3 256x256 (row blocks)", (1, 64, 256, 256), (1, 64, 3, 3), {}, False),
            ("Conv 128->64 3x3 64x64 (Winograd)", (1, 128, 64, 64), (64, 128, 3, 3), {}, False),
            ("Conv 32->128 1x1 128x128 + Swish", (1, 32, 128, 128), (128, 32, 1, 1), {}, True),
            ("Conv 64->32 1x1 128x128", (1, 64, 128, 128), (32, 64, 1, 1), {}, False)):
        cx = rng.standard_normal(xs).astype(np.float32)
        cw = helper.make_tensor("w", F, list(ws), (rng.standard_normal(ws) * 0.1).astype(np.float32))
        cb = helper.make_tensor("b", F, [ws[0]], rng.standard_normal(ws[0]).astype(np.float32))
        conv = helper.make_node("Conv", ["x", "w", "b"], ["c" if swish else "y"], pads=[ws[2] // 2] * 4, **attrs)
        nodes = [conv] + ([helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
                          if swish else [])
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, xs)],
                              [helper.make_tensor_value_info("y", F, None)], [cw, cb])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=10).SerializeToString()
        yield name, m, m, {"x": cx}
    m = model(helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1] * 4), {"x": img})
    yield "MaxPool 3x3 256x56x56", m, m, {"x": img}
    sc = helper.make_tensor("sc", F, [4], [1.0, 1.0, 2.0, 2.0])
    m = model(helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear"), {"x": img}, [sc], opset=19)
    yield "Resize linear x2 256x56x56", m, m, {"x": img}
    q, k, v = (rng.standard_normal((4, 8, 48, 64)).astype(np.float32) for _ in range(3))
    feeds = {"q": q, "k": k, "v": v}
    kit = model(helper.make_node("Attention", ["q", "k", "v"], ["y"], domain="ai.onnxkit"), feeds, opset=17,
                extra=[helper.make_opsetid("ai.onnxkit", 2)])
    yield "Attention 4x8x48x64", kit, model(helper.make_node("Attention", ["q", "k", "v"], ["y"]), feeds, opset=23), feeds


def kernels(repeat: int) -> int:
    import time

    import onnxruntime as ort

    from onnxkit import InferenceSession, SessionOptions

    print(f"fastest of {repeat} back-to-back timings per session; onnxkit with ONNXKIT_FIRST_RUN=warm\n")
    print(f"{'kernel':40s} {'kit-1':>8s} {'kit-2':>8s} {'ort-1':>8s} {'ort-2':>8s}  {'kit 1/2':>7s} {'ort 1/2':>7s}")
    for name, kit, oracle, feeds in _kernel_models():
        fns = {}
        for n in (1, 2):
            so = SessionOptions()
            so.intra_op_num_threads = n
            s = InferenceSession(kit, so, validate=False)
            fns[f"kit-{n}"] = lambda s=s: s.run(None, feeds)
        for n in (1, 2):
            so = ort.SessionOptions()
            so.intra_op_num_threads, so.inter_op_num_threads = n, 1
            s = ort.InferenceSession(oracle, so, providers=["CPUExecutionProvider"])
            fns[f"ort-{n}"] = lambda s=s: s.run(None, feeds)
        best = {}
        for key, fn in fns.items():
            fn()
            fn()
            ts = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            best[key] = min(ts)
        print(f"{name:40s} " + " ".join(f"{best[k] * 1e3:8.2f}" for k in ("kit-1", "kit-2", "ort-1", "ort-2"))
              + f"  {best['kit-1'] / best['kit-2']:7.2f} {best['ort-1'] / best['ort-2']:7.2f}", flush=True)
    from models import conditions as c
    print("end conditions:", c())
    return 0


if __name__ == "__main__":
    sys.exit(main())
