"""shim: imported by onnxkit_gpu/kernels/activation.py and onnxkit_gpu/kernels/reduction.py;
removed when those families move.  The elementwise kernels are portable now
(``onnxkit_default_domain/kernels/elementwise.py``)."""

from __future__ import annotations


def low_float(dt) -> bool:
    """float16 / bfloat16 (torch dtypes)."""
    import torch

    return dt in (torch.float16, torch.bfloat16)
