"""``onnxkit run MODEL --input NAME=FILE ... [--output-dir DIR] [--backend NAME] [--profile]
[--optimized-model OUT] [--no-optimize] [--threads N]``.

Inputs are ``.npy`` files (pickled Python objects are refused: loading them could run code)
or ``.pb`` value files of the ONNX test package.  Each output is printed; ``--output-dir``
writes it to ``DIR/<name>.npy`` with the name made safe for a file name (``/`` and other
path characters become ``_``).  ``--profile`` runs with profiling on, prints the operators
that took the most time as a table, then the body each node's kernel chose per input-shape key
where the kernel reports it (:mod:`onnxkit.runtime.bodies`: a cpu Conv's ``winograd``,
``planes``, ``columns``, ...), and writes the Chrome trace (``chrome://tracing``).
``--strict`` is ``InferenceSession(strict=True)``: every violation refuses the model or the
run, warnings included (Clause 8.6); without it warnings are reported and the model runs.
``--optimized-model OUT`` writes the model the graph optimizer produced (the one planned);
``--no-optimize`` plans the graph as given; ``--threads N`` is ``intra_op_num_threads``.
"""

from __future__ import annotations

import os
import re

import numpy as np

from ..errors import OnnxkitError
from .paths import require_model_file

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def add_parser(sub):
    p = sub.add_parser("run", help="evaluate a model on inputs given as .npy (or .pb) files",
                       description="evaluate a model on inputs given as .npy or .pb files.")
    p.add_argument("model", metavar="MODEL", help="the model file (.onnx)")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE",
                   help="an input value: a .npy file, or a .pb value file of the ONNX test package (repeatable)")
    p.add_argument("--output-dir", "-o", metavar="DIR", help="write each output to DIR/<name>.npy")
    p.add_argument("--backend", default="cpu", help="the backend to run on: cpu (default) or gpu (onnxkit-gpu)")
    p.add_argument("--profile", action="store_true",
                   help="profile the run: print the top operators by time and write a Chrome trace JSON")
    p.add_argument("--top", type=int, default=10, metavar="N", help="with --profile: how many operators to list")
    p.add_argument("--strict", action="store_true",
                   help="refuse on any violation, warnings included (Clause 8.6); default: report warnings and run")
    p.add_argument("--optimized-model", metavar="OUT", help="write the optimized model (the one planned) to OUT")
    p.add_argument("--no-optimize", action="store_true",
                   help="plan the graph as given (graph_optimization_level ORT_DISABLE_ALL)")
    p.add_argument("--threads", type=int, default=0, metavar="N",
                   help="BLAS threads during the run (intra_op_num_threads; default 0: the physical cores)")
    return p


def _read(path: str, vi):
    if path.endswith(".npy"):
        try:
            return np.load(path, allow_pickle=False)
        except ValueError as exc:
            if "pickle" in str(exc).lower():
                raise OnnxkitError(f"input file {path} holds pickled Python objects (an object array); onnxkit "
                                   "does not unpickle input files, since that can run code: save a numeric or "
                                   "string array instead") from None
            raise OnnxkitError(f"input file {path} is not a readable .npy file: {exc}") from None
    from ..api import load_value

    return load_value(path, type=vi.type if vi is not None else None)


def safe_file_name(name: str, taken: set) -> str:
    """``name`` as a file name inside one directory: unsafe characters as ``_``, unique in ``taken``."""
    base = _UNSAFE.sub("_", name).lstrip(".") or "output"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}_{n}"
    taken.add(candidate)
    return candidate


def run(args) -> int:
    from ..runtime import InferenceSession, SessionOptions
    from ..runtime.options import GraphOptimizationLevel

    so = SessionOptions()
    so.log_severity_level = {0: 2, 1: 1}.get(getattr(args, "verbose", 0), 0)  # -v: info, -vv: verbose
    if args.profile:
        so.enable_profiling = True
        so.profile_file_prefix = "onnxkit_profile"
    if args.optimized_model:
        from ..api import save_target

        try:  # refused before the model is planned: a directory, FIFO or device, or no such directory
            save_target(args.optimized_model)
        except OnnxkitError as exc:
            raise OnnxkitError(f"--optimized-model: {exc}") from None
        so.optimized_model_filepath = args.optimized_model
    if args.no_optimize:
        so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    if args.threads < 0:
        raise OnnxkitError(f"--threads must be 0 (the physical cores) or more, got {args.threads}")
    so.intra_op_num_threads = args.threads
    require_model_file(args.model)
    feed = {}
    pending = []
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep:
            raise OnnxkitError(f"--input needs NAME=FILE, got {item!r}")
        if not os.path.exists(path):
            raise OnnxkitError(f"input file {path} does not exist")
        pending.append((name, path))
    sess = InferenceSession(args.model, so, backend=args.backend, strict=args.strict)
    by_name = {vi.name: vi for vi in sess.model.graph.input}
    for name, path in pending:
        feed[name] = _read(path, by_name.get(name))
    outputs = sess.run(None, feed)
    names = [o.name for o in sess.get_outputs()]
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
    taken: set = set()
    for name, value in zip(names, outputs):
        if isinstance(value, np.ndarray):
            print(f"{name}: {value.dtype}{list(value.shape)}")
            print(np.array2string(value, threshold=20, edgeitems=3))
            if args.output_dir:
                file = os.path.join(args.output_dir, safe_file_name(name, taken) + ".npy")
                np.save(file, value, allow_pickle=False)
                print(f"  written to {file}")
        else:
            print(f"{name}: {value!r}")
    if args.optimized_model:
        done = ", ".join(f"{k} {v}" for k, v in sess.optimized.rewrites.items() if v) or "no rewrites"
        print(f"optimized model ({done}) written to {args.optimized_model}")
    if args.profile:
        _print_profile(sess, args.top)
    return 0


def _print_profile(sess, top: int) -> None:
    import json

    from rich.table import Table

    from . import console as make_console

    from ..runtime.bodies import describe as describe_bodies
    from ..runtime.state import top_operators

    path = sess.end_profiling()
    with open(path, encoding="utf-8") as fh:
        events = json.load(fh)
    rows = top_operators(events, top)
    total = sum(float(e["dur"]) for e in events if e.get("cat") == "Node") or 1.0
    table = Table(title=f"top operators by total time ({sum(1 for e in events if e.get('cat') == 'Node')} node runs)")
    for col, justify in (("operator", "left"), ("calls", "right"), ("total ms", "right"), ("mean µs", "right"),
                         ("share", "right")):
        table.add_column(col, justify=justify)
    for op, calls, us in rows:
        table.add_row(op, str(calls), f"{us / 1e3:.3f}", f"{us / calls:.1f}", f"{100 * us / total:.1f}%")
    console = make_console(markup=False)  # operator names are the model's text
    console.print(table)
    chosen = describe_bodies(sess.plan)
    if chosen:
        console.print(f"bodies chosen per input-shape key ({len(chosen)}):")
        for line in chosen:
            console.print(f"  {line}")
    console.print(f"Chrome trace written to {path} (open it in chrome://tracing or ui.perfetto.dev)")
