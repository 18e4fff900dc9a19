"""Hook implementations of onnxkit-ml (entry point ``ml_domain`` in group ``onnxkit``)."""

from __future__ import annotations

from onnxkit import hookimpl


@hookimpl
def onnxkit_operator_sets():
    """ai.onnx.ml 1..5 (Clause 5.3.2, 14.3)."""
    from .schemas import operator_sets

    return operator_sets()


@hookimpl
def onnxkit_kernels(backend):
    """CPU kernels of every ai.onnx.ml definition (numpy), for the ``cpu`` backend only."""
    from .kernels import all_kernels

    return all_kernels() if backend == "cpu" else None


@hookimpl
def onnxkit_inference_functions():
    from .inference import functions
    return functions()
