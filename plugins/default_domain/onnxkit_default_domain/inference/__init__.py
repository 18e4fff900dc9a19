"""Inference functions of ai.onnx and the preview domains (Clause 9.2), one module per family.

Every module of this package whose name does not start with ``_`` defines ``FUNCTIONS``:
``{(domain, op_type, since_version): fn}``; :func:`functions` gives them, each loaded on its
first call (:mod:`onnxkit.plugin.lazy`), and the plugin's ``onnxkit_inference_functions`` hook
returns the result.
"""

from __future__ import annotations

from onnxkit.plugin import lazy_family_tables


def functions() -> dict:
    """Every inference function of every family module of this package, each imported when it is
    first called (the generated ``_function_index.py``; tests/plugins/test_kernel_index.py keeps it equal
    to the modules' ``FUNCTIONS``: regenerate with ``python tools/kernel_index.py``)."""
    from ._function_index import ENTRIES

    return lazy_family_tables(__name__, ENTRIES, table="FUNCTIONS")
