"""The entry points of one group, read straight from the installed distributions' metadata.

:func:`importlib.metadata.entry_points` is costly in a fresh process (importing it pulls in
``email``, ``zipfile``, ``csv``...; then it builds a ``Distribution`` object per installed
package), a noticeable share of onnxkit's time to a first result.  :func:`group_entry_points`
finds the same entry points by reading ``entry_points.txt`` (and ``METADATA`` / ``PKG-INFO`` for
the name and version) of the ``*.dist-info`` / ``*.egg-info`` directories on :data:`sys.path`, as
importlib.metadata's path finder does: in :data:`sys.path` order, the first distribution of a
(normalized) name wins, the name read from the folder's ``{name}-{version}`` stem, and ``""`` is
the current directory.

It hands the work to importlib.metadata whenever it could differ from it: a :data:`sys.path`
entry that is a file (a zip or an egg), or a :data:`sys.meta_path` finder other than the
standard path finder that can find distributions.  The entry points it returns have
importlib.metadata's ``name``, ``value``, ``group``, ``dist`` (``dist.metadata["Name"]``,
``dist.version``) and ``load()``.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Optional


class ScannedDistribution:
    """What a registry reads of a distribution: ``metadata["Name"]`` and ``version``."""

    def __init__(self, name: str, version: Optional[str]):
        self.metadata = {"Name": name}
        self.version = version


class ScannedEntryPoint:
    """One ``name = module[:attr.path]`` line of a distribution's ``entry_points.txt``."""

    def __init__(self, name: str, value: str, group: str, dist: ScannedDistribution):
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def load(self):
        """Import the module and follow the attribute path, as ``importlib.metadata.EntryPoint.load``."""
        target = self.value.split("[", 1)[0].strip()  # "[extras]" are not loaded
        module_name, _, attrs = target.partition(":")
        obj = importlib.import_module(module_name.strip())
        for attr in filter(None, attrs.strip().split(".")):
            obj = getattr(obj, attr)
        return obj

    def __repr__(self) -> str:
        return f"ScannedEntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _scan_usable() -> bool:
    """Whether the directories on sys.path are all importlib.metadata would look at."""
    from importlib.machinery import PathFinder

    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in sys.meta_path):
        return False
    return not any(os.path.isfile(entry) for entry in sys.path if entry)


def _headers(folder: str) -> tuple:
    """``(Name, Version)`` from a metadata folder's METADATA or PKG-INFO (None where missing)."""
    name = version = None
    for file in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, file), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break  # the headers end at the first blank line
                    key, _, value = line.partition(":")
                    if key == "Name" and name is None:
                        name = value.strip()
                    elif key == "Version" and version is None:
                        version = value.strip()
            return name, version
        except OSError:
            continue
    return name, version


def _group_lines(text: str, group: str) -> list:
    """``(name, value)`` of the entries under ``[group]`` of an entry_points.txt."""
    found, inside = [], False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
        elif inside and "=" in line:
            name, _, value = line.partition("=")
            found.append((name.strip(), value.strip()))
    return found


def group_entry_points(group: str) -> list:
    """The entry points of ``group`` of every installed distribution (see the module)."""
    if not _scan_usable():
        from importlib.metadata import entry_points

        return list(entry_points(group=group))
    seen: set = set()
    found = []
    for entry in sys.path:
        folder = entry or "."
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for child in names:
            stem, dot, suffix = child.rpartition(".")
            if not dot or suffix not in ("dist-info", "egg-info"):
                continue
            key = _normalized(stem.split("-", 1)[0])  # "{name}-{version}.dist-info", as importlib.metadata reads it
            if key in seen:
                continue
            seen.add(key)
            meta = os.path.join(folder, child)
            try:
                with open(os.path.join(meta, "entry_points.txt"), encoding="utf-8") as fh:
                    rows = _group_lines(fh.read(), group)
            except OSError:
                continue
            if rows:  # METADATA is read only for a distribution with entry points of the group
                name, version = _headers(meta)
                dist = ScannedDistribution(name or stem.split("-", 1)[0], version)
                found.extend(ScannedEntryPoint(n, v, group, dist) for n, v in rows)
    return found
