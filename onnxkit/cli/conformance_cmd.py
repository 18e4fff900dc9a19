"""``onnxkit conformance run DIR [--backend NAME] [--report FILE.json] [-k SUBSTRING]`` and
``onnxkit conformance statement [--backend NAME] [--format md|json]`` (Annex A)."""

from __future__ import annotations

import sys
from pathlib import Path


def add_parser(sub):
    p = sub.add_parser("conformance", help="run ONNX 1-3 test vectors; print the conformance statement")
    csub = p.add_subparsers(dest="action", metavar="ACTION")
    csub.required = True
    r = csub.add_parser("run", help="run every case under DIR")
    r.add_argument("dir", metavar="DIR", help="a folder of test cases (model.onnx + test_data_set_*/)")
    r.add_argument("--backend", default="cpu", help="the backend to run on (default: cpu)")
    r.add_argument("--report", metavar="FILE.json", help="write a JSON report")
    r.add_argument("-k", dest="filter", action="append", default=[], help="only cases whose name contains this")
    r.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    r.add_argument("-v", "--verbose", action="store_true", help="print each case that does not pass")
    s = csub.add_parser("statement", help="the conformance statement (Annex A), generated from the installed plugins")
    s.add_argument("--backend", action="append", metavar="NAME", help="only this backend (repeatable; default: all)")
    s.add_argument("--format", choices=("md", "json"), default="md", help="Markdown (as docs/conformance.md embeds it) or JSON")
    return p


def run(args) -> int:
    if args.action == "statement":
        return _statement(args)
    from ..conformance import discover, run_all, summary, write_report

    root = Path(args.dir)
    if not root.is_dir():
        print(f"onnxkit conformance: error: {root} is not a folder", file=sys.stderr)
        return 2
    cases = [c for c in discover(root) if not args.filter or any(f in c.name for f in args.filter)]
    if not cases:
        which = " matching -k " + ", ".join(map(repr, args.filter)) if args.filter else ""
        print(f"onnxkit conformance: no test case{which} under {root} (a case is a folder holding model.onnx "
              "and test_data_set_*/)", file=sys.stderr)
        return 1
    outcomes = run_all(cases, args.backend, progress=not args.no_progress and sys.stderr.isatty())
    counts = summary(outcomes)
    if args.verbose:
        for o in outcomes:
            if o.status != "pass":
                print(f"{o.status:12s} {o.name}: {o.message[:300]}")
    if args.report:
        write_report(args.report, outcomes, args.backend)
    print(f"{len(outcomes)} cases on {args.backend}: {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['unsupported']} unsupported, {counts['error']} errors")
    return 0 if counts["fail"] == counts["error"] == counts["unsupported"] == 0 else 1


def _statement(args) -> int:
    import json

    from ..registry import get_registry
    from ..statement import build_statement, render_markdown

    registry = get_registry()
    unknown = [b for b in args.backend or () if b not in registry.backends]
    if unknown:
        print(f"onnxkit conformance: error: no backend {unknown[0]!r}; installed: {sorted(registry.backends)}",
              file=sys.stderr)
        return 2
    st = build_statement(registry, args.backend)
    sys.stdout.write(json.dumps(st, indent=1) + "\n" if args.format == "json" else render_markdown(st))
    return 0
