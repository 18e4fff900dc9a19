"""Small helpers for plugin authors: one module per operator family, merged into one table.

A plugin keeps its kernels (or inference functions) in a package with one module per
operator family, each defining a table (``KERNELS`` or ``FUNCTIONS``) keyed by
``(domain, op_type, since_version)``; :func:`merge_family_tables` finds the modules and
merges their tables.  Modules whose name starts with ``_`` hold shared helpers.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable


def family_modules(package_path: Iterable[str]) -> list:
    """The family module names of a package (its ``__path__``), sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(package_path) if not m.name.startswith("_"))


def merge_family_tables(package_name: str, package_path: Iterable[str], table: str) -> dict:
    """Merge the ``table`` attribute of every family module; a key in two families is an error."""
    merged: dict = {}
    owner: dict = {}
    for family in family_modules(package_path):
        module = importlib.import_module(f"{package_name}.{family}")
        for key, value in getattr(module, table, {}).items():
            if key in merged:
                raise RuntimeError(f"{key} is defined in two families of {package_name}: {owner[key]} and {family}")
            merged[key] = value
            owner[key] = family
    return merged
