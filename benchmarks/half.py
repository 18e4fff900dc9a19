"""float16 and bfloat16 models (issue 44, item 5): onnxkit-cpu against onnxruntime.

Five architectures, each converted from float32 by onnxconverter-common's
``float16.convert_float_to_float16`` (the usual deployment step) with ``keep_io_types`` True
(float32 inputs and outputs, Casts at the edges) and False (float16 throughout):

* ResNet-18, ViT and BERT: transformers' configurations with random weights
  (``torch.manual_seed(0)``; no download), exported by torch's TorchScript exporter at opset 17
  into ``--out`` (default ``.cache/half``; kept between runs).  ViT-base and BERT-base widths,
  ``--layers`` encoder layers (default 4) to keep a run short on a shared machine.
* the U-Net (``unet_resize_ts``) and Whisper-tiny's encoder over 30 s of audio
  (``hf_whisper_encoder_long_dynamo``) from the corpus (``.cache/corpus``; ``python -m
  tests.corpus.build`` makes it).

plus a bfloat16 variant of the models whose bfloat16 graph onnxruntime 1.32 runs on CPU (each
float16 tensor and Cast target of the keep_io_types=True graph retyped to bfloat16; where
onnxruntime refuses it (1.32 has no CPU kernel for most bfloat16 operators) onnxkit's bfloat16
run is timed (where the graph is valid: at opset 17 Conv and MaxPool do not admit bfloat16, and
onnxkit refuses such a graph naming the node) and compared against onnxruntime's float32 model, and the line says so).  Each model is timed with onnxkit (``ONNXKIT_FIRST_RUN=warm``)
against onnxruntime 1.32 (CPU provider), one intra-op thread each (``OPENBLAS_NUM_THREADS=1``
is set for onnxkit's BLAS before numpy loads) and, with ``--threads 0``, each library's default;
two warm-up calls, then ``--repeat`` rounds of one call each, interleaved (the order
alternating), median.  Prints both wall times, the ratio, and the largest absolute difference of the
first output from onnxruntime's together with onnxruntime's largest magnitude; one thread each,
also both calls' thread CPU time (``time.thread_time``: each library computes in the calling
thread then) and its ratio, the measure on a shared, loaded host.

Run: ``python benchmarks/half.py [--repeat N] [-k NAME] [--threads 1|0]``.  Needs torch,
transformers, onnx, onnxconverter-common, onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if "--threads" not in sys.argv or "1" in sys.argv[sys.argv.index("--threads") + 1:][:1]:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import timing  # noqa: E402,F401  (ONNXKIT_FIRST_RUN=warm: steady-state runs)

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / ".cache" / "corpus"


def _exported(layers: int):
    """name -> (config factory, model class, input factory): the models exported here."""
    import torch
    import transformers as t

    def bert_inputs():
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, 30522, (1, 128), generator=g)
        return {"input_ids": ids, "attention_mask": torch.ones(1, 128, dtype=torch.int64)}

    return {
        "resnet18": (lambda: t.ResNetConfig(layer_type="basic", depths=[2, 2, 2, 2],
                                            hidden_sizes=[64, 128, 256, 512]),
                     t.ResNetForImageClassification, lambda: {"pixel_values": torch.randn(1, 3, 224, 224)}),
        "vit": (lambda: t.ViTConfig(num_hidden_layers=layers), t.ViTForImageClassification,
                lambda: {"pixel_values": torch.randn(1, 3, 224, 224)}),
        "bert": (lambda: t.BertConfig(num_hidden_layers=layers), t.BertModel, bert_inputs),
    }


class _First:
    """Wraps a transformers model: keyword inputs in, the first output out (the logits / hidden states)."""

    def __new__(cls, model, keys):
        import torch

        class First(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, *args):
                return self.model(**dict(zip(keys, args)))[0]

        return First()


def export(name: str, out: Path, layers: int) -> tuple:
    """(float32 model path, inputs) of ``name``: exported once into ``out``, or the corpus's."""
    corpus = {"unet": "unet_resize_ts", "whisper_encoder": "hf_whisper_encoder_long_dynamo"}
    if name in corpus:
        path = CORPUS / f"{corpus[name]}.onnx"
        if not path.exists():
            raise SystemExit(f"{path} is missing: build the corpus first (python -m tests.corpus.build)")
        return path, dict(np.load(CORPUS / f"{corpus[name]}.inputs.npz"))
    path = out / f"{name}.onnx"
    inputs = out / f"{name}.inputs.npz"
    if not path.exists():
        import torch

        torch.manual_seed(0)
        config, cls, make_inputs = _exported(layers)[name]
        model = cls(config()).eval()
        feed = make_inputs()
        wrapped = _First(model, list(feed))
        with torch.no_grad():
            torch.onnx.export(wrapped, tuple(feed.values()), str(path), input_names=list(feed),
                              output_names=["y"], dynamo=False, opset_version=17)
        np.savez(inputs, **{k: v.numpy() for k, v in feed.items()})
    return path, dict(np.load(inputs))


NAMES = ("resnet18", "unet", "bert", "vit", "whisper_encoder")


def converted(path: Path, out: Path, keep_io: bool) -> Path:
    """``path`` converted to float16 by onnxconverter-common (kept in ``out``)."""
    dst = out / f"{path.stem}.f16{'_io32' if keep_io else ''}.onnx"
    if not dst.exists():
        import warnings

        import onnx
        from onnxconverter_common import float16

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # "the float32 number ... will be truncated"
            model = float16.convert_float_to_float16(onnx.load(str(path)), keep_io_types=keep_io)
        onnx.save(model, str(dst))
    return dst


def bfloat16_of(f16_io32: Path) -> Path:
    """The keep_io_types=True float16 model with every float16 retyped to bfloat16."""
    dst = f16_io32.with_name(f16_io32.name.replace(".f16_io32", ".bf16_io32"))
    if dst.exists():
        return dst
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.load(str(f16_io32))
    F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16

    def retype_tensor(t):
        if t.data_type == F16:
            v = numpy_helper.to_array(t).astype(np.float32)
            t.CopyFrom(helper.make_tensor(t.name, BF16, v.shape, v.reshape(-1).tolist()))

    def walk(g):
        for t in g.initializer:
            retype_tensor(t)
        for vi in list(g.value_info) + list(g.input) + list(g.output):
            if vi.type.tensor_type.elem_type == F16:
                vi.type.tensor_type.elem_type = BF16
        for n in g.node:
            for a in n.attribute:
                if n.op_type == "Cast" and a.name == "to" and a.i == F16:
                    a.i = BF16
                if a.type == onnx.AttributeProto.TENSOR:
                    retype_tensor(a.t)
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)

    walk(m.graph)
    onnx.save(m, str(dst))
    return dst


def compare(path: Path, feed: dict, repeat: int, threads: int, float32: Path = None) -> tuple:
    """(onnxkit median s, onnxruntime median s, max |diff|, max |ort|, note) or a string saying
    why not; wall time, the note giving the calling thread's CPU time too where one thread each
    computes in the calling thread.  Where onnxruntime refuses ``path`` and ``float32`` is given, onnxruntime runs that
    float32 model instead (the note says so)."""
    import onnxruntime as ort

    import onnxkit

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    note = ""
    try:
        peer = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as e:                               # noqa: BLE001  (a type onnxruntime has no kernel for)
        why = str(e).splitlines()[0][:100]
        if float32 is None:
            return f"onnxruntime refuses it: {why}"
        peer = ort.InferenceSession(str(float32), so, providers=["CPUExecutionProvider"])
        note = f"  [onnxruntime refuses the bfloat16 graph ({why.split(' : ')[-1][:60]}...): its float32 model]"
    types = {i.name: i.type for i in peer.get_inputs()}
    dt = {"tensor(float16)": np.float16, "tensor(float)": np.float32}
    feed = {k: (v.astype(dt[types[k]]) if types[k] in dt else v) for k, v in feed.items()}
    if "tensor(bfloat16)" in types.values():
        return "bfloat16 inputs: onnxruntime's Python API takes no bfloat16 array"
    ko = onnxkit.SessionOptions()
    if threads:
        ko.intra_op_num_threads = threads
    try:
        kit = onnxkit.InferenceSession(str(path), ko)
    except onnxkit.OnnxkitError as e:       # a bfloat16 graph its opset does not admit (Conv takes it from 22)
        first = [ln.strip() for ln in str(e).splitlines() if "error:" in ln][:1]
        return f"onnxkit refuses it: {first[0].split('error: ')[-1][:110] if first else str(e)[:110]}"
    want = peer.run(None, feed)[0].astype(np.float64)
    got = np.asarray(kit.run(None, feed)[0]).astype(np.float64)
    diff, top = float(np.abs(want - got).max()), float(np.abs(want).max())
    for _ in range(2):
        peer.run(None, feed), kit.run(None, feed)
    times = {"ort": [], "kit": []}
    cpu = {"ort": [], "kit": []}
    for i in range(repeat):
        for who in (("ort", "kit") if i % 2 == 0 else ("kit", "ort")):
            sess = peer if who == "ort" else kit
            c, t = time.thread_time(), time.perf_counter()
            sess.run(None, feed)
            times[who].append(time.perf_counter() - t)
            cpu[who].append(time.thread_time() - c)
    note = (f"  thread CPU {statistics.median(cpu['kit']) * 1e3:.2f} ms vs {statistics.median(cpu['ort']) * 1e3:.2f} ms"
            f" (ratio {statistics.median(cpu['kit']) / statistics.median(cpu['ort']):.2f})" if threads == 1 else "") + note
    return statistics.median(times["kit"]), statistics.median(times["ort"]), diff, top, note


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("-k", default="")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="1: one thread each; 0: each library's default")
    parser.add_argument("--no-bf16", action="store_true")
    parser.add_argument("--out", default=str(ROOT / ".cache" / "half"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import onnxruntime

    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"{os.cpu_count()} CPUs, load average {load}; onnxruntime {onnxruntime.__version__}; "
          f"{'one thread each' if args.threads == 1 else 'default threads'}; interleaved, median of {args.repeat}; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")
    for name in NAMES:
        if args.k not in name:
            continue
        path, feed = export(name, out, args.layers)
        variants = [("float32", path), ("f16 io32", converted(path, out, True)), ("f16", converted(path, out, False))]
        if not args.no_bf16:
            variants.append(("bf16 io32", bfloat16_of(variants[1][1])))
        for label, p in variants:
            r = compare(p, feed, args.repeat, args.threads, path if label.startswith("bf16") else None)
            if isinstance(r, str):
                print(f"{name:16} {label:9} {r}", flush=True)
                continue
            kit, ort_s, diff, top, note = r
            print(f"{name:16} {label:9} onnxkit {kit * 1e3:9.2f} ms  onnxruntime {ort_s * 1e3:9.2f} ms  "
                  f"ratio {kit / ort_s:6.2f}  max |diff| {diff:.2e} (max |ort| {top:.2e}){note}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
