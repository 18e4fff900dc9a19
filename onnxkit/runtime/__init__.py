"""Evaluation (Clause 8): planning, the run loop, sessions, and the kernel contract for backends."""

from .gc_pause import collection_paused as _collection_paused

with _collection_paused():  # importing the session's modules makes ~20 collections that free nothing (gc_pause)
    from .kernel import KernelTable, NodeContext, Unsupported, needs_scope
    from .options import (
        ExecutionMode, GraphOptimizationLevel, ModelMetadata, NodeArg, RunOptions, SessionOptions,
    )
    from .ortvalue import IOBinding, OrtValue
    from .providers import get_available_providers, get_device
    from .session import InferenceSession, InputError, run_model
    from .state import RunTerminated

__all__ = ["ExecutionMode", "GraphOptimizationLevel", "IOBinding", "InferenceSession", "InputError", "KernelTable",
           "ModelMetadata", "NodeArg", "NodeContext", "OrtValue", "RunOptions", "RunTerminated", "SessionOptions",
           "Unsupported", "needs_scope", "run_model", "get_available_providers", "get_device"]

