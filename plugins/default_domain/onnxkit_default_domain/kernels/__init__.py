"""Kernels of ai.onnx and the preview domains, written once for every backend.

One module per operator family (``generators.py``, ...), each exposing ``KERNELS``, an
:class:`onnxkit.plugin.KernelTable` keyed by ``(domain, op_type, since_version)``.  A kernel
computes with ``ctx.xp``, the array namespace (array API standard) of the backend the node
runs on: numpy on ``cpu``, torch on ``gpu``.  A kernel registered ``host_only=True`` needs
numpy itself and runs on the cpu backend (the gpu backend runs that node there, per node).
Backends may override a definition with a faster native kernel of their own
(``onnxkit_cpu/overrides``, ``onnxkit_gpu/overrides``).

To find everything about an operator: ``grep -rn '"OpName"' plugins/`` gives its definition
data, its inference function, this kernel and any override.
"""

from __future__ import annotations

from onnxkit.plugin import lazy_family_tables


def all_kernels() -> dict:
    """Every kernel of every family module of this package, each imported when a node is first
    planned with it (the generated ``_kernel_index.py``; tests/plugins/test_kernel_index.py keeps it equal
    to the modules' ``KERNELS``: regenerate with ``python tools/kernel_index.py``)."""
    from ._kernel_index import ENTRIES

    return lazy_family_tables(__name__, ENTRIES)
