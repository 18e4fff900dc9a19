"""The cpu backend's overrides: native kernels that replace a portable kernel of
``onnxkit_default_domain.kernels`` on this backend because they are much faster there, and
compute the same result within the type's tolerance (Clause 11).

One module per operator family, named as the portable family it overrides, each exposing
``KERNELS`` (an :class:`onnxkit.plugin.KernelTable`).  An override holds only what is
specific to this backend's library; attribute parsing and geometry come from the portable
family it overrides, never repeated here.
"""

from __future__ import annotations

from onnxkit.plugin import merge_family_tables


def all_overrides() -> dict:
    """Every override of every family module of this package."""
    return merge_family_tables(__name__, __path__, "KERNELS")
