"""Registration helpers shared by the family modules."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _since_versions() -> dict:
    from ..schemas import definitions

    out: dict = {}
    for s in definitions():
        out.setdefault((s.domain, s.name), []).append(s.since_version)
    return {k: sorted(v) for k, v in out.items()}


def versions(op: str, lo: int = 1, hi: int = 10**6, domain: str = "") -> list:
    """The since_versions of ``op`` in [lo, hi]."""
    return [v for v in _since_versions().get((domain, op), ()) if lo <= v <= hi]


def register(table: dict, ops, fn, lo: int = 1, hi: int = 10**6, domain: str = ""):
    """Register ``fn`` for every since_version in [lo, hi] of each op in ``ops``."""
    if isinstance(ops, str):
        ops = ops.split()
    for op in ops:
        vs = versions(op, lo, hi, domain)
        if not vs:
            raise KeyError(f"no definition of {domain or 'ai.onnx'}::{op} in [{lo}, {hi}]")
        for v in vs:
            table[(domain, op, v)] = fn
    return fn


def rule(table: dict, ops, lo: int = 1, hi: int = 10**6, domain: str = ""):
    """Decorator form of :func:`register`."""

    def deco(fn):
        register(table, ops, fn, lo, hi, domain)
        return fn

    return deco
