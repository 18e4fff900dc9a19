"""Shared fixtures of onnxkit's test suite."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

try:
    from hypothesis import settings as hypothesis_settings
except ImportError:  # the property tests are skipped without hypothesis
    hypothesis_settings = None

TESTS = Path(__file__).resolve().parent
#: the folders of tests, one per part of the code (engine, optimizer, ort, ...), whose modules are
#: all ``test_*.py``: importable by name too (a test reuses another's model builders)
FOLDERS = ("engine", "optimizer", "ort", "wire", "ir", "plugins", "cli", "conformance", "structure", "integrations", "hostile",
           "generative")
for _path in (TESTS, *(TESTS / d for d in FOLDERS)):  # --import-mode=importlib: helpers importable
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

#: Every property test (tests/wire/test_wire_hypothesis.py) runs under this profile: the examples are
#: derived from each test's own source (derandomize: the same examples on every machine and run),
#: nothing is stored between runs, and no wall-clock deadline can fail a slow shared machine.
HYPOTHESIS_PROFILE = "deterministic"
if hypothesis_settings is not None:
    hypothesis_settings.register_profile(HYPOTHESIS_PROFILE, derandomize=True, deadline=None, database=None,
                                         print_blob=True)
    hypothesis_settings.load_profile(HYPOTHESIS_PROFILE)


@pytest.fixture(scope="session")
def onnx_vectors_dir() -> Path:
    """The ONNX 1-3 test package folder (generated once from the installed ``onnx``; see tests/onnx_vectors.py)."""
    pytest.importorskip("onnx")
    from onnx_vectors import ensure_vectors

    return ensure_vectors()


# -- the first-run policy (onnxkit.runtime.bodies, ONNXKIT_FIRST_RUN) ---------------------------
#
# The suite runs the default policy (``tiered``); no conftest sets ONNXKIT_FIRST_RUN for everyone
# (tests/engine/test_first_run_matrix.py checks).  Which bodies a tiered session's first plan takes
# depends on the process: before numba is imported, onnxkit-cpu's compiled loops are deferred
# (numpy bodies, a cold plan that is not specialized) until the runs have spent numba's estimated
# setup; once it is imported, every plan takes the compiled loops at once.  So that no test
# depends on what ran before it or on how long its runs took, the suite's process has numba
# loaded (below, as collecting plugins/cpu_backend/tests does anyway), and the fixtures choose:
#
# * ``first_run_policy``: the test twice, ``tiered`` as a fresh process's session runs (numba
#   not imported yet: the cold plan, numpy bodies; its promotion put out of reach, so the whole
#   test sees the cold plan) and ``warm`` (compiled loops and specialized plans from the first
#   run).  For tests of session behaviour that can differ between the two (outputs aliasing,
#   shape specialization, plan passes, fallback, threads, profiling).
# * ``warm_bodies``: ``warm`` for the test, for tests of the compiled loops themselves.
#
# The promotion between the two plans is tested by tests/engine/test_first_run_bodies.py.

FIRST_RUN_POLICIES = ("tiered", "warm")


def _compiled_loops():
    try:
        from onnxkit_cpu import compiled
    except ImportError:  # onnxkit-cpu absent: nothing is deferred, tiered plans as warm
        return None
    return compiled


@pytest.fixture(scope="session", autouse=True)
def _numba_loaded():
    """Every test runs in a process that has numba imported (where it is installed): a tiered
    session then takes the compiled loops from its first plan whatever ran before the test."""
    compiled = _compiled_loops()
    if compiled is not None:
        compiled.available()


def as_a_fresh_process(monkeypatch) -> None:
    """For the test: onnxkit-cpu's compiled loops see a process that has not imported numba (a
    cold plan defers them), and their estimated setup is out of reach of the test's runs (the
    cold plan is kept, whatever the runs' times)."""
    compiled = _compiled_loops()
    if compiled is None:
        return
    modules = {name: module for name, module in sys.modules.items() if name != "numba"}
    monkeypatch.setattr(compiled, "sys", types.SimpleNamespace(modules=modules))
    monkeypatch.setattr(compiled, "_numba", None)
    monkeypatch.setattr(compiled, "SETUP_S", 1e9)


@pytest.fixture
def fresh_process_patch():
    """:func:`as_a_fresh_process`, for a test that applies it part-way (after its own checks): a
    fixture, since ``from conftest import`` may find another folder's conftest in a full run."""
    return as_a_fresh_process


@pytest.fixture(params=FIRST_RUN_POLICIES)
def first_run_policy(request, monkeypatch) -> str:
    """The test under each of :data:`FIRST_RUN_POLICIES` (see above); the policy's name."""
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", request.param)
    if request.param == "tiered":
        as_a_fresh_process(monkeypatch)
    return request.param


@pytest.fixture
def warm_bodies(monkeypatch) -> None:
    """``ONNXKIT_FIRST_RUN=warm`` for the test: its sessions run compiled loops from the first run."""
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
