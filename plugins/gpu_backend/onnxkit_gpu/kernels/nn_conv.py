"""Names other legacy gpu families still import from the convolution family, which moved to
``onnxkit_default_domain.kernels.conv`` (portable) and ``onnxkit_gpu.overrides.conv`` (torch).

shim: imported by resize.py of this package; removed when that family moves.
"""

from __future__ import annotations

from ..overrides.conv import full_precision

__all__ = ["check_dtype", "compute_dtype", "full_precision"]


def compute_dtype(dtype):
    """The dtype arithmetic is done in: float32/float64 as is, anything else in float32."""
    import torch

    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def check_dtype(ctx, t, allowed, what="input"):
    """Fail clearly unless ``t`` is a torch tensor of one of the ``allowed`` dtypes."""
    import torch

    if not isinstance(t, torch.Tensor):
        ctx.fail(f"{what} must be a tensor, got {type(t).__name__}")
    if t.dtype not in allowed:
        ctx.fail(f"{what} has element type {t.dtype}, which this operator does not take on the gpu backend "
                 f"(allowed: {', '.join(str(a).replace('torch.', '') for a in allowed)})")
