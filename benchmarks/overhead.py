"""Per-run and per-node overhead of the run loop, and time per run of corpus models, A/B.

Three measurements, each a median over ``--repeat`` timed calls after a warm-up, one BLAS thread:

* ``trivial``: ``InferenceSession.run`` of a one-node model (``Y = Add(X, X)``, X float32[1]):
  what a run costs beyond its kernels (feed checks, the run loop's set-up, the fetch);
* ``chain``: a chain of ``--nodes`` Add nodes on float32[1]: (time - trivial) / nodes is the
  per-node cost (loop plus a kernel that does almost nothing);
* each corpus model named with ``-m`` (``.cache/corpus``, its stored inputs): time per run.

``--ab DIR_A DIR_B`` runs this script under two checkouts (``PYTHONPATH`` pointing at each one's
``onnxkit`` and plugins), alternating A, B, A, B... ``--rounds`` times in fresh processes, and
prints per measurement the median over rounds of each side, so a change in machine load affects
both alike.  Without ``--ab`` it measures the checkout it is imported from and prints JSON.
Run: ``python benchmarks/overhead.py [--ab /work/main /work/wt] [-m hf_bert_ts ...]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from timing import median_of

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ("default_domain", "ml_domain", "cpu_backend", "gpu_backend")


def _model(n_nodes: int):
    """An ir.Model: a chain of ``n_nodes`` Add nodes over a float32[1] input (built without onnx)."""
    from onnxkit import ir

    t = ir.TensorType(elem_type=1, shape=ir.Shape.of([1]))
    names = ["x"] + [f"v{i}" for i in range(1, n_nodes)] + ["y"]
    nodes = [ir.Node(op_type="Add", input=[names[i], "x"], output=[names[i + 1]], name=f"n{i}")
             for i in range(n_nodes)]
    graph = ir.Graph(node=nodes, name="chain", input=[ir.ValueInfo("x", t)], output=[ir.ValueInfo("y", t)])
    return ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 17)], graph=graph)


def measure(models, n_nodes: int, repeat: int, level: str = "ORT_ENABLE_ALL") -> dict:
    """``{measurement: seconds}`` for the checkout this process imports."""
    import warnings

    import numpy as np

    from onnxkit import InferenceSession, SessionOptions
    from onnxkit.runtime.options import GraphOptimizationLevel

    warnings.simplefilter("ignore")
    so = SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = getattr(GraphOptimizationLevel, level)
    x = {"x": np.ones(1, np.float32)}
    out = {}
    trivial = InferenceSession(_model(1), so)
    out["trivial"] = median_of(lambda: trivial.run(None, x), repeat, 200)
    chain = InferenceSession(_model(n_nodes), so)
    out["chain"] = median_of(lambda: chain.run(None, x), repeat, 20)
    out["per_node"] = (out["chain"] - out["trivial"]) / max(n_nodes - 1, 1)
    sys.path.insert(0, str(ROOT / "tests" / "corpus"))
    from corpus_cache import corpus_dir, load_inputs

    folder = corpus_dir()
    for name in models:
        sess = InferenceSession(str(folder / f"{name}.onnx"), so)
        feed = load_inputs(folder, name)
        out[name] = median_of(lambda: sess.run(None, feed), repeat, 3)
    return out


def _env_for(checkout: str) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([checkout] + [f"{checkout}/plugins/{p}" for p in PLUGINS])
    return env


def ab(a: str, b: str, args) -> None:
    script = str(Path(__file__).resolve())
    rows: dict = {a: [], b: []}
    for r in range(args.rounds):
        for side in ((a, b) if r % 2 == 0 else (b, a)):
            cmd = [sys.executable, script, "--nodes", str(args.nodes), "--repeat", str(args.repeat),
                   "--level", args.level, "-m", *args.models] if args.models else \
                  [sys.executable, script, "--nodes", str(args.nodes), "--repeat", str(args.repeat), "--level", args.level]
            res = subprocess.run(cmd, env=_env_for(side), capture_output=True, text=True, cwd=side, check=True)
            rows[side].append(json.loads(res.stdout.strip().splitlines()[-1]))
    keys = list(rows[a][0])
    print(f"A = {a}\nB = {b}\n{args.rounds} rounds alternating A/B in fresh processes, each the median of "
          f"{args.repeat} timings; one BLAS thread; load average {os.getloadavg()[0]:.2f}")
    print(f"{'measurement':24s} {'A':>12s} {'B':>12s} {'B/A':>6s}")
    for k in keys:
        ma = statistics.median(x[k] for x in rows[a])
        mb = statistics.median(x[k] for x in rows[b])
        unit, scale = ("us", 1e6) if ma < 1e-3 else ("ms", 1e3)
        print(f"{k:24s} {ma * scale:10.2f}{unit} {mb * scale:10.2f}{unit} {mb / ma:6.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ab", nargs=2, metavar=("CHECKOUT_A", "CHECKOUT_B"))
    parser.add_argument("-m", dest="models", nargs="*", default=[])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--level", default="ORT_ENABLE_ALL")
    args = parser.parse_args()
    if args.ab:
        ab(*args.ab, args)
        return 0
    print(json.dumps(measure(args.models, args.nodes, args.repeat, args.level)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
