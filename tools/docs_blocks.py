"""The fenced code blocks of a Markdown page (README.md, docs/*.md), for the docs tests and CI.

Conventions of the pages (tests/structure/test_docs.py holds them to it):

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
``.ci/wheels`` builds the plugin guide's example from the guide alone); ``script PAGE DIR`` writes
the page's blocks as one script (:func:`page_script`), which ``.ci/wheels`` runs with the
interpreter of the fresh environment, as ``tests/structure/test_docs.py`` does with the repository's.
"""

from __future__ import annotations

import re
import shlex
import sys
import textwrap
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


INSTALL_WORDS = ("pip install", "python3 -m build", "python -m build")

#: The helper each page's script imports: an ``onnxkit`` command in-process (the CLI's ``main``),
#: or in a subprocess where the page sets environment variables for it.
RUNNER = '''
import os, subprocess, sys
from onnxkit.cli import main

def onnxkit(words, expect, where, env):
    sys.stdout.flush()
    program, argv = words[0], words[1:]
    if program != "onnxkit":  # python ...: this interpreter
        code = subprocess.run([sys.executable, *argv], env={**os.environ, **env}).returncode
    elif env:
        code = subprocess.run([sys.executable, "-m", "onnxkit", *argv], env={**os.environ, **env}).returncode
    else:
        try:
            code = main(argv)
        except SystemExit as exc:  # --help, --version, a usage error
            code = exc.code if isinstance(exc.code, int) else 2
    sys.stdout.flush()
    if code != expect:
        raise AssertionError(f"{where}: `{' '.join(words)}` exited {code}, the page says {expect}")
'''


def page_script(page: Path, where: Optional[str] = None) -> Optional[str]:
    """The page's blocks as one Python script whose line numbers are the page's, or None when the
    page has nothing to run.  It imports :data:`RUNNER` as ``_docs_runner``.  Raises ValueError
    for a block outside the conventions."""
    page = Path(page)
    where = where or page.name
    lines: dict = {}
    for b in blocks(page):
        if b.lang == "sh":
            if not any(w in b.text for w in INSTALL_WORDS):
                raise ValueError(f"{where}:{b.line}: a ```sh block is an install step (pip install, python3 -m "
                                 "build); put onnxkit commands in ```console or ```bash")
            continue
        if b.title:
            lines[b.line - 1] = f"open({b.title!r}, 'w').write({b.text!r})"
            continue
        if b.illustrative:
            if b.lang != "python":
                raise ValueError(f"{where}:{b.line}: only a ```python block can be marked illustrative")
            lines[b.line - 1] = f"compile({textwrap.dedent(b.text)!r}, '{where}:{b.line}', 'exec')"
            continue
        if b.lang == "python":
            for k, text in enumerate(textwrap.dedent(b.text).splitlines()):
                lines[b.line + k] = text
        elif b.lang in ("console", "bash"):
            for c in commands(b, where):
                lines[c.line] = f"_onnxkit({c.argv!r}, {c.expect}, '{where}:{c.line}', {c.env!r})"
        elif b.lang not in ("toml", "text", "json", ""):
            raise ValueError(f"{where}:{b.line}: a ```{b.lang} block: the docs test runs python, console and "
                             "bash blocks, reads sh blocks as install steps and writes titled blocks")
        elif not b.title and b.lang == "toml":
            raise ValueError(f"{where}:{b.line}: a ```toml block without title=\"FILE\"")
    if not any(not t.startswith("open(") for t in lines.values()):
        return None
    top = max(lines)
    body = [lines.get(n, "") for n in range(1, top + 1)]
    assert not body[0], f"{where}: line 1 is a code line"
    body[0] = "from _docs_runner import onnxkit as _onnxkit"
    return "\n".join(body) + "\n"


def write_script(page: Path, folder: Path) -> Path:
    """Write ``page``'s script (:func:`page_script`) and its runner into ``folder``; return the
    script's path.  Run it with ``folder`` as the working directory."""
    script = page_script(Path(page))
    if script is None:
        raise SystemExit(f"{page}: nothing to run")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_docs_runner.py").write_text(RUNNER)
    target = folder / f"{Path(page).stem}_blocks.py"
    target.write_text(script)
    return target


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
    if len(argv) != 3 or argv[0] not in ("extract", "script"):
        print("usage: python tools/docs_blocks.py extract PAGE DIR   (the page's titled blocks, as files)\n"
              "       python tools/docs_blocks.py script PAGE DIR    (the page's blocks as one script)", file=sys.stderr)
        return 2
    if argv[0] == "script":
        print(write_script(Path(argv[1]), Path(argv[2])))
        return 0
    for path in extract(Path(argv[1]), Path(argv[2])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
