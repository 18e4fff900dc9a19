"""Per-node caches the cpu overrides share (no kernels: a private module, not a family).

A kernel keeps a dict from a *key* of its inputs (their extents, the values of small integer
inputs such as a shape or axes, read once with ``tolist``) to what its portable checks and
geometry decided for that key; a run of a known key does only the array work.  What is
cached is built completely before it is stored (a plain dict store: safe with several
threads running one session), and a key whose checks fail is never stored, so every run with
bad values fails again, naming the node.

Where those small inputs are constants of the plan (the usual case: initializers, or values
the shape specializer folded), :class:`IntPlans` gives the run loop a function keyed by the
extents alone (:func:`onnxkit.runtime.kernel.binds_constants`): the values are read once.

A kernel that keeps what it derived from an input *array* (a convolution's weights in its
product layout, BatchNormalization's scale and shift, an RNN's prepared weights) reuses it while
the same object comes back only where :func:`unchanging` says its elements cannot have changed.
"""

from __future__ import annotations

import numpy as np

#: entries one node keeps (the table is emptied when full: extents that keep changing)
PLANS_MAX = 64
#: views deep a base chain is followed at most (a chain of views is short; bounded anyway)
_CHAIN = 64


def unchanging(v) -> bool:
    """Whether the elements of array ``v`` cannot change while ``v`` lives, so that what a kernel
    derived from them may be reused while the same object comes back: ``v`` is read-only and so is
    every array it is a view of, down to memory nobody may write (``bytes``, a read-only
    buffer: a loaded model's octets or a read-only map of its file).  Initializers and the values
    the plan folded are (:func:`onnxkit.runtime.plan.frozen`).  A read-only *view* of a writeable
    array is not — ``np.broadcast_to`` of a runtime input, a view whose flag the caller cleared:
    its base may be written between runs — nor is any writeable array."""
    if type(v) is not np.ndarray or v.flags.writeable:
        return False
    base = v.base
    for _ in range(_CHAIN):
        if base is None or type(base) is bytes:
            return True
        if isinstance(base, np.ndarray):
            if base.flags.writeable:
                return False
            base = base.base
        elif isinstance(base, memoryview):  # a read-only buffer: its maker's promise (the loader's own copy)
            return base.readonly
        else:  # a read-only buffer of some other owner (a map opened for reading) is read-only
            try:
                return memoryview(base).readonly
            except TypeError:
                return False
    return False


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


class IntPlans:
    """One node's plans keyed by its data input's extents and the values of small integer
    inputs (a shape, axes, starts...): ``decide(x, *ints)`` (each a tuple of ints, or None for
    an absent input) makes the plan, raising (``ctx.fail``) for values it refuses.

    :meth:`plan` reads the values each call; :meth:`fixed` reads them once, for constants,
    and returns ``plan(x)``, keyed by ``x.shape`` alone."""

    __slots__ = ("decide", "plans")

    def __init__(self, decide):
        self.decide, self.plans = decide, {}

    def plan(self, x, *values):
        key = (x.shape, *[None if v is None else host_ints(v) for v in values])
        p = self.plans.get(key)
        if p is None:
            p = remember(self.plans, key, self.decide(x, *key[1:]))
        return p

    def fixed(self, *values):
        """``plan(x)`` for these constant values (None where one is not an integer tensor:
        the caller keeps reading them)."""
        if not all(v is None or (type(v) is np.ndarray and v.dtype.kind in "iuf") for v in values):
            return None
        ints = [None if v is None else host_ints(v) for v in values]
        by_shape: dict = {}
        decide = self.decide

        def plan(x):
            p = by_shape.get(x.shape)
            if p is None:
                p = remember(by_shape, x.shape, decide(x, *ints))
            return p

        return plan
