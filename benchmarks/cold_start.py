"""Time to first result in a fresh process: onnxkit-cpu vs onnxruntime, one intra-op thread each.

A user's command-line tool that runs a model per invocation pays, every time: the import, the
session (load, check, inference, optimizer, planning) and the first run.  For each model (the
bundled example and real-world corpus models with their fixed inputs, ``.cache/corpus``) this
starts ``--repeat`` fresh Python processes per runtime, *interleaved* (kit, ort, ort, kit, ...),
each timing from before ``import`` to the first result, and prints the medians, the ratio
onnxkit / onnxruntime per model and their geometric mean, and onnxkit's split by phase:

* ``import``   ``import onnxkit`` (onnxruntime: ``import onnxruntime``)
* ``modules``  importing the session's modules (``onnxkit.runtime``: the planner, optimizer, checker...)
* ``plugins``  finding and loading the plugins (the registry, built once per process)
* ``load``     reading and decoding the model file (Clause 12)
* ``check``    the checker (Clause 10) and type inference (Clause 9)
* ``optimize`` the graph optimizer
* ``plan``     planning on the cpu backend (kernels bound, constants folded) and the plan passes
* ``first``    the first ``run``
* ``rest``     the total less the phases above (reading the feeds, the session's own bookkeeping)
* ``next``     after the first result, ``--then`` more runs (default 4), timed together: what a tool
               that runs a model a few times per process pays beyond the first result (onnxkit's
               sessions keep their cold plan until its runs have spent numba's setup)

Both runtimes run with one intra-op thread (``intra_op_num_threads=1``; onnxruntime also
``inter_op_num_threads=1``) and their default optimization level.  Python byte code must be
cached for a fair start (``PYTHONDONTWRITEBYTECODE`` unset or the ``.pyc`` files written once);
the script warns when it is not.  The first round of each runtime is a warm-up (disk caches,
numba's on-disk cache) and is not counted.
Run: ``python benchmarks/cold_start.py [--repeat N] [-k NAME] [--then N]``.  Needs onnxruntime.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: corpus models timed, beside the bundled example
CORPUS = ("hf_bert_ts", "hf_vit_ts", "hf_gpt2_ts", "lstm_tagger_ts", "small_resnet_ts", "rapidocr_rec_v4",
          "magika_standard_v3_3", "silero_vad_16k_op15")
PHASES = ("import", "modules", "plugins", "load", "check", "optimize", "plan", "first", "rest")

_CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
runtime, model, inputs = sys.argv[1], sys.argv[2], sys.argv[3]
marks = {}
if runtime == "ort":
    import onnxruntime as rt
    marks["import"] = time.perf_counter() - t0
    import numpy as np
    so = rt.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
    t = time.perf_counter()
    s = rt.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    marks["session"] = time.perf_counter() - t
else:
    import onnxkit as rt
    marks["import"] = time.perf_counter() - t0
    import numpy as np
    t = time.perf_counter()
    from onnxkit import registry as _registry, api as _api
    from onnxkit.runtime import session as _session, plan as _plan, plans as _plans
    marks["modules"] = time.perf_counter() - t

    def timed(owner, name, phase):
        original = getattr(owner, name)
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                marks[phase] = marks.get(phase, 0.0) + time.perf_counter() - t
        setattr(owner, name, wrapper)

    timed(_session, "get_registry", "plugins")
    timed(_api, "load", "load")
    timed(_session.InferenceSession, "_validate", "check")
    timed(_session.InferenceSession, "_optimize", "optimize")
    timed(_plan.Planner, "compile_model", "plan")
    timed(_plans.PlanSet, "_passes", "plan")
    so = rt.SessionOptions(); so.intra_op_num_threads = 1
    t = time.perf_counter()
    s = rt.InferenceSession(model, so)
    marks["session"] = time.perf_counter() - t
feeds = dict(np.load(inputs)) if inputs != "-" else {"image": np.zeros((1, 1, 8, 8), np.float32)}
t = time.perf_counter()
s.run(None, feeds)
marks["first"] = time.perf_counter() - t
marks["total"] = time.perf_counter() - t0
if runtime != "ort":
    marks["rest"] = marks["total"] - sum(v for k, v in marks.items() if k not in ("session", "total"))
t = time.perf_counter()
for _ in range(int(sys.argv[4])):
    s.run(None, feeds)
marks["then"] = time.perf_counter() - t
print("COLD " + json.dumps(marks))
'''


def models(pattern: str) -> list:
    """``(name, model path, inputs path or '-')`` of the bundled example and the corpus models present."""
    found = [("digits (example)", ROOT / "examples" / "digits.onnx", "-")]
    corpus = Path(os.environ.get("ONNXKIT_CORPUS", ROOT / ".cache" / "corpus"))
    for name in CORPUS:
        path, inputs = corpus / f"{name}.onnx", corpus / f"{name}.inputs.npz"
        if path.exists() and inputs.exists():
            found.append((name, path, inputs))
    return [m for m in found if pattern in m[0]]


def one_process(runtime: str, model: Path, inputs, then: int = 0) -> dict:
    """The phase times of one fresh process (seconds); ``then``: the runs after the first result
    (their total time under ``then``)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, runtime, str(model), str(inputs), str(then)],
                          capture_output=True, text=True, env=env, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("COLD "):
            return json.loads(line[5:])
    raise RuntimeError(f"{runtime} on {model.name} failed:\n{proc.stderr[-2000:]}")


def conditions() -> str:
    import numpy
    import onnxruntime

    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    pyc = "not written (PYTHONDONTWRITEBYTECODE is set)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "cached"
    return (f"{datetime.date.today()}  {platform.machine()}  {os.cpu_count()} CPUs  load average {load}\n"
            f"python {platform.python_version()}, numpy {numpy.__version__}, onnxruntime {onnxruntime.__version__}; "
            f"byte code {pyc}; one intra-op thread each")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per runtime and model (median)")
    parser.add_argument("-k", default="", help="only models whose name contains this")
    parser.add_argument("--then", type=int, default=4,
                        help="runs after the first result, timed together (the 'next' columns: a tool that "
                             "runs a model a few times per process)")
    args = parser.parse_args(argv)
    print(conditions())
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("warning: byte code is not cached; every process compiles onnxkit's sources (not a user's start)")
    print(f"{'model':24} {'kit s':>7} {'ort s':>7} {'ratio':>6}   " + " ".join(f"{p:>8}" for p in PHASES)
          + f"   {'next kit':>8} {'next ort':>8} {'ratio':>6}")
    ratios, then_ratios = [], []
    for name, path, inputs in models(args.k):
        samples = {"kit": [], "ort": []}
        for runtime in ("kit", "ort"):  # warm-up: disk caches, numba's on-disk cache
            one_process(runtime, path, inputs)
        for i in range(args.repeat):
            order = ("kit", "ort") if i % 2 == 0 else ("ort", "kit")
            for runtime in order:
                samples[runtime].append(one_process(runtime, path, inputs, args.then))
        kit = statistics.median(s["total"] for s in samples["kit"])
        ort = statistics.median(s["total"] for s in samples["ort"])
        split = [statistics.median(s.get(p, 0.0) for s in samples["kit"]) for p in PHASES]
        then_kit = statistics.median(s["then"] for s in samples["kit"])
        then_ort = statistics.median(s["then"] for s in samples["ort"])
        ratios.append(kit / ort)
        then_ratio = then_kit / then_ort if args.then and then_ort > 0 else float("nan")
        if args.then:
            then_ratios.append(then_ratio)
        print(f"{name:24} {kit:7.3f} {ort:7.3f} {kit / ort:6.2f}   " + " ".join(f"{v:8.3f}" for v in split)
              + f"   {then_kit:8.3f} {then_ort:8.3f} {then_ratio:6.2f}", flush=True)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean onnxkit / onnxruntime, time to first result: {geo:.2f} ({len(ratios)} models)")
    if then_ratios:
        geo = math.exp(sum(math.log(r) for r in then_ratios) / len(then_ratios))
        print(f"geometric mean onnxkit / onnxruntime, the {args.then} runs after it: {geo:.2f} "
              f"(highest {max(then_ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
