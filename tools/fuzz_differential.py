"""The differential fuzzer's long run (fuzz/differential).

    python tools/fuzz_differential.py --models 10000 --seed 0 --jobs 2 --out DIR

Prints models tried, failures (each minimized and saved under DIR with a one-line summary),
exclusions by reason and the elapsed time; exits 1 when a model failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))       # appended: the installed onnxkit stays the one imported

from fuzz.differential.driver import run_many  # noqa: E402
from fuzz.differential.exclusions import EXCLUSIONS  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first model index")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None, help="folder for minimized failing models")
    ap.add_argument("--no-minimize", action="store_true")
    args = ap.parse_args(argv)

    def progress(report, outcome):
        if outcome.verdict.status == "fail":
            print("FAIL", outcome.summary, flush=True)
        if report.models % 1000 == 0:
            print(f"... {report.models} models, {len(report.failures)} failures", flush=True)
    report = run_many(args.models, args.seed, args.jobs, args.out, not args.no_minimize, args.start, progress)
    print(report.text())
    for name in sorted(report.exclusions):
        print(f"  {name}: {EXCLUSIONS.get(name, '')}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
