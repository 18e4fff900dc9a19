"""Evaluation (Clause 8): planning, the run loop, sessions, and the kernel contract for backends."""

from .gc_pause import collection_paused as _collection_paused

with _collection_paused():  # importing the session's modules makes ~20 collections that free nothing (gc_pause)
    from .kernel import KernelTable, NodeContext, Unsupported, needs_scope
    from .options import ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions
    from .ortvalue import IOBinding, OrtValue
    from .providers import get_available_providers, get_device
    from .session import InferenceSession, InputError, run_model
    from .state import RunTerminated

__all__ = ["ExecutionMode", "GraphOptimizationLevel", "IOBinding", "InferenceSession", "InputError", "KernelTable",
           "ModelMetadata", "NodeArg", "NodeContext", "OrtValue", "RunOptions", "RunTerminated", "SessionOptions",
           "Unsupported", "needs_scope", "run_model", "get_available_providers", "get_device"]


def __getattr__(name):
    """:class:`ModelMetadata` and :class:`NodeArg`, defined in :mod:`.surface_records` on first use."""
    if name in ("ModelMetadata", "NodeArg"):
        from . import surface_records

        return getattr(surface_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
