"""A family module's inference functions: :class:`FunctionTable`, the one way a domain package
registers them (Clause 9.2), as :class:`onnxkit.runtime.kernel.KernelTable` is for its kernels.

A package keeps one module per operator family, each defining ``FUNCTIONS = FunctionTable(...)``
and registering with ``@FUNCTIONS.register("OpName", ...)``; its ``onnxkit_inference_functions``
hook returns ``lazy_family_tables(__name__, ENTRIES, table="FUNCTIONS")`` over the generated
index (:mod:`onnxkit.plugin.lazy`), or, for a one-module plugin, the table itself.

Where a kernel implements one definition exactly (Clause 4.4: its since_versions are listed),
an inference function usually serves every definition of an operator over a range of
versions: :meth:`FunctionTable.register` takes the range and finds the since_versions in the
definitions the table was given.  tests/structure/test_one_way.py fails on any other spelling
in the plugins (a table filled by item assignment, a dict literal, a registration helper).
"""

from __future__ import annotations

import sys
from functools import update_wrapper
from typing import Callable, Iterable, Optional, Union

from ..domains import display_domain, normalize_domain

__all__ = ["FunctionTable"]

#: ``{id(definitions): (definitions, {(domain, op_type): [since_version, ...]})}``: each
#: package's definitions read once, however many family tables share them
_SINCE: dict = {}


def _key(definition) -> tuple:
    """``(domain, op_type, since_version)`` of a key or an OpSchema, the domain normalised."""
    if isinstance(definition, tuple):
        domain, op, since = definition
    else:
        domain, op, since = definition.domain, definition.name, definition.since_version
    return normalize_domain(domain), op, int(since)


class FunctionTable(dict):
    """``{(domain, op_type, since_version): fn}`` of a family module (its ``FUNCTIONS``), filled by
    :meth:`register`.

    ``definitions``: the definitions the functions serve, as ``(domain, op_type,
    since_version)`` keys or :class:`~onnxkit.schema.OpSchema` objects, or a callable returning
    them (a package's ``schema_data().keys``), called at the first registration and read once
    per callable.  ``domain``: the domain :meth:`register` uses where it is not given one."""

    def __init__(self, definitions: Union[Callable[[], Iterable], Iterable], domain: str = ""):
        super().__init__()
        self._definitions = definitions if callable(definitions) else tuple(definitions)
        self.domain = normalize_domain(domain)

    def _since_versions(self) -> dict:
        source = self._definitions
        held = _SINCE.get(id(source))
        if held is None or held[0] is not source:
            since: dict = {}
            for definition in (source() if callable(source) else source):
                d, op, v = _key(definition)
                since.setdefault((d, op), []).append(v)
            held = _SINCE[id(source)] = (source, {k: sorted(set(v)) for k, v in since.items()})
        return held[1]

    def versions(self, op_type: str, first: int = 1, last: Optional[int] = None, domain: Optional[str] = None) -> list:
        """The since_versions in ``[first, last]`` (``last`` None: every later one) of the
        definitions of ``domain::op_type`` (the table's domain by default)."""
        d = self.domain if domain is None else normalize_domain(domain)
        return [v for v in self._since_versions().get((d, op_type), ())
                if first <= v and (last is None or v <= last)]

    def register(self, ops: Union[str, Iterable[str]], first: int = 1, last: Optional[int] = None, *,
                 domain: Optional[str] = None):
        """A decorator registering ``fn`` for every since_version in ``[first, last]`` (``last``
        None: every later one) of each operator of ``ops`` (a name, or names written out, so
        that ``grep '"OpName"'`` finds them) in ``domain`` (the table's by default), as the
        definitions give them; an operator with no definition in the range is a ``KeyError``
        naming it.  A function made elsewhere (a ready-made rule of
        :mod:`onnxkit.plugin.inference`, ``same_as_input(0)``...) is registered wrapped, with
        the registering module as its ``__module__``: where the operator index and the function
        index say an operator's inference is.  The decorator returns what it registered."""
        names = (ops,) if isinstance(ops, str) else tuple(ops)
        d = self.domain if domain is None else normalize_domain(domain)
        caller = sys._getframe(1).f_globals.get("__name__", "")
        found = {}
        for op in names:
            vs = self.versions(op, first, last, d)
            if not vs:
                span = f"[{first}, {last}]" if last is not None else f"{first} and later"
                raise KeyError(f"no definition of {display_domain(d)}::{op} in {span}")
            found[op] = vs

        def deco(fn):
            fn = _attributed(fn, caller)
            for op, vs in found.items():
                for v in vs:
                    self[(d, op, v)] = fn
            return fn

        return deco


def _attributed(fn, caller: str):
    """``fn``, or where it was made outside ``caller``'s package, a wrapper of it whose
    ``__module__`` is ``caller``."""
    module = getattr(fn, "__module__", "") or ""
    package = caller.rpartition(".")[0]
    if not caller or module == caller or (package and module.startswith(package + ".")):
        return fn

    def rule_of_family(ctx):
        return fn(ctx)

    update_wrapper(rule_of_family, fn)
    rule_of_family.__module__ = caller
    return rule_of_family
