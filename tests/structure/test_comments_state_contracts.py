"""Comments state contracts; benchmark figures and history live in docs/benchmarks.md and the git log.

A comment or docstring in onnxkit/ and plugins/*/onnxkit_*/ says what the code does and why: a
threshold that is the code's behaviour stays, with what it means, and a constant that estimates a
cost says what it estimates and where it is measured.  What does not belong there:

* a **timing figure**: a number of ms / µs / us / ns (``0.70 ms -> 0.18 ms``, ``~35 ms in a
  fresh process``), a number of seconds with ``->``, "measured", "median", "took", "takes" or
  "costs" near it (``measured ... 0.45-0.50 s``), or a speed ratio said to be faster or slower (``1.6-2.2x
  slower``): it moves to the table "Figures behind the code" of docs/benchmarks.md, with the
  date and conditions it was recorded under;
* a **date** (``2026-12-03``): a measurement's conditions, kept with the figure in the docs;
* **history**: ``issue 32 item 1``, ``as before issue 32`` (the git log has it; a decision with a
  known difference is documented in docs/decisions.md, which a comment points to instead).

Precision figures (ulp, relative errors) are contracts and stay.  Scanned: comments (tokenize)
and string statements (docstrings of modules, classes and functions, attribute docstrings),
except the generated ``_kernel_index.py`` / ``_function_index.py`` and the conformance data of
``onnxkit/statement/``.  What remains must be in :data:`ALLOWED`, exactly.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = {"_kernel_index.py", "_function_index.py"}

_NUM = r"(?<![\w.])~?\d+(?:[.,]\d+)?(?:\s?-\s?\d+(?:\.\d+)?)?"
PATTERNS = {
    # a number of milli-, micro- or nanoseconds is always a measured figure
    "timing": re.compile(_NUM + r"\s?(?:ms|µs|us|ns)\b"),
    # seconds (``1s`` as "ones" is not one: a space before the unit)
    "seconds": re.compile(_NUM + r"\s+s\b"),
    "ratio": re.compile(_NUM + r"x\s+(?:faster|slower)\b"),
    "date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
    "issue": re.compile(r"\bissue\s+\d+", re.IGNORECASE),
    "before issue": re.compile(r"\bbefore\s+issue\b", re.IGNORECASE),
}
#: a number of seconds counts as a measured figure with one of these within :data:`NEAR` characters
NEAR_SECONDS = re.compile(r"->|measured|median|\b(?:took|takes?|costs?)\b", re.IGNORECASE)
NEAR = 80

#: ``(path, kind, matched text)`` -> why it stays.  Empty: every figure the code's comments
#: carried moved to docs/benchmarks.md ("Figures behind the code"), every issue reference went.
ALLOWED: dict = {}


def scanned_files(root: Path = ROOT) -> list:
    files = list((root / "onnxkit").rglob("*.py"))
    for package in sorted((root / "plugins").glob("*/onnxkit_*")):
        files.extend(package.rglob("*.py"))
    statement = root / "onnxkit" / "statement"
    return sorted(f for f in files if f.name not in GENERATED and statement not in f.parents)


def texts(source: str) -> list:
    """``(line, text)`` of each comment block (consecutive comment lines joined) and each string
    statement (docstrings) of ``source``."""
    out, block, last = [], [], None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            line, alone = tok.start[0], tok.line.lstrip().startswith("#")
            if block and not (alone and line == last + 1):
                out.append((block[0][0], " ".join(t for _, t in block)))
                block = []
            block.append((line, tok.string.lstrip("#:").strip()))
            last = line if alone else -2      # a comment after code ends its block
    if block:
        out.append((block[0][0], " ".join(t for _, t in block)))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.append((node.lineno, " ".join(node.value.value.split())))
    return out


def findings(text: str) -> list:
    """``(kind, matched text)`` of each figure or history reference in one comment or docstring."""
    found = []
    for kind, pattern in PATTERNS.items():
        for m in pattern.finditer(text):
            if kind == "seconds" and not NEAR_SECONDS.search(text[max(0, m.start() - NEAR):m.end() + NEAR]):
                continue
            found.append((kind, m.group(0).strip()))
    return found


def scan(root: Path = ROOT) -> list:
    """``(path, line, kind, matched text)`` over :func:`scanned_files`."""
    out = []
    for f in scanned_files(root):
        rel = f.relative_to(root).as_posix()
        for line, text in texts(f.read_text(encoding="utf-8")):
            out.extend((rel, line, kind, match) for kind, match in findings(text))
    return out


def test_the_patterns_catch_what_moved_and_spare_contracts():
    caught = [
        "the loop computes it (2.0-5x the numpy body, e.g. 0.70 ms -> 0.18 ms on (1, 240, 12, 40)",
        ":func:`importlib.metadata.entry_points` costs ~35 ms in a fresh process",
        "a few library calls instead of its per-call bookkeeping (about 9 µs per run)",
        "body's per-call type dispatch (1.5 -> 0.5 us on a small tensor)",
        "libm's scalar tanh costs 20-30 ns an element here",
        "Measured by benchmarks/promotion.py: the promoting run's setup took 0.45-0.50 s",
        "one loop writing all four did not: 1.6-2.2x slower",
        "the first compilation still takes seconds (an empty cache: 4.3-4.5 s here)",
        "median of 9, 2026-12-03, benchmarks/image_models.py's timing",
        "-- first-run bodies (issue 32 item 1) --",
        "the warm bodies from the first run, as before issue 32",
    ]
    for text in caught:
        assert findings(" ".join(text.split())), text
    spared = [
        "padded with trailing 1s to A's rank",
        "multiply-adds where the im2col product has 9 * M * C * 4T, 2.25x fewer",
        "within 1 ulp of the exact exp over [-104, 0], measured 0.92 ulp",
        "the first compilation still takes seconds",
        "ConformanceWarning lines are not issued through the logger",
        "how long a reading of the load average is reused (seconds)",
    ]
    for text in spared:
        assert not findings(text), text


def test_texts_reads_comment_blocks_and_docstrings():
    source = '"""Module: 1 ms."""\n\n# a block\n# of two: 2 ms\nX = 1  # apart: 3 ms\n\n\ndef f():\n    """4 ms."""\n'
    assert sorted(texts(source)) == [(1, "Module: 1 ms."), (3, "a block of two: 2 ms"), (5, "apart: 3 ms"),
                                     (9, "4 ms.")]


def test_no_figures_or_history_in_comments():
    found = scan()
    keyed = {(path, kind, match) for path, _, kind, match in found}
    stray = [f"{path}:{line} (the comment or docstring starting there): {kind}: {match!r}"
             for path, line, kind, match in found
             if (path, kind, match) not in ALLOWED]
    assert not stray, ("comments and docstrings state contracts; move figures to docs/benchmarks.md "
                       "('Figures behind the code') and leave history to the git log:\n" + "\n".join(stray))
    assert not set(ALLOWED) - keyed, f"allowed but no longer found: {sorted(set(ALLOWED) - keyed)}"
    assert len(ALLOWED) == 0


def test_the_scan_covers_host_and_plugins_but_not_generated_or_statement_data():
    files = {f.relative_to(ROOT).as_posix() for f in scanned_files()}
    assert "onnxkit/runtime/threads.py" in files
    assert "plugins/cpu_backend/onnxkit_cpu/overrides/conv.py" in files
    assert not any(Path(f).name in GENERATED for f in files)
    assert not any(f.startswith("onnxkit/statement/") for f in files)
    assert any(f.startswith("plugins/default_domain/onnxkit_default_domain/") for f in files)
