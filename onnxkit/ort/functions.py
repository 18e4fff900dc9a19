"""onnxruntime's module-level functions, with what each means in onnxkit.

* :func:`get_version_string` / ``__version__``: the onnxruntime API level onnxkit follows
  (:data:`ORT_API_VERSION`); :func:`get_build_info` names onnxkit and its version.
* :func:`get_all_providers`: every provider name onnxruntime knows; the available ones are
  :func:`onnxkit.get_available_providers`'s.
* :func:`set_default_logger_severity` / :func:`set_default_logger_verbosity`: see
  :mod:`onnxkit.log`; :func:`set_default_logger_callback` routes onnxkit's log records to
  ``callback(severity, category, logid, code_location, message)``.
* :func:`set_seed`: the seed of sessions created afterwards without their own ``seed``
  (random operators: RandomNormal, Dropout in training mode, ...).
* :func:`set_global_thread_pool_sizes`: kept; sessions with ``session.use_per_session_threads``
  ``"0"`` use its intra-op size.
* :func:`copy_tensors`: each source OrtValue's data into the destination of the same index
  (same shape and element type); ``stream`` must be None (onnxkit has no streams).
* Telemetry (:func:`enable_telemetry_events`, :func:`disable_telemetry_events`): onnxkit sends
  none; documented no-ops.  Execution-provider libraries (:func:`register_execution_provider_library`)
  are native code: ``NotImplementedError`` naming the feature.
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

from .. import __version__ as ONNXKIT_VERSION
from ..log import get_logger, set_default_logger_severity, set_default_logger_verbosity  # noqa: F401
from ..runtime.defaults import DEFAULTS
from ..runtime.devices import get_ep_devices  # noqa: F401

#: The onnxruntime Python API version onnxkit's stand-in follows.
ORT_API_VERSION = "1.23.0"

#: Every provider name onnxruntime knows (its ``get_all_providers``), in its order of priority.
ALL_PROVIDERS = [
    "TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider", "ROCMExecutionProvider",
    "OpenVINOExecutionProvider", "DnnlExecutionProvider", "VitisAIExecutionProvider", "QNNExecutionProvider",
    "NnapiExecutionProvider", "VSINPUExecutionProvider", "JsExecutionProvider", "CoreMLExecutionProvider",
    "ArmNNExecutionProvider", "ACLExecutionProvider", "DmlExecutionProvider", "RknpuExecutionProvider",
    "WebNNExecutionProvider", "WebGpuExecutionProvider", "XnnpackExecutionProvider", "CANNExecutionProvider",
    "AzureExecutionProvider", "CPUExecutionProvider",
]

_STATE = {"telemetry": False, "callback_handler": None}


def get_version_string() -> str:
    return ORT_API_VERSION


def get_build_info() -> str:
    return f"onnxkit Build Info: onnxkit {ONNXKIT_VERSION}, a Python implementation of ONNX standing in for " \
           f"onnxruntime {ORT_API_VERSION}'s Python API"


def get_all_providers() -> list:
    return list(ALL_PROVIDERS)


def enable_telemetry_events() -> None:
    """onnxkit collects and sends no telemetry: a no-op (the setting is remembered)."""
    _STATE["telemetry"] = True


def disable_telemetry_events() -> None:
    """onnxkit collects and sends no telemetry: a no-op."""
    _STATE["telemetry"] = False


def set_seed(seed: int) -> None:
    """The seed of the sessions created from now on that are not given ``seed=``."""
    DEFAULTS["seed"] = int(seed)


def set_global_thread_pool_sizes(intra_op_num_threads: int = 0, inter_op_num_threads: int = 0) -> None:
    """onnxruntime's global thread pools; the intra-op size is used by sessions that ask for the
    global pools (``session.use_per_session_threads`` = ``"0"``)."""
    DEFAULTS["global_threads"] = (int(intra_op_num_threads), int(inter_op_num_threads))


_SEVERITY_OF_LEVEL = {logging.DEBUG: 0, logging.INFO: 1, logging.WARNING: 2, logging.ERROR: 3, logging.CRITICAL: 4}


class _CallbackHandler(logging.Handler):
    def __init__(self, callback: Callable):
        super().__init__()
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        severity = _SEVERITY_OF_LEVEL.get(record.levelno, 2)
        try:
            self.callback(severity, record.name, "", f"{record.pathname}:{record.lineno}", record.getMessage())
        except Exception:  # noqa: BLE001
            # Broad: the user's callback may raise anything, and a failing log handler must not
            # break evaluation; logging.Handler's contract: handleError shows it (the traceback on
            # stderr while logging.raiseExceptions, Python's default).
            self.handleError(record)


def set_default_logger_callback(callback: Optional[Callable]) -> None:
    """Send onnxkit's log records to ``callback(severity, category, logid, code_location, message)``
    (None removes it)."""
    root = get_logger()
    old = _STATE["callback_handler"]
    if old is not None:
        root.removeHandler(old)
        _STATE["callback_handler"] = None
    if callback is not None:
        handler = _CallbackHandler(callback)
        root.addHandler(handler)
        _STATE["callback_handler"] = handler


def register_execution_provider_library(registration_name: str, path: str) -> None:
    raise NotImplementedError("execution provider libraries (register_execution_provider_library) are native "
                              "code that onnxkit does not load; an onnxkit backend is a plugin")


def unregister_execution_provider_library(registration_name: str) -> None:
    raise NotImplementedError("execution provider libraries (unregister_execution_provider_library) are not "
                              "loaded by onnxkit")


def preload_dlls(cuda: bool = True, cudnn: bool = True, msvc: bool = True, directory=None) -> None:
    """onnxruntime loads CUDA libraries here; onnxkit's gpu backend is torch, which loads its own: a no-op."""


def print_debug_info() -> None:
    print(get_build_info())


def has_collective_ops() -> bool:
    return False


def copy_tensors(src, dst, stream=None) -> None:
    """Copy each tensor of ``src`` (OrtValues) into the OrtValue of the same index in ``dst``,
    in place; an :class:`~onnxkit.errors.OnnxkitError` naming the pair whose shapes or element
    types differ (nothing is copied then).  ``stream`` must be None: onnxkit has no device streams."""
    from ..errors import OnnxkitError

    src, dst = list(src), list(dst)
    if stream is not None:
        raise NotImplementedError("copy_tensors: device synchronization streams are not implemented by onnxkit; "
                                  "pass stream=None")
    if len(src) != len(dst):
        raise OnnxkitError(f"copy_tensors: {len(src)} sources but {len(dst)} destinations")
    for i, (s, d) in enumerate(zip(src, dst)):
        if s.shape() != d.shape() or s.data_type() != d.data_type():
            raise OnnxkitError(f"copy_tensors: pair {i}: source {s.data_type()} {s.shape()} does not match "
                               f"destination {d.data_type()} {d.shape()}")
    for s, d in zip(src, dst):
        d.update_inplace(s.numpy())
