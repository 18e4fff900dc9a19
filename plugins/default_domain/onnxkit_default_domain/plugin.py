"""Hook implementations of onnxkit-default-domain (entry point ``default_domain`` in group ``onnxkit``)."""

from __future__ import annotations

from onnxkit.plugin import hookimpl


@hookimpl
def onnxkit_operator_sets():
    """ai.onnx 1..28, ai.onnx.preview.training 1, ai.onnx.preview 1 (Clause 5.3.2, 14.3)."""
    from .schemas import operator_sets

    return operator_sets()


@hookimpl
def onnxkit_inference_functions():
    """Shape and type inference functions of ai.onnx and the preview domains (Clause 9.2)."""
    from .inference import functions

    return functions()


@hookimpl
def onnxkit_portable_kernels():
    """The kernels of ai.onnx and the preview domains, one body for every backend."""
    from .kernels import all_kernels

    return all_kernels()
