"""``onnxruntime.capi.onnxruntime_pybind11_state``: onnxruntime's native module, here its
exception classes (:mod:`onnxkit.status`, which onnxkit's errors derive from) and its objects."""

from __future__ import annotations

from ...status import (  # noqa: F401
    DeviceReset, EngineError, EPFail, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, ModelLoadCanceled,
    ModelLoaded, ModelRequiresCompilation, NoModel, NoSuchFile, NotFound, NotImplemented, RuntimeException,
)
from ._pybind_state import *  # noqa: F401,F403
from ._pybind_state import __all__ as _names

__all__ = [*_names, "DeviceReset", "EngineError", "EPFail", "Fail", "InvalidArgument", "InvalidGraph",
           "InvalidProtobuf", "ModelLoadCanceled", "ModelLoaded", "ModelRequiresCompilation", "NoModel", "NoSuchFile",
           "NotFound", "NotImplemented", "RuntimeException"]
