"""shim: imported by onnxkit_cpu/kernels/reduction.py and onnxkit_gpu/kernels/reduction.py; removed when that family moves.

The shape and indexing families are portable now (``onnxkit_default_domain/kernels/shape.py``,
``shape_layout.py``, ``indexing.py``, ``selection.py``); this module keeps only the helper
names other legacy modules import, and registers no kernels.
"""

from __future__ import annotations

import numpy as np
from onnxkit_default_domain.kernels._common import norm_axes, norm_axis

__all__ = ["int_list", "norm_axes", "norm_axis"]


def int_list(value) -> list:
    """A 0-d or 1-d integer tensor (or a list) as a list of Python ints."""
    return [int(v) for v in np.asarray(value).reshape(-1).tolist()]
