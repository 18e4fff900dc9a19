"""Per-node time of depthwise convolutions on synthetic shapes, onnxkit against onnxruntime.

``python benchmarks/depthwise.py [--rounds N] [--calls N] [--threads 1,2] [--before] [-k TEXT]``:
one-node models (``Conv`` with ``group = C`` and B, float32, made here with ``onnx.helper``) of
MobileNetV2-, EfficientNet- and ConvNeXt-like depthwise shapes (3x3 / 5x5 / 7x7, stride 1 and 2,
maps from 56 x 56 down to 6 x 6) and the 1x1 products beside them.  Per thread count, an onnxkit
session (``ONNXKIT_FIRST_RUN=warm``) and an onnxruntime session (that many intra-op threads, one
inter-op thread) alternate in ``--rounds`` rounds of ``--calls`` calls each; printed: the median
per call of the **thread CPU time of the calling thread** (``time.thread_time``; with one
thread the work runs on it, with more the other threads' share is not in it) and of the **wall
time**, microseconds, and the ratio onnxkit / onnxruntime of each.  ``--before`` also times an
onnxkit session planned without the channel-block depthwise path
(:data:`onnxkit_cpu.overrides.conv_channels.WIDTH` emptied while it plans), interleaved with the
two others.  OpenBLAS follows the thread count (``threadpoolctl``).

``--models NAME,NAME``: the same timing (``--before`` too) of models of ``architectures.py`` already
exported to ``.cache/architectures`` (names without the ``arch_`` prefix) instead of the shapes;
the held-back models (``HELD_BACK`` there) are refused: tune on the tuning set only.
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

#: (name, C in, C out, map, kernel, stride, group is C): depthwise and 1x1 shapes
SHAPES = [
    ("dw3x3 s1 32ch 56", 32, 32, 56, 3, 1, True),
    ("dw3x3 s2 144ch 56", 144, 144, 56, 3, 2, True),
    ("dw3x3 s1 192ch 28", 192, 192, 28, 3, 1, True),
    ("dw3x3 s2 192ch 28", 192, 192, 28, 3, 2, True),
    ("dw3x3 s1 384ch 14", 384, 384, 14, 3, 1, True),
    ("dw3x3 s1 384ch 12", 384, 384, 12, 3, 1, True),
    ("dw3x3 s1 384ch 8", 384, 384, 8, 3, 1, True),
    ("dw3x3 s2 576ch 14", 576, 576, 14, 3, 2, True),
    ("dw3x3 s1 160ch 7", 160, 160, 7, 3, 1, True),
    ("dw3x3 s1 960ch 7", 960, 960, 7, 3, 1, True),
    ("dw5x5 s2 240ch 28", 240, 240, 28, 5, 2, True),
    ("dw5x5 s1 480ch 14", 480, 480, 14, 5, 1, True),
    ("dw5x5 s1 672ch 14", 672, 672, 14, 5, 1, True),
    ("dw5x5 s1 912ch 6", 912, 912, 6, 5, 1, True),
    ("dw5x5 s1 1152ch 7", 1152, 1152, 7, 5, 1, True),
    ("dw5x5 s1 240ch 28", 240, 240, 28, 5, 1, True),
    ("dw7x7 s1 40ch 56", 40, 40, 56, 7, 1, True),
    ("dw7x7 s1 80ch 28", 80, 80, 28, 7, 1, True),
    ("dw7x7 s1 160ch 14", 160, 160, 14, 7, 1, True),
    ("dw7x7 s1 320ch 7", 320, 320, 7, 7, 1, True),
    ("1x1 160->960 7", 160, 960, 7, 1, 1, False),
    ("1x1 960->160 7", 960, 160, 7, 1, 1, False),
    ("1x1 96->576 14", 96, 576, 14, 1, 1, False),
    ("1x1 24->144 56", 24, 144, 56, 1, 1, False),
    ("1x1 144->24 56", 144, 24, 56, 1, 1, False),
    ("1x1 32->192 28", 32, 192, 28, 1, 1, False),
    ("1x1 192->32 28", 192, 32, 28, 1, 1, False),
]


def model(c, m, size, k, s, depthwise):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(44)
    w = rng.standard_normal((m, 1 if depthwise else c, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c if depthwise else 1,
                            pads=[k // 2] * 4, strides=[s, s])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, c, size, size])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    mo = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mo.ir_version = 8
    x = rng.standard_normal((1, c, size, size)).astype(np.float32)
    return mo.SerializeToString(), {"x": x}


def model_cases(names):
    """``(name, model path, feeds)`` of exported tuning-set models."""
    import numpy as np

    sys.path.insert(0, str(HERE))
    from architectures import HELD_BACK

    for n in names:
        if n in HELD_BACK or f"arch_{n}" in HELD_BACK:
            raise SystemExit(f"{n} is held back: not timed here")
        yield n, str(CACHE / f"arch_{n}.onnx"), dict(np.load(CACHE / f"arch_{n}.inputs.npz"))


def shape_cases(k):
    for name, c, m, size, kern, s, dw in SHAPES:
        if not k or k in name:
            data, feeds = model(c, m, size, kern, s, dw)
            yield name, data, feeds


def timed(f, calls):
    c, t = time.thread_time(), time.perf_counter()
    for _ in range(calls):
        f()
    return (time.thread_time() - c) / calls * 1e6, (time.perf_counter() - t) / calls * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--before", action="store_true")
    parser.add_argument("-k", default="")
    parser.add_argument("--models", default="")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import numpy as np
    import onnxruntime as ort
    from threadpoolctl import threadpool_limits

    import onnxkit
    from onnxkit import InferenceSession, SessionOptions
    from onnxkit_cpu.overrides import conv_channels

    ort.set_default_logger_severity(3)
    print(f"onnxkit from {os.path.dirname(onnxkit.__file__)}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"load average {tuple(round(v, 2) for v in os.getloadavg())}; onnxruntime {ort.__version__}; median of "
          f"{args.rounds} interleaved rounds of {args.calls} calls; us per call, thread CPU / wall")
    for threads in [int(t) for t in args.threads.split(",")]:
        with threadpool_limits(threads):
            cases = model_cases(args.models.split(",")) if args.models else shape_cases(args.k)
            for name, data, feeds in cases:
                so = SessionOptions()
                so.intra_op_num_threads = threads
                kit = InferenceSession(data, so)
                runs = {"onnxkit": lambda kit=kit: kit.run(None, feeds)}
                if args.before:
                    width, conv_channels.WIDTH = conv_channels.WIDTH, {}
                    try:
                        old = InferenceSession(data, so)
                        old.run(None, feeds)          # planned (and prepared) without the path
                    finally:
                        conv_channels.WIDTH = width
                    runs["before"] = lambda old=old: old.run(None, feeds)
                o = ort.SessionOptions()
                o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
                r = ort.InferenceSession(data, o, providers=["CPUExecutionProvider"])
                runs["onnxruntime"] = lambda: r.run(None, feeds)
                got, want = runs["onnxkit"]()[0], runs["onnxruntime"]()[0]
                got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
                diff = float(np.abs(got - want).max())
                same = "" if "before" not in runs else (" same bits as before" if np.array_equal(
                    got, runs["before"]()[0]) else " DIFFERENT from before")
                for f in runs.values():
                    f(), f()
                res = {n: ([], []) for n in runs}
                order = list(runs)
                for i in range(args.rounds):
                    for n in (order if i % 2 == 0 else order[::-1]):
                        cpu, wall = timed(runs[n], args.calls)
                        res[n][0].append(cpu)
                        res[n][1].append(wall)
                med = {n: (statistics.median(v[0]), statistics.median(v[1])) for n, v in res.items()}
                ref = med["onnxruntime"]
                text = "  ".join(f"{n} {v[0]:7.1f} / {v[1]:7.1f}" for n, v in med.items())
                ratio = f"ratio {med['onnxkit'][0] / ref[0]:.2f} / {med['onnxkit'][1] / ref[1]:.2f}"
                if "before" in med:
                    ratio += f" (before {med['before'][0] / ref[0]:.2f} / {med['before'][1] / ref[1]:.2f})"
                print(f"{threads}t {name:22s} {text}  {ratio}  max|diff| {diff:.1e}{same}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
