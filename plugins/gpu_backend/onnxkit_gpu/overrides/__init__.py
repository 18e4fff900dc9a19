"""Overrides of the gpu backend: torch-native kernels (``torch.nn.functional`` convolution and
pooling, fused softmax...) that replace a portable kernel on this backend where they are much
faster on a device and give the same result within the type's tolerance (Clause 11).  Same
layout and rules as :mod:`onnxkit_cpu.overrides`: one module per portable family it
overrides, ``KERNELS`` in each, nothing but torch-specific code.
"""

from __future__ import annotations

from onnxkit.plugin import lazy_family_tables


def all_overrides() -> dict:
    """Every override of every family module of this package, each imported when a node is first
    planned with it (the generated ``_kernel_index.py``; tests/plugins/test_kernel_index.py keeps it equal
    to the modules' ``KERNELS``: regenerate with ``python tools/kernel_index.py``)."""
    from ._kernel_index import ENTRIES

    return lazy_family_tables(__name__, ENTRIES)
