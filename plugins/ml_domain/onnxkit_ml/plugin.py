"""Hook implementations of onnxkit-ml (entry point ``ml_domain`` in group ``onnxkit``)."""

from __future__ import annotations

from onnxkit.plugin import hookimpl


@hookimpl
def onnxkit_operator_sets():
    """ai.onnx.ml 1..5 (Clause 5.3.2, 14.3)."""
    from .schemas import operator_sets

    return operator_sets()


@hookimpl
def onnxkit_portable_kernels():
    """The kernels of every ai.onnx.ml definition: numpy (``host_only``), so they run on the cpu
    backend, and on the gpu backend through its per-node fallback."""
    from .kernels import all_kernels

    return all_kernels()


@hookimpl
def onnxkit_inference_functions():
    from .inference import functions
    return functions()
