"""Write docs/cli.md, the command-line reference, from the ``onnxkit`` argparse parser:
``python tools/cli_reference.py`` (``--check``: exit 1 when docs/cli.md differs).

The page is rendered from the parser's actions (not from ``format_help``, whose layout changes
with the terminal width and the Python version), so it is the same on every machine;
``tests/structure/test_docs.py`` fails while docs/cli.md differs from :func:`render`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from onnxkit.cli import build_parser

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"

HEADER = """# CLI reference

Generated from the `onnxkit` command's own parser by `python tools/cli_reference.py` (a test
keeps this page current).  `onnxkit COMMAND --help` prints the same.

**Every command.**  `onnxkit --version` prints the version; `-v` / `-vv` before the command
shows onnxkit's log records (info / debug) on stderr.

**Exit status.**  0 success; 1 the command's negative verdict (the model does not conform,
`run --strict`'s refusal included; unsupported operators; failing conformance cases, or a
conformance folder with no case or no test data); 2 a usage or I/O problem, a file that is not an
ONNX model (said first: "not an ONNX model" or "truncated"), or bad input; 3 an internal error of
onnxkit (one line; `ONNXKIT_TRACEBACK=1` shows the traceback); 130 interrupted.  No command prints
a traceback otherwise.  `run` refuses `.npy` files holding pickled objects and writes outputs
whose names hold `/` or other path characters as `DIR/a_b.npy`.
"""


def subcommands(parser: argparse.ArgumentParser, prefix: str = ""):
    """(name, parser) of every subcommand, nested ones after their parent, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix}{name}", sub
                yield from subcommands(sub, f"{prefix}{name} ")


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest.upper() if not action.option_strings else action.dest.upper().replace("-", "_")


def label(action: argparse.Action) -> str:
    """How the page names an argument: ``MODEL``, ``--format {text,json}``, ``-o, --output FILE``."""
    if not action.option_strings:
        return f"`{_metavar(action)}`"
    names = ", ".join(sorted(action.option_strings, key=lambda s: (s.startswith("--"), s)))
    takes_value = action.nargs != 0
    return f"`{names} {_metavar(action)}`" if takes_value else f"`{names}`"


def _default(action: argparse.Action) -> str:
    if not action.option_strings or action.nargs == 0 or action.default in (None, [], argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _usage(name: str, sub: argparse.ArgumentParser) -> str:
    words = [f"onnxkit {name}"]
    for action in sub._actions:
        if isinstance(action, argparse._SubParsersAction):
            words.append("{" + ",".join(action.choices) + "} ...")
        elif not action.option_strings:
            words.append(_metavar(action) + (" ..." if action.nargs in ("+", "*", argparse.REMAINDER) else ""))
    if any(a.option_strings and not isinstance(a, argparse._HelpAction) for a in sub._actions):
        words.append("[options]")
    return " ".join(words)


def _sentence(text: str) -> str:
    text = (text or "").strip()
    return text[:1].upper() + text[1:] if text else ""


def render() -> str:
    """The page, as Markdown."""
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in top._choices_actions}
    out = [HEADER, "| command | what it does |", "|---|---|"]
    for name in top.choices:
        out.append(f"| [`onnxkit {name}`](#onnxkit-{name}) | {_sentence(helps.get(name))} |")
    for name, sub in subcommands(parser):
        out += ["", f"## `onnxkit {name}`", "", _sentence(sub.description), "", "```text", _usage(name, sub), "```"]
        rows = [a for a in sub._actions
                if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        if rows:
            out += ["", "| argument | meaning | default |", "|---|---|---|"]
            for a in rows:
                meaning = (a.help or "").replace("|", "\\|")
                out.append(f"| {label(a).replace('|', chr(92) + '|')} | {meaning} | {_default(a)} |")
    return "\n".join(out) + "\n"


def main(argv: list) -> int:
    text = render()
    if argv == ["--check"]:
        if PAGE.read_text() != text:
            print(f"{PAGE} is stale: run python tools/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
