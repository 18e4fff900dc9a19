"""The per-node and per-run floor of onnxkit's plans against onnxruntime (issues 43 and 44).

Three chains of ``--nodes`` cheap nodes over a tiny input whose first extent is a dimension
variable (so nothing folds at planning), one thread each, onnxkit's session on its cold plan
(``ONNXKIT_FIRST_RUN=tiered``, never promoted here: no kernel of these chains defers a setup, so
tiered runs the plan it starts with) and onnxruntime 1.32 interleaved:

* ``elementwise``: Add, Mul, Sub, Relu, Neg in turn on float32[n, 4];
* ``shape``: the shape arithmetic of a torch export repeated: Shape, Gathers of scalars, Mul,
  Unsqueeze, Concat with a constant, Reshape of the data by the computed shapes (flat, then
  back to [n, 4]), an Add / Mul by a scalar between them, on float32[n, 4];
* ``mixed``: both, alternating.

And the per-run cost: ``trivial``, one Identity node.  Per chain: the median over ``--repeat``
timed rounds (each round ``--inner`` runs) of the thread CPU time and of the wall time per run;
``(chain - trivial) / nodes`` is the cost of one node.  A round is onnxkit then onnxruntime or
the other way round, alternating.  ``--vary``: a new first extent every run (as a decoder's
past grows a position a token: nothing a plan keeps per shape is reused).  Run: ``python benchmarks/floor.py [--nodes 600] [--repeat 9]
[--vary] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("ONNXKIT_FIRST_RUN", "tiered")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402


def _chain(kind: str, n_nodes: int) -> bytes:
    """A model of ``n_nodes`` nodes of ``kind`` (see the module docstring), serialized."""
    nodes, inits = [], []
    inits.append(helper.make_tensor("c", TensorProto.FLOAT, [4], [0.5, 1.0, 1.5, 2.0]))
    inits.append(helper.make_tensor("h", TensorProto.FLOAT, [], [1.0]))
    inits.append(helper.make_tensor("i0", TensorProto.INT64, [], [0]))
    inits.append(helper.make_tensor("i1", TensorProto.INT64, [], [1]))
    inits.append(helper.make_tensor("ax0", TensorProto.INT64, [1], [0]))
    inits.append(helper.make_tensor("four", TensorProto.INT64, [1], [4]))
    cur, k = "x", 0

    def name(tag):
        nonlocal k
        k += 1
        return f"{tag}{k}"

    def elementwise():
        nonlocal cur
        op = ("Add", "Mul", "Sub", "Relu", "Neg")[k % 5]
        out = name("e")
        nodes.append(helper.make_node(op, [cur, "c"] if op in ("Add", "Mul", "Sub") else [cur], [out]))
        cur = out
        return 1

    def shape():
        nonlocal cur
        s, g0, g1, m, u, flat, a, u0, cat, back, b = (name(t) for t in ("s", "g0", "g1", "m", "u", "flat", "a",
                                                                       "u0", "cat", "back", "b"))
        nodes.extend([
            helper.make_node("Shape", [cur], [s]),
            helper.make_node("Gather", [s, "i0"], [g0]),
            helper.make_node("Gather", [s, "i1"], [g1]),
            helper.make_node("Mul", [g0, g1], [m]),
            helper.make_node("Unsqueeze", [m, "ax0"], [u]),
            helper.make_node("Reshape", [cur, u], [flat]),
            helper.make_node("Add", [flat, "h"], [a]),
            helper.make_node("Unsqueeze", [g0, "ax0"], [u0]),
            helper.make_node("Concat", [u0, "four"], [cat], axis=0),
            helper.make_node("Reshape", [a, cat], [back]),
            helper.make_node("Mul", [back, "h"], [b]),
        ])
        cur = b
        return 11

    made, block = 0, 0
    while made < n_nodes:
        use_shape = kind == "shape" or (kind == "mixed" and block % 2 == 1)
        if use_shape and n_nodes - made >= 11:
            made += shape()
        else:
            made += sum(elementwise() for _ in range(min(11, n_nodes - made)))
        block += 1
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, kind, [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _trivial() -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "trivial", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _per_run(run, inner: int) -> tuple:
    """(thread CPU seconds, wall seconds) per call of ``run`` over ``inner`` calls."""
    c0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(inner):
        run()
    return (time.thread_time() - c0) / inner, (time.perf_counter() - w0) / inner


def measure(n_nodes: int, repeat: int, inner: int, vary: bool = False) -> dict:
    import onnxruntime as ort

    import onnxkit

    so = onnxkit.SessionOptions()
    so.intra_op_num_threads = 1
    oso = ort.SessionOptions()
    oso.intra_op_num_threads = oso.inter_op_num_threads = 1
    feed = {"x": np.ones((3, 4), np.float32)}
    models = {"trivial": _trivial(), **{k: _chain(k, n_nodes) for k in ("elementwise", "shape", "mixed")}}
    result = {}
    for kind, data in models.items():
        mine = onnxkit.InferenceSession(data, so)
        theirs = ort.InferenceSession(data, oso, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(mine.run(None, feed)[0], theirs.run(None, feed)[0], rtol=1e-6)
        if vary:  # a new first extent every run (a decoder's growing past): nothing is memoized by shape
            grown = {"onnxkit": iter(range(1, 1 << 30)), "ort": iter(range(1, 1 << 30))}
            runs = {"onnxkit": lambda: mine.run(None, {"x": np.ones((next(grown["onnxkit"]) % 512 + 1, 4), np.float32)}),
                    "ort": lambda: theirs.run(None, {"x": np.ones((next(grown["ort"]) % 512 + 1, 4), np.float32)})}
        else:
            runs = {"onnxkit": lambda: mine.run(None, feed), "ort": lambda: theirs.run(None, feed)}
        n = inner if kind != "trivial" else inner * 20
        for f in runs.values():  # warm-up: the plan's first runs (record, specialize)
            for _ in range(20):
                f()
        samples: dict = {k: [] for k in runs}
        for r in range(repeat):
            for k in (("onnxkit", "ort") if r % 2 == 0 else ("ort", "onnxkit")):
                samples[k].append(_per_run(runs[k], n))
        result[kind] = {k: {"cpu_us": statistics.median(s[0] for s in v) * 1e6,
                            "wall_us": statistics.median(s[1] for s in v) * 1e6} for k, v in samples.items()}
        result[kind]["nodes"] = len(onnx.load_from_string(data).graph.node)
        result[kind]["cold"] = mine._cold is not None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--inner", type=int, default=20)
    parser.add_argument("--vary", action="store_true", help="a new first extent every run")
    parser.add_argument("--json")
    args = parser.parse_args()
    import onnxruntime as ort

    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}, Python {platform.python_version()}, numpy {np.__version__}, onnxruntime "
          f"{ort.__version__}, ONNXKIT_FIRST_RUN={os.environ['ONNXKIT_FIRST_RUN']}, one thread each"
          f"{', a new extent every run' if args.vary else ''}")
    r = measure(args.nodes, args.repeat, args.inner, args.vary)
    base = r["trivial"]
    print(f"trivial run: onnxkit {base['onnxkit']['cpu_us']:.1f} us, onnxruntime {base['ort']['cpu_us']:.1f} us "
          "(thread CPU)")
    for kind in ("elementwise", "shape", "mixed"):
        row = r[kind]
        per = {k: (row[k]["cpu_us"] - base[k]["cpu_us"]) / row["nodes"] for k in ("onnxkit", "ort")}
        print(f"{kind:12s} {row['nodes']} nodes: onnxkit {row['onnxkit']['cpu_us']:8.1f} us "
              f"({per['onnxkit']:.2f} us/node, cold plan {row['cold']}), onnxruntime {row['ort']['cpu_us']:8.1f} us "
              f"({per['ort']:.2f} us/node): {row['onnxkit']['cpu_us'] / row['ort']['cpu_us']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
