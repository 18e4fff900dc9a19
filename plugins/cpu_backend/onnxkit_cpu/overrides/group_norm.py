"""InstanceNormalization and GroupNormalization by one compiled loop per group.

Where compiled loops are on at planning (:mod:`onnxkit_cpu.compiled`), a float32 or float64 X of
rank 3 or more with at least one element per group, whose scale and B have X's type and the
definition's size, is normalized by :func:`onnxkit_cpu.compiled.group_norm.group_norm_loop`: one
call over the rows ``(N * G, C / G * spatial)`` (InstanceNormalization: a group is a channel),
each row's mean, variance and ``d / sqrt(var + epsilon) * scale + B`` in two passes over it,
where the portable kernels (onnxkit_default_domain/kernels/norm.py) make some ten numpy passes
and temporaries of X's size.  The results are bit-identical to the portable kernels' (the loop's
docstring says why).  The rows are split across the run's intra-op threads (each row computed
alike, so the results do not depend on the thread count).

GroupNormalization-18 takes scale and bias per group (repeated over the group's channels for the
loop: the same values), 21 per channel; 21's statistics are in ``stash_type``: the loop runs
where that is X's own type (1 for float32 X, 1 or 11 for float64 X).  scale / B are cast and
checked once while the same arrays come back where the plan holds them (:class:`~._plans.Held`),
else each call.  Everything else is the portable kernel's, with its checks and errors: float16 /
bfloat16 X, float32 X with ``stash_type`` 11, a scale or B of another type or size, a NaN in
scale or B (a product of two NaNs takes either operand's payload depending on the order the
compiler gives them: only the numpy body gives its own bits), rank below 3, an empty group,
``num_groups`` not dividing C, or compiled loops off.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, parallel_for, splits_across_threads
from onnxkit_cpu.compiled.group_norm import group_norm_loop
from onnxkit_cpu.overrides._plans import Held, remember
from onnxkit_default_domain.api import group_norm as portable_group_norm
from onnxkit_default_domain.api import instance_norm as portable_instance_norm
from onnxkit_default_domain.api import quiet

KERNELS = KernelTable()
splits_across_threads(("", "InstanceNormalization"), ("", "GroupNormalization"))
#: elements of the loop worth a block of rows on a thread of its own
#: (:func:`onnxkit.runtime.threads.parallel_for`)
ROW_WORK = 16384

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _grouped(ctx, other, groups_of, per_group: bool, stash_ok):
    """The node function: the compiled loop where it applies (module docstring), else ``other``
    (the portable kernel).  ``groups_of(c)``: the groups of a C-channel X (None: the portable
    kernel judges); ``per_group``: scale and B hold one value per group; ``stash_ok(dtype)``:
    whether the statistics' type is X's own."""
    other = quiet(other)      # numpy's floating-point warnings off: an inf in X gives NaN results
    loop = group_norm_loop()
    if loop is None:
        return other
    eps = float(ctx.attr("epsilon"))
    eps_of = {_F32: np.float32(eps), _F64: np.float64(eps)}
    held = (Held(ctx, 1), Held(ctx, 2))
    shapes = {}          # (X shape, dtype) -> (rows, n, groups, cpg) or None: the portable kernel
    last = [None]        # [(scale, B, dtype, scale per channel, B per channel)] while held

    def geometry(key, x):
        shape, dt = key
        g = None
        if dt in eps_of and stash_ok(dt) and x.ndim >= 3 and x.size > 0:
            c = int(shape[1])
            groups = groups_of(c)
            if groups:
                g = (int(shape[0]) * groups, x.size // (int(shape[0]) * groups), groups, c // groups)
        return remember(shapes, key, g)

    def params(x, g, scale, b):
        """scale and B per channel, contiguous, in X's type, or None (the portable kernel)."""
        p = last[0]
        dt = x.dtype
        if p is not None and p[0] is scale and p[1] is b and p[2] is dt:
            return p
        want = g[2] if per_group else g[2] * g[3]
        if not all(type(v) is np.ndarray and v.dtype == dt and v.size == want for v in (scale, b)):
            return None
        s, bb = (np.ascontiguousarray(v.reshape(want)) for v in (scale, b))
        if np.isnan(s).any() or np.isnan(bb).any():
            return None
        if per_group and g[3] > 1:
            s, bb = np.repeat(s, g[3]), np.repeat(bb, g[3])
        p = (scale, b, dt, s, bb)
        if held[0](scale) and held[1](b):
            last[0] = p
        return p

    def run(x, scale, b):
        key = (x.shape, x.dtype)
        g = shapes[key] if key in shapes else geometry(key, x)
        if g is None:
            return other(x, scale, b)
        p = params(x, g, scale, b)
        if p is None:
            return other(x, scale, b)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        rows, n, _, cpg = g
        x2 = x.reshape(rows, n)
        y = np.empty((rows, n), x.dtype)
        s, bb, e = p[3], p[4], eps_of[x.dtype]

        def block(lo, hi):
            loop(x2[lo:hi], lo, cpg, s, bb, e, y[lo:hi])

        parallel_for(block, rows, grain=max(1, ROW_WORK // n), name="group_norm.rows")
        return y.reshape(x.shape)

    return run


@KERNELS.register("InstanceNormalization", 1, 6, 22)
def instance_norm(ctx):
    """InstanceNormalization: the compiled loop, a group per channel (module docstring)."""
    return _grouped(ctx, portable_instance_norm(ctx), lambda c: c, False, lambda dt: True)


@KERNELS.register("GroupNormalization", 18, 21)
def group_norm(ctx):
    """GroupNormalization-18 / 21: the compiled loop (module docstring)."""
    groups = int(ctx.attr("num_groups"))
    per_group = ctx.since_version < 21
    stash = None if per_group else int(ctx.attr("stash_type"))      # (18 has no stash_type)

    def stash_ok(dt):
        return per_group or stash == 1 or (stash == 11 and dt == _F64)

    return _grouped(ctx, portable_group_norm(ctx), lambda c: groups if groups > 0 and c % groups == 0 else None,
                    per_group, stash_ok)
