"""onnxkit: a Python implementation of the ONNX core specification (Part 1, IR version 14).

The host is small: the IR (:mod:`onnxkit.ir`), element types (:mod:`onnxkit.dtypes`), the
binary codec (:mod:`onnxkit.wire`), the plugin contract (:mod:`onnxkit.hookspecs`) and the
registry that loads plugins (:mod:`onnxkit.registry`).  Operator sets, kernels and backends
come from plugins.
"""

from __future__ import annotations

from .hookspecs import hookimpl
from .errors import (
    DecodeError, EncodeError, EvaluationError, ExternalDataError, LimitExceeded, OnnxkitError, PluginError,
    UnsupportedOperatorError, ValidationError,
)
from .dtypes import DataType
from .limits import DEFAULT_LIMITS, Limits
from .registry import get_registry, register_plugin, unregister_plugin

__version__ = "0.2.0"

__all__ = [
    "hookimpl", "DecodeError", "EncodeError", "EvaluationError", "ExternalDataError", "LimitExceeded", "OnnxkitError",
    "PluginError", "UnsupportedOperatorError", "ValidationError", "DataType", "DEFAULT_LIMITS", "Limits",
    "get_registry", "register_plugin", "unregister_plugin", "IR_VERSION", "load", "save", "load_value",
    "canonical_bytes", "model_hash", "InferenceSession", "run_model", "check_model", "infer_shapes",
]

#: The IR version this edition of onnxkit writes and checks against (Clause 14.1.2).
IR_VERSION = 14


def __getattr__(name):
    # The codec API is imported on first use so that `import onnxkit` stays light.
    if name in ("load", "save", "load_value", "canonical_bytes", "model_hash", "to_bytes"):
        from . import api

        return getattr(api, name)
    if name in ("InferenceSession", "run_model"):
        from .runtime import session

        return getattr(session, name)
    if name == "check_model":
        from .checker import check_model

        return check_model
    if name == "infer_shapes":
        from .inference import infer_shapes

        return infer_shapes
    raise AttributeError(f"module 'onnxkit' has no attribute {name!r}")
