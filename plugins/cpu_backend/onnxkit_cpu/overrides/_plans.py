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
product layout, BatchNormalization's scale and shift, an RNN's prepared weights) keeps it only
where :class:`Held` says so — the planner declares the input a constant of the plan
(:meth:`onnxkit.plugin.NodeContext.is_constant`), or the object is the plan's own default for it
(:meth:`~onnxkit.plugin.NodeContext.default`, a run that fed none), both read once by the
factory — and reuses it while the same object comes back; otherwise it derives again each call.
No kernel decides that from an array itself (its ``writeable`` flag, its chain of ``base``
arrays): a caller may write a runtime input, or memory it is a view of, between runs
(tests/engine/test_kernel_constants.py scans the kernels for such tests).
"""

from __future__ import annotations

import numpy as np

#: entries one node keeps (the table is emptied when full: extents that keep changing)
PLANS_MAX = 64


class Held:
    """Whether what a kernel derives from the value of input ``i`` may be kept while the same
    object comes back (``held(value)``): the planner declares the input a constant of the plan
    (``ctx.is_constant``: an initializer, a folded value), or ``value`` is the very object the
    plan gives the input where a run feeds none (``ctx.default``: an initializer that is also a
    graph input; a fed value never is that object).  Made by the factory, from ``ctx``."""

    __slots__ = ("constant", "default", "holds")

    def __init__(self, ctx, i: int):
        self.constant = ctx.is_constant(i)
        self.default = ctx.default(i)
        self.holds = ctx.holds  # a value of the plan's folded-defaults variant, by identity

    def __call__(self, value) -> bool:
        return self.constant or (value is not None and (value is self.default or self.holds(value)))


class _NotHeld:
    """A :class:`Held` of an input the plan never holds (nothing is kept)."""

    __slots__ = ()
    constant, default = False, None

    def __call__(self, value) -> bool:
        return False


NOT_HELD = _NotHeld()


def decided_each_call(decide, other):
    """The unbound kernel of a ``decide`` / ``other`` pair (:func:`bodies_by_layout`'s): each call
    decides its body, ``decide(x, *others)``, and runs it on ``x``, or ``other(x, *others)`` where
    ``decide`` returns None."""

    def run(x, *others):
        body = decide(x, *others)
        return other(x, *others) if body is None else body(x)

    return run


def bodies_by_layout(decide, other):
    """A ``bind`` for :func:`onnxkit.runtime.kernel.binds_constants` of a kernel whose inputs but
    the first are all bound (a quantized convolution or product with constant weights, scales,
    zero points and bias): the function it returns keeps, per X shape and dtype, the body
    ``decide(x, *others)`` made (a function of X alone: the checks, geometry and parameters
    decided once for that layout), and runs it on each X of that layout; where ``decide`` returns
    None (the portable kernel serves those inputs, with its errors), ``other(x, *others)`` runs
    and nothing is kept.  The run loop binds only where every other input is a constant of the
    plan or absent, so a fed scale or weight never reaches a kept body."""

    def bind(*constants):
        bodies: dict = {}

        def bound(x, *others):
            key = (x.shape, x.dtype) if type(x) is np.ndarray else None
            body = bodies.get(key)
            if body is None:
                body = decide(x, *others)
                if body is None:
                    return other(x, *others)
                if key is not None:
                    remember(bodies, key, body)
            return body(x)

        return bound

    return bind


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
