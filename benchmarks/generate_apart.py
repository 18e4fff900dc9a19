"""Generative decoding at the runtimes' default threads, each runtime in a process of its own.

``benchmarks/generate.py --threads default`` steps onnxkit and onnxruntime in turn in one process:
there onnxruntime's default intra-op pool (its threads spin for a while after each run) takes the
cores onnxkit's next step needs, and onnxkit's wall time measures that.  This script runs the same
greedy loop (``generate.SessionStepper``: a ``--prompt``-token prefill, then one token a run, the
presents fed back) for one runtime per process: onnxkit ``InferenceSession`` with default
``SessionOptions`` (intra_op_num_threads 0) under ``ONNXKIT_FIRST_RUN`` ``warm`` or ``tiered``,
onnxruntime's with its defaults; the BLAS library's own default threads.  The processes alternate
(``--reps`` of each, the order swapped every repetition).

Printed per model and policy, one markdown row, ms, medians over the repetitions of each
process's medians: the session's first run, the prefill (the prompt again on a fresh sequence,
three times), tokens 11-30 and the last 20, as wall time with the ratio onnxkit / onnxruntime; then
the ratios of the processes' CPU time (``time.process_time``: every thread of the process) for
the two token spans.

Run: ``python benchmarks/generate_apart.py -m genai-small-int4 [-m ...] [--policy warm]
[--policy tiered] [--tokens 100] [--reps 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402  (the models and the stepper)


def child(runtime: str, name: str, tokens: int, prompt_len: int) -> dict:
    """One runtime's stream in this process: per step (wall s, process CPU s), and three prefills."""
    path = generate.model_path(name)
    head = json.loads((path.parent / "genai_config.json").read_text())["model"]["decoder"]["head_size"]
    if runtime == "onnxkit":
        import onnxkit

        sess = onnxkit.InferenceSession(str(path), onnxkit.SessionOptions())
    else:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    prompt = np.random.default_rng(0).integers(3, 1000, prompt_len)
    stepper = generate.SessionStepper(sess, prompt, head)

    def timed(st):
        c0 = time.process_time()
        wall = st.step()[0]
        return wall, time.process_time() - c0

    steps = [timed(stepper) for _ in range(tokens + 1)]
    return {"steps": steps, "prefill": [timed(stepper.again()) for _ in range(3)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-m", "--model", action="append", choices=[m for m in generate.MODELS if m.startswith("genai")])
    parser.add_argument("--policy", action="append", choices=("warm", "tiered"))
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.tokens, args.prompt)))
        return
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; default threads, one runtime a process")
    print("| model | policy | first ms onnxkit / ort | prefill ms (x) | tokens 11-30 ms (x) | last 20 ms (x) "
          "| process CPU x (early, late) |")
    print("|---|---|---|---|---|---|---|")
    for name in args.model or ["genai-small-int4"]:
        for policy in args.policy or ["warm"]:
            runs: dict = {"onnxkit": [], "ort": []}
            for rep in range(args.reps):
                for runtime in ("ort", "onnxkit") if rep % 2 == 0 else ("onnxkit", "ort"):
                    env = {**os.environ, "ONNXKIT_FIRST_RUN": policy}
                    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                        env.pop(var, None)
                    done = subprocess.run([sys.executable, __file__, "--child", runtime, name, "--tokens",
                                           str(args.tokens), "--prompt", str(args.prompt)],
                                          capture_output=True, text=True, env=env)
                    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
                    if done.returncode or not lines:
                        raise SystemExit(f"{runtime} {name} {policy} failed:\n{done.stderr[-3000:]}")
                    runs[runtime].append(json.loads(lines[-1]))

            def med(runtime, pick, col):
                return 1e3 * statistics.median(statistics.median(s[col] for s in pick(r)) for r in runs[runtime])

            spans = {"first": lambda r: r["steps"][:1], "prefill": lambda r: r["prefill"],
                     "early": lambda r: r["steps"][11:31], "late": lambda r: r["steps"][-20:]}
            a = {k: med("onnxkit", f, 0) for k, f in spans.items()}
            b = {k: med("ort", f, 0) for k, f in spans.items()}
            cpu = [med("onnxkit", spans[k], 1) / med("ort", spans[k], 1) for k in ("early", "late")]
            print(f"| {name} | {policy} | {a['first']:.0f} / {b['first']:.0f} | {a['prefill']:.2f} / {b['prefill']:.2f} "
                  f"({a['prefill'] / b['prefill']:.2f}) | {a['early']:.3f} / {b['early']:.3f} ({a['early'] / b['early']:.2f}) "
                  f"| {a['late']:.3f} / {b['late']:.3f} ({a['late'] / b['late']:.2f}) | {cpu[0]:.2f}, {cpu[1]:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
