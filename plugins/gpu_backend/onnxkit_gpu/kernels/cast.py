"""shim: imported by onnxkit_gpu/kernels/shape.py; removed when that family moves.  Cast is
portable now (``onnxkit_default_domain/kernels/cast.py``)."""

from __future__ import annotations

from onnxkit_default_domain.kernels.cast import cast_values


def convert(x, dt):
    """``x`` (a torch tensor) converted to torch dtype ``dt`` by the rules of Cast."""
    import array_api_compat.torch as xp

    return cast_values(xp, x, dt)
