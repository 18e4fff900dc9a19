"""CPU time per call of the transformer kernels and models, onnxkit against onnxruntime, one thread.

``python benchmarks/transformer_kernels.py [--rounds N] [kernels | MODEL,MODEL,...]``: either the
single-node models of ``threads.py --kernels`` (Gelu, LayerNormalization, Softmax, Attention) or
models of ``architectures.py`` already exported to ``.cache/architectures`` (names without the
``arch_`` prefix; the tuning set only: see ``HELD_BACK`` there).  onnxkit with one intra-op thread
and ``ONNXKIT_FIRST_RUN=warm``, onnxruntime with one intra-op and one inter-op thread, OpenBLAS
limited to one thread; the two runtimes' calls interleaved in ``--rounds`` alternating rounds
(10 calls a round for single nodes, 3 for models), the median **process CPU time** per call of
each (on a shared machine the wall time stretches with the load; the CPU time much less).  To
time another tree (e.g. the one before a change), run it with that tree's ``onnxkit`` and plugin
directories first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("ONNXKIT_FIRST_RUN", "warm")
HERE = Path(__file__).resolve().parent
CACHE = HERE.parent / ".cache" / "architectures"
KERNELS = ("Gelu", "LayerNorm", "Softmax", "Attention")


def _kernel_cases():
    sys.path.insert(0, str(HERE))
    import threads

    for name, kit, oracle, feeds in threads._kernel_models():
        if name.startswith(KERNELS):
            yield name, kit, oracle, feeds


def _model_cases(names):
    import numpy as np

    for n in names:
        path = str(CACHE / f"arch_{n}.onnx")
        yield n, path, path, dict(np.load(CACHE / f"arch_{n}.inputs.npz"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", nargs="?", default="kernels")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import onnxruntime as ort
    from threadpoolctl import threadpool_limits

    import onnxkit
    from onnxkit import InferenceSession, SessionOptions

    ort.set_default_logger_severity(3)
    single = args.what == "kernels"
    cases = _kernel_cases() if single else _model_cases(args.what.split(","))
    print(f"onnxkit from {Path(onnxkit.__file__).parent}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"load average {os.getloadavg()}; median CPU time per call of {args.rounds} interleaved rounds")
    with threadpool_limits(1):
        for name, kit, oracle, feeds in cases:
            so = SessionOptions()
            so.intra_op_num_threads = 1
            s = InferenceSession(kit, so, validate=False) if isinstance(kit, bytes) else InferenceSession(kit, so)
            o = ort.SessionOptions()
            o.intra_op_num_threads, o.inter_op_num_threads = 1, 1
            r = ort.InferenceSession(oracle, o, providers=["CPUExecutionProvider"])
            fk, fo = (lambda: s.run(None, feeds)), (lambda: r.run(None, feeds))
            for f in (fk, fk, fk, fo, fo):
                f()
            calls = 10 if single else 3
            ck, co = [], []
            for i in range(args.rounds):
                for f, acc in ((fk, ck), (fo, co)) if i % 2 == 0 else ((fo, co), (fk, ck)):
                    c = time.process_time()
                    for _ in range(calls):
                        f()
                    acc.append((time.process_time() - c) / calls)
            k, q = statistics.median(ck) * 1e3, statistics.median(co) * 1e3
            print(f"{name:28s} onnxkit {k:8.3f} ms  onnxruntime {q:8.3f} ms  ratio {k / q:5.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
