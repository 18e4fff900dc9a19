"""Quantized models, thread-matched: onnxkit-cpu vs onnxruntime, one thread each (issue 32 item 2).

The models are the ones onnxruntime's quantizer makes from corpus models in the test build
(``plugins/microsoft_domain/tests/test_models.py`` writes them to ``.cache/corpus/microsoft``;
run that test file once if they are missing): dynamic int8 (``quantize_dynamic``: BERT, GPT-2,
the small ResNet), static QDQ (``quantize_static``: the small ResNet, ViT, BERT, the U-Net with Resize) and static
QOperator (the small ResNet), each fed its source model's fixed corpus inputs.  The QDQ models run
on integer kernels through the optimizer's ``qdq`` pass (``onnxkit/runtime/optimizer/qdq.py``);
``--no-qdq`` adds a column ``noqdq``: onnxkit with that pass off.  Per model three sessions are timed *interleaved*
(one call of each per round, the order rotating), median of ``--repeat`` rounds after a warm-up:

* ``kit``:      onnxkit, ``intra_op_num_threads=1`` (BLAS one thread), its default level
* ``portable``: the same, planned with the cpu quantization overrides replaced by the portable
  kernels they override (``onnxkit_cpu/overrides/quantization.py``, ``quantized_conv.py``,
  ``quantized_microsoft.py``): what those overrides save
* ``ort``:      onnxruntime, ``intra_op_num_threads=1``, ``inter_op_num_threads=1``, its default level

It prints the conditions (date, CPUs, load average, BLAS, versions), per model the medians and
the ratios ``kit/ort`` and ``portable/kit``, and the geometric means.  A timing is one call after
a garbage collection (``timing.interleaved_samples``).  Needs onnxruntime.

    python benchmarks/quantized.py [--repeat N] [-k NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import warnings
from pathlib import Path

from timing import interleaved_samples, medians

ROOT = Path(__file__).resolve().parent.parent
#: derived model -> the corpus model whose inputs it takes
MODELS = {"qdyn_bert_ts": "hf_bert_ts", "qdyn_gpt2_ts": "hf_gpt2_ts", "qdyn_small_resnet_ts": "small_resnet_ts",
          "qdq_small_resnet_ts": "small_resnet_ts", "qdq_vit_ts": "hf_vit_ts", "qdq_bert_ts": "hf_bert_ts",
          "qdq_unet_resize_ts": "unet_resize_ts", "qop_small_resnet_ts": "small_resnet_ts"}
#: the override modules whose kernels ``portable`` replaces
OVERRIDES = ("quantization", "quantized_conv", "quantized_microsoft")


@contextlib.contextmanager
def portable_quantization():
    """While inside, sessions planned on cpu run the portable kernels where the cpu backend
    has a quantization override."""
    import importlib

    from onnxkit.registry import get_registry

    reg = get_registry()
    table = reg.kernels["cpu"]
    keys = [k for name in OVERRIDES for k in importlib.import_module(f"onnxkit_cpu.overrides.{name}").KERNELS]
    saved = {k: table[k] for k in keys if k in table and k in reg.portable}
    try:
        for k in saved:
            table[k] = reg.portable[k]
        yield
    finally:
        table.update(saved)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("-k", dest="only", default=None, help="only models whose name contains this")
    parser.add_argument("--no-qdq", action="store_true", help="also time onnxkit with the qdq pass off")
    args = parser.parse_args()

    import onnxruntime as ort
    from models import _ms, conditions

    from onnxkit import InferenceSession, SessionOptions

    sys.path.insert(0, str(ROOT / "tests" / "corpus"))
    from corpus_cache import corpus_dir, load_inputs

    ort.set_default_logger_severity(3)
    warnings.simplefilter("ignore")   # the corpus models' validation warnings (reported by the corpus tests)
    folder = corpus_dir()
    print("conditions:", conditions())
    print(f"interleaved, median of {args.repeat} timings of one call each after a garbage collection; onnxkit "
          "intra_op_num_threads=1 (BLAS 1 thread), onnxruntime intra_op_num_threads=1 inter_op_num_threads=1\n")
    print(f"{'model':24s} {'kit':>10s} {'portable':>10s} {'ort':>10s}  {'kit/ort':>7s} {'port/kit':>8s}")
    rows = []
    for name, source in MODELS.items():
        if args.only and args.only not in name:
            continue
        path = folder / "microsoft" / f"{name}.onnx"
        if not path.is_file():
            print(f"{name:24s} missing: run plugins/microsoft_domain/tests/test_models.py once")
            continue
        feed = load_inputs(folder, source)
        so = SessionOptions()
        so.intra_op_num_threads = 1
        sessions = {"kit": InferenceSession(str(path), so)}
        with portable_quantization():
            sessions["portable"] = InferenceSession(str(path), so)
        if args.no_qdq:
            off = SessionOptions()
            off.intra_op_num_threads = 1
            off.add_session_config_entry("session.disable_passes", "qdq")
            sessions["noqdq"] = InferenceSession(str(path), off)
        o = ort.SessionOptions()
        o.intra_op_num_threads = 1
        o.inter_op_num_threads = 1
        sessions["ort"] = ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])
        fns = {k: (lambda s=s: s.run(None, feed)) for k, s in sessions.items()}
        t = medians(interleaved_samples(fns, args.repeat, 1, quiesce=False))
        rows.append((name, t["kit"], t["portable"], t["ort"]))
        extra = f"  noqdq {_ms(t['noqdq'])} {t['noqdq'] / t['ort']:5.2f}" if "noqdq" in t else ""
        print(f"{name:24s} {_ms(t['kit'])} {_ms(t['portable'])} {_ms(t['ort'])}  {t['kit'] / t['ort']:7.2f} "
              f"{t['portable'] / t['kit']:8.2f}{extra}", flush=True)

    def gmean(values):
        return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan

    print()
    print(f"geometric mean onnxkit / onnxruntime, 1 thread each ({len(rows)} models): "
          f"{gmean([r[1] / r[3] for r in rows]):.2f}  (target <= 2)")
    print(f"geometric mean onnxkit with the portable quantization kernels / onnxruntime: "
          f"{gmean([r[2] / r[3] for r in rows]):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
