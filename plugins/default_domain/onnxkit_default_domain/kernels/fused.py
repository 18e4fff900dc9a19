"""Kernels of ai.onnxkit, onnxkit's fused operators (:mod:`onnxkit_default_domain.fused`): each
the kernel of the ai.onnx definition it repeats (a backend's override of that definition also
registers the fused one, so both compute alike on every backend)."""

from __future__ import annotations

from onnxkit.plugin import KernelTable

from ..fused import FUSED_DOMAIN
from . import activation

KERNELS = KernelTable()

KERNELS.register("Gelu", 1, domain=FUSED_DOMAIN)(activation.KERNELS[("", "Gelu", 20)])
KERNELS.register("HardSwish", 1, domain=FUSED_DOMAIN)(activation.KERNELS[("", "HardSwish", 14)])
