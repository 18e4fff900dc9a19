"""Small helpers for plugin authors: one module per operator family.

A plugin keeps its kernels (or inference functions) in a package with one module per
operator family, each defining a table (``KERNELS``, a :class:`~onnxkit.plugin.KernelTable`,
or ``FUNCTIONS``, a :class:`~onnxkit.plugin.FunctionTable`) keyed by ``(domain, op_type,
since_version)``; :func:`family_modules` names those modules (those whose name starts with
``_`` hold shared helpers).  The package's hook hands the tables over with
:func:`onnxkit.plugin.lazy_family_tables` from a generated index: the one way.
:func:`merge_family_tables`, which imported and merged them all, is gone and refused by name.
"""

from __future__ import annotations

from typing import Iterable

from .errors import OnnxkitError


def family_modules(package_path: Iterable[str]) -> list:
    """The family module names of a package (its ``__path__``), sorted."""
    import pkgutil  # not at import: a session's path lists no package

    return sorted(m.name for m in pkgutil.iter_modules(package_path) if not m.name.startswith("_"))


def merge_family_tables(package_name: str, package_path: Iterable[str] = (), table: str = "KERNELS") -> dict:
    """Gone (one way to hand over a package's kernels and inference functions): raises an
    :class:`~onnxkit.errors.OnnxkitError` naming what replaces it."""
    raise OnnxkitError(
        f"merge_family_tables({package_name!r}, ..., {table!r}) is gone: keep a generated index beside the "
        f"family modules (onnxkit.plugin.lazy.write_index({package_name!r})) and return "
        f"lazy_family_tables(__name__, ENTRIES{', table=' + repr(table) if table != 'KERNELS' else ''}) from "
        "the hook (onnxkit.plugin.lazy); a plugin of one module returns its KernelTable or FunctionTable")
