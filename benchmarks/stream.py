"""A streaming VAD from a fresh environment: no call may stall while the warm plan is set up.

A voice-activity detector is called once per 512-sample chunk (32 ms of 16 kHz audio) with the
state its previous call returned.  onnxkit starts on its cold plan (numpy bodies), and once its
runs have spent the estimated setup its warm plan (numba's compiled loops) is set up off the run
path (:mod:`onnxkit.runtime.plans`: a child process compiles, a background thread loads) and
switched to between two calls.  This script streams ``--calls`` chunks back to back (the worst
case for a background setup: no idle time between calls) through

* onnxkit, in a new process whose numba cache is a new empty folder (``NUMBA_CACHE_DIR``): what
  a user's first stream on a machine gets (``--warm-cache``: the folder filled by a first process);
* onnxruntime, in a new process (one intra-op and one inter-op thread),

one thread each, and prints per runtime the median, p99 and slowest call, the total (and the
calling thread's CPU time over the stream: the time the other processes of a loaded machine
leave out), the ratio of the totals, the calls made on the cold plan before the setup began and before the switch,
and how many calls took longer than a chunk lasts (32 ms).  ``--control`` adds a third stream,
onnxkit kept on its cold plan (no setup begins): on a loaded machine, what the machine alone does
to a stream's slowest calls.  The model: ``silero_vad_16k_op15``
from the corpus (``.cache/corpus``, ``$ONNXKIT_CORPUS``) where present, else a VAD-like model built
here with onnx (Conv, LSTM, Sigmoid: the ops the real one runs compiled).
``--setup thread`` compiles in the background thread instead of a child process
(``ONNXKIT_WARM_SETUP``); ``--policy`` sets ``ONNXKIT_FIRST_RUN``.
Run: ``python benchmarks/stream.py [--calls N] [--repeat N] [--warm-cache] [--setup process|thread] [--control]``.
Needs onnxruntime (and onnx where the corpus is absent).
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 512
CHUNK_MS = 1000.0 * CHUNK / 16000

_CHILD = r'''
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
runtime, model, calls, carry = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
feeds = dict(np.load(sys.argv[5]))
audio = np.random.default_rng(0).standard_normal((calls, feeds["input"].shape[-1])).astype(np.float32) * 0.1
if runtime == "onnxruntime":
    import onnxruntime as ort
    so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
else:
    import onnxkit
    if runtime == "onnxkit-cold":  # the control: the setup never begins (its estimate out of reach)
        import onnxkit_cpu.compiled
        onnxkit_cpu.compiled.SETUP_S = 1e9
    so = onnxkit.SessionOptions(); so.intra_op_num_threads = 1
    s = onnxkit.InferenceSession(model, so)
    plans = s._plans
    record = s._cold  # the cold plan's record: its estimate once the first run has planned
times, starts, began, switched = [], [], None, None
cpu = time.thread_time()
for i in range(calls):
    feeds["input"] = audio[i:i + 1].reshape(feeds["input"].shape)
    t = time.perf_counter()
    out = s.run(None, feeds)
    times.append(time.perf_counter() - t)
    starts.append(t)
    for name, position in carry.items():
        feeds[name] = out[position]
    if runtime != "onnxruntime":
        if began is None and plans._setup is not None:
            began = i
        if switched is None and plans.cold is None:
            switched = i
cpu = time.thread_time() - cpu
phases = None
if runtime == "onnxkit" and plans._setup is not None:  # each call's phase: 0 before the setup, 1 its child
    marks = [m if m is not None else float("inf") for m in plans._setup.times]  # process, 2 in-process, 3 after
    phases = [sum(t >= m for m in marks) for t in starts]
estimate = record.cost if runtime != "onnxruntime" and record is not None else None
print("STREAM " + json.dumps({"times": times, "began": began, "switched": switched, "phases": phases, "cpu": cpu,
                              "estimate": estimate}))
'''


def _builtin(folder: Path) -> tuple:
    """A VAD-like model (Conv front end, one LSTM over the frames, Sigmoid), its feeds and carry."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    hidden, channels = 64, 32

    def init(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    nodes = [
        helper.make_node("Reshape", ["input", "shape3"], ["x3"]),
        helper.make_node("Conv", ["x3", "w1", "b1"], ["c1"], strides=[4], pads=[2, 2], kernel_shape=[8]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], strides=[2], pads=[1, 1], kernel_shape=[3]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Transpose", ["r2"], ["seq"], perm=[2, 0, 1]),
        helper.make_node("LSTM", ["seq", "W", "R", "B", "", "h", "c"], ["ys", "hN", "cN"], hidden_size=hidden),
        helper.make_node("ReduceMean", ["ys", "axes"], ["m"], keepdims=0),
        helper.make_node("MatMul", ["m", "wo"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["output"]),
    ]
    inits = [numpy_helper.from_array(np.array([1, 1, CHUNK], np.int64), "shape3"), init("w1", channels, 1, 8),
             init("b1", channels), init("w2", channels, channels, 3), init("b2", channels),
             init("W", 1, 4 * hidden, channels), init("R", 1, 4 * hidden, hidden), init("B", 1, 8 * hidden),
             numpy_helper.from_array(np.array([0, 1], np.int64), "axes"), init("wo", hidden, 1)]
    f = TensorProto.FLOAT
    graph = helper.make_graph(nodes, "vad", [helper.make_tensor_value_info("input", f, [1, CHUNK]),
                                             helper.make_tensor_value_info("h", f, [1, 1, hidden]),
                                             helper.make_tensor_value_info("c", f, [1, 1, hidden])],
                              [helper.make_tensor_value_info("output", f, [1, 1]),
                               helper.make_tensor_value_info("hN", f, [1, 1, hidden]),
                               helper.make_tensor_value_info("cN", f, [1, 1, hidden])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = folder / "vad_builtin.onnx"
    onnx.save(model, path)
    feeds = folder / "vad_builtin.npz"
    np.savez(feeds, input=np.zeros((1, CHUNK), np.float32), h=np.zeros((1, 1, hidden), np.float32),
             c=np.zeros((1, 1, hidden), np.float32))
    return "vad_builtin", path, feeds, {"h": 1, "c": 2}


def _model(folder: Path) -> tuple:
    corpus = Path(os.environ.get("ONNXKIT_CORPUS", ROOT / ".cache" / "corpus"))
    path = corpus / "silero_vad_16k_op15.onnx"
    if path.exists():
        return "silero_vad_16k_op15", path, corpus / "silero_vad_16k_op15.inputs.npz", {"state": 1}
    return _builtin(folder)


def stream(runtime: str, model: Path, feeds: Path, carry: dict, calls: int, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, runtime, str(model), str(calls), json.dumps(carry), str(feeds)],
                          capture_output=True, text=True, env=env, timeout=1800)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("STREAM ")), None)
    if line is None:
        raise RuntimeError(f"{runtime} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[7:])


def summary(name: str, result: dict) -> dict:
    t = np.array(result["times"]) * 1e3
    row = {"median": float(np.median(t)), "p99": float(np.percentile(t, 99)), "max": float(t.max()),
           "slowest": int(t.argmax()), "total": float(t.sum()), "over": int((t > CHUNK_MS).sum()),
           "cpu": 1e3 * result.get("cpu", float("nan"))}
    began, switched = result.get("began"), result.get("switched")
    where = "" if name != "onnxkit" else (f"  setup began at call {began}, switched at call {switched}"
                                              if began is not None else "  no setup began")
    if name == "onnxkit" and result.get("estimate") is not None:
        where += f" (setup estimated at {result['estimate']:.2f} s)"
    print(f"{name:12} median {row['median']:7.3f} ms  p99 {row['p99']:7.2f} ms  max {row['max']:7.1f} ms "
          f"(call {row['slowest']})  total {row['total']:8.1f} ms (thread CPU {row['cpu']:7.1f} ms)  "
          f">{CHUNK_MS:.0f} ms: {row['over']}{where}", flush=True)
    if result.get("phases"):
        phases = np.array(result["phases"])
        for phase, label in enumerate(("before the setup", "setup: child process", "setup: in this process",
                                       "after the setup")):
            p = t[phases == phase]
            if len(p):
                print(f"{'':14}{label:24} {len(p):6d} calls  median {np.median(p):7.3f}  p99 {np.percentile(p, 99):7.2f}"
                      f"  max {p.max():7.1f} ms  >{CHUNK_MS:.0f} ms: {int((p > CHUNK_MS).sum())}")
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=1, help="pairs of streams (onnxruntime, onnxkit), in turn")
    parser.add_argument("--warm-cache", action="store_true", help="fill the numba cache in a first process")
    parser.add_argument("--setup", choices=("process", "thread"), default="process", help="ONNXKIT_WARM_SETUP")
    parser.add_argument("--policy", default="", help="ONNXKIT_FIRST_RUN (default: unset, tiered)")
    parser.add_argument("--control", action="store_true",
                        help="also stream onnxkit on its cold plan only (no setup): what the machine does to a stream")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="onnxkit-stream-") as tmp:
        name, model, feeds, carry = _model(Path(tmp))
        base = {k: v for k, v in os.environ.items() if k not in ("ONNXKIT_FIRST_RUN", "ONNXKIT_WARM_SETUP")}
        base.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", ONNXKIT_WARM_SETUP=args.setup)
        if args.policy:
            base["ONNXKIT_FIRST_RUN"] = args.policy
        load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
        print(f"{name}: {args.calls} calls back to back, one thread each; {os.cpu_count()} CPUs, load average {load}; "
              f"numba cache {'filled by a first process' if args.warm_cache else 'empty (a new folder per process)'}; "
              f"warm setup: {args.setup}")
        totals = []
        for r in range(args.repeat):
            cache = Path(tmp) / f"numba-{r}"
            cache.mkdir()
            env = dict(base, NUMBA_CACHE_DIR=str(cache))
            if args.warm_cache:
                stream("onnxkit", model, feeds, carry, 50, dict(env, ONNXKIT_FIRST_RUN="warm"))
            ort = summary("onnxruntime", stream("onnxruntime", model, feeds, carry, args.calls, env))
            kit = summary("onnxkit", stream("onnxkit", model, feeds, carry, args.calls, env))
            if args.control:
                summary("onnxkit-cold", stream("onnxkit-cold", model, feeds, carry, args.calls, env))
            totals.append(kit["total"] / ort["total"])
            print(f"{'':12} total ratio onnxkit/onnxruntime {totals[-1]:.2f}x (thread CPU {kit['cpu'] / ort['cpu']:.2f}x); "
                  f"median ratio {kit['median'] / ort['median']:.2f}x", flush=True)
        if args.repeat > 1:
            print(f"median total ratio over {args.repeat} pairs: {statistics.median(totals):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
