"""Every environment variable onnxkit's code reads is in the user guide's one table, and every
variable the table lists is read (or set) somewhere in the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "onnxkit", *sorted((ROOT / "plugins").glob("*/onnxkit_*"))]
GUIDE = ROOT / "docs" / "guide.md"


def _environment_names() -> set:
    """Names the code reads from ``os.environ`` / ``os.getenv`` (string constants), and every
    ``ONNXKIT_*`` constant (read through a helper or written for a child process)."""
    names = set()
    for root in SOURCES:
        for path in root.rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and re.fullmatch(r"ONNXKIT_[A-Z0-9_]+", node.value):
                    names.add(node.value)
                if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                        and isinstance(node.args[0].value, str):
                    f = node.func
                    text = ast.unparse(f)
                    if text in ("os.environ.get", "os.getenv", "environ.get", "os.environ.setdefault"):
                        names.add(node.args[0].value)
                if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ" \
                        and isinstance(node.slice, ast.Constant):
                    names.add(node.slice.value)
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TUNABLES"
                                                        for t in node.targets):
                    names.update(ast.literal_eval(node.value))
    return names


def _table_names() -> set:
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", first))
    return names


def test_every_variable_the_code_reads_is_in_the_table():
    assert _environment_names() - _table_names() == set()


def test_every_variable_in_the_table_is_in_the_code():
    assert _table_names() - _environment_names() == set()


def test_the_table_lists_twenty_one_variables():
    assert len(_table_names()) == 21
