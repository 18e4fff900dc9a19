"""onnxkit: a Python implementation of the ONNX core specification (Part 1, IR version 14).

The host is small: the IR (:mod:`onnxkit.ir`), element types (:mod:`onnxkit.dtypes`), the
binary codec (:mod:`onnxkit.wire`), the plugin contract (:mod:`onnxkit.hookspecs`) and the
registry that loads plugins (:mod:`onnxkit.registry`).  Operator sets, kernels and backends
come from plugins.

The public API: :func:`load` / :func:`save` / :func:`to_bytes` (the codec), :func:`check_model`
(Clause 10), :func:`infer_shapes` (Clause 9), :class:`InferenceSession` with onnxruntime's
Python API (:class:`SessionOptions`, :class:`RunOptions`, :class:`OrtValue`,
:func:`get_available_providers`), :func:`to_text` (the ONNX textual syntax), the errors
(all derived from :class:`OnnxkitError`, and from onnxruntime's status classes:
:mod:`onnxkit.status`) and :class:`Limits`.  Logging goes to the ``onnxkit`` logger
(:mod:`onnxkit.log`).  :func:`install_as_onnxruntime` makes ``import onnxruntime`` give
onnxkit's stand-in (:mod:`onnxkit.ort`) for the rest of the process.
"""

from __future__ import annotations

import gc as _gc

# The cyclic collector paused while onnxkit's own modules are imported (attrs' and the record
# classes' definitions make collections that free nothing), as onnxkit.runtime's import does
# (onnxkit.runtime.gc_pause, which this cannot import without importing the runtime): switched
# back on only if it was on, and what the import made moved to the oldest generation where no
# object is frozen, so a young collection does not traverse it all at once afterwards.
_collecting = _gc.isenabled()
_gc.disable()
try:
    from .hookspecs import hookimpl
    from .errors import (
        ConformanceWarning, DecodeError, EncodeError, EvaluationError, ExternalDataError, LimitExceeded, OnnxkitError, PluginError,
        UnsupportedOperatorError, ValidationError,
    )
    from .dtypes import DataType
    from .limits import DEFAULT_LIMITS, Limits
    from .registry import get_registry, register_plugin, unregister_plugin
finally:
    if _collecting:
        if _gc.get_freeze_count() == 0:
            _gc.freeze()
            _gc.unfreeze()
        _gc.enable()
    del _collecting

__version__ = "0.2.0"

#: Names imported on first use (module that defines them), so that ``import onnxkit`` stays light.
_LAZY = {
    **{n: "api" for n in ("load", "save", "load_value", "canonical_bytes", "model_hash", "to_bytes")},
    **{n: "runtime" for n in ("InferenceSession", "run_model", "SessionOptions", "RunOptions", "OrtValue",
                              "IOBinding", "ModelMetadata", "NodeArg", "InputError", "RunTerminated",
                              "GraphOptimizationLevel", "ExecutionMode", "get_available_providers", "get_device")},
    "check_model": "checker",
    "infer_shapes": "inference",
    "to_text": "printer",
    "set_default_logger_severity": "log",
    "install_as_onnxruntime": "ort.install",
    "install_as_onnxruntime_genai": "genai.install",
}

__all__ = [
    "hookimpl", "ConformanceWarning", "DecodeError", "EncodeError", "EvaluationError", "ExternalDataError", "LimitExceeded", "OnnxkitError",
    "PluginError", "UnsupportedOperatorError", "ValidationError", "DataType", "DEFAULT_LIMITS", "Limits",
    "get_registry", "register_plugin", "unregister_plugin", "IR_VERSION", "__version__", *_LAZY,
]

#: The IR version this edition of onnxkit writes and checks against (Clause 14.1.2).
IR_VERSION = 14


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'onnxkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


#: Subpackages a user reaches for by name (``onnxkit.ir.Node``), listed by ``dir(onnxkit)`` too.
_PUBLIC_MODULES = ("ir", "log", "runtime", "limits", "errors", "dtypes")


def __dir__():
    """The public API (``__all__``) and the public subpackages, not the implementation modules."""
    return sorted(set(__all__) | set(_PUBLIC_MODULES))
