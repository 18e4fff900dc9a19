"""``onnxkit check PATH [--format text|json] [--open-external]``: validate a model (Clause 10).

Every condition found is reported (10.5), one per line in the text form, like a compiler::

    model.onnx: graph 'main' / node 3 'conv1' (Conv) / attribute 'pads': error: ... [unknown-attribute, Clause 10.4]
    model.onnx: 1 error, 0 warnings

``--format json`` prints one object: ``{"errors": N, "warnings": N, "diagnostics":
[{"severity", "code", "clause", "message", "location"}, ...]}``.  ``--open-external``
also resolves external data references and verifies the files (off by default, 15.5).
``--strict``: warnings that break a SHALL (the *strict* column of docs/diagnostics.md: what
``InferenceSession(strict=True)`` refuses) count as failures.

Exit status: 0 the model runs (warnings allowed; under ``--strict`` only advisory ones), 1 it
does not (at least one error, or under ``--strict`` a violation), 2 usage or I/O problem (no
such file, unreadable) or octets that are not an ONNX model (the ``decode-error`` diagnostic
is still reported, with "not an ONNX model" or "truncated" first).
"""

from __future__ import annotations

import json
import sys

from ..errors import DecodeError, OnnxkitError, decode_summary, describe
from .paths import why_not_a_model_file


def add_parser(sub):
    p = sub.add_parser("check", help="validate a model (Clause 10) and report every condition found")
    p.add_argument("path", metavar="PATH", help="the model file (.onnx)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output form (default: text)")
    p.add_argument("--open-external", action="store_true",
                   help="resolve external data references and verify the files (Clause 13, 15.3)")
    p.add_argument("--strict", action="store_true",
                   help="count warnings that break a SHALL as failures (exit 1), as InferenceSession(strict=True) does")
    return p


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def run(args, out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    from ..checker import check_model
    from ..checker.codes import refuses

    path = args.path
    why = why_not_a_model_file(path)
    if why is not None:
        print(f"onnxkit check: error: {path} {why}", file=err)
        return 2
    try:
        report = check_model(path, open_external=args.open_external)
    except OnnxkitError as exc:
        print(f"onnxkit check: error: {describe(exc)}", file=err)
        return 2
    undecodable = [d for d in report.diagnostics if d.code == "decode-error"]
    if args.format == "json":
        json.dump(report.to_json(), out, indent=2)
        out.write("\n")
    else:
        for d in report.diagnostics:
            where = f"{d.location}: " if d.location else ""
            print(f"{path}: {where}{d.severity}: {d.message} [{d.code}, Clause {d.clause}]", file=out)
        print(f"{path}: {_plural(len(report.errors), 'error')}, {_plural(len(report.warnings), 'warning')}", file=out)
    if undecodable:
        summary = decode_summary(DecodeError(undecodable[0].message))
        print(f"onnxkit check: error: {path}: {summary}", file=err)
        return 2
    return 1 if any(refuses(d, args.strict) for d in report.diagnostics) else 0
