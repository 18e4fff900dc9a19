"""What a first result on the bundled example does not import (issue 44: time to first result
after ``pip install``): each deferral pinned in a fresh process, with the condition under which
it holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _after_a_run_of_the_example(code: str) -> str:
    """What ``code`` prints in a fresh process after one session on the example has run (one
    intra-op thread, the BLAS limit entered: the example has a Gemm)."""
    prelude = ("import sys, numpy as np, onnxkit\n"
               "so = onnxkit.SessionOptions(); so.intra_op_num_threads = 1\n"
               "s = onnxkit.InferenceSession('examples/digits.onnx', so)\n"
               "y = s.run(None, {'image': np.zeros((1, 1, 8, 8), np.float32)})[0]\n"
               "assert y.shape == (1, 10)\n")
    out = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=300,
                         cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_an_openblas_process_limits_blas_without_threadpoolctl():
    """numpy's OpenBLAS limited through its own entry points (onnxkit.runtime.threads): where every
    BLAS loaded is an OpenBLAS listed in /proc/self/maps, threadpoolctl is not imported."""
    printed = _after_a_run_of_the_example(
        "from onnxkit.runtime import threads\n"
        "print(threads._openblas_only() is not None, 'threadpoolctl' in sys.modules, s._uses_blas)\n")
    fast, imported, uses_blas = printed.split()
    assert uses_blas == "True", printed
    assert imported == ("False" if fast == "True" else "True"), printed
