"""int8 models in the formats onnxruntime's quantizer writes: onnxkit-cpu vs onnxruntime (issue 44 item 6).

Eight architectures from transformers' configurations (random weights, ``torch.manual_seed(0)``,
no download; reduced sizes, listed in :func:`configs`) are exported by torch's TorchScript exporter
at opset 17 into ``--out`` (default ``.cache/int8_models``, kept between runs), then quantized by
onnxruntime 1.32's quantizer (``onnxruntime.quantization``) in each format of :data:`FORMATS`:
static QDQ and QOperator (``quantize_static``, two random calibration samples, MinMax), per tensor
and per channel, u8 / s8 activations with u8 / s8 weights, and dynamic (``quantize_dynamic``).
Each model is timed interleaved (one call of each session per round, the order alternating,
median of ``--repeat`` rounds after two warm-up calls; wall time, and CPU time: the timing's
wall time times the process's CPU share, steadier where other processes load the machine) at one
thread each (onnxkit
``intra_op_num_threads=1``, onnxruntime intra 1 / inter 1) and, with ``--threads default``,
at each runtime's default threads.  Printed: the conditions, per model both medians, the ratio
``kit/ort`` in wall and in CPU time, and the largest absolute difference of the first output relative to onnxruntime's
largest magnitude (quantized models differ by a step where a value sits at a rounding tie;
the column shows how far that carries); then geometric means, overall (with the worst model),
per format and per architecture.

    python benchmarks/int8.py [--repeat N] [-k SUBSTRING] [--formats qdq_u8s8_pt,...] [--threads 1|default|both]
                              [--without PASS,...]

``--without qlut`` times a third session, onnxkit with those optimizer passes off, in the same
rounds (the "before" of a pass, on the same code and machine load).

Needs torch, transformers, onnxruntime.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import warnings
from pathlib import Path

import numpy as np
import timing  # noqa: F401 -- sets the warm first-run policy

ROOT = Path(__file__).resolve().parent.parent

#: format name -> (kind, quantizer keyword arguments); "static" formats take the calibration reader
FORMATS = {
    "qdq_u8s8_pt": ("static", dict(quant_format="QDQ", activation_type="QUInt8", weight_type="QInt8", per_channel=False)),
    "qdq_u8s8_pc": ("static", dict(quant_format="QDQ", activation_type="QUInt8", weight_type="QInt8", per_channel=True)),
    "qdq_s8s8_pc": ("static", dict(quant_format="QDQ", activation_type="QInt8", weight_type="QInt8", per_channel=True)),
    "qdq_u8u8_pt": ("static", dict(quant_format="QDQ", activation_type="QUInt8", weight_type="QUInt8", per_channel=False)),
    "qop_u8s8_pc": ("static", dict(quant_format="QOperator", activation_type="QUInt8", weight_type="QInt8",
                                   per_channel=True)),
    "qop_u8u8_pt": ("static", dict(quant_format="QOperator", activation_type="QUInt8", weight_type="QUInt8",
                                   per_channel=False)),
    "qop_s8s8_pt": ("static", dict(quant_format="QOperator", activation_type="QInt8", weight_type="QInt8",
                                   per_channel=False)),
    "dyn_s8": ("dynamic", dict(weight_type="QInt8", per_channel=False)),
    "dyn_u8_pc": ("dynamic", dict(weight_type="QUInt8", per_channel=True)),
}


def configs():
    """name -> (build the torch module, example inputs as a dict of numpy arrays)."""
    import transformers as t

    rng = np.random.default_rng(0)

    def image(size):
        return {"pixel_values": rng.standard_normal((1, 3, size, size)).astype(np.float32)}

    def text(vocab, length=64, mask=True):
        feed = {"input_ids": rng.integers(0, vocab, (1, length)).astype(np.int64)}
        if mask:
            feed["attention_mask"] = np.ones((1, length), np.int64)
        return feed

    return {
        "resnet18": (lambda: t.ResNetForImageClassification(t.ResNetConfig(
            layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512])), image(112)),
        "mobilenet_v2": (lambda: t.MobileNetV2ForImageClassification(t.MobileNetV2Config(image_size=112)), image(112)),
        "convnext": (lambda: t.ConvNextForImageClassification(t.ConvNextConfig(
            depths=[1, 1, 2, 1], hidden_sizes=[48, 96, 192, 384])), image(112)),
        "vit": (lambda: t.ViTForImageClassification(t.ViTConfig(
            image_size=112, patch_size=16, hidden_size=192, num_hidden_layers=4, num_attention_heads=3,
            intermediate_size=768)), image(112)),
        "bert": (lambda: t.BertModel(t.BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                                  intermediate_size=1024, vocab_size=8000)), text(8000)),
        "distilbert": (lambda: t.DistilBertModel(t.DistilBertConfig(dim=256, n_layers=4, n_heads=4, hidden_dim=1024,
                                                                    vocab_size=8000)), text(8000)),
        "gpt2": (lambda: t.GPT2Model(t.GPT2Config(n_embd=256, n_layer=4, n_head=4, vocab_size=8000, n_positions=128)),
                 text(8000, mask=False)),
        "whisper_encoder": (lambda: t.WhisperModel(t.WhisperConfig(
            d_model=256, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=1024, decoder_layers=1,
            decoder_attention_heads=4, decoder_ffn_dim=256, num_mel_bins=80, max_source_positions=200,
            vocab_size=1000, pad_token_id=1, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)).get_encoder(),
            {"input_features": rng.standard_normal((1, 80, 400)).astype(np.float32)}),
    }


class _Wrap:
    """A module returning its first output only (the exporters' plain tensor)."""

    def __new__(cls, model, names):
        import torch

        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, *args):
                out = self.m(**dict(zip(names, args)))
                return out[0] if isinstance(out, (tuple, list)) else next(iter(out.values()))

        return W()


def export(name: str, out: Path) -> Path:
    """The float model (exported once) and its example inputs (``NAME.inputs.npz``)."""
    path = out / f"{name}.onnx"
    if path.exists():
        return path
    import torch

    torch.manual_seed(0)
    build, feed = configs()[name]
    model = _Wrap(build().eval(), list(feed))
    args = tuple(torch.from_numpy(v) for v in feed.values())
    torch.onnx.export(model, args, str(path), input_names=list(feed), output_names=["y"], dynamo=False,
                      opset_version=17)
    _constants_as_initializers(path)
    np.savez(out / f"{name}.inputs.npz", **feed)
    return path


def _constants_as_initializers(path: Path) -> None:
    """The exporter's ``Constant`` nodes (tensor values) and ``Identity`` nodes of initializers
    become initializers: onnxruntime's QOperator quantizer needs a Conv's bias as an initializer
    (as ``quant_pre_process`` leaves it)."""
    import onnx

    model = onnx.load(str(path))
    inits = {t.name: t for t in model.graph.initializer}
    keep = []
    for node in model.graph.node:
        value = [a for a in node.attribute if a.name == "value"]
        source = None
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and value:
            source = value[0].t
        elif node.op_type == "Identity" and node.domain in ("", "ai.onnx") and node.input[0] in inits:
            source = inits[node.input[0]]
        if source is not None:
            tensor = onnx.TensorProto()
            tensor.CopyFrom(source)
            tensor.name = node.output[0]
            model.graph.initializer.append(tensor)
            inits[tensor.name] = tensor
        else:
            keep.append(node)
    del model.graph.node[:]
    model.graph.node.extend(keep)
    onnx.save(model, str(path))


def feed_of(out: Path, name: str) -> dict:
    with np.load(out / f"{name}.inputs.npz") as z:
        return {k: z[k] for k in z.files}


def quantize(name: str, fmt: str, out: Path) -> Path:
    """The model ``name`` quantized in format ``fmt`` by onnxruntime's quantizer (made once)."""
    path = out / f"{name}.{fmt}.onnx"
    if path.exists():
        return path
    from onnxruntime import quantization as q

    src = export(name, out)
    kind, kw = FORMATS[fmt]
    kw = dict(kw)
    if kind == "dynamic":
        q.quantize_dynamic(str(src), str(path), weight_type=getattr(q.QuantType, kw["weight_type"]),
                           per_channel=kw["per_channel"])
        return path
    feed = feed_of(out, name)
    rng = np.random.default_rng(1)

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            samples = []
            for _ in range(2):
                s = {}
                for k, v in feed.items():
                    s[k] = (rng.standard_normal(v.shape).astype(v.dtype) if v.dtype == np.float32
                            else v if k == "attention_mask" else rng.integers(0, 1000, v.shape).astype(v.dtype))
                samples.append(s)
            self.it = iter(samples)

        def get_next(self):
            return next(self.it, None)

    q.quantize_static(str(src), str(path), Reader(), quant_format=getattr(q.QuantFormat, kw["quant_format"]),
                      activation_type=getattr(q.QuantType, kw["activation_type"]),
                      weight_type=getattr(q.QuantType, kw["weight_type"]), per_channel=kw["per_channel"])
    return path


def sessions(path: Path, threads: str, without: str = ""):
    """``(onnxkit, onnxruntime[, onnxkit with the passes of the comma-separated ``without`` off])``."""
    import onnxruntime as ort

    import onnxkit

    so = ort.SessionOptions()
    ko, k0 = onnxkit.SessionOptions(), onnxkit.SessionOptions()
    if threads == "1":
        so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
        ko.intra_op_num_threads = k0.intra_op_num_threads = 1
    peer = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    kit = onnxkit.InferenceSession(str(path), ko)
    if not without:
        return kit, peer
    k0.add_session_config_entry("session.disable_passes", without)
    return kit, peer, onnxkit.InferenceSession(str(path), k0)


def interleaved(fns: dict, repeat: int) -> dict:
    """``{name: [(wall s, process CPU share, thread CPU s), ...]}``: each callable once per round,
    the order rotating per round, after two untimed warm-up calls each; a garbage collection
    before every timing.  Thread CPU is the calling thread's (``time.thread_time``): both runtimes
    compute on it at one thread, and it leaves out the waits for a CPU of a loaded machine."""
    import gc
    import time

    names = list(fns)
    for n in names:
        fns[n](), fns[n]()
    samples: dict = {n: [] for n in names}
    for r in range(repeat):
        for n in names[r % len(names):] + names[:r % len(names)]:
            gc.collect()
            c0, t0, h0 = time.process_time(), time.perf_counter(), time.thread_time()
            fns[n]()
            h, wall = time.thread_time() - h0, time.perf_counter() - t0
            samples[n].append((wall, (time.process_time() - c0) / wall if wall > 0 else 0.0, h))
    return samples


def gmean(values):
    values = [v for v in values if v == v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("-k", dest="only", default=None, help="only models whose name contains this")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated subset of " + ", ".join(FORMATS))
    parser.add_argument("--threads", choices=("1", "default", "both"), default="1")
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "int8_models")
    parser.add_argument("--build-only", action="store_true", help="export and quantize, time nothing")
    parser.add_argument("--without", default="", help="also time onnxkit with these optimizer passes off "
                        "(comma-separated, e.g. qlut), interleaved: the 'before' column")
    args = parser.parse_args()

    import onnxruntime as ort
    from models import _ms, conditions

    ort.set_default_logger_severity(3)
    warnings.simplefilter("ignore")
    args.out.mkdir(parents=True, exist_ok=True)
    formats = [f for f in args.formats.split(",") if f]
    names = [n for n in configs() if not args.only or args.only in n]
    if args.build_only:
        for n in names:
            for f in formats:
                try:
                    quantize(n, f, args.out)
                    print("made", n, f, flush=True)
                except Exception as e:  # noqa: BLE001 -- a format the quantizer refuses for a model
                    print("failed", n, f, type(e).__name__, str(e)[:200], flush=True)
        return 0
    print("conditions:", conditions())
    threads = ["1", "default"] if args.threads == "both" else [args.threads]
    print(f"interleaved, median of {args.repeat} timings of one call each; threads: "
          + ", ".join("onnxkit intra_op_num_threads=1, onnxruntime intra 1 inter 1" if t == "1" else
                      "each runtime's defaults" for t in threads) + "\n")
    print(f"{'model':30s} {'thr':>7s} {'kit':>10s} {'ort':>10s}  {'kit/ort':>7s}  {'kit cpu':>10s} {'ort cpu':>10s}  "
          f"{'cpu':>7s}  {'kit thr':>10s} {'ort thr':>10s}  {'thread':>7s}  max|diff|/max|ort|")
    ratios = {t: [] for t in threads}
    cpu_ratios = {t: [] for t in threads}
    thr_ratios = {t: [] for t in threads}
    rows = []
    for n in names:
        for f in formats:
            try:
                path = quantize(n, f, args.out)
            except Exception as e:  # noqa: BLE001
                print(f"{n + '.' + f:30s} not made: {type(e).__name__}: {str(e)[:120]}")
                continue
            feed = feed_of(args.out, n)
            for t in threads:
                try:
                    made = sessions(path, t, args.without)
                    kit, peer = made[:2]
                    want, got = peer.run(None, feed)[0], kit.run(None, feed)[0]
                except Exception as e:  # noqa: BLE001 -- reported, the table goes on
                    print(f"{n + '.' + f:30s} {t:>7s} failed: {type(e).__name__}: {str(e)[:160]}", flush=True)
                    continue
                diff = float(np.abs(want.astype(np.float64) - got.astype(np.float64)).max()
                             / (np.abs(want.astype(np.float64)).max() + 1e-30))
                fns = {"kit": lambda: kit.run(None, feed), "ort": lambda: peer.run(None, feed)}
                if args.without:
                    fns["kit0"] = lambda: made[2].run(None, feed)
                samples = interleaved(fns, args.repeat)
                m = {k: statistics.median(w for w, _, _ in v) for k, v in samples.items()}
                cpu = {k: statistics.median(w * share for w, share, _ in v) for k, v in samples.items()}
                thr = {k: statistics.median(h for _, _, h in v) for k, v in samples.items()}
                ratios[t].append(m["kit"] / m["ort"])
                cpu_ratios[t].append(cpu["kit"] / cpu["ort"])
                thr_ratios[t].append(thr["kit"] / thr["ort"])
                before = (m["kit0"] / m["ort"], cpu["kit0"] / cpu["ort"], thr["kit0"] / thr["ort"]) if args.without \
                    else (math.nan, math.nan, math.nan)
                rows.append((n, f, t, m["kit"] / m["ort"], cpu["kit"] / cpu["ort"]) + before[:2]
                            + (thr["kit"] / thr["ort"], before[2]))
                extra = (f"  without {args.without}: {_ms(thr['kit0'])} thread, {before[2]:.2f} "
                         f"(cpu {before[1]:.2f}, wall {before[0]:.2f})" if args.without else "")
                print(f"{n + '.' + f:30s} {t:>7s} {_ms(m['kit'])} {_ms(m['ort'])}  {m['kit'] / m['ort']:7.2f}  "
                      f"{_ms(cpu['kit'])} {_ms(cpu['ort'])}  {cpu['kit'] / cpu['ort']:7.2f}  "
                      f"{_ms(thr['kit'])} {_ms(thr['ort'])}  {thr['kit'] / thr['ort']:7.2f}  {diff:.2e}{extra}",
                      flush=True)
    print()
    for t, r in ratios.items():
        c, h = cpu_ratios[t], thr_ratios[t]
        print(f"geometric mean onnxkit / onnxruntime, threads {t} ({len(r)} models): wall {gmean(r):.2f} "
              f"(worst {max(r) if r else math.nan:.2f}), CPU time {gmean(c):.2f} (worst {max(c) if c else math.nan:.2f}), "
              f"thread CPU {gmean(h):.2f} (worst {max(h) if h else math.nan:.2f}); target <= 1.5")
    for label, col in (("format", 1), ("architecture", 0)):
        print(f"\nby {label} (geometric means of the thread-CPU ratios; CPU time, wall in brackets):")
        for key in dict.fromkeys(r[col] for r in rows):
            sel = [r for r in rows if r[col] == key]
            was = (f"   without {args.without}: {gmean([r[8] for r in sel]):5.2f}  ({gmean([r[6] for r in sel]):.2f}, "
                   f"{gmean([r[5] for r in sel]):.2f})" if args.without else "")
            print(f"  {key:18s} {gmean([r[7] for r in sel]):5.2f}  ({gmean([r[4] for r in sel]):.2f}, "
                  f"{gmean([r[3] for r in sel]):.2f}){was}")
    if args.without:
        print(f"\nall ({len(rows)}): {gmean([r[7] for r in rows]):.2f} ({gmean([r[4] for r in rows]):.2f}, "
              f"{gmean([r[3] for r in rows]):.2f}); without {args.without}: {gmean([r[8] for r in rows]):.2f} "
              f"({gmean([r[6] for r in rows]):.2f}, {gmean([r[5] for r in rows]):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
