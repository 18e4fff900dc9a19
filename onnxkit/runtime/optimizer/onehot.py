"""The ``onehot`` plan pass: a one-hot encoding times a constant matrix, computed as the rows it selects.

JAX and TensorFlow exporters write an embedding lookup as ``MatMul(Cast(Equal(A, iota)), W)``:
integer ids ``A`` whose last axis is 1, compared with a constant ``iota`` holding 0 .. K-1 along
its last axis, give one-hot rows of K, cast to W's type and multiplied by a constant (K, N)
``W`` (magika's byte embedding, where the three steps are a large share of a run).  Each row
of the product is row ``a`` of W, ``a`` the row's id, or zeros where ``a`` is outside 0 .. K-1.

**When it applies** (the top-level plan, numpy constants).  Steps ``Equal`` (either input
order), ``Cast`` and ``MatMul`` of the default domain, none with a scope or subgraph, where the
Equal's other input is a plan constant of an integer type shaped ``(1, ..., 1, K)`` equal to
0 .. K-1, its output is read by the Cast alone, the Cast (``to``: W's type, float16, float or
double) is read by the MatMul alone as its first input, neither is a graph output, and the
MatMul's second input is a 2-D constant ``W`` of K rows whose every element is finite.

**The fused step** takes the MatMul's place (its node: errors and profiling name the MatMul).
Given ids of the constant's type whose last axis is 1 it checks the output's size with the
MatMul's own guard (on a zero-stride view of the one-hot's shape, charged until the run ends,
as :mod:`.epilogue` charges), then takes the rows (``np.take``, zeros for ids out of range).
Any other input runs the three original kernels in order, each after its own size guard.

**Exact.**  A one-hot row has one 1 and K-1 zeros; with W finite, ``1 * w`` is ``w`` and each
``0 * w`` a zero, and a sum of zeros and one value is that value in any order: the product is
the selected row.  Only the sign of a zero may differ (a -0 in W, or an unmatched row, where
BLAS may give +0 or -0).  A W with an inf or NaN is left alone (``0 * inf`` is NaN).  On at
``ORT_ENABLE_EXTENDED`` and above, off with ``session.disable_passes=onehot``.
"""

from __future__ import annotations

import numpy as np

from ..budget import current_budget
from ..plan import GraphPlan, Step
from ..usedef import step_index
from .epilogue import guarded, on_plan, plain_default, rebuilt, sole_producer

#: ``Cast``'s ``to`` element types the fused step computes in (float16, float, double)
_FLOAT_TAGS = {10: np.float16, 1: np.float32, 11: np.float64}


def _iota(value) -> bool:
    """True if ``value`` is an integer array shaped ``(1, ..., 1, K)`` holding 0 .. K-1."""
    if type(value) is not np.ndarray or value.dtype.kind not in "iu" or value.ndim == 0 or value.size == 0:
        return False
    if any(d != 1 for d in value.shape[:-1]):
        return False
    return bool(np.array_equal(value.reshape(-1), np.arange(value.shape[-1])))


def _cast_to(step: Step):
    to = step.node.attr("to")
    return None if to is None else _FLOAT_TAGS.get(int(to))


def rows_of(equal: Step, cast: Step, matmul: Step, iota: np.ndarray, w: np.ndarray, ids_first: bool):
    """The fused kernel ``fn(a, iota, w)`` (module docstring)."""
    k, n = w.shape
    zero = np.zeros((), w.dtype)
    eq, to, mm = guarded(equal.fn, equal.guard), guarded(cast.fn, cast.guard), matmul.fn
    mm_guard, ids_type, lead_iota = matmul.guard, iota.dtype, iota.shape[:-1]

    def onehot_rows(a, i, m):
        if type(a) is not np.ndarray or a.dtype != ids_type or a.ndim == 0 or a.shape[-1] != 1:
            c = to(eq(a, i) if ids_first else eq(i, a))
            if mm_guard is not None:
                mm_guard(current_budget(), (c, m))
            return mm(c, m)
        lead = np.broadcast_shapes(a.shape[:-1], lead_iota)
        if mm_guard is not None:
            mm_guard(current_budget(), (np.broadcast_to(zero, lead + (k,)), m))
        ids = a.reshape(-1)
        inside = (ids < k) if ids.dtype.kind == "u" else ((ids >= 0) & (ids < k))
        if inside.all():
            out = np.take(m, ids, axis=0)
        else:
            out = np.take(m, np.where(inside, ids, 0), axis=0)
            out[~inside] = 0
        return out.reshape(lead + (n,))

    return onehot_rows


def fuse(steps: list, constants: dict, keep) -> tuple:
    """``(steps, count)``: ``steps`` with each one-hot product fused (a new list), and how many."""
    index = step_index(steps, keep)
    at = {id(s): k for k, s in enumerate(steps)}
    out, removed, count = list(steps), set(), 0
    for j, m in enumerate(steps):
        if m.node.op_type != "MatMul" or not plain_default(m) or len(m.inputs) != 2 or len(m.outputs) != 1:
            continue
        w = constants.get(m.inputs[1])
        cast = sole_producer(index, m.inputs[0], "Cast")
        if type(w) is not np.ndarray or w.ndim != 2 or w.dtype.kind != "f" or cast is None \
                or _cast_to(cast) is not w.dtype.type or len(cast.inputs) != 1:
            continue
        equal = sole_producer(index, cast.inputs[0], "Equal")
        if equal is None or len(equal.inputs) != 2:
            continue
        ids_first = _iota(constants.get(equal.inputs[1]))
        if not ids_first and not _iota(constants.get(equal.inputs[0])):
            continue
        ids_name, iota_name = equal.inputs if ids_first else equal.inputs[::-1]
        iota = constants[iota_name]
        if iota.shape[-1] != w.shape[0] or not np.isfinite(w).all():
            continue
        fn = rows_of(equal, cast, m, iota, w, ids_first)
        out[j] = Step(fn, [ids_name, iota_name, m.inputs[1]], list(m.outputs), m.node, m.scope)
        removed.update((at[id(equal)], at[id(cast)]))
        count += 1
    return rebuilt(steps, out, removed, keep, count)


def run(plan: GraphPlan) -> int:
    """Fuse the one-hot products of ``plan`` (its steps and its folded-defaults variant); returns
    how many were fused."""
    return on_plan(plan, fuse)


__all__ = ["run", "fuse", "rows_of"]
