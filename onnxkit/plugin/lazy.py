"""Operator families loaded when a model needs them: an index, kept beside the
family modules, stands in for importing them all when the registry is built.

A package with one module per operator family (:func:`onnxkit.plugin.family_modules`), each
holding a table filled by the table's ``register`` (``KERNELS``, a
:class:`~onnxkit.plugin.KernelTable`; ``FUNCTIONS``, a :class:`~onnxkit.plugin.FunctionTable`),
keeps a generated index and returns ``lazy_family_tables(__name__, ENTRIES, ...)`` from its
hook: the one way to hand a package's families over (``merge_family_tables``, which imported and
merged them all, is gone and refused by name).  Two kinds of package do:

* a **kernel** package (tables ``KERNELS``) keeps ``_kernel_index.py`` holding ``ENTRIES``:
  ``(domain, op_type, since_versions, family, factory_module, host_only)`` rows, with a seventh
  column ``{trait: value}`` where the factory declares other factory traits
  (:data:`~onnxkit.kernel_traits.FACTORY_TRAITS`: ``calls_blas`` and the operator traits
  ``size_guard``, ``nondeterministic``, ``fails_on_values``); ``lazy_family_tables(__name__, ENTRIES)`` gives one :class:`LazyKernel`
  per key: a factory that imports its family module the first time a node is planned with it,
  and answers what the host asks of a factory before that (``traits_of(...)``: the factory
  traits of :data:`~onnxkit.kernel_traits.FACTORY_TRAITS`; ``__module__`` for the operator
  index) from the index;
* an **inference** package (tables ``FUNCTIONS``, Clause 9.2) keeps ``_function_index.py``
  holding ``ENTRIES``: ``(domain, op_type, since_versions, family, function_module)`` rows;
  ``lazy_family_tables(__name__, ENTRIES, table="FUNCTIONS")`` gives one :class:`LazyFunction`
  per key: an inference function that imports its family module on its first call and then calls
  the real function with the same arguments (returning what it returns, raising what it raises);
  before that it answers ``__module__`` (the real function's, which may be a shared toolkit
  module such as ``onnxkit.inference.common``) from the index.

The registry's keys, owners and listings are those the modules would give.  What a lazy entry is
not: the real object (``is`` comparisons with a module's table entry fail; call
:meth:`LazyKernel.resolve` / :meth:`LazyFunction.resolve` for it).

Contract: the index must equal what the modules' tables hold (:func:`index_of`);
``tests/plugins/test_kernel_index.py`` fails when a module, an entry or a trait is missing from an index
or an index names one the modules lack.  Regenerate with
``python tools/kernel_index.py PACKAGE [PACKAGE ...]`` (e.g. ``onnxkit_cpu.overrides``,
``onnxkit_ml.inference``; outside onnxkit's checkout, :func:`write_index`).  A stale entry met
at planning (a kernel) or inference (a function) raises an :class:`~onnxkit.errors.OnnxkitError`
naming the package, the key and the command, never a deep traceback (inference reports a
failing function as a warning, 9.4: the message is that error's).
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import TYPE_CHECKING, Iterable, Mapping

from ..errors import OnnxkitError
from ..kernel_traits import FACTORY_TRAITS, NO_TRAITS, TRAITS_ATTRIBUTE, KernelTraits, traits_of
from ..plugin_tools import family_modules

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["INDEX_MODULES", "LazyFunction", "LazyKernel", "index_of", "index_of_entries", "lazy_family_tables",
           "render_index", "table_of", "write_index"]

#: the index module a package keeps, by the table its family modules define
INDEX_MODULES = {"KERNELS": "_kernel_index", "FUNCTIONS": "_function_index"}
INDEX_MODULE = INDEX_MODULES["KERNELS"]
_WHAT = {"KERNELS": "kernel", "FUNCTIONS": "function"}
_HOST_ONLY = KernelTraits(host_only=True)
_lock = threading.RLock()


class _LazyEntry:
    """The entry ``key`` of table ``TABLE`` in family ``family`` of ``package``, imported when first used."""

    TABLE = ""

    def __init__(self, package: str, family: str, key: tuple, module: str, prepare=None):
        self.package, self.family, self.key, self.__module__ = package, family, key, module
        self._real, self._prepare = None, prepare

    def resolve(self):
        """The real entry (imports the family module once)."""
        real = self._real
        if real is None:
            with _lock:
                if self._real is not None:
                    return self._real
                if self._prepare is not None:
                    self._prepare()
                module = importlib.import_module(f"{self.package}.{self.family}")
                real = getattr(module, self.TABLE, {}).get(self.key)
                if real is None:
                    raise OnnxkitError(
                        f"{self.package}: its {_WHAT[self.TABLE]} index names {self.key} in family {self.family!r}, "
                        f"whose {self.TABLE} lacks it: the index is stale (regenerate it: "
                        f"python tools/kernel_index.py {self.package})")
                self._real = real
        return real

    def __repr__(self) -> str:
        state = "loaded" if self._real is not None else "not loaded"
        return f"<lazy {_WHAT[self.TABLE]} {self.key} of {self.package}.{self.family} ({state})>"


class LazyKernel(_LazyEntry):
    """The factory of ``key`` in family ``family`` of ``package``, imported on its first call."""

    TABLE = "KERNELS"

    def __init__(self, package: str, family: str, key: tuple, module: str, host_only: bool, prepare=None,
                 traits: tuple = ()):
        super().__init__(package, family, key, module, prepare)
        if traits:  # the factory traits the index carries beyond host_only: ((name, value), ...)
            setattr(self, TRAITS_ATTRIBUTE, _declared(host_only, traits))
        elif host_only:
            setattr(self, TRAITS_ATTRIBUTE, _HOST_ONLY)

    def __call__(self, ctx):
        """The node function of ``ctx``'s node; what the factory notes about the body it chose is
        reported for it (:func:`onnxkit.runtime.bodies.prepare_noting`)."""
        from ..runtime.bodies import prepare_noting

        return prepare_noting(self.resolve(), ctx)


#: a lazy kernel declaring nothing answers traits_of from its class (the traits are frozen records)
setattr(LazyKernel, TRAITS_ATTRIBUTE, NO_TRAITS)
_TRAITS: dict = {}


def _declared(host_only: bool, traits: tuple) -> KernelTraits:
    """The traits of an index row, one record per distinct row (frozen, so shared)."""
    key = (host_only, traits)
    made = _TRAITS.get(key)
    if made is None:
        made = _TRAITS[key] = KernelTraits(host_only=host_only, **dict(traits))
    return made


class LazyFunction(_LazyEntry):
    """The inference function of ``key`` in family ``family`` of ``package``, imported on its first call."""

    TABLE = "FUNCTIONS"

    def __call__(self, *args, **kwargs):
        """What the real function returns for these arguments."""
        return self.resolve()(*args, **kwargs)


def lazy_family_tables(package: str, entries: Iterable, prepare=None, table: str = "KERNELS") -> dict:
    """``{key: LazyKernel}`` (``table="KERNELS"``) or ``{key: LazyFunction}`` (``"FUNCTIONS"``)
    for every row of ``entries`` (see the module docstring); ``prepare()``, where given, is called
    before a family module is imported (it must be cheap after its first call)."""
    index = index_of_entries(entries)
    if table == "KERNELS":
        return {key: LazyKernel(package, family, key, module, host_only, prepare, traits)
                for key, (family, module, host_only, traits) in index.items()}
    if table == "FUNCTIONS":
        return {key: LazyFunction(package, family, key, module, prepare) for key, (family, module) in index.items()}
    raise ValueError(f"table must be one of {sorted(INDEX_MODULES)}, not {table!r}")


def index_of_entries(entries: Iterable) -> dict:
    """``{(domain, op_type, since_version): (family, module[, host_only, traits])}`` of the rows:
    kernel rows carry ``host_only`` and ``traits``, the other factory traits as sorted ``(name,
    value)`` pairs (``()`` where the row has no seventh column); function rows carry neither."""
    out: dict = {}
    for domain, op, sinces, family, module, *rest in entries:
        if rest:
            host_only, *declared = rest
            value = (family, module, bool(host_only), _trait_pairs(declared[0] if declared else {}))
        else:
            value = (family, module)
        for since in sinces:
            out[(domain, op, int(since))] = value
    return out


def _trait_pairs(declared) -> tuple:
    """The factory traits but ``host_only`` of a row or a factory as sorted ``(name, value)``
    pairs, those left at their default omitted."""
    if not declared:  # most rows: nothing beyond host_only
        return ()
    names = tuple(t for t in FACTORY_TRAITS if t != "host_only")
    if isinstance(declared, KernelTraits):
        declared = {name: getattr(declared, name) for name in names}
    unknown = sorted(set(declared) - set(names))
    if unknown:
        raise ValueError(f"an index row declares {unknown}, which are not factory traits {names}")
    return tuple(sorted((name, value) for name, value in dict(declared).items() if value))


def table_of(package: str) -> str:
    """``"KERNELS"`` or ``"FUNCTIONS"``: the table ``package``'s family modules define (the index
    it keeps, where it keeps one; else imports its modules)."""
    pkg = importlib.import_module(package)
    kept = [t for t, name in INDEX_MODULES.items() if any(os.path.exists(os.path.join(p, f"{name}.py"))
                                                          for p in pkg.__path__)]
    if len(kept) == 1:
        return kept[0]
    found = {t for family in family_modules(pkg.__path__) for t in INDEX_MODULES
             if hasattr(importlib.import_module(f"{package}.{family}"), t)}
    if len(found) != 1:
        raise ValueError(f"{package}: its family modules define {sorted(found) or 'no'} table(s) of "
                         f"{sorted(INDEX_MODULES)}; an index is for a package of one kind")
    return found.pop()


def index_of(package: str, table: str = "KERNELS") -> dict:
    """The index the family modules of ``package`` give (imports them all): ``{key: (family,
    module, host_only, traits)}`` for ``KERNELS`` (``traits``: the factory's other factory
    traits as sorted ``(name, value)`` pairs), ``{key: (family, module)}`` for ``FUNCTIONS``; a key in
    two families is an error."""
    pkg = importlib.import_module(package)
    out: dict = {}
    for family in family_modules(pkg.__path__):
        module = importlib.import_module(f"{package}.{family}")
        for key, value in getattr(module, table, {}).items():
            if key in out:
                raise RuntimeError(f"{key} is defined in two families of {package}: {out[key][0]} and {family}")
            where = getattr(value, "__module__", None) or module.__name__
            if table == "KERNELS":
                traits = traits_of(value)
                out[key] = (family, where, traits.host_only, _trait_pairs(traits))
            else:
                out[key] = (family, where)
    return dict(sorted(out.items()))


def render_index(package: str, index: Mapping, table: str = "KERNELS") -> str:
    """The text of ``package``'s index module for ``index`` (one row per operator and module)."""
    rows: dict = {}
    for (domain, op, since), value in sorted(index.items()):
        rows.setdefault((domain, op, *value), []).append(since)
    what = _WHAT[table]
    columns = "family, factory module, host_only" if table == "KERNELS" else "family, function module"
    traits = table == "KERNELS" and any(value[3] for value in index.values())
    if traits:  # a seventh column, {trait: value}, only on the rows of factories declaring more traits
        columns += "[, factory traits]"
    lines = [f'"""The {what} index of {package}: generated by `python tools/kernel_index.py {package}`;',
             "do not edit (tests/plugins/test_kernel_index.py fails when it and the family modules disagree).",
             "", f"Rows ``(domain, op_type, since_versions, {columns})``",
             '(:mod:`onnxkit.plugin.lazy`)."""', "", "ENTRIES = ("]
    for (d, op, *rest), sinces in rows.items():
        if table == "KERNELS":
            rest = rest[:3] + ([dict(rest[3])] if rest[3] else [])
        lines.append("    (" + ", ".join(repr(v) for v in (d, op, tuple(sinces), *rest)) + "),")
    lines += [")", ""]
    return "\n".join(lines)


def write_index(package: str, table: str = None) -> Path:
    """Write ``package``'s index module (``_kernel_index.py`` or ``_function_index.py``, by
    ``table``, default :func:`table_of`) from its modules; returns its path."""
    table = table or table_of(package)
    pkg = importlib.import_module(package)
    from pathlib import Path  # not at import: pathlib is no module a session needs

    path = Path(list(pkg.__path__)[0]) / f"{INDEX_MODULES[table]}.py"
    path.write_text(render_index(package, index_of(package, table), table), encoding="utf-8")
    return path
