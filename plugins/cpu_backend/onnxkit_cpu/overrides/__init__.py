"""The cpu backend's overrides: native kernels that replace a portable kernel of
``onnxkit_default_domain.kernels`` on this backend because they are much faster there, and
compute the same result within the type's tolerance (Clause 11).

One module per operator family, named as the portable family it overrides, each exposing
``KERNELS`` (an :class:`onnxkit.plugin.KernelTable`).  An override holds only what is
specific to this backend's library; attribute parsing and geometry come from the portable
family it overrides, never repeated here.
"""

from __future__ import annotations

from onnxkit.plugin import lazy_family_tables


def all_overrides(prepare=None) -> dict:
    """Every override of every family module of this package, each imported when a node is first
    planned with it (the generated ``_kernel_index.py``; tests/plugins/test_kernel_index.py keeps it equal
    to the modules' ``KERNELS``: regenerate with ``python tools/kernel_index.py``); ``prepare()`` runs
    before a family module is imported (the plugin's namespace, made before selection.py imports it)."""
    from ._kernel_index import ENTRIES

    return lazy_family_tables(__name__, ENTRIES, prepare)
