"""The ``onnxkit`` command line: one subcommand per module of :data:`COMMANDS`.

Each module exposes ``add_parser(subparsers)`` (adds its subparser) and ``run(args) -> int``.
An :class:`onnxkit.errors.OnnxkitError` becomes one line on stderr and exit status 2
(usage or input problem); commands choose 0 / 1 for their own verdicts.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional

from .. import __version__
from ..errors import OnnxkitError

COMMANDS = [
    "onnxkit.cli.plugins_cmd",
    "onnxkit.cli.opsets_cmd",
    "onnxkit.cli.hash_cmd",
    "onnxkit.cli.run_cmd",
    "onnxkit.cli.unsupported_cmd",
    "onnxkit.cli.conformance_cmd",
    "onnxkit.cli.infer_cmd",
    "onnxkit.cli.check_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onnxkit", description="onnxkit: the ONNX core specification in Python")
    parser.add_argument("--version", action="version", version=f"onnxkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = importlib.import_module(name)
        p = module.add_parser(sub)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except OnnxkitError as exc:
        print(f"onnxkit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `onnxkit opsets | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
