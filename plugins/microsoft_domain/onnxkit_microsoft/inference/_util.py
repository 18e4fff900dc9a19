"""Registration helper shared by the family modules."""

from __future__ import annotations

DOMAIN = "com.microsoft"


def rule(table: dict, *ops: str):
    """Register the decorated function for com.microsoft ``op``-1 of each of ``ops`` (written out,
    so that ``grep '"OpName"'`` finds them)."""

    def deco(fn):
        for op in ops:
            table[(DOMAIN, op, 1)] = fn
        return fn

    return deco
