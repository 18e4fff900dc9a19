"""Evaluation speed, thread-matched: onnxkit-cpu vs onnxruntime, one BLAS/intra-op thread each.

For each model (the nine light models of the ONNX test package, and real-world corpus models
with their fixed inputs, ``.cache/corpus``), three sessions are timed *interleaved* (one call
of each per round, the order rotating), median of ``--repeat`` rounds after a warm-up:

* ``kit-off``: onnxkit, ``intra_op_num_threads=1``, ``graph_optimization_level=ORT_DISABLE_ALL``
* ``kit-on``:  onnxkit, ``intra_op_num_threads=1``, the default level (``ORT_ENABLE_ALL``)
* ``ort``:     onnxruntime, ``intra_op_num_threads=1``, ``inter_op_num_threads=1``, its default level

It prints per model the medians and the ratios ``kit-on/ort`` and ``kit-off/kit-on``, then the
geometric means, and first the conditions: date, CPUs available, load average, BLAS, versions.
``--threads default`` times both runtimes with their default threads instead (onnxkit: BLAS
threads = physical cores, set by threadpoolctl per run; onnxruntime: its default pools), and
``--busy N`` keeps N other processes spinning on the CPUs while timing (a busy machine), and
prints under each model the fastest and slowest call of each runtime and the median share of
a CPU its threads got (:func:`spread`).
With default threads each timing starts once the process's other threads are idle
(``timing.settle``: onnxruntime's intra-op pool spins about one CPU for 60-100 ms after a run,
which would otherwise fall on the next runtime timed; ``--no-settle`` skips the wait); one
thread each, neither runtime has a pool, and timings follow each other at once.
A timing is one call after a garbage collection (caches as the other two sessions left them);
``--warm`` makes it back-to-back calls instead (~20 ms of onnxruntime's time: a warm serving
loop), where a small model's fixed per-node costs show fully.
Needs the test extras (onnxruntime).  Run: ``python benchmarks/models.py [--repeat N] [-k NAME]
[--light-only] [--threads 1|default] [--busy N] [--warm]``.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import statistics
import sys
import warnings
from pathlib import Path

from timing import interleaved_samples, medians

ROOT = Path(__file__).resolve().parent.parent
#: corpus models timed (real architectures, real-size inputs)
CORPUS = ("hf_bert_ts", "hf_vit_ts", "hf_gpt2_ts", "lstm_tagger_ts", "small_resnet_ts", "rapidocr_rec_v4",
          "magika_standard_v3_3", "silero_vad_16k_op15", "hf_whisper_encoder_long_dynamo", "unet_resize_ts")


def light_models() -> list:
    return sorted((ROOT / ".cache" / "onnx-vectors-1.23.2" / "light").glob("light_*.onnx"))


def conditions() -> str:
    import numpy
    import onnxruntime
    from threadpoolctl import threadpool_info

    blas = ", ".join(f"{i['internal_api']} {i['version']} ({i['num_threads']} threads by default, "
                     f"{i.get('architecture') or '?'} kernels)" for i in threadpool_info() if i.get("user_api") == "blas")
    pinned = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    if pinned:  # a pinned core type picks older kernels than the CPU runs (onnxruntime's own are not pinned)
        blas += " (" + ", ".join(f"{k}={v}" for k, v in pinned.items()) + ")"
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.processor() or platform.machine()}; "
            f"{len(os.sched_getaffinity(0))} CPUs available; load average {load}; BLAS {blas}; "
            f"numpy {numpy.__version__}, onnxruntime {onnxruntime.__version__}, Python {platform.python_version()}")


def cases(light_only: bool, only):
    """``(name, model path, feed)`` of every model timed."""
    import numpy as np

    import onnxkit

    for path in light_models():
        model = onnxkit.load(path)
        init = {t.name for t in model.graph.initializer}
        rng = np.random.default_rng(0)
        feed = {vi.name: rng.standard_normal([int(d) for d in vi.type.shape.values]).astype(np.float32)
                for vi in model.graph.input if vi.name not in init}
        yield "light/" + path.stem[len("light_"):], path, feed
    if light_only:
        return
    sys.path.insert(0, str(ROOT / "tests" / "corpus"))
    from corpus_cache import corpus_dir, load_inputs

    folder = corpus_dir()
    for name in CORPUS:
        if (folder / f"{name}.onnx").is_file():
            yield "corpus/" + name, folder / f"{name}.onnx", load_inputs(folder, name)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--light-only", action="store_true")
    parser.add_argument("-k", dest="only", default=None, help="only models whose name contains this")
    parser.add_argument("--threads", choices=("1", "default"), default="1")
    parser.add_argument("--busy", type=int, default=0, help="spinning processes kept running while timing")
    parser.add_argument("--no-settle", action="store_true",
                        help="with --threads default: start each timing at once, while the previous call's "
                             "thread pool may still spin (one thread each: no pool, never waited for)")
    parser.add_argument("--warm", action="store_true",
                        help="time back-to-back calls (a warm loop, ~20 ms per timing) instead of one call each")
    args = parser.parse_args()
    one = args.threads == "1"
    spinners = [_spin() for _ in range(args.busy)]
    try:
        return _run(args, one)
    finally:
        for p in spinners:
            p.kill()


def _ms(seconds: float) -> str:
    """A time in milliseconds, 8 wide, three significant digits for small ones."""
    ms = seconds * 1e3
    return f"{ms:8.1f}ms" if ms >= 10 else f"{ms:8.3f}ms" if ms < 1 else f"{ms:8.2f}ms"


def _inner_calls(fn, target_s: float = 0.02) -> int:
    """Back-to-back calls per timing in ``--warm`` mode: about ``target_s`` of onnxruntime's time."""
    import time

    fn()
    t0 = time.perf_counter()
    fn()
    return max(1, min(200, int(target_s / max(time.perf_counter() - t0, 1e-6))))


def spread(samples: dict, names) -> str:
    """How the timings of ``names`` spread on a busy machine: per runtime the fastest and slowest
    call and the median CPU share its threads got (``timing.interleaved_samples``), e.g.
    ``kit-on 10.7-31.3 ms at 0.78 CPU``: where its threads land beside the spinning processes
    moves a call's time by a factor of 2-6 on a small machine."""
    parts = []
    for n in names:
        walls = [w for w, _ in samples[n]]
        share = statistics.median(c for _, c in samples[n])
        parts.append(f"{n} {min(walls) * 1e3:.1f}-{max(walls) * 1e3:.1f} ms at {share:.2f} CPU (median)")
    return "; ".join(parts)


def _spin():
    """A process that keeps one CPU busy until killed."""
    import subprocess

    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _run(args, one: bool) -> int:

    import onnxruntime as ort

    from onnxkit import InferenceSession, SessionOptions
    from onnxkit.runtime.options import GraphOptimizationLevel

    ort.set_default_logger_severity(3)
    warnings.simplefilter("ignore")  # the corpus models' validation warnings (reported by the corpus tests)
    print("conditions:", conditions())
    how = ("back-to-back calls (warm loop, ~20 ms of onnxruntime time per timing)" if args.warm
           else "one call each after a garbage collection")
    if one:
        print(f"interleaved, median of {args.repeat} timings of {how}; onnxkit intra_op_num_threads=1 (BLAS 1 thread), "
              f"onnxruntime intra_op_num_threads=1 inter_op_num_threads=1; {args.busy} spinning processes\n")
    else:
        print(f"interleaved, median of {args.repeat} timings of {how}; default threads for both; "
              f"{args.busy} spinning processes\n")
    print(f"{'model':28s} {'kit-off':>10s} {'kit-on':>10s} {'ort':>10s}  {'on/ort':>7s} {'off/on':>7s}")
    rows = []
    for name, path, feed in cases(args.light_only, args.only):
        if args.only and args.only not in name:
            continue
        sessions = {}
        for key, level in (("kit-off", GraphOptimizationLevel.ORT_DISABLE_ALL),
                           ("kit-on", GraphOptimizationLevel.ORT_ENABLE_ALL)):
            so = SessionOptions()
            if one:
                so.intra_op_num_threads = 1
            so.graph_optimization_level = level
            sessions[key] = InferenceSession(str(path), so)
        so = ort.SessionOptions()
        if one:
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
        sessions["ort"] = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        fns = {k: (lambda s=s: s.run(None, feed)) for k, s in sessions.items()}
        inner = _inner_calls(fns["ort"]) if args.warm else 1
        samples = interleaved_samples(fns, args.repeat, inner, quiesce=not (one or args.no_settle))
        t = medians(samples)
        rows.append((name, t["kit-off"], t["kit-on"], t["ort"]))
        print(f"{name:28s} {_ms(t['kit-off'])} {_ms(t['kit-on'])} {_ms(t['ort'])}  "
              f"{t['kit-on'] / t['ort']:7.2f} {t['kit-off'] / t['kit-on']:7.2f}", flush=True)
        if args.busy:
            print("    " + spread(samples, ("kit-on", "ort")), flush=True)

    def gmean(values):
        return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan

    print()
    for group in ("light/", "corpus/"):
        part = [r for r in rows if r[0].startswith(group)]
        if part:
            print(f"geometric mean onnxkit (optimizer on) / onnxruntime, {group[:-1]} models ({len(part)}): "
                  f"{gmean([r[2] / r[3] for r in part]):.2f}")
    threads = "1 thread each" if one else "default threads"
    print(f"geometric mean onnxkit (optimizer on) / onnxruntime, {threads}:  {gmean([r[2] / r[3] for r in rows]):.2f}"
          "  (target <= 1.5)")
    print(f"geometric mean onnxkit (optimizer off) / onnxruntime, {threads}: {gmean([r[1] / r[3] for r in rows]):.2f}")
    print(f"geometric mean onnxkit optimizer off / on:                          {gmean([r[1] / r[2] for r in rows]):.2f}")
    print(f"models above 3x onnxruntime (optimizer on): {[r[0] for r in rows if r[2] / r[3] > 3] or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
