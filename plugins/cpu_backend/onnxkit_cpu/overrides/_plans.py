"""Per-node caches the cpu overrides share (no kernels: a private module, not a family).

A kernel keeps a dict from a *key* of its inputs (their extents, the values of small integer
inputs such as a shape or axes, read once with ``tolist``) to what its portable checks and
geometry decided for that key; a run of a known key does only the array work.  What is
cached is built completely before it is stored (a plain dict store: safe with several
threads running one session), and a key whose checks fail is never stored, so every run with
bad values fails again, naming the node.
"""

from __future__ import annotations

#: entries one node keeps (the table is emptied when full: extents that keep changing)
PLANS_MAX = 64


def host_ints(v) -> tuple:
    """An input's values as a tuple of Python ints, as ``ctx.ints`` reads them (a plan key;
    Split-1 types its lengths as floats)."""
    values = (v if v.ndim == 1 else v.reshape(-1)).tolist()
    return tuple(values) if v.dtype.kind in "iu" else tuple(int(e) for e in values)


def remember(plans: dict, key, value):
    """Store ``value`` under ``key`` and return it."""
    if len(plans) >= PLANS_MAX:
        plans.clear()
    plans[key] = value
    return value
