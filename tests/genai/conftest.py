"""Fixtures of the onnxkit.genai tests: the tiny byte-level-BPE Llama built by onnxruntime-genai's
builder (tests/genai/genai_bpe_model.py) and the real onnxruntime_genai, the oracle."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # appended: tests/conftest.py stays the ``conftest`` a test imports by name
    sys.path.append(str(HERE))

import genai_bpe_model  # noqa: E402


@pytest.fixture(scope="session")
def bpe_model() -> Path:
    """The built model folder (built once, then reused from .cache/genai_models)."""
    return genai_bpe_model.build()


@pytest.fixture(scope="session")
def real_og():
    """The real onnxruntime_genai 0.18.0 (the test extra's oracle)."""
    import onnxruntime_genai

    assert onnxruntime_genai.__version__ == "0.18.0", onnxruntime_genai.__version__
    return onnxruntime_genai


@pytest.fixture(scope="session")
def kit_og():
    """onnxkit's stand-in module, used directly (not installed under the onnxruntime_genai name)."""
    import onnxkit.genai

    return onnxkit.genai
