"""Shared fixtures of onnxkit's test suite."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:  # pytest runs with --import-mode=importlib: make tests/ helpers importable
    sys.path.insert(0, str(TESTS))


@pytest.fixture(scope="session")
def onnx_vectors_dir() -> Path:
    """The ONNX 1-3 test package folder (generated once from the installed ``onnx``; see tests/onnx_vectors.py)."""
    pytest.importorskip("onnx")
    from onnx_vectors import ensure_vectors

    return ensure_vectors()
