"""Helpers the portable kernel families share: axes, host scalars, the compute dtype.

Everything here works with any array namespace (``ctx.xp``); none of it depends on a backend.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import OnnxkitTypeError, arrays, ir, type_string
from onnxkit.plugin.dtypes import from_numpy_dtype


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


def device_of(x):
    """``array_api_compat.device(x)``: ``"cpu"`` for a numpy array or scalar (what
    array-api-compat answers for them) without importing array-api-compat; its answer for any
    other array (torch, cupy...)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return "cpu"
    import array_api_compat

    return array_api_compat.device(x)


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


def as_dtype(xp, x, dtype):
    """``x`` in ``dtype``: ``x`` itself when it has that dtype already (no copy, no call into
    the namespace: a kernel's hot path converts many small arrays)."""
    return x if x.dtype == dtype else xp.astype(x, dtype)


def check_dtype(ctx, x, allowed, what: str = "input") -> None:
    """Fail naming the node unless ``x``'s element type is one of ``allowed`` (plain names:
    ``"float32"``, ``"int8"``...)."""
    name = arrays.dtype_name(x.dtype)
    if name not in allowed:
        ctx.fail(f"{what} has element type {name}, which this definition does not take "
                 f"(allowed: {', '.join(sorted(allowed))})")


#: plain dtype names whose ONNX type string differs from the name
_ONNX_NAMES = {"float32": "float", "float64": "double"}
_PLAIN_NAMES = {v: k for k, v in _ONNX_NAMES.items()}


def schema_types(ctx, param: str) -> frozenset:
    """The plain element type names (``float32``, ``int8``...) type parameter ``param`` of the
    node's definition allows (what :func:`check_dtype` takes)."""
    for tc in getattr(ctx.schema, "type_constraints", ()):
        if tc.type_param == param:
            names = (t[len("tensor("):-1] for t in tc.allowed_types if t.startswith("tensor("))
            return frozenset(_PLAIN_NAMES.get(n, n.replace("float8", "float8_", 1) if n.startswith("float8") else n)
                             for n in names)
    return frozenset()


def _type_string(dtype) -> str:
    """The type string (``tensor(float)``) of a tensor of ``dtype`` (numpy's or the namespace's);
    a dtype of no element type gets its own name, which no type constraint admits."""
    name = arrays.dtype_name(dtype)
    try:
        tag = from_numpy_dtype(np.dtype(name)).tag
    except (TypeError, OnnxkitTypeError):
        return f"tensor({name})"
    return type_string(ir.TensorType(int(tag)))


def input_type_checker(ctx):
    """A function ``check(*inputs)`` that fails naming the node unless each supplied input's
    element type is one its definition's type constraint admits and inputs bound to the same
    type parameter agree (Part 2: the tables, not a list of ours).  Checked dtype combinations
    are remembered, so a run costs a tuple lookup."""
    schema = ctx.schema
    params = [schema.input_at(i) for i in range(ctx.num_inputs)]
    seen = set()

    def check(*values):
        key = tuple(None if v is None else v.dtype for v in values)
        if key in seen:
            return
        bound = {}
        for i, (v, param) in enumerate(zip(values, params)):
            if v is None or param is None:
                continue
            ts = _type_string(v.dtype)
            allowed = schema.allowed_types(param)
            if allowed and ts not in allowed:
                ctx.fail(f"input {i} ({param.name}) has element type {arrays.dtype_name(v.dtype)}, which "
                         f"{ctx.op_type}-{ctx.since_version} does not take "
                         f"(allowed: {', '.join(a[7:-1] for a in allowed)})")
            first = bound.setdefault(param.type_str, (i, ts))
            if first[1] != ts:
                ctx.fail(f"inputs {first[0]} and {i} must have the same element type ({param.type_str}), "
                         f"got {first[1][7:-1]} and {ts[7:-1]}")
        seen.add(key)

    return check
