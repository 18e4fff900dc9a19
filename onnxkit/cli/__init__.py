"""The ``onnxkit`` command line: one subcommand per module of :data:`COMMANDS`.

Each module exposes ``add_parser(subparsers)`` (adds its subparser) and ``run(args) -> int``.
Exit status (docs/cli.md): 0 success; 1 a command's own negative verdict (the model
does not conform, an operator is unsupported, a conformance case failed: a
:class:`~onnxkit.errors.ValidationError` or :class:`~onnxkit.errors.UnsupportedOperatorError`
from any command, ``run --strict``'s refusal included); 2 a usage problem,
an I/O problem (no such file, unreadable), octets that are not an ONNX model, or bad input
(an :class:`onnxkit.errors.OnnxkitError`: one line on stderr); 3 an internal error of onnxkit
(one line too; ``ONNXKIT_TRACEBACK=1`` shows the traceback); 130 interrupted.  No traceback
is printed otherwise.  ``-v`` / ``-vv`` show onnxkit's log records (INFO / DEBUG) on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Optional

from ..errors import OnnxkitError, UnsupportedOperatorError, ValidationError, describe

COMMANDS = [
    "onnxkit.cli.plugins_cmd",
    "onnxkit.cli.opsets_cmd",
    "onnxkit.cli.hash_cmd",
    "onnxkit.cli.run_cmd",
    "onnxkit.cli.show_cmd",
    "onnxkit.cli.print_cmd",
    "onnxkit.cli.unsupported_cmd",
    "onnxkit.cli.conformance_cmd",
    "onnxkit.cli.infer_cmd",
    "onnxkit.cli.check_cmd",
    "onnxkit.cli.exec_cmd",
]

EXIT_OK, EXIT_VERDICT, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _version() -> str:
    from .. import IR_VERSION, __version__

    return f"onnxkit {__version__} (ONNX IR version {IR_VERSION})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onnxkit", description="onnxkit: the ONNX core specification in Python",
                                     epilog="exit status: 0 ok, 1 negative verdict, 2 usage / I/O / not a model / "
                                            "bad input, 3 internal error")
    parser.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="show onnxkit's log records on stderr (-v: info, -vv: debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = importlib.import_module(name)
        p = module.add_parser(sub)
        p.set_defaults(_run=module.run)
    _describe(parser)
    return parser


def _describe(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand (nested ones too) a description: its help line, where it has none,
    so that ``onnxkit COMMAND --help`` always says what the command does."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if not sub.description and helps.get(name):
                    sub.description = helps[name][0].upper() + helps[name][1:] + "."
                _describe(sub)


def _configure_logging(verbosity: int) -> None:
    if not verbosity:
        return
    from rich.logging import RichHandler

    from ..log import get_logger

    log = get_logger()
    handler = RichHandler(console=_stderr_console(), show_path=False, show_time=False)
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)


def console(stderr: bool = False, markup: bool = True):
    """A rich console for a command's tables; a closed pipe (``| head``) ends the command quietly.
    ``markup=False``: strings are printed as they are (a model's names and shapes such as
    ``[batch, 50]`` are not read as rich markup)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich would exit with status 1
            raise BrokenPipeError

    return _Console(stderr=stderr, file=None if stderr else sys.stdout, markup=markup)


def _stderr_console():
    return console(stderr=True)


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    where = f"onnxkit {args.command}"
    try:
        return int(args._run(args) or 0)
    except (ValidationError, UnsupportedOperatorError) as exc:  # a verdict on the model, not a usage problem
        print(f"{where}: error: {describe(exc)}", file=sys.stderr)
        return EXIT_VERDICT
    except OnnxkitError as exc:
        print(f"{where}: error: {describe(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `onnxkit opsets | head`: the reader has all it wanted
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no complaint when Python flushes
        except OSError:
            pass
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        what = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"{where}: error: {what}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001
        # Broad: the command line's last resort.  Not one of the typed errors above, so a bug of
        # onnxkit: shown as one line on stderr and exit status EXIT_INTERNAL; the traceback is
        # re-raised with ONNXKIT_TRACEBACK=1 and logged at DEBUG (`onnxkit -vv` shows it).
        if os.environ.get("ONNXKIT_TRACEBACK"):
            raise
        from ..log import get_logger

        get_logger().debug("%s: internal error", where, exc_info=exc)
        print(f"{where}: internal error: {type(exc).__name__}: {exc} (a bug of onnxkit; "
              "ONNXKIT_TRACEBACK=1 shows the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
