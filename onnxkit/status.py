"""onnxruntime's status exception classes, for code written against onnxruntime.

onnxruntime raises one class per status code (``onnxruntime.capi.onnxruntime_pybind11_state``):
``Fail`` (1), ``InvalidArgument`` (2), ``NoSuchFile`` (3), ``NoModel`` (4), ``EngineError`` (5),
``RuntimeException`` (6), ``InvalidProtobuf`` (7), ``ModelLoaded`` (8), ``NotImplemented`` (9),
``InvalidGraph`` (10), ``EPFail`` (11), ``ModelLoadCanceled`` (12), ``ModelRequiresCompilation``
(13), ``NotFound`` (14), plus ``DeviceReset``.  Here they are plain Python classes deriving from
:class:`RuntimeError` (onnxruntime's derive from ``Exception``; ``RuntimeError`` is what its
Python layer raises for everything else, so code catching either form catches these).

onnxkit's own errors (:mod:`onnxkit.errors`) derive from the class of the status onnxruntime
would report for the same fault: every :class:`~onnxkit.errors.OnnxkitError` is a ``Fail``, an
input that does not match the model an ``InvalidArgument``, undecodable octets an
``InvalidProtobuf``, an unsupported operator a ``NotImplemented``, and so on.  This module
imports nothing, so :mod:`onnxkit.errors` can build on it.
"""

from __future__ import annotations


class OrtStatusError(RuntimeError):
    """Base of the status classes; ``code`` is onnxruntime's status code, ``status`` its name."""

    code = 0
    status = "OK"


def _status(name: str, code: int, status: str, doc: str) -> type:
    return type(name, (OrtStatusError,), {"code": code, "status": status, "__doc__": doc, "__module__": __name__})


Fail = _status("Fail", 1, "FAIL", "A generic failure (onnxruntime status 1).")
InvalidArgument = _status("InvalidArgument", 2, "INVALID_ARGUMENT", "A bad argument or feed (status 2).")
NoSuchFile = _status("NoSuchFile", 3, "NO_SUCHFILE", "A model or data file does not exist (status 3).")
NoModel = _status("NoModel", 4, "NO_MODEL", "No model is loaded (status 4).")
EngineError = _status("EngineError", 5, "ENGINE_ERROR", "An engine (provider) error (status 5).")
RuntimeException = _status("RuntimeException", 6, "RUNTIME_EXCEPTION", "A failure during a run (status 6).")
InvalidProtobuf = _status("InvalidProtobuf", 7, "INVALID_PROTOBUF", "The octets are not a model (status 7).")
ModelLoaded = _status("ModelLoaded", 8, "MODEL_LOADED", "A model is loaded already (status 8).")
NotImplemented = _status("NotImplemented", 9, "NOT_IMPLEMENTED", "An operator or feature is not implemented "
                         "(status 9).")  # noqa: A001 - onnxruntime's name
InvalidGraph = _status("InvalidGraph", 10, "INVALID_GRAPH", "The graph does not conform (status 10).")
EPFail = _status("EPFail", 11, "EP_FAIL", "An execution provider failed (status 11).")
ModelLoadCanceled = _status("ModelLoadCanceled", 12, "MODEL_LOAD_CANCELED", "Loading was canceled (status 12).")
ModelRequiresCompilation = _status("ModelRequiresCompilation", 13, "MODEL_REQUIRES_COMPILATION",
                                   "The model must be compiled first (status 13).")
NotFound = _status("NotFound", 14, "NOT_FOUND", "Something asked for was not found (status 14).")
DeviceReset = _status("DeviceReset", 15, "DEVICE_RESET", "The device was reset.")

#: Every status class by name, as ``capi.onnxruntime_pybind11_state`` exports them.
STATUS_CLASSES = {c.__name__: c for c in (
    Fail, InvalidArgument, NoSuchFile, NoModel, EngineError, RuntimeException, InvalidProtobuf, ModelLoaded,
    NotImplemented, InvalidGraph, EPFail, ModelLoadCanceled, ModelRequiresCompilation, NotFound, DeviceReset)}
