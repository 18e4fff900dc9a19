"""Hook implementations of onnxkit-microsoft (entry point ``microsoft_domain`` in group ``onnxkit``)."""

from __future__ import annotations

from onnxkit.plugin import hookimpl


@hookimpl
def onnxkit_operator_sets():
    """com.microsoft 1 and com.microsoft.nchwc 1 (onnxruntime's NCHWc layout operators): the
    definitions this package implements (:mod:`.schemas`)."""
    from .schemas import operator_sets

    return operator_sets()


@hookimpl
def onnxkit_extension_operators():
    """ai.onnx SimplifiedLayerNormalization-1 and LayerNormalization-1, where onnxruntime registers
    them (ONNX defines neither): extensions, bound only where the imported ai.onnx operator set has no
    operator of that name (LayerNormalization-1 below ai.onnx 17)."""
    from .schemas import extension_operators

    return extension_operators()


@hookimpl
def onnxkit_inference_functions():
    """Shape and type inference functions of every com.microsoft definition here (Clause 9.2)."""
    from .inference import functions

    return functions()


@hookimpl
def onnxkit_portable_kernels():
    """The kernels of every com.microsoft definition here: one body for every backend (the array
    API namespace ``ctx.xp``), except the string ones (Tokenizer, MurmurHash3), marked
    ``host_only``: a backend whose values are not numpy runs them on its fallback (cpu)."""
    from .kernels import all_kernels

    return all_kernels()
