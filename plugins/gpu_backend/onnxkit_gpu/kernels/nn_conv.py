"""Names other legacy gpu families still import from the convolution family, which moved to
``onnxkit_default_domain.kernels.conv`` (portable) and ``onnxkit_gpu.overrides.conv`` (torch).

shim: imported by nn_pool.py, nn_norm.py and resize.py of this package; removed when those families move.
"""

from __future__ import annotations

from onnxkit_default_domain.kernels.conv_geometry import pad_spatial as _pad_spatial

from ..overrides.conv import full_precision

__all__ = ["check_dtype", "check_float", "compute_dtype", "full_precision", "pad_spatial"]


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


def check_float(ctx, t, what="input", bf16=True):
    import torch

    allowed = (torch.float16, torch.float32, torch.float64) + ((torch.bfloat16,) if bf16 else ())
    check_dtype(ctx, t, allowed, what)


def pad_spatial(x, begin, end, value=0.0):
    """``x`` with its spatial axes (2..) padded by ``begin``/``end`` (negative pads crop)."""
    import array_api_compat.torch as xp

    return _pad_spatial(xp, x, begin, end, value)
