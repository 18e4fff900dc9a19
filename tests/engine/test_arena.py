"""The cpu memory arena (onnxkit.runtime.arena): glibc's malloc thresholds raised once per process
when a session is made with ``enable_cpu_mem_arena`` (the default), left alone where the
environment chose or the option is off.  What is checked is the decision, in fresh processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DIGITS = str(Path(__file__).resolve().parents[2] / "examples" / "digits.onnx")

_CHILD = r'''
import sys
import onnxkit
from onnxkit.runtime import arena
so = onnxkit.SessionOptions()
so.enable_cpu_mem_arena = sys.argv[2] == "on"
before = dict(arena._state)
onnxkit.InferenceSession(sys.argv[1], so)
print("RESULT", before, arena._state.get("applied"))
'''


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (AttributeError, ValueError, OSError):
        return False


def _decision(option: str, **env) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    proc = subprocess.run([sys.executable, "-c", _CHILD, DIGITS, option], capture_output=True, text=True,
                          env={**base, **env}, timeout=120)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, proc.stderr[-2000:]
    return line.split(" ", 1)[1]


@pytest.mark.skipif(not _glibc(), reason="glibc's malloc only")
def test_a_session_sets_the_thresholds_once_on_glibc():
    assert _decision("on") == "{} True"


def test_the_environments_malloc_tunables_are_left_as_they_are():
    assert _decision("on", MALLOC_TRIM_THRESHOLD_="65536") == "{} False"      # Dask's workers
    assert _decision("on", GLIBC_TUNABLES="glibc.malloc.trim_threshold=65536") == "{} False"


def test_a_session_without_the_arena_leaves_malloc_alone():
    assert _decision("off") == "{} None"
