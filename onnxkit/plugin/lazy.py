"""Kernel families loaded when a model needs them (issue 32 item 1): an index, kept beside the
family modules, stands in for importing them all when the registry is built.

A kernel package with one module per operator family (:func:`onnxkit.plugin.merge_family_tables`)
may instead keep a generated ``_kernel_index.py`` holding ``ENTRIES``: ``(domain, op_type,
since_versions, family, factory_module, host_only)`` rows, and return
``lazy_family_tables(__name__, ENTRIES)`` from its hook.  Each entry is then a :class:`LazyKernel`:
a factory that imports its family module the first time a node is planned with it, and answers
what the host asks of a factory before that (``traits_of(...).host_only``, ``__module__`` for the
operator index) from the index.  The registry's keys, owners and listings are those the modules
would give.

Contract: the index must equal what the modules' ``KERNELS`` tables hold (:func:`index_of`);
``tests/test_kernel_index.py`` fails when a module, a kernel or a trait is missing from the index
or the index names one the modules lack.  Regenerate with
``python tools/kernel_index.py PACKAGE [PACKAGE ...]`` (e.g. ``onnxkit_cpu.overrides``).
A stale entry met at planning raises an :class:`~onnxkit.errors.OnnxkitError` naming the package,
the key and the command, never a deep traceback.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import OnnxkitError
from ..kernel_traits import TRAITS_ATTRIBUTE, KernelTraits, traits_of
from ..plugin_tools import family_modules

__all__ = ["LazyKernel", "index_of", "index_of_entries", "lazy_family_tables", "render_index", "write_index"]

INDEX_MODULE = "_kernel_index"
_HOST_ONLY = KernelTraits(host_only=True)
_lock = threading.RLock()


class LazyKernel:
    """The factory of ``key`` in family ``family`` of ``package``, imported on its first call."""

    def __init__(self, package: str, family: str, key: tuple, module: str, host_only: bool, prepare=None):
        self.package, self.family, self.key, self.__module__ = package, family, key, module
        self._factory, self._prepare = None, prepare
        if host_only:
            setattr(self, TRAITS_ATTRIBUTE, _HOST_ONLY)

    def resolve(self):
        """The real factory (imports the family module once)."""
        factory = self._factory
        if factory is None:
            with _lock:
                if self._prepare is not None:
                    self._prepare()
                module = importlib.import_module(f"{self.package}.{self.family}")
                factory = getattr(module, "KERNELS", {}).get(self.key)
                if factory is None:
                    raise OnnxkitError(
                        f"{self.package}: its kernel index names {self.key} in family {self.family!r}, whose KERNELS "
                        f"lacks it: the index is stale (regenerate it: python tools/kernel_index.py {self.package})")
                self._factory = factory
        return factory

    def __call__(self, ctx):
        """The node function of ``ctx``'s node; what the factory notes about the body it chose is
        reported for it (:func:`onnxkit.runtime.bodies.prepare_noting`)."""
        from ..runtime.bodies import prepare_noting

        return prepare_noting(self.resolve(), ctx)

    def __repr__(self) -> str:
        state = "loaded" if self._factory is not None else "not loaded"
        return f"<lazy kernel {self.key} of {self.package}.{self.family} ({state})>"


def lazy_family_tables(package: str, entries: Iterable, prepare=None) -> dict:
    """``{key: LazyKernel}`` for every row of ``entries`` (see the module docstring);
    ``prepare()``, where given, is called before a family module is imported (it must be cheap
    after its first call)."""
    return {key: LazyKernel(package, family, key, module, host_only, prepare)
            for key, (family, module, host_only) in index_of_entries(entries).items()}


def index_of_entries(entries: Iterable) -> dict:
    """``{(domain, op_type, since_version): (family, factory module, host_only)}`` of the rows."""
    return {(domain, op, int(since)): (family, module, bool(host_only))
            for domain, op, sinces, family, module, host_only in entries for since in sinces}


def index_of(package: str, table: str = "KERNELS") -> dict:
    """The index the family modules of ``package`` give (imports them all): ``{key: (family,
    factory module, host_only)}``; a key in two families is an error, as for
    :func:`~onnxkit.plugin.merge_family_tables`."""
    pkg = importlib.import_module(package)
    out: dict = {}
    for family in family_modules(pkg.__path__):
        module = importlib.import_module(f"{package}.{family}")
        for key, factory in getattr(module, table, {}).items():
            if key in out:
                raise RuntimeError(f"{key} is defined in two families of {package}: {out[key][0]} and {family}")
            out[key] = (family, getattr(factory, "__module__", None) or module.__name__,
                        traits_of(factory).host_only)
    return dict(sorted(out.items()))


def render_index(package: str, index: Mapping) -> str:
    """The text of ``_kernel_index.py`` for ``index`` (one row per operator and factory)."""
    rows: dict = {}
    for (domain, op, since), (family, module, host_only) in sorted(index.items()):
        rows.setdefault((domain, op, family, module, host_only), []).append(since)
    lines = [f'"""The kernel index of {package}: generated by `python tools/kernel_index.py {package}`;',
             "do not edit (tests/test_kernel_index.py fails when it and the family modules disagree).",
             "", "Rows ``(domain, op_type, since_versions, family, factory module, host_only)``",
             '(:mod:`onnxkit.plugin.lazy`)."""', "", "ENTRIES = ("]
    lines += [f"    ({d!r}, {op!r}, {tuple(sinces)!r}, {fam!r}, {mod!r}, {host!r}),"
              for (d, op, fam, mod, host), sinces in rows.items()]
    lines += [")", ""]
    return "\n".join(lines)


def write_index(package: str) -> Path:
    """Write ``package``'s ``_kernel_index.py`` from its modules; returns its path."""
    pkg = importlib.import_module(package)
    path = Path(list(pkg.__path__)[0]) / f"{INDEX_MODULE}.py"
    path.write_text(render_index(package, index_of(package)), encoding="utf-8")
    return path

