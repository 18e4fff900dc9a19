"""shim: imported by onnxkit_cpu/kernels/activation.py; removed when that family moves.  The
elementwise kernels are portable now (``onnxkit_default_domain/kernels/elementwise*.py``); the
numpy erf is in ``onnxkit_cpu/overrides/elementwise_math.py``."""

from __future__ import annotations

from ..overrides.elementwise_math import erf

__all__ = ["erf"]
