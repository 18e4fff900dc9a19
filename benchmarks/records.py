"""What onnxkit's record classes (attrs classes, ``onnxkit.records``) cost a fresh process.

Three figures, each the median of ``--rounds``:

* ``import attrs`` in a fresh process (``onnxkit.records`` imports it): wall and CPU time;
* one record class: ``--classes`` classes of 8 fields (half with a default, half with a list
  factory) made by ``records.define`` (attrs) and, for scale, by ``dataclasses.dataclass(slots=True)``,
  interleaved; the definition alone, and with a first instance and one ``==``;
* a session's path: a fresh process imports onnxkit, opens the bundled example and runs it once,
  with attrs' ``define`` / ``frozen`` timed (thread CPU time): how many record classes it defines
  and the time attrs spends making them (``benchmarks/cold_start.py`` times the whole first result).

Run: ``python benchmarks/records.py [--rounds N] [--classes N]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import attrs  # noqa: E402

from onnxkit import records  # noqa: E402

FIELDS = [f"f{i}" for i in range(8)]

#: a fresh process: import attrs, timed
_IMPORT = ("import time\n"
           "t, c = time.perf_counter(), time.process_time()\n"
           "import attrs\n"
           "print(time.perf_counter() - t, time.process_time() - c)")

#: a fresh process: attrs' define / frozen timed, then onnxkit imported and the example run once
_SESSION = r'''
import json, sys, time
import attrs
spent = []

def timing(original):
    def wrapper(maybe_cls=None, **options):
        def make(cls):
            t = time.thread_time()
            made = original(cls, **options)
            spent.append(time.thread_time() - t)
            return made
        return make if maybe_cls is None else make(maybe_cls)
    return wrapper

attrs.define, attrs.frozen = timing(attrs.define), timing(attrs.frozen)
t = time.thread_time()
import numpy as np
import onnxkit
s = onnxkit.InferenceSession(sys.argv[1])
s.run(None, {"image": np.zeros((1, 1, 8, 8), np.float32)})
print(json.dumps({"classes": len(spent), "attrs": sum(spent), "total": time.thread_time() - t}))
'''


def _namespace(field_of):
    ns = {"__annotations__": {f: "object" for f in FIELDS}}
    for i, f in enumerate(FIELDS):
        ns[f] = field_of(i)
    return ns


def make_record(n):
    ns = _namespace(lambda i: records.field(factory=list) if i % 2 else 0)
    return records.define(type(f"R{n}", (), ns))


def make_dataclass(n):
    ns = _namespace(lambda i: dataclasses.field(default_factory=list) if i % 2 else 0)
    return dataclasses.dataclass(slots=True)(type(f"D{n}", (), ns))


def timed(make, classes: int, use: bool) -> float:
    """ms per class (thread CPU time): ``classes`` definitions (and, with ``use``, a first instance and one ``==`` each)."""
    t0 = time.thread_time()
    for n in range(classes):
        cls = make(n)
        if use:
            cls() == cls()  # noqa: B015
    return (time.thread_time() - t0) / classes * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--classes", type=int, default=50)
    args = ap.parse_args()
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; {os.cpu_count()} CPUs, load average {load}; "
          f"Python {sys.version.split()[0]}, attrs {attrs.__version__}; median of {args.rounds}")

    runs = [subprocess.run([sys.executable, "-c", _IMPORT], capture_output=True, text=True, check=True).stdout.split()
            for _ in range(args.rounds)]
    wall, cpu = (statistics.median(float(r[i]) for r in runs) * 1e3 for i in (0, 1))
    print(f"import attrs in a fresh process: {wall:.1f} ms wall, {cpu:.1f} ms CPU")

    makers = {"records (attrs)": make_record, "dataclasses": make_dataclass}
    results = {}
    for use in (False, True):
        samples = {k: [] for k in makers}
        for r in range(args.rounds):
            for name in (list(makers) if r % 2 else list(reversed(makers))):
                samples[name].append(timed(makers[name], args.classes, use))
        results[use] = {k: statistics.median(v) for k, v in samples.items()}
    print(f"one class of 8 fields ({args.classes} per round, interleaved), thread CPU time:")
    print(f"  {'library':18s} {'define ms':>10s} {'+ first use ms':>15s}")
    for name in makers:
        print(f"  {name:18s} {results[False][name]:10.3f} {results[True][name]:15.3f}")

    example = ROOT / "examples" / "digits.onnx"
    session = [json.loads(subprocess.run([sys.executable, "-c", _SESSION, str(example)], capture_output=True,
                                         text=True, check=True, cwd=str(ROOT)).stdout.splitlines()[-1])
               for _ in range(args.rounds)]
    classes = statistics.median(s["classes"] for s in session)
    spent = statistics.median(s["attrs"] for s in session) * 1e3
    total = statistics.median(s["total"] for s in session) * 1e3
    print(f"a session on the example (import onnxkit, session, first run): {classes:.0f} record classes defined, "
          f"{spent:.1f} ms in attrs' class making ({spent / max(classes, 1):.3f} ms each) of {total:.0f} ms, "
          f"thread CPU time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
