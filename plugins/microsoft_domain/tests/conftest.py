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


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def one_intra_op_block_by_default(monkeypatch):
    """The default thread count splits no loop here (the default follows the machine's load, and a
    split loop is called once per block, which the spies count); the cpu backend's tests pin it the
    same way, and its test_parallel.py checks the bits at every count."""
    from onnxkit.runtime import threads

    real = threads.free_threads
    monkeypatch.setattr(threads, "free_threads",
                        lambda now=None, loadavg=None, running=None:
                        1 if (now, loadavg, running) == (None, None, None) else real(now, loadavg, running))
