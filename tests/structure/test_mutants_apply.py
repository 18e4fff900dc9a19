"""Every planted mutant of tools/mutation_smoke.py still applies: its text occurs exactly once in
its file, and the test files it names exist.  (Running the mutants takes minutes and is not part
of the suite; a mutant whose text the code no longer has would only fail when someone runs it.)"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import mutation_smoke  # noqa: E402


def test_every_mutant_text_occurs_once_in_its_file():
    stale = [(m.name, m.path, (ROOT / m.path).read_text(encoding="utf-8").count(m.old))
             for m in mutation_smoke.MUTANTS if (ROOT / m.path).read_text(encoding="utf-8").count(m.old) != 1]
    assert stale == []


def test_every_test_file_a_mutant_names_exists():
    missing = []
    for m in mutation_smoke.MUTANTS:
        for arg in m.tests:
            path = arg.split("::", 1)[0]
            if path.endswith(".py") or "/" in path:
                if not (ROOT / path).exists():
                    missing.append((m.name, path))
    assert missing == []


def test_the_mutants_are_many_and_named_once():
    names = [m.name for m in mutation_smoke.MUTANTS]
    assert len(names) == len(set(names)) and len(names) >= 150
