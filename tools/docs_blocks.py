"""The fenced code blocks of a Markdown page (README.md, docs/*.md), for the docs tests and CI.

Conventions of the pages (tests/test_docs.py holds them to it):

* ```` ```python ```` blocks run, in the page's order, in one process;
* ```` ```console ```` blocks hold ``$ onnxkit ...`` commands, ```` ```bash ```` blocks ``onnxkit ...``
  commands (an ``ONNXKIT_X=value`` prefix allowed), or ``python -m ...`` / ``python script.py``;
  each must exit with the status its trailing ``# exit N`` comment states, 0 without one;
* ```` ```sh ```` blocks are install steps (``pip install``, ``python3 -m build``): CI's
  ``.ci/run`` and ``.ci/wheels`` run them, not the docs test;
* a block whose fence says ``title="FILE"`` is a file of the example (``pyproject.toml``,
  ``onnxkit_swish.py``): it is written to ``FILE`` before the blocks after it run, never run itself;
* a block preceded by the line :data:`ILLUSTRATIVE` (an HTML comment, invisible on the site) is
  illustrative: a python one is compiled, not run (it needs a cluster, say); the docs test counts
  these blocks and asserts the figure.

``python tools/docs_blocks.py extract PAGE DIR`` writes a page's titled blocks into ``DIR`` (how
``.ci/wheels`` builds the plugin guide's example from the guide alone).
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`]*)$")
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
_EXIT = re.compile(r"\s+#\s*exit\s+(?P<code>\d+)\s*$")
_ASSIGN = re.compile(r"^[A-Z_][A-Z0-9_]*=")
#: The marker line, just before a fence, of a block that is shown but not run.
ILLUSTRATIVE = "<!-- docs-test: illustrative -->"
#: The programs a console or bash block may run.
PROGRAMS = ("onnxkit", "python", "python3")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its title (a file name) or None, the line (1-based) of its
    first code line, its text (the lines between the fences, with a final newline), and whether
    the :data:`ILLUSTRATIVE` marker precedes it."""

    lang: str
    title: Optional[str]
    line: int
    text: str
    illustrative: bool = False


@dataclass(frozen=True)
class Command:
    """A command of a console or bash block: its words (the program, one of :data:`PROGRAMS`,
    first), the environment assignments before it, the exit status the page states, and its line."""

    argv: list
    env: dict
    expect: int
    line: int
    source: str


def blocks(path: Path) -> list:
    """Every fenced block of ``path``, in order.  An unterminated fence is a ValueError."""
    lines = Path(path).read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        info, fence, start = m["info"].strip(), m["fence"], i + 1
        j = start
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        if j == len(lines):
            raise ValueError(f"{path}:{i + 1}: the code fence is never closed")
        title = _TITLE.search(info)
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        out.append(Block(info.split()[0] if info else "", title["title"] if title else None, start + 1,
                         "".join(f"{ln}\n" for ln in lines[start:j]), before == ILLUSTRATIVE))
        i = j + 1
    return out


def commands(block: Block, where: str) -> list:
    """The commands of a console or bash block; a program outside :data:`PROGRAMS` is a ValueError
    naming its line (install steps belong in an ```` ```sh ```` block)."""
    out = []
    for k, raw in enumerate(block.text.splitlines()):
        line = block.line + k
        text = raw.strip()
        if block.lang == "console":
            if not text.startswith("$ "):
                continue  # a line of the command's output
            text = text[2:].strip()
        elif not text or text.startswith("#"):
            continue
        m = _EXIT.search(text)
        expect = int(m["code"]) if m else 0
        text = text[:m.start()] if m else text.split(" # ")[0]
        words = shlex.split(text)
        env = {}
        while words and _ASSIGN.match(words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        if not words or words[0] not in PROGRAMS:
            raise ValueError(f"{where}:{line}: {raw.strip()!r} is not an `onnxkit` or `python` command; a "
                             f"```{block.lang} block runs those only (install steps go in a ```sh block)")
        if any(w in ("|", "&&", ";", ">", "<") for w in words):
            raise ValueError(f"{where}:{line}: {raw.strip()!r}: one command per line, no pipes or redirections")
        out.append(Command(words, env, expect, line, text))
    return out


def extract(page: Path, folder: Path) -> list:
    """Write every titled block of ``page`` to ``folder / title``; return the paths written."""
    written = []
    for b in blocks(page):
        if b.title:
            target = Path(folder) / b.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b.text)
            written.append(target)
    if not written:
        raise SystemExit(f"{page}: no block with a title=\"FILE\"")
    return written


def main(argv: list) -> int:
    if len(argv) != 3 or argv[0] != "extract":
        print("usage: python tools/docs_blocks.py extract PAGE DIR", file=sys.stderr)
        return 2
    for path in extract(Path(argv[1]), Path(argv[2])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
