"""Inference functions of ai.onnxkit, onnxkit's fused operators (:mod:`onnxkit_default_domain.fused`):
each that of the ai.onnx definition it repeats."""

from __future__ import annotations

from onnxkit.plugin.inference import same_as_input

from ..fused import FUSED_DOMAIN
from . import attention
from ._util import _attributed

FUNCTIONS: dict = {
    (FUSED_DOMAIN, "Gelu", 1): _attributed(same_as_input(0)),
    (FUSED_DOMAIN, "HardSwish", 1): _attributed(same_as_input(0)),
    # Attention-2: ai.onnx Attention-23's shapes and types (nan_to_zero changes values only)
    (FUSED_DOMAIN, "Attention", 2): attention.FUNCTIONS[("", "Attention", 23)],
}
