"""When a session leaves its cold plan: the setup the kernels estimated against the setup measured.

A fresh session runs its cold plan (onnxkit-cpu's numpy bodies, numba not imported) until the
time its runs have spent reaches the setup its kernels estimated for the warm plan (numba's
import and target, each compiled loop's cached code: ``onnxkit_cpu.compiled.SETUP_S`` and
``LOAD_S``); then the warm plan is set up off the run path, in a background thread (and a child
process: :mod:`onnxkit.runtime.plans`), and the session switches to it between two runs.  The
rule costs at most twice the better of "never promote" and "promote at once" only if the estimate
is right, so this script measures it: for each model, in ``--repeat`` fresh processes (numba's
on-disk cache filled by a first one), it runs the session until the setup begins, waits for it
(``wait_for_warm_plan``, no runs meanwhile) and reports

* ``runs``      the runs made on the cold plan before the setup began
* ``estimate``  the record's cost (seconds)
* ``setup``     how long the background setup took from the run that began it to its end (wall
                clock, the session idle: a child process, numba's import and cache, the warm-up)
* ``switch``    the first run on the warm plan less the median of the ``--after`` runs that
                follow it: what is left of the setup inside a run (0 but for noise)
* ``cold ms`` / ``warm ms``  a run's median time on the cold plan (its last ``--after`` runs)
                and on the warm plan

and the medians over the processes.  One intra-op thread, BLAS at one thread.
``--setup thread`` sets ``ONNXKIT_WARM_SETUP=thread`` (no child process).  ``--empty-cache`` gives
each process a new empty numba cache (``NUMBA_CACHE_DIR``): the setup then compiles every loop,
and the estimate counts ``COMPILE_S`` a loop (``compiles`` 1) where it counts ``LOAD_S`` with the
cache filled: what ``COMPILE_S`` is set from (the setup's excess over a filled cache's, per loop).
Run: ``python benchmarks/promotion.py [--repeat N] [-k NAME] [--after N] [--setup process|thread] [--empty-cache]``.
Needs the corpus (``.cache/corpus``); onnxruntime is not used.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("rapidocr_rec_v4", "lstm_tagger_ts", "small_resnet_ts", "magika_standard_v3_3", "silero_vad_16k_op15",
          "hf_bert_ts")

_CHILD = r'''
import json, sys, time, statistics
import numpy as np
import onnxkit
model, inputs, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
so = onnxkit.SessionOptions(); so.intra_op_num_threads = 1
s = onnxkit.InferenceSession(model, so)
feeds = dict(np.load(inputs))
record, times = s._cold, []
while s._cold is not None and s._plans._setup is None and len(times) < 100000:
    t = time.perf_counter(); s.run(None, feeds); times.append(time.perf_counter() - t)
if record is None or not record.deferred:
    print("PROMOTION " + json.dumps({"deferred": 0})); sys.exit()
began = time.perf_counter() - times[-1]  # the run that began the setup
s.wait_for_warm_plan()
setup = time.perf_counter() - began
cold = times[-after:]
warm = []
for _ in range(after + 1):
    t = time.perf_counter(); s.run(None, feeds); warm.append(time.perf_counter() - t)
first = warm.pop(0)
print("PROMOTION " + json.dumps({"deferred": len(record.deferred), "runs": len(times), "estimate": record.cost,
                                 "compiles": int(record.compiles),
                                 "spent": record.spent, "setup": setup, "switch": first - statistics.median(warm),
                                 "cold": statistics.median(cold), "warm": statistics.median(warm)}))
'''


def one_process(model: Path, inputs: Path, after: int, setup: str = "process", empty_cache: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "ONNXKIT_FIRST_RUN"}
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", ONNXKIT_WARM_SETUP=setup)
    if empty_cache:
        with tempfile.TemporaryDirectory(prefix="onnxkit-numba-") as cache:
            return _run(model, inputs, after, dict(env, NUMBA_CACHE_DIR=cache))
    return _run(model, inputs, after, env)


def _run(model: Path, inputs: Path, after: int, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(model), str(inputs), str(after)], capture_output=True,
                          text=True, env=env, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("PROMOTION "):
            return json.loads(line[10:])
    raise RuntimeError(f"{model.name} failed:\n{proc.stderr[-2000:]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per model (median)")
    parser.add_argument("--after", type=int, default=5, help="warm runs timed after the promotion")
    parser.add_argument("-k", default="", help="only models whose name contains this")
    parser.add_argument("--setup", choices=("process", "thread"), default="process", help="ONNXKIT_WARM_SETUP")
    parser.add_argument("--empty-cache", action="store_true", help="a new empty numba cache per process (compiles)")
    args = parser.parse_args(argv)
    corpus = Path(os.environ.get("ONNXKIT_CORPUS", ROOT / ".cache" / "corpus"))
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"{os.cpu_count()} CPUs, load average {load}; one intra-op thread; median of {args.repeat} processes; "
          f"numba cache {'empty (a new folder per process)' if args.empty_cache else 'filled by a first process'}")
    print(f"{'model':24} {'deferred':>8} {'compiles':>8} {'runs':>6} {'estimate s':>10} {'setup s':>8} "
          f"{'switch ms':>9} {'cold ms':>8} {'warm ms':>8}")
    for name in MODELS:
        path, inputs = corpus / f"{name}.onnx", corpus / f"{name}.inputs.npz"
        if args.k not in name or not path.exists():
            continue
        if not args.empty_cache:
            one_process(path, inputs, 1, args.setup)  # numba's on-disk cache, the file caches
        samples = [one_process(path, inputs, args.after, args.setup, args.empty_cache) for _ in range(args.repeat)]
        if not samples[0]["deferred"]:
            print(f"{name:24} {0:8d}   (nothing deferred: planned warm after the first run)")
            continue

        def med(key):
            return statistics.median(s[key] for s in samples)

        print(f"{name:24} {samples[0]['deferred']:8d} {samples[0]['compiles']:8d} {med('runs'):6.0f} "
              f"{med('estimate'):10.3f} {med('setup'):8.3f} {med('switch') * 1e3:9.2f} {med('cold') * 1e3:8.2f} "
              f"{med('warm') * 1e3:8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
