"""gpu (torch) kernels, one module per operator family (elementwise, activation, shape, nn_conv, ...).

Each family module exposes ``KERNELS``, an :class:`onnxkit.runtime.KernelTable` keyed by
``(domain, op_type, since_version)``; values are torch tensors on :func:`onnxkit_gpu.device.device`.

The backend-independent host-side logic (attribute parsing, axis normalisation, output
geometry and padding arithmetic, Resize coordinate transforms and tap weights...) is imported
from the cpu backend's kernels (``onnxkit_cpu.kernels``), not repeated here: the gpu plugin
depends on the ``onnxkit-cpu`` distribution (which ``pip install onnxkit`` installs anyway).
"""

from __future__ import annotations

from onnxkit.plugin_tools import merge_family_tables


def all_kernels() -> dict:
    """Every kernel of every family module of this package."""
    return merge_family_tables(__name__, __path__, "KERNELS")
