"""The float32 Erf of benchmarks/int8.py's models before / after its compiled loop (issue 44).

Each model (default: the five with GELU's erf form, which onnxruntime's quantizer leaves float
between a DequantizeLinear and a QuantizeLinear) in each format (default QDQ and QOperator u8s8
per channel) runs in three sessions at one thread each: onnxkit with the compiled 'erf32' loop
withheld at planning (the numpy body: "before"), onnxkit as shipped ("after"), onnxruntime
(intra 1 / inter 1); timed interleaved (``timing.interleaved_samples``), medians of ``repeat``
rounds, wall and CPU time.  Then the Erf nodes alone: the sizes a run feeds them, numpy body
against the compiled loop, thread CPU time, interleaved.  Sessions plan compiled loops from the
first run (``ONNXKIT_FIRST_RUN=warm``).

    python benchmarks/int8_erf.py [REPEAT] [MODELS,...] [FORMATS,...]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ["ONNXKIT_FIRST_RUN"] = "warm"

import numpy as np  # noqa: E402

import int8  # noqa: E402
from timing import interleaved_samples, medians  # noqa: E402


def main() -> int:
    import onnxkit
    from onnxkit_cpu.compiled import activation as loops
    from onnxkit_cpu.overrides import elementwise_math

    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    models = sys.argv[2].split(",") if len(sys.argv) > 2 else ["convnext", "whisper_encoder", "bert", "vit",
                                                               "distilbert"]
    formats = sys.argv[3].split(",") if len(sys.argv) > 3 else ["qdq_u8s8_pc", "qop_u8s8_pc"]
    real, loop = loops.loop, loops.loop("erf32")
    sizes = {}
    state = {"calls": 0, "model": None}

    def counted(x, *rest):
        state["calls"] += 1
        if state["model"] is not None:
            sizes.setdefault(state["model"], []).append(x.shape[0])
        return loop(x, *rest)

    def withheld(name):
        return None if name == "erf32" else real(name)

    def spied(name):
        return counted if name == "erf32" else real(name)

    out = int8.ROOT / ".cache" / "int8_models"
    print("load", os.getloadavg())
    for n in models:
        for f in formats:
            path, feed = int8.quantize(n, f, out), int8.feed_of(out, n)
            ko = onnxkit.SessionOptions()
            ko.intra_op_num_threads = 1
            loops.loop = withheld
            before = onnxkit.InferenceSession(str(path), ko)
            loops.loop = spied
            after = onnxkit.InferenceSession(str(path), ko)
            loops.loop = real
            _, peer = int8.sessions(path, "1")
            want = peer.run(None, feed)[0]
            state["model"] = n if f == formats[0] else None
            c0 = state["calls"]
            got = after.run(None, feed)[0]
            per_run = state["calls"] - c0
            state["model"] = None

            def run_before():
                loops.loop = withheld
                try:
                    c = state["calls"]
                    before.run(None, feed)
                    assert state["calls"] == c, "the before session ran the compiled loop"
                finally:
                    loops.loop = real

            fns = {"before": run_before, "after": lambda: after.run(None, feed), "ort": lambda: peer.run(None, feed)}
            s = interleaved_samples(fns, repeat, 1, quiesce=False)
            m = medians(s)
            cpu = {k: statistics.median(w * share for w, share in v) for k, v in s.items()}
            diff = float(np.abs(got.astype(np.float64) - want).max() / (np.abs(want).max() + 1e-30))
            print(f"{n}.{f}: Erf loop calls a run {per_run}; wall ms before {m['before'] * 1e3:.2f} after "
                  f"{m['after'] * 1e3:.2f} ort {m['ort'] * 1e3:.2f}; CPU ms before {cpu['before'] * 1e3:.2f} after "
                  f"{cpu['after'] * 1e3:.2f} ort {cpu['ort'] * 1e3:.2f}; kit/ort CPU {cpu['before'] / cpu['ort']:.2f}"
                  f" -> {cpu['after'] / cpu['ort']:.2f}; max|diff|/max|ort| {diff:.1e}", flush=True)
    compiled = elementwise_math._compiled32(loop)
    rng = np.random.default_rng(0)
    for n, ss in sizes.items():
        xs = [(rng.standard_normal(k) * 2).astype(np.float32) for k in ss]
        times = ([], [])
        for r in range(repeat):
            for which in ((0, 1) if r % 2 else (1, 0)):
                fn = elementwise_math.erf if which == 0 else compiled
                t = time.thread_time()
                for x in xs:
                    fn(x)
                times[which].append(time.thread_time() - t)
        print(f"{n}: Erf sizes {ss}; the run's Erf nodes, thread CPU, median of {repeat}: numpy body "
              f"{statistics.median(times[0]) * 1e3:.3f} ms, compiled {statistics.median(times[1]) * 1e3:.3f} ms")
    print("load", os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
