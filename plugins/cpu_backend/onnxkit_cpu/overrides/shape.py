"""cpu overrides of the shape family (``onnxkit_default_domain/kernels/shape.py``).

Reshape, Flatten, Squeeze, Unsqueeze, Expand, Concat, Split, Transpose and Shape run in every
model, mostly on small tensors, where the per-call cost is the checks and the geometry, not
the array work.  Each kernel here keeps the portable family's decision per key of its inputs
(:mod:`._plans`: the input's extents and the values of its shape / axes / split input), so a
run of a known key is one dictionary look-up and one numpy call.  The checks and the geometry
are the portable family's own functions, run once per key; a key they refuse is not stored
(every run with it fails, naming the node); where the shape / axes / split input is a
constant of the plan, its values are read once (:class:`._plans.IntPlans`) and a run is
keyed by the extents alone.  Results are those of the portable kernels,
exactly: views where they give views, a fresh C-contiguous array from Expand.

A key not seen before (a decoder's past grows one position a token: its Reshape, Unsqueeze,
Squeeze and Expand see new extents every run) is decided by a direct rule where the values are
the plain case the rule covers — Reshape to positive extents and at most one -1, Unsqueeze /
Squeeze at distinct axes in range (Squeeze's of extent 1), Expand to non-negative extents that
broadcast (Clause 6.6.2) — and by the portable geometry otherwise, which also gives every
refusal: the two agree wherever the direct rule answers (plugins/cpu_backend/tests/test_shape_rules.py).
Unsqueeze of constant axes (the usual case) decides once per input rank, what alone places its
1s, and inserts them by indexing: a new extent costs it no decision at all.  A node whose keys
keep being new (:data:`VARYING_AFTER` of them: its extents vary) stops remembering what the
direct rule decides (:class:`RuledPlans`), and Concat its checked axis: a key that would not come
again costs no look-up, no entry and no emptied table.
"""

from __future__ import annotations

import numpy as np
from onnxkit_default_domain.api import WIDENED_ONLY_VERSIONS as _LATEST
from onnxkit_default_domain.api import (axes_attr, concat_axis, concat_check, expand_target, flatten_extents,
                                        reshape_allowzero, reshape_target, shape_bounds, split_args, split_attr_args,
                                        split_index, split_lengths, squeeze_target, transpose_perm, unsqueeze_target)

from onnxkit.plugin import KernelTable, binds_constants, declares_output_bytes

from ._plans import IntPlans, host_ints, remember

KERNELS = KernelTable()

#: new keys a node meets before it stops remembering the keys its direct rule decides
#: (:class:`RuledPlans`; Concat alike): its extents vary, a remembered key would not come again
VARYING_AFTER = 16


# -- the direct rules of a new key (None: the portable geometry decides) ------------------------
def reshape_rule(shape: tuple, dims: tuple):
    """Reshape's extents for input extents ``shape`` and a target ``dims`` of positive extents
    and at most one -1 (of a non-empty input), the element counts agreeing; else None."""
    known, free = 1, -1
    for k, d in enumerate(dims):
        if d > 0:
            known *= d
        elif d == -1 and free < 0:
            free = k
        else:
            return None
    size = 1
    for e in shape:
        size *= e
    if free < 0:
        return tuple(dims) if known == size else None
    if size == 0 or size % known:
        return None
    out = list(dims)
    out[free] = size // known
    return tuple(out)


def unsqueeze_positions(rank: int, axes):
    """Where Unsqueeze puts its 1s for an input of ``rank``: ``axes`` (distinct, in range of the
    output's rank, negative ones counted from its end) as sorted positions of the output; None
    for anything else.  A function of the rank alone, not of the extents."""
    if not axes:
        return None
    rank += len(axes)
    at = sorted(a + rank if a < 0 else a for a in axes)
    if at[0] < 0 or at[-1] >= rank or len(set(at)) != len(at):
        return None
    return tuple(at)


def unsqueeze_rule(shape: tuple, axes):
    """Unsqueeze's extents: a 1 inserted at each of ``axes`` (:func:`unsqueeze_positions`); None
    for anything else."""
    at = unsqueeze_positions(len(shape), axes)
    if at is None:
        return None
    out = list(shape)
    for a in at:
        out.insert(a, 1)
    return tuple(out)


def _unsqueeze_by_rank(axes: tuple, plan):
    """Unsqueeze at constant ``axes``: the positions of the 1s decided once per input rank
    (:func:`unsqueeze_positions`), kept as the index that inserts them (``None`` entries: a view,
    as Reshape gives), so a new extent (a decoder's past) costs no decision; a rank they do not
    fit runs ``plan`` (the portable geometry, which refuses it by name)."""
    by_rank: dict = {}

    def run(x, axes_=None):
        index = by_rank.get(x.ndim)
        if index is None:
            r = x.ndim
            at = unsqueeze_positions(r, axes)
            if at is None:
                index = False
            else:
                index = [slice(None)] * r
                for a in at:
                    index.insert(a, None)
                index = tuple(index)
            remember(by_rank, r, index)
        if index is False:
            return x.reshape(plan(x))
        return x[index]

    return run


def squeeze_rule(shape: tuple, axes):
    """Squeeze's extents without ``axes`` (distinct, in range, each of extent 1); None for
    anything else (no axes included: the portable rule)."""
    if not axes:
        return None
    rank = len(shape)
    at = {a + rank if a < 0 else a for a in axes}
    if len(at) != len(axes) or any(not 0 <= a < rank or shape[a] != 1 for a in at):
        return None
    return tuple(d for i, d in enumerate(shape) if i not in at)


def expand_rule(shape: tuple, dims: tuple):
    """Expand's extents: ``shape`` and ``dims`` (non-negative) broadcast both ways; None where
    they do not (the portable rule says why) or an extent is negative."""
    n = len(dims) - len(shape)
    a = (1,) * n + shape if n > 0 else shape
    b = (1,) * -n + tuple(dims) if n < 0 else dims
    out = []
    for p, q in zip(a, b):
        if q < 0:
            return None
        if p == q or q == 1:
            out.append(p)
        elif p == 1:
            out.append(q)
        else:
            return None
    return tuple(out)


def _ruled(rule, portable):
    """``decide(x, ints)``: ``rule(x.shape, ints)`` where it answers, else ``portable(x, ints)``."""
    def decide(x, ints):
        out = rule(x.shape, ints) if ints is not None else None
        return portable(x, ints) if out is None else out
    return decide


class RuledPlans(IntPlans):
    """:class:`IntPlans` of a kernel with a direct rule ``rule(shape, ints)`` for its one integer
    input (``portable(x, ints)``: the geometry of the rest, refusals included).  Once the node
    has met :data:`VARYING_AFTER` keys it had not seen (a decoder's past: a new length, and a new
    computed target, every token), a key is first put to the rule, and what it answers is the
    plan, neither looked up nor remembered; what it does not answer is looked up and decided as
    before.  The plans are the same (the rule answers only where the portable geometry gives
    its answer: test_shape_rules); a node whose keys repeat keeps remembering them."""

    __slots__ = ("rule", "misses")

    def __init__(self, rule, portable):
        super().__init__(_ruled(rule, portable))
        self.rule, self.misses = rule, 0

    def plan(self, x, *values):
        v = values[0] if values else None
        if self.misses >= VARYING_AFTER and v is not None:
            out = self.rule(x.shape, host_ints(v))
            if out is not None:
                return out
        key = (x.shape, *[None if v is None else host_ints(v) for v in values])
        p = self.plans.get(key)
        if p is None:
            self.misses += 1
            p = remember(self.plans, key, self.decide(x, *key[1:]))
        return p


@KERNELS.register("Reshape", 5, 13, 14, 19, *_LATEST)
def reshape(ctx):
    allowzero = reshape_allowzero(ctx)
    plans = RuledPlans(reshape_rule, lambda x, shape: reshape_target(ctx, x, list(shape), allowzero))

    def fn(x, shape):
        return x.reshape(plans.plan(x, shape))

    def bind(shape):
        plan = plans.fixed(shape)
        return None if plan is None else lambda x, shape: x.reshape(plan(x))

    return binds_constants(fn, bind, 1)


@KERNELS.register("Flatten", 1, 9, 11, 13, *_LATEST)
def flatten(ctx):
    axis = int(ctx.attr("axis"))
    plans: dict = {}

    def fn(x):
        target = plans.get(x.shape)
        if target is None:
            target = remember(plans, x.shape, tuple(flatten_extents(ctx, list(x.shape), axis)))
        return x.reshape(target)

    return fn


def _axes_kernel(ctx, target, rule, by_rank=None):
    """Squeeze / Unsqueeze over ``target`` (their extents; ``rule``: the direct rule of a new
    key): ``axes`` an attribute up to 11, an (optional) input from 13; ``by_rank(axes, plan)``:
    the kernel of constant ``axes`` whose result depends on the input's rank alone (Unsqueeze)."""
    plans: dict = {}
    if ctx.since_version <= 11:
        axes = axes_attr(ctx)
        decide = _ruled(rule, lambda x, axes: target(ctx, x, axes))

        def fn(x):
            out = plans.get(x.shape)
            if out is None:
                out = remember(plans, x.shape, decide(x, axes))
            return x.reshape(out)

        return fn

    plans = RuledPlans(rule, lambda x, axes: target(ctx, x, None if axes is None else list(axes)))

    def fn(x, axes=None):
        return x.reshape(plans.plan(x, axes))

    def bind(axes):
        plan = plans.fixed(axes)
        if plan is None:
            return None
        if by_rank is not None and axes is not None and axes.dtype.kind in "iu":
            return by_rank(host_ints(axes), plan)
        return lambda x, axes=None: x.reshape(plan(x))

    return binds_constants(fn, bind, 1)


def _axes_factory(name: str, target, rule, by_rank=None):
    def factory(ctx):
        return _axes_kernel(ctx, target, rule, by_rank)

    factory.__name__ = name
    return factory


KERNELS.register("Squeeze", 1, 11, 13, *_LATEST)(_axes_factory("squeeze", squeeze_target, squeeze_rule))
KERNELS.register("Unsqueeze", 1, 11, 13, *_LATEST)(_axes_factory("unsqueeze", unsqueeze_target, unsqueeze_rule,
                                                                 _unsqueeze_by_rank))


@KERNELS.register("Transpose", 1, 13, *_LATEST)
def transpose(ctx):
    perm = transpose_perm(ctx)
    perms: dict = {}   # rank -> the permutation (checked once per rank)

    def fn(x):
        p = perms.get(x.ndim)
        if p is None:
            p = remember(perms, x.ndim, perm(x.ndim))
        return x.transpose(p)

    return fn


@KERNELS.register("Concat", 1, 4, 11, 13)
def concat(ctx):
    axis = concat_axis(ctx)
    plans: dict = {}

    misses = [0]   # new keys met: from VARYING_AFTER on the check runs per call, nothing remembered

    def fn(*xs):
        if misses[0] >= VARYING_AFTER:
            return np.concatenate(xs, axis=concat_check(ctx, xs, axis))
        key = tuple([v.shape for v in xs])
        a = plans.get(key)
        if a is None:
            misses[0] += 1
            a = remember(plans, key, concat_check(ctx, xs, axis))
        return np.concatenate(xs, axis=a)

    return fn


def _split_kernel(ctx, axis: int, lengths):
    """Split along ``axis``; ``lengths(split)`` gives ``(lengths or None, num_outputs)`` for
    the optional ``split`` input's values (a tuple, or None when absent)."""
    def decide(x, split):
        sizes, num_outputs = lengths(split)
        return split_index(ctx, x, axis, sizes, num_outputs)

    plans = IntPlans(decide)

    def fn(x, split=None):
        return tuple([x[i] for i in plans.plan(x, split)])

    def bind(split):
        plan = plans.fixed(split)
        return None if plan is None else lambda x, split=None: tuple([x[i] for i in plan(x)])

    return binds_constants(fn, bind, 1)


@KERNELS.register("Split", 1, 2, 11)
def split_attr(ctx):
    axis, attr_split = split_attr_args(ctx)
    return _split_kernel(ctx, axis, lambda given: (attr_split if given is None else list(given), None))


@KERNELS.register("Split", 13, 18)
def split(ctx):
    axis, num_outputs = split_args(ctx)
    return _split_kernel(ctx, axis, lambda given: (split_lengths(ctx, None if given is None else list(given), num_outputs),
                                             num_outputs))


def _expanded(x, out: tuple):
    if out == x.shape:
        return x
    y = np.empty(out, dtype=x.dtype)
    y[...] = x
    return y


@KERNELS.register("Expand", 8, 13)
def expand(ctx):
    plans = RuledPlans(expand_rule, lambda x, shape: expand_target(ctx, x, list(shape)))

    def fn(x, shape):
        return _expanded(x, plans.plan(x, shape))

    def nbytes(x, shape):
        """The output's bytes, from the same plan (0 where X comes back itself): the size guard
        needs no inference when the shape input's values change every run (a decoder's past)."""
        out = plans.plan(x, shape)
        if out == x.shape:
            return 0
        n = x.dtype.itemsize
        for d in out:
            n *= d
        return n

    def bind(shape):
        plan = plans.fixed(shape)
        return None if plan is None else lambda x, shape: _expanded(x, plan(x))

    return binds_constants(declares_output_bytes(fn, nbytes), bind, 1)


@KERNELS.register("Shape", 1, 13, 15, 19, *_LATEST)
def shape(ctx):
    start, end = shape_bounds(ctx)   # Python slicing clamps them as Shape-15 does
    return lambda x: np.array(x.shape[start:end], dtype=np.int64)
