"""Helpers the portable kernel families share: axes, host scalars, the compute dtype.

Everything here works with any array namespace (``ctx.xp``); none of it depends on a backend.
"""

from __future__ import annotations

from onnxkit.plugin import arrays


def norm_axis(ctx, axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in [-rank, rank-1] made non-negative; ctx.fail otherwise."""
    axis = int(axis)
    if not -rank <= axis < rank:
        ctx.fail(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return axis + rank if axis < 0 else axis


def norm_axes(ctx, axes, rank: int, what: str = "axes") -> list:
    """Each axis normalised; repeated axes rejected."""
    out = [norm_axis(ctx, a, rank, what) for a in axes]
    if len(set(out)) != len(out):
        ctx.fail(f"{what} {list(axes)} repeats an axis")
    return out


def scalar_int(ctx, value, what: str) -> int:
    """The one element of an integer tensor as a Python int; ctx.fail if it has not one."""
    a = ctx.to_host(value)
    if a.size != 1:
        ctx.fail(f"{what} must hold exactly one value, got shape {list(a.shape)}")
    return int(a.reshape(-1)[0])


def shape_of(x) -> list:
    """A value's shape as a list of Python ints (numpy and torch alike)."""
    return [int(d) for d in x.shape]


def size_of(x) -> int:
    """A value's number of elements (numpy and torch alike)."""
    n = 1
    for d in x.shape:
        n *= int(d)
    return n


def compute_dtype(xp, dtype):
    """The dtype arithmetic is done in: float32/float64 as they are, anything else float32."""
    return dtype if arrays.dtype_name(dtype) in ("float32", "float64") else xp.float32


def check_dtype(ctx, x, allowed: tuple, what: str = "input") -> None:
    """Fail naming the node unless ``x``'s element type is one of ``allowed`` (plain names:
    ``"float32"``, ``"int8"``...)."""
    name = arrays.dtype_name(x.dtype)
    if name not in allowed:
        ctx.fail(f"{what} has element type {name}, which this operator does not take (allowed: {', '.join(allowed)})")
