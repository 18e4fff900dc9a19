"""Hook implementations of onnxkit-ml (entry point ``ml_domain`` in group ``onnxkit``)."""

from __future__ import annotations

from onnxkit import hookimpl


@hookimpl
def onnxkit_operator_sets():
    """ai.onnx.ml 1..5 (Clause 5.3.2, 14.3)."""
    from .schemas import operator_sets

    return operator_sets()
