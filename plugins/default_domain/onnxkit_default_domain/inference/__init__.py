"""Inference functions of ai.onnx and the preview domains (Clause 9.2), one module per family.

Every module of this package whose name does not start with ``_`` defines ``FUNCTIONS``:
``{(domain, op_type, since_version): fn}``; :func:`functions` merges them (pkgutil
auto-discovery), and the plugin's ``onnxkit_inference_functions`` hook returns the result.
"""

from __future__ import annotations

from onnxkit.plugin import merge_family_tables


def functions() -> dict:
    """Every inference function of every family module of this package."""
    return merge_family_tables(__name__, __path__, "FUNCTIONS")
