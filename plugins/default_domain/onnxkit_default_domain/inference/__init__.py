"""Inference functions of ai.onnx and the preview domains (Clause 9.2), one module per family.

Every module of this package whose name does not start with ``_`` defines ``FUNCTIONS``:
``{(domain, op_type, since_version): fn}``; :func:`functions` merges them (pkgutil
auto-discovery), and the plugin's ``onnxkit_inference_functions`` hook returns the result.
"""

from __future__ import annotations

import importlib
import pkgutil


def functions() -> dict:
    """Every inference function of every family module."""
    out: dict = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for key, fn in getattr(module, "FUNCTIONS", {}).items():
            out.setdefault(key, fn)
    return out
