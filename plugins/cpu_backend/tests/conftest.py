"""Fixtures shared by the cpu backend's tests; their shared helper modules (nn_cases.py) are
importable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The suites test the bodies a warm session runs (compiled loops from its first plan); the cold
# first run (numpy bodies until numba is loaded, onnxkit.runtime.bodies) is tested by
# tests/test_first_run_bodies.py, which sets ONNXKIT_FIRST_RUN itself.
os.environ.setdefault("ONNXKIT_FIRST_RUN", "warm")

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # pytest runs with --import-mode=importlib
    sys.path.insert(0, str(HERE))


class Counting:
    """Stands for a compiled loop's :class:`onnxkit_cpu.compiled.Lazy`: ``get()`` gives a wrapper
    of the compiled function that counts its calls (None where compiled loops are off), so a
    test fails if a fast path silently stops being taken."""

    def __init__(self, lazy):
        self.lazy, self.calls = lazy, 0

    def get(self):
        fn = self.lazy.get()
        if fn is None:
            return None

        def counted(*args):
            self.calls += 1
            return fn(*args)
        return counted


@pytest.fixture
def count_calls(monkeypatch):
    """``count_calls(module, name)``: the module's loop ``name`` replaced by a :class:`Counting`
    (for the test's duration), returned."""
    def spy(module, name: str) -> Counting:
        c = Counting(getattr(module, name))
        monkeypatch.setattr(module, name, c)
        return c
    return spy
