"""Inference functions of ai.onnxkit, onnxkit's fused operators (:mod:`onnxkit_default_domain.fused`):
each that of the ai.onnx definition it repeats."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import same_as_input

from ..fused import FUSED_DOMAIN
from . import attention
from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys, domain=FUSED_DOMAIN)
FUNCTIONS.register("Gelu")(same_as_input(0))
FUNCTIONS.register("HardSwish")(same_as_input(0))
# Attention-2: ai.onnx Attention-23's shapes and types (nan_to_zero changes values only)
FUNCTIONS.register("Attention", 2)(attention.FUNCTIONS[("", "Attention", 23)])
