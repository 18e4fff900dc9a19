"""MatMul + Add (+ Relu) nodes and models, onnxkit before / after the cpu MatMul's short-slice
product and epilogue, against onnxruntime, one thread.

``python benchmarks/products.py [--rounds N] [--calls N] [nodes | MODEL,MODEL]``: ``nodes`` (the
default) times one-node models (``MatMul`` by a constant W, ``Add`` of a constant B, a ``Relu``
where the shape says so; float32, made here with ``onnx.helper``) of ConvNeXt's channels-last
Linear layers and MobileBERT's products; ``MODEL,...`` times models of ``architectures.py``
already exported to ``.cache/architectures`` (names without the ``arch_`` prefix; the held-back
ones, ``HELD_BACK`` there, are refused: tune on the tuning set only).  Three sessions alternate in
``--rounds`` rounds of ``--calls`` calls: onnxruntime (one intra-op and one inter-op thread),
onnxkit "before" (planned with MatMul's epilogue offer removed, and run with
:data:`onnxkit_cpu.overrides.linalg.FLAT_WEIGHT` out of reach, so no product is flattened) and
onnxkit "after" (as it is), onnxkit with one intra-op thread and ``ONNXKIT_FIRST_RUN=warm``.
Printed: the median per call of the calling thread's CPU time (``time.thread_time``) and of the
wall time, milliseconds, and the ratios to onnxruntime.
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

#: (A's shape, N, Relu after the Add)
NODES = [
    ((1, 56, 56, 40), 160, False), ((1, 56, 56, 160), 40, False),
    ((1, 28, 28, 80), 320, False), ((1, 28, 28, 320), 80, False),
    ((1, 14, 14, 160), 640, False), ((1, 14, 14, 640), 160, False),
    ((1, 7, 7, 320), 1280, False), ((1, 7, 7, 1280), 320, False),
    ((1, 128, 64), 1024, True), ((1, 128, 1024), 64, False), ((1, 128, 384), 256, False),
]


def node_model(shape, n: int, relu: bool):
    import numpy as np
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    k = shape[-1]
    w, b = rng.standard_normal((k, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["s" if relu else "y"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", 1, list(shape))],
                              [helper.make_tensor_value_info("y", 1, list(shape[:-1]) + [n])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    return data, {"a": rng.standard_normal(shape).astype(np.float32)}


def sessions(data, feed):
    """(onnxruntime, before, after) run functions on ``data``."""
    import onnxruntime as ort
    from onnxkit_cpu.overrides import linalg

    import onnxkit

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    ko = onnxkit.SessionOptions()
    ko.intra_op_num_threads = 1
    peer = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    offer, flat = linalg.offers_epilogue, linalg.FLAT_WEIGHT
    linalg.offers_epilogue = lambda fn, fuse, inputs=None: fn
    try:
        before = onnxkit.InferenceSession(data, ko)
        before.run(None, feed)
    finally:
        linalg.offers_epilogue = offer
    after = onnxkit.InferenceSession(data, ko)

    def run_before():
        linalg.FLAT_WEIGHT = 1 << 62
        try:
            before.run(None, feed)
        finally:
            linalg.FLAT_WEIGHT = flat
    return {"ort": lambda: peer.run(None, feed), "before": run_before, "after": lambda: after.run(None, feed)}


def timed(fns: dict, rounds: int, calls: int) -> dict:
    """``{name: (thread CPU ms, wall ms)}`` per call, medians over interleaved rounds."""
    for f in fns.values():
        for _ in range(2):
            f()
    got = {k: ([], []) for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            w, c = time.perf_counter(), time.thread_time()
            for _ in range(calls):
                f()
            got[k][0].append((time.thread_time() - c) / calls * 1e3)
            got[k][1].append((time.perf_counter() - w) / calls * 1e3)
    return {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in got.items()}


def line(label: str, t: dict) -> str:
    o, b, a = t["ort"], t["before"], t["after"]
    return (f"{label:44s} cpu ms ort {o[0]:.3f} before {b[0]:.3f} after {a[0]:.3f} ({b[0] / o[0]:.2f} -> "
            f"{a[0] / o[0]:.2f}) | wall ort {o[1]:.3f} before {b[1]:.3f} after {a[1]:.3f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", nargs="?", default="nodes")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--calls", type=int, default=0, help="calls a round (default: 10 for nodes, 1 for models)")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    import numpy as np
    import threadpoolctl

    threadpoolctl.threadpool_limits(1)
    print(f"load average {os.getloadavg()}")
    if args.what == "nodes":
        for shape, n, relu in NODES:
            data, feed = node_model(shape, n, relu)
            label = f"{list(shape)} x [{shape[-1]}, {n}] + B" + (" + Relu" if relu else "")
            print(line(label, timed(sessions(data, feed), args.rounds, args.calls or 10)), flush=True)
    else:
        sys.path.insert(0, str(HERE))
        from architectures import HELD_BACK

        for name in args.what.split(","):
            if f"arch_{name}" in HELD_BACK:
                print(f"{name}: held back, not timed")
                continue
            path = CACHE / f"arch_{name}.onnx"
            feed = dict(np.load(CACHE / f"arch_{name}.inputs.npz"))
            print(line(name, timed(sessions(str(path), feed), args.rounds, args.calls or 1)), flush=True)
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
