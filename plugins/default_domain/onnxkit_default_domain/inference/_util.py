"""Registration helpers shared by the family modules."""

from __future__ import annotations

import sys
from functools import lru_cache, update_wrapper

from onnxkit.plugin import display_domain


@lru_cache(maxsize=1)
def _since_versions() -> dict:
    from ..schemas import schema_data

    out: dict = {}
    for domain, name, since in schema_data().keys:  # the keys alone: no definition is built
        out.setdefault((domain, name), []).append(since)
    return {k: sorted(v) for k, v in out.items()}


def versions(op: str, lo: int = 1, hi: int = 10**6, domain: str = "") -> list:
    """The since_versions of ``op`` in [lo, hi]."""
    return [v for v in _since_versions().get((domain, op), ()) if lo <= v <= hi]


def _attributed(fn):
    """``fn`` as written by the family module registering it: a rule built by a host helper
    (``same_as_input(0)``, ...) is wrapped so that its ``__module__`` names the family module
    (the operator index says where an operator's inference is registered)."""
    module = getattr(fn, "__module__", "") or ""
    if module.startswith(__package__ + "."):
        return fn
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    caller = frame.f_globals.get("__name__") if frame is not None else None
    if not caller:
        return fn

    def rule_of_family(ctx):
        return fn(ctx)

    update_wrapper(rule_of_family, fn)
    rule_of_family.__module__ = caller
    return rule_of_family


def register(table: dict, ops, fn, lo: int = 1, hi: int = 10**6, domain: str = ""):
    """Register ``fn`` for every since_version in [lo, hi] of each op in ``ops`` (a tuple of
    names, written out so that ``grep '"OpName"'`` finds them; a space-separated string is
    accepted too)."""
    fn = _attributed(fn)
    if isinstance(ops, str):
        ops = ops.split()
    for op in ops:
        vs = versions(op, lo, hi, domain)
        if not vs:
            raise KeyError(f"no definition of {display_domain(domain)}::{op} in [{lo}, {hi}]")
        for v in vs:
            table[(domain, op, v)] = fn
    return fn


def rule(table: dict, ops, lo: int = 1, hi: int = 10**6, domain: str = ""):
    """Decorator form of :func:`register`."""

    def deco(fn):
        register(table, ops, fn, lo, hi, domain)
        return fn

    return deco
