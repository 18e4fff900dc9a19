"""Fixtures shared by the cpu backend's tests; their shared helper modules (nn_cases.py) are
importable."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from onnxkit_cpu import compiled

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


@pytest.fixture(autouse=True)
def one_intra_op_block_by_default(monkeypatch):
    """A session with the default thread count (``intra_op_num_threads = 0``) splits no loop
    here: the default follows the machine's load (:func:`onnxkit.runtime.threads.free_threads`),
    and a split loop is called once per block, which the tests' spies count.  Results are the
    same bits at any count (test_parallel.py, which sets its counts, checks that); asked with
    its arguments, ``free_threads`` answers as it does."""
    from onnxkit.runtime import threads

    real = threads.free_threads

    def free_threads(now=None, loadavg=None, running=None):
        return 1 if (now, loadavg, running) == (None, None, None) else real(now, loadavg, running)

    monkeypatch.setattr(threads, "free_threads", free_threads)


@pytest.fixture
def count_calls(monkeypatch):
    """``count_calls(module, name)``: the module's loop ``name`` replaced by a :class:`Counting`
    (for the test's duration), returned."""
    def spy(module, name: str) -> Counting:
        c = Counting(getattr(module, name))
        monkeypatch.setattr(module, name, c)
        return c
    return spy


# -- the first-run policy (onnxkit.runtime.bodies, ONNXKIT_FIRST_RUN) ---------------------------
#
# As in tests/conftest.py (the same fixtures; tests/engine/test_first_run_matrix.py keeps them equal):
# the suite runs the default policy (``tiered``) in a process that has numba loaded, where a
# tiered session takes the compiled loops from its first plan whatever ran before the test;
# ``first_run_policy`` runs a test twice, ``tiered`` as a fresh process's session (numba not
# imported yet: the cold plan, numpy bodies, kept for the whole test) and ``warm``;
# ``warm_bodies`` is ``warm`` for a test of the compiled loops themselves, which must run them
# whatever the process has loaded.

FIRST_RUN_POLICIES = ("tiered", "warm")


@pytest.fixture(scope="session", autouse=True)
def _numba_loaded():
    """Every test runs in a process that has numba imported (where it is installed)."""
    compiled.available()


def as_a_fresh_process(monkeypatch) -> None:
    """For the test: the compiled loops see a process that has not imported numba (a cold plan
    defers them), and their estimated setup is out of reach of the test's runs."""
    modules = {name: module for name, module in sys.modules.items() if name != "numba"}
    monkeypatch.setattr(compiled, "sys", types.SimpleNamespace(modules=modules))
    monkeypatch.setattr(compiled, "_numba", None)
    monkeypatch.setattr(compiled, "SETUP_S", 1e9)


@pytest.fixture(params=FIRST_RUN_POLICIES)
def first_run_policy(request, monkeypatch) -> str:
    """The test under each of :data:`FIRST_RUN_POLICIES`; the policy's name."""
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", request.param)
    if request.param == "tiered":
        as_a_fresh_process(monkeypatch)
    return request.param


@pytest.fixture
def warm_bodies(monkeypatch) -> None:
    """``ONNXKIT_FIRST_RUN=warm`` for the test: its sessions run compiled loops from the first run."""
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
