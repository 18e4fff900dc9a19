"""The com.microsoft kernels' tests: the shared one-node harness (ms_harness.py) is importable."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # pytest runs with --import-mode=importlib
    sys.path.insert(0, str(HERE))


def pytest_collection_modifyitems(items):
    """One-node models leave their outputs untyped (onnxruntime infers them): onnxkit's warning
    about that is expected here."""
    import pytest

    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.filterwarnings("ignore:the model is evaluated despite"))
