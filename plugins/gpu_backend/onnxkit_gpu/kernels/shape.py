"""shim: imported by onnxkit_gpu/kernels/reduction.py; removed when that family moves.

The shape and indexing families are portable now (``onnxkit_default_domain/kernels/``); this
module keeps only the helper name another legacy module imports, and registers no kernels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["int_list"]


def int_list(value) -> list:
    """A 0-d or 1-d integer tensor (torch or numpy) or a list as a list of Python ints."""
    if hasattr(value, "detach"):
        return [int(v) for v in value.detach().reshape(-1).tolist()]
    return [int(v) for v in np.asarray(value).reshape(-1).tolist()]
