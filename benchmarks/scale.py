"""Scale: a 100,000-node chain loaded, checked and planned, vs onnxruntime's session creation (issue #18).

onnxkit's cost is linear in the node count (tests/engine/test_growth.py); this prints the absolute
times and the ratio to onnxruntime for the same file, thread-matched: onnxkit plans on one
thread, so onnxruntime gets ``intra_op_num_threads = inter_op_num_threads = 1`` and
sequential execution.  Both read the model from the same file on disk.  onnxruntime's
creation includes its own checks and graph optimisations (level as given, default: all).

Run: ``python benchmarks/scale.py [nodes] [--repeat N]``.  Needs onnxruntime (test extra).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from timing import best_of  # noqa: E402


def onnxkit_phases(path: str) -> dict:
    """Seconds for load, check and plan of ``path``, one after the other."""
    import onnxkit
    from onnxkit.checker import check_model
    from onnxkit.registry import get_registry
    from onnxkit.runtime.plan import Planner

    registry = get_registry()
    t0 = time.perf_counter()
    model = onnxkit.load(path)
    t1 = time.perf_counter()
    report = check_model(model, registry=registry)
    t2 = time.perf_counter()
    if not report.ok:
        raise SystemExit(f"the model does not check: {report.errors[:3]}")
    Planner(model, registry, "cpu").compile_model()
    t3 = time.perf_counter()
    return {"load": t1 - t0, "check": t2 - t1, "plan": t3 - t2, "total": t3 - t0}


def ort_session(path: str) -> None:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nodes", nargs="?", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    import hostile
    from onnxkit.api import save
    from onnxkit.registry import get_registry

    get_registry()  # plugin discovery is a one-time cost, not the model's
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "chain.onnx")
        save(hostile.relu_chain(args.nodes), path)
        print(f"model: {args.nodes:,} Relu nodes in a chain, {os.path.getsize(path):,} octets; best of {args.repeat}")
        best = None
        for _ in range(args.repeat):
            phases = onnxkit_phases(path)
            if best is None or phases["total"] < best["total"]:
                best = phases
        print("onnxkit      load {load:7.2f} s  check {check:7.2f} s  plan {plan:7.2f} s  total {total:7.2f} s".format(**best))
        try:
            ort_s = best_of(lambda: ort_session(path), args.repeat)
        except ImportError:
            print("onnxruntime is not installed: no ratio")
            return
        print(f"onnxruntime  session creation (1 intra-op, 1 inter-op thread, sequential)  {ort_s:7.2f} s")
        print(f"ratio onnxkit load+check+plan / onnxruntime session creation: {best['total'] / ort_s:.2f}")
        print(f"ratio onnxkit plan alone / onnxruntime session creation:      {best['plan'] / ort_s:.2f}")


if __name__ == "__main__":
    main()
