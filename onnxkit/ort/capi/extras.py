"""Native-layer objects of onnxruntime with no onnxkit counterpart of their own:
``OrtValueVector`` (a list of OrtValues), ``SessionIOBinding`` (the native IOBinding, built on a
session), ``ExecutionOrder``, ``get_default_session_options`` and ``is_dlpack_uint``."""

from __future__ import annotations

import enum

from ...runtime import IOBinding, SessionOptions
from ...runtime.session_ort import OrtValueVector  # noqa: F401


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class SessionIOBinding(IOBinding):
    """The native IOBinding: ``SessionIOBinding(session._sess)``."""

    def __init__(self, session):
        super().__init__(getattr(session, "_session", session))


def get_default_session_options() -> SessionOptions:
    return SessionOptions()


def is_dlpack_uint(dlpack) -> bool:
    """Whether a DLPack capsule or object holds unsigned integers (bool travels as uint8)."""
    import numpy as np

    try:
        arr = np.from_dlpack(dlpack)
    except (TypeError, RuntimeError, BufferError):
        return False
    return arr.dtype.kind == "u"
