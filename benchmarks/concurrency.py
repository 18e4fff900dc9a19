"""One session shared by Python threads: throughput of T threads against the same runs made serially.

For each model (``-k`` filters; the light models and the corpus models of ``models.py``), one
onnxkit session with ``intra_op_num_threads=1`` (one BLAS thread per run) makes ``--runs`` runs
serially, then the same number spread over ``--threads`` Python threads (default: the CPUs
available); numpy releases the GIL inside BLAS and its larger loops, so models dominated by
matrix products and big elementwise work run faster, small-input models (bound by per-node
Python work under the GIL) do not.  The same is done with onnxruntime (``intra_op_num_threads=1``),
whose runs release the GIL throughout.  Serial and threaded rounds alternate, median of
``--repeat``.  Prints per model the serial and threaded time per run and the speed-up
(serial / threaded) of each runtime.  Needs the test extras (onnxruntime).
Run: ``python benchmarks/concurrency.py [-k NAME] [--threads T] [--runs N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import warnings

from models import cases, conditions


def _serial(run, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        run()
    return (time.perf_counter() - t0) / n


def _threaded(run, n: int, threads: int) -> float:
    per = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]
    start = threading.Barrier(threads + 1)

    def work(k):
        start.wait()
        for _ in range(k):
            run()

    ws = [threading.Thread(target=work, args=(k,)) for k in per]
    for w in ws:
        w.start()
    start.wait()
    t0 = time.perf_counter()
    for w in ws:
        w.join()
    return (time.perf_counter() - t0) / n


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-k", dest="only", default=None)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--runs", type=int, default=0, help="runs per timing (default: ~0.3 s of serial work)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import onnxruntime as ort

    from onnxkit import InferenceSession, SessionOptions

    ort.set_default_logger_severity(3)
    warnings.simplefilter("ignore")
    print("conditions:", conditions())
    print(f"{args.threads} Python threads share one session (1 BLAS / intra-op thread per run); serial and threaded "
          f"rounds alternate, median of {args.repeat}\n")
    print(f"{'model':28s} {'kit serial':>11s} {'threaded':>9s} {'speed-up':>9s}   {'ort serial':>11s} {'threaded':>9s} {'speed-up':>9s}")
    for name, path, feed in cases(False, args.only):
        if args.only and args.only not in name:
            continue
        so = SessionOptions()
        so.intra_op_num_threads = 1
        kit = InferenceSession(str(path), so)
        oo = ort.SessionOptions()
        oo.intra_op_num_threads = 1
        oo.inter_op_num_threads = 1
        rt = ort.InferenceSession(str(path), oo, providers=["CPUExecutionProvider"])
        row = []
        for sess in (kit, rt):
            run = (lambda s=sess: s.run(None, feed))
            run()
            n = args.runs or max(args.threads * 2, int(0.3 / max(_serial(run, 2), 1e-6)))
            ser, thr = [], []
            for _ in range(args.repeat):
                ser.append(_serial(run, n))
                thr.append(_threaded(run, n, args.threads))
            s, t = statistics.median(ser), statistics.median(thr)
            row += [s, t, s / t]
        print(f"{name:28s} {row[0] * 1e3:9.2f}ms {row[1] * 1e3:7.2f}ms {row[2]:8.2f}x   "
              f"{row[3] * 1e3:9.2f}ms {row[4] * 1e3:7.2f}ms {row[5]:8.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
