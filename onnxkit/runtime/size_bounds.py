"""Sizes of concrete values, and the host's implementation of each ``size_guard`` kind.

:mod:`onnxkit.runtime.budget` checks a node's output size before its kernel runs; what it reads
of the inputs lives here: the logical size of a value (:func:`numel`, :func:`nbytes`), the
cheap upper bounds on a node's output elements by kind (:data:`BOUNDS`: a bound within the
budget's small size passes the node uncharged, a larger one asks inference for the exact size),
and the estimators of sizes that depend on data inference never sees (:data:`ESTIMATORS`:
NonZero's count, sequences, strings, Unique).  Each takes ``(guard, args)`` or
``(guard, budget, args)``: ``guard`` the node's :class:`~onnxkit.runtime.budget.Guard` (its
``node``, ``op``, ``template``, ``n_out``), ``budget`` the run's
:class:`~onnxkit.runtime.budget.RunBudget`, whose ``charge`` refuses what the limits do not allow
(:func:`refuse`: :class:`~onnxkit.errors.LimitExceeded` naming the limit, node and size).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import LimitExceeded, OnnxkitError


def refuse(limit: str, value: int, maximum: int, node, op: str, what: str = "output"):
    """Raise the :class:`LimitExceeded` of one refused request (names limit, node, op_type, size)."""
    name = getattr(node, "name", "") or ""
    label = f"node {name!r}" if name else "an unnamed node"
    raise LimitExceeded(f"{limit} exceeded: {label} ({op}) requests {what} of {value:,} "
                        f"{'elements' if limit == 'max_sequence_length' else 'bytes'} > {maximum:,} "
                        "(see onnxkit.limits.Limits)", limit=limit, value=value, maximum=maximum,
                        path=f"node {name!r} ({op})")


# -- sizes of concrete values ------------------------------------------------------------------

def numel(v) -> int:
    """Elements of a backend array (numpy or torch); 0 for anything else."""
    if type(v) is np.ndarray:
        return v.size
    n = getattr(v, "numel", None)
    return int(n()) if callable(n) else 0


def nbytes(v) -> int:
    """Logical bytes of a value: ``numel x itemsize`` of a tensor (a broadcast view counts in
    full), the sum over a sequence or map's elements, 0 for None and opaque objects."""
    if type(v) is np.ndarray:
        return v.size * v.itemsize
    if isinstance(v, list):
        return sum(nbytes(x) for x in v)
    if isinstance(v, dict):
        return sum(_entry_bytes(k) + _entry_bytes(x) for k, x in v.items())
    es = getattr(v, "element_size", None)
    return numel(v) * int(es()) if callable(es) else 0


def _entry_bytes(x) -> int:
    """Logical bytes of a map's key or value: a tensor's, a string's length, 8 for a scalar."""
    if isinstance(x, (str, bytes)):
        return len(x)
    return nbytes(x) if hasattr(x, "shape") or isinstance(x, (list, dict)) else 8


# -- cheap upper bounds on output elements (a failed bound asks inference for the exact size) -----

#: what a bound, an estimator or a kernel's prediction raises on inputs it cannot read (bad
#: shapes, element types, attribute values; an input missing); an :class:`OnnxkitError` it
#: raises is a refusal and propagates.  Anything else is a bug of it and propagates too (the run
#: loop wraps it in an EvaluationError naming the node), except an AttributeError where some
#: input is not a tensor (:func:`odd`).
UNREADABLE = (TypeError, ValueError, IndexError, ArithmeticError)
#: what an inference function raises refusing its inputs: a typed error, or one of the above
#: (:data:`onnxkit.runtime.kernel.REFUSALS`, restated: this module imports no runtime module
#: that could import it back)
REFUSED = (OnnxkitError, MemoryError, *UNREADABLE)


def odd(args) -> bool:
    """Whether some input is neither a tensor nor absent (a sequence, a map, an opaque value
    where the operator takes a tensor): an AttributeError reading it is a refusal, not a bug.
    Called on the failure path only."""
    return any(a is not None and not hasattr(a, "shape") for a in args)


def _product_bound(g, args) -> int:
    bound = 1
    for a in args:
        bound *= (a.size if type(a) is np.ndarray else numel(a)) + 1
    return bound


def _broadcast_bound(g, args) -> int:
    first = args[0]
    shape = first.shape
    for a in args:
        if a.shape != shape:
            return _product_bound(g, args)
    return first.size if type(first) is np.ndarray else numel(first)  # no broadcasting: the inputs' shape


def _concat_bound(g, args) -> int:
    return sum(numel(a) for a in args)


def _contraction_bound(k_a: int, args) -> int:
    # out = batch x M x N <= (|a| / K) x (|b| / K), K the contracted extent (unknown when 0)
    a, b = args[0], args[1]
    if a.ndim == 0 or b.ndim == 0:
        return _product_bound(None, args)
    k = int(a.shape[k_a])
    return (numel(a) // k) * (numel(b) // k) if k else 1 << 62


def _matmul_bound(g, args) -> int:
    return _contraction_bound(-1, args)


def _gemm_bound(g, args) -> int:
    return _contraction_bound(0 if g.template["_attributes"].get("transA") else -1, args)


def _gather_bound(g, args) -> int:
    data, indices = args[0], args[1]
    if data.ndim == 0:
        return _product_bound(g, args)
    extent = int(data.shape[int(g.template["_attributes"].get("axis", 0) or 0) % data.ndim])
    return numel(indices) * (numel(data) // max(extent, 1))


BOUNDS = {"broadcast": _broadcast_bound, "concat": _concat_bound, "matmul": _matmul_bound, "gemm": _gemm_bound,
           "gather": _gather_bound, "product": _product_bound}


# -- estimators: sizes that depend on data inference does not see -----------------------------

def _nonzero(g, budget, args):
    x = args[0]
    if not hasattr(x, "ndim"):
        return 0  # not a tensor: the kernel says so, by name
    count = int(np.count_nonzero(x)) if type(x) is np.ndarray else int(x.count_nonzero())
    return budget.charge(count * max(x.ndim, 1) * 8, g.node, g.op)


def sequence_length(g, budget, n: int) -> None:
    maximum = budget.limits.max_sequence_length
    if n > maximum:
        refuse("max_sequence_length", n, maximum, g.node, g.op, "a sequence")


def _split_to_sequence(g, budget, args):
    x = args[0]
    split = args[1] if len(args) > 1 else None
    if not hasattr(x, "ndim") or not (split is None or hasattr(split, "ndim")):
        return 0  # not tensors: the kernel says so, by name
    axis = int(g.template["_attributes"].get("axis", 0) or 0)
    rank = x.ndim
    if not -rank <= axis < max(rank, 1):
        return 0
    dim = int(x.shape[axis]) if rank else 1
    if split is None:
        n = dim
    elif numel(split) == 1 and split.ndim == 0:
        step = int(split.reshape(()).item() if type(split) is np.ndarray else split.item())
        n = -(-dim // step) if step > 0 else 0
    else:
        n = numel(split)
    sequence_length(g, budget, n)
    return 0


def _sequence_insert(g, budget, args):
    sequence_length(g, budget, len(args[0]) + 1 if isinstance(args[0], list) else 1)
    return 0


def _sequence_construct(g, budget, args):
    sequence_length(g, budget, len(args))
    return 0


def _concat_from_sequence(g, budget, args):
    seq = args[0] if args else None
    if not isinstance(seq, list):
        return 0
    return budget.charge(sum(nbytes(x) for x in seq), g.node, g.op)


def _lengths(x) -> np.ndarray:
    flat = x.reshape(-1)
    return np.fromiter((len(s) if isinstance(s, (bytes, str)) else len(str(s)) for s in flat), np.int64, len(flat))


def _string_concat(g, budget, args):
    x, y = args[0], args[1]
    if not (hasattr(x, "shape") and hasattr(y, "shape")):
        return 0
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return 0  # the kernel names the mismatch
    lx, ly = _lengths(x), _lengths(y)
    longest = (int(lx.max()) if lx.size else 0) + (int(ly.max()) if ly.size else 0)
    if longest > budget.limits.max_string_bytes:
        refuse("max_string_bytes", longest, budget.limits.max_string_bytes, g.node, g.op, "a string")
    n = math.prod(shape)
    # broadcasting repeats each element of x n / x.size times: total text is exact
    text = (int(lx.sum()) * (n // max(lx.size, 1)) if lx.size else 0) + \
           (int(ly.sum()) * (n // max(ly.size, 1)) if ly.size else 0)
    return budget.charge(n * 8 + text, g.node, g.op)


def _string_split(g, budget, args):
    x = args[0]
    if not hasattr(x, "reshape"):
        return 0
    delim = g.template["_attributes"].get("delimiter") or None
    if isinstance(delim, str):
        delim = delim.encode("utf-8", "surrogateescape")
    width = 0
    for s in x.reshape(-1):
        raw = s if isinstance(s, bytes) else str(s).encode("utf-8", "surrogateescape")
        width = max(width, raw.count(delim) + 1 if delim else len(raw.split()))
    return budget.charge(numel(x) * (width * 8 + 8), g.node, g.op)


def _unique(g, budget, args):
    # Y is at most the input, indices / inverse_indices / counts at most one int64 per element
    x = args[0]
    extra = sum(1 for k in range(1, g.n_out) if g.node.output[k])
    return budget.charge(nbytes(x) + numel(x) * 8 * extra, g.node, g.op)


ESTIMATORS = {
    "unique": _unique,
    "nonzero": _nonzero, "sequence_split": _split_to_sequence, "sequence_insert": _sequence_insert,
    "sequence_construct": _sequence_construct, "sequence_concat": _concat_from_sequence,
    "string_concat": _string_concat, "string_split": _string_split,
}
