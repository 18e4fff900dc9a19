"""Hook implementations of onnxkit-default-domain (entry point ``default_domain`` in group ``onnxkit``)."""

from __future__ import annotations

from onnxkit.plugin import hookimpl


@hookimpl
def onnxkit_operator_sets():
    """ai.onnx 1..28, ai.onnx.preview.training 1, ai.onnx.preview 1 (Clause 5.3.2, 14.3), and
    ai.onnxkit 1, the optimizer's fused operators (:mod:`.fused`)."""
    from . import fused
    from .schemas import operator_sets

    return operator_sets() + fused.operator_sets()


@hookimpl
def onnxkit_inference_functions():
    """Shape and type inference functions of ai.onnx, the preview domains and ai.onnxkit (Clause 9.2)."""
    from .inference import functions

    return functions()


@hookimpl
def onnxkit_portable_kernels():
    """The kernels of ai.onnx, the preview domains and ai.onnxkit, one body for every backend."""
    from .kernels import all_kernels

    return all_kernels()
