"""CPU kernels of ai.onnx and the preview domains, one module per operator family.

Each family module (``elementwise.py``, ``reduction.py``, ``shape.py``, ``nn_conv.py``, ...)
exposes ``KERNELS``, an :class:`onnxkit.runtime.KernelTable` keyed by
``(domain, op_type, since_version)``; :func:`all_kernels` merges every module of this
package.  To find the kernel of an operator: ``grep -rn '"OpName"' plugins/cpu_backend``.
"""

from __future__ import annotations

from onnxkit.plugin_tools import merge_family_tables


def all_kernels() -> dict:
    """Every kernel of every family module of this package."""
    return merge_family_tables(__name__, __path__, "KERNELS")
