"""What a record class costs to make: onnxkit.records vs attrs vs dataclasses (slots), in one run.

A session's import path defines some 85 classes (the IR, options, schemas, plan bookkeeping), so
the per-class cost is part of every fresh process's time to a first result
(``benchmarks/cold_start.py``).  Each round defines ``--classes`` classes of 8 fields (half with a
default, half with a list factory) per library, the libraries interleaved, and times two things:
the definition alone, and the definition plus a first instance and one ``==`` (onnxkit.records
compiles ``__init__`` and ``__eq__`` on first use, so that is its full cost for a class that is
used).  Prints the median over ``--rounds`` rounds in ms per class and each library over attrs, and the
time ``import attrs`` takes in a fresh process (median of ``--rounds`` processes).
Run: ``python benchmarks/records.py [--rounds N] [--classes N]``; attrs is optional.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from onnxkit import records  # noqa: E402

FIELDS = [f"f{i}" for i in range(8)]


def _namespace(field_of):
    ns = {"__annotations__": {f: "object" for f in FIELDS}}
    for i, f in enumerate(FIELDS):
        ns[f] = field_of(i)
    return ns


def make_records(n):
    ns = _namespace(lambda i: records.field(factory=list) if i % 2 else 0)
    return records.define(type(f"R{n}", (), ns))


def make_dataclass(n):
    ns = _namespace(lambda i: dataclasses.field(default_factory=list) if i % 2 else 0)
    return dataclasses.dataclass(slots=True)(type(f"D{n}", (), ns))


def make_attrs(n):
    import attrs

    ns = _namespace(lambda i: attrs.field(factory=list) if i % 2 else attrs.field(default=0))
    return attrs.define(type(f"A{n}", (), ns))


def timed(make, classes: int, use: bool) -> float:
    """ms per class: ``classes`` definitions (and, with ``use``, a first instance and one ``==`` each)."""
    t0 = time.perf_counter()
    for n in range(classes):
        cls = make(n)
        if use:
            cls() == cls()  # noqa: B015
    return (time.perf_counter() - t0) / classes * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--classes", type=int, default=50)
    args = ap.parse_args()
    makers = {"onnxkit.records": make_records, "dataclasses": make_dataclass}
    try:
        import attrs
        makers["attrs"] = make_attrs
        version = f", attrs {attrs.__version__}"
    except ImportError:
        version = ", attrs not installed"
    print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; Python {sys.version.split()[0]}{version}; "
          f"{args.classes} classes of 8 fields per round, libraries interleaved, median of {args.rounds} rounds")
    results = {}
    for use in (False, True):
        samples = {k: [] for k in makers}
        for r in range(args.rounds):
            for name in (list(makers) if r % 2 else list(reversed(makers))):
                samples[name].append(timed(makers[name], args.classes, use))
        results[use] = {k: statistics.median(v) for k, v in samples.items()}
    print(f"{'library':18s} {'define ms':>10s} {'+ first use ms':>15s} {'/ attrs':>8s}")
    for name in makers:
        ratio = (f"{results[True][name] / results[True]['attrs']:8.2f}" if "attrs" in makers else "       -")
        print(f"{name:18s} {results[False][name]:10.3f} {results[True][name]:15.3f} {ratio}")
    if "attrs" in makers:
        code = "import time; t = time.perf_counter(); import attrs; print(time.perf_counter() - t)"
        runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
                for _ in range(args.rounds)]
        print(f"import attrs in a fresh process: {statistics.median(runs) * 1e3:.1f} ms (median of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
