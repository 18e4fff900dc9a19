"""float32 Sigmoid and Tanh on 1e6 elements: onnxkit's bodies since they are onnxruntime's (MLAS's
rationals, docs/decisions.md) against the bodies before, and onnxruntime.

Timed interleaved, one call each per round, median of ``--repeat`` rounds, wall time and the
process's CPU time (``time.process_time``: on a loaded machine the wall time mostly measures the
other processes); everything on one thread (onnxruntime ``intra_op_num_threads=1``, onnxkit's
bodies called directly, without the session's block split):

* ``compiled``: the numba loop (``onnxkit_cpu.compiled.activation``, true fused multiply-adds),
  what a warm plan runs;
* ``numpy``: the numpy body (``onnxkit_default_domain.api.mlas_logistic`` / ``mlas_tanh``),
  what a cold first run or a process without numba runs;
* ``before``: the float32 bodies the cpu backend had (Sigmoid ``1 / (1 + exp(-x))`` in four
  float32 numpy passes, the body above 4096 elements; Tanh ``np.tanh``);
* ``ort``: onnxruntime's Sigmoid / Tanh in a one-node model, ``session.run`` included.

Run: ``python benchmarks/mlas_activations.py [--repeat N] [--size N]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np


def _old_sigmoid(x):
    t = np.negative(x)
    np.exp(t, out=t)
    t += 1
    return np.divide(1, t, out=t)


def _ort(op):
    import onnxruntime as ort
    from onnx import helper

    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", 1, [None])],
                          [helper.make_tensor_value_info("y", 1, [None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda x: s.run(None, {"x": x})[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--size", type=int, default=1_000_000)
    args = ap.parse_args(argv)

    import onnxruntime
    from onnxkit_cpu.compiled import activation as loops
    from onnxkit_default_domain.api import mlas_logistic, mlas_tanh

    x = (np.random.default_rng(0).standard_normal(args.size) * 4).astype(np.float32)
    y = np.empty_like(x)
    bodies = {}
    for op, name, numpy_body, before in (("Sigmoid", "mlas_logistic", mlas_logistic, _old_sigmoid),
                                         ("Tanh", "mlas_tanh", mlas_tanh, np.tanh)):
        loop = loops.loop(name)
        bodies[op] = {"compiled": (lambda x, loop=loop: loop(x, y)) if loop is not None else None,
                      "numpy": lambda x, f=numpy_body: f(np, x), "before": before, "ort": _ort(op)}
        for fn in bodies[op].values():
            if fn is not None:
                fn(x)                                   # compile / warm up
    samples = {(op, k): [] for op, b in bodies.items() for k, fn in b.items() if fn is not None}
    for _ in range(args.repeat):
        for (op, k) in samples:
            c, t = time.process_time(), time.perf_counter()
            bodies[op][k](x)
            samples[(op, k)].append((time.perf_counter() - t, time.process_time() - c))
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}; numpy {np.__version__}, onnxruntime "
          f"{onnxruntime.__version__}; {args.size} float32, one thread, median of {args.repeat}")
    for (op, k), s in samples.items():
        wall = statistics.median(v[0] for v in s) * 1e3
        cpu = statistics.median(v[1] for v in s) * 1e3
        print(f"{op:8} {k:9} wall {wall:8.2f} ms   cpu {cpu:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
