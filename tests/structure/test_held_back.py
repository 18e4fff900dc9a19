"""The held-back third of benchmarks/architectures.py: fixed by a stable hash, and named by no
tuning file.

The script's ``ARCHITECTURES`` keys and ``HELD_BACK`` tuple are read from its source (the module
is not imported: importing the benchmarks' timing helper sets an environment variable), and the
hash rule is computed here independently: SHA-256 of the UTF-8 name, 0 modulo 3.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "architectures.py"
#: the held-back list's size; changing the architectures changes it, deliberately, here too
HELD_BACK_SIZE = 22
#: where a speed-up would be tuned: no file here but the benchmark itself may name a held-back model
TUNING_TREES = ("benchmarks", "onnxkit", "plugins", "tools")


def _literals():
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "ARCHITECTURES":
                found["names"] = [k.value for k in node.value.keys]
            elif node.targets[0].id == "HELD_BACK":
                found["held"] = [e.value for e in node.value.elts]
    return found["names"], found["held"]


def test_held_back_third_is_the_hash_rule_and_its_size():
    names, held = _literals()
    assert len(names) >= 40 and len(set(names)) == len(names)
    want = [n for n in names if int(hashlib.sha256(n.encode()).hexdigest(), 16) % 3 == 0]
    assert held == want
    assert len(held) == HELD_BACK_SIZE
    assert 0.25 <= len(held) / len(names) <= 0.40


SUFFIXES = (".py", ".json", ".toml", ".txt", ".cfg", ".yaml", ".yml", ".md", ".sh")


def _offenders(root: Path, trees, held) -> list:
    """``"path: name"`` of each file under ``root/tree`` (but the benchmark) naming a held-back model."""
    pattern = re.compile("|".join(re.escape(n) for n in held))
    found = []
    for tree in trees:
        for path in sorted((root / tree).rglob("*")):
            if path == SCRIPT or not path.is_file() or path.suffix not in SUFFIXES:
                continue
            match = pattern.search(path.read_text(encoding="utf-8", errors="replace"))
            if match:
                found.append(f"{path.relative_to(root)}: {match.group(0)}")
    return found


def test_no_tuning_file_names_a_held_back_model():
    _, held = _literals()
    offenders = _offenders(ROOT, TUNING_TREES, held)
    assert not offenders, offenders


def test_the_scan_finds_a_planted_name_and_only_it(tmp_path):
    _, held = _literals()
    (tmp_path / "plugins" / "pkg").mkdir(parents=True)
    (tmp_path / "plugins" / "pkg" / "tuned.py").write_text(f"FAST = ({held[-1]!r},)\n")
    (tmp_path / "plugins" / "pkg" / "other.py").write_text("FAST = ('arch_not_a_held_back_name',)\n")
    assert _offenders(tmp_path, ("plugins",), held) == [f"plugins/pkg/tuned.py: {held[-1]}"]
