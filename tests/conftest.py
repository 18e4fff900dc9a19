"""Shared fixtures of onnxkit's test suite."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The suites test the bodies a warm session runs (compiled loops from its first plan); the cold
# first run (numpy bodies until numba is loaded, onnxkit.runtime.bodies) is tested by
# tests/test_first_run_bodies.py, which sets ONNXKIT_FIRST_RUN itself.
os.environ.setdefault("ONNXKIT_FIRST_RUN", "warm")

try:
    from hypothesis import settings as hypothesis_settings
except ImportError:  # the property tests are skipped without hypothesis
    hypothesis_settings = None

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:  # pytest runs with --import-mode=importlib: make tests/ helpers importable
    sys.path.insert(0, str(TESTS))

#: Every property test (tests/test_wire_hypothesis.py) runs under this profile: the examples are
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
