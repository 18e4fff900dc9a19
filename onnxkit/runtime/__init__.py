"""Evaluation (Clause 8): planning, the run loop, sessions, and the kernel contract for backends."""

from .kernel import KernelTable, NodeContext, Unsupported, needs_scope
from .options import (
    ExecutionMode, GraphOptimizationLevel, ModelMetadata, NodeArg, RunOptions, SessionOptions,
)
from .ortvalue import IOBinding, OrtValue
from .session import InferenceSession, InputError, run_model
from .state import RunTerminated

__all__ = ["ExecutionMode", "GraphOptimizationLevel", "IOBinding", "InferenceSession", "InputError", "KernelTable",
           "ModelMetadata", "NodeArg", "NodeContext", "OrtValue", "RunOptions", "RunTerminated", "SessionOptions",
           "Unsupported", "needs_scope", "run_model", "get_available_providers", "get_device"]


def get_available_providers() -> list:
    """onnxruntime's ``get_available_providers``: the providers of the installed backends
    (``CUDAExecutionProvider`` only where torch sees CUDA), CPU last but for plugins' own."""
    from ..registry import get_registry
    from .options import provider_of
    from .providers import cuda_available

    backends = get_registry().backends
    order = sorted(backends, key=lambda b: (b != "gpu", b != "cpu", b))
    return [provider_of(b) for b in order if b != "gpu" or cuda_available()]


def get_device() -> str:
    """onnxruntime's ``get_device``: ``'GPU'`` when the gpu backend sees CUDA, else ``'CPU'``."""
    try:
        import torch

        return "GPU" if torch.cuda.is_available() and "gpu" in __import__("onnxkit").get_registry().backends else "CPU"
    except ImportError:
        return "CPU"
