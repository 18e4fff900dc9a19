"""Reusable pieces for writing inference functions (Clause 9.2).

Extents are handled as plain values: ``int`` (static), ``str`` (a dimension variable) or
``None`` (unknown); a shape is a list of extents, or ``None`` for unknown rank.  Nothing here
computes over dimension variables or equates two distinct ones (9.3).

Ready-made inference functions (each ``fn(ctx)``): :func:`same_as_input`,
:func:`elementwise_rule`, :func:`cast_rule`, :func:`reduction_rule`, :func:`from_constraints`.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from .. import ir
from ..dtypes import ELEMENT_TYPES, DataType, by_name
from ..errors import OnnxkitTypeError
from ..shapes import BroadcastError, broadcast_multidirectional, broadcast_unidirectional
from .context import MAX_CONSTANT_ELEMENTS, InferenceContext, InferenceError, as_symbolic, is_symbolic

INT64 = int(DataType.INT64)
BOOL = int(DataType.BOOL)
FLOAT = int(DataType.FLOAT)


# -- reading types --------------------------------------------------------------------------------

def elem_of(t) -> int:
    """The element type tag of a tensor type (0 when unknown or not a tensor)."""
    if isinstance(t, (ir.TensorType, ir.SparseTensorType)):
        return int(t.elem_type or 0)
    return 0


def dims_of(t) -> Optional[list]:
    """The extents of a tensor type (int / str / None each), or None for unknown rank."""
    if isinstance(t, (ir.TensorType, ir.SparseTensorType)) and t.shape is not None:
        return list(t.shape.values)
    return None


def rank_of(t) -> Optional[int]:
    d = dims_of(t)
    return None if d is None else len(d)


def tensor(elem: int, dims: Optional[Sequence] = None) -> ir.TensorType:
    """A tensor type: ``dims`` None = unknown rank; each extent int / str / None."""
    return ir.TensorType(int(elem or 0), None if dims is None else list(dims))


def is_static(dims) -> bool:
    return dims is not None and all(isinstance(d, int) for d in dims)


def unify(*extents):
    """One extent for positions the operator requires to be equal: a static one if any, else the
    first variable (the output's extent *is* that input's), else unknown."""
    for e in extents:
        if isinstance(e, int):
            return e
    for e in extents:
        if isinstance(e, str):
            return e
    return None


def check_equal(ctx: InferenceContext, a, b, what: str) -> None:
    """Fail when two extents the operator requires to be equal are different static extents."""
    if isinstance(a, int) and isinstance(b, int) and a != b:
        ctx.fail(f"{what}: {a} != {b}")


def normalize_axis(ctx: InferenceContext, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        ctx.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def product(dims):
    """The product of static extents, None if any is not static."""
    n = 1
    for d in dims:
        if not isinstance(d, int):
            return None
        n *= d
    return n


# -- type strings (schema formal types) -----------------------------------------------------------

def parse_type(s: str) -> Optional[ir.Type]:
    """``'tensor(float)'`` / ``'seq(tensor(int64))'`` / ``'map(int64, tensor(float))'`` -> a Type."""
    s = s.strip()
    if not s.endswith(")") or "(" not in s:
        return None
    head, inner = s[: s.index("(")], s[s.index("(") + 1: -1]
    try:
        if head in ("tensor", "sparse_tensor"):
            tag = int(by_name(inner).tag)
            return ir.TensorType(tag) if head == "tensor" else ir.SparseTensorType(tag)
        if head in ("seq", "sequence"):
            e = parse_type(inner)
            return None if e is None else ir.SequenceType(e)
        if head == "optional":
            e = parse_type(inner)
            return None if e is None else ir.OptionalType(e)
        if head == "map":
            k, v = inner.split(",", 1)
            vt = parse_type(v)
            return None if vt is None else ir.MapType(int(by_name(k.strip()).tag), vt)
    except (OnnxkitTypeError, ValueError):  # an element type name Table 5 lacks, a map without its ','
        return None
    return None


def constraint_type(ctx: InferenceContext, k: int) -> Optional[ir.Type]:
    """The type of output ``k`` as far as the schema's type constraints determine it.

    The output's type parameter bound by a node input of the same parameter (its element type
    and kind, not its shape), else the one type the constraint allows, else its fixed type string.
    """
    schema = ctx.schema
    if schema is None:
        return None
    param = schema.output_at(k)
    if param is None:
        return None
    tc = schema.type_constraint(param.type_str)
    if tc is None:
        return parse_type(param.type_str)
    for i in range(ctx.num_inputs):
        formal = schema.input_at(i)
        if formal is not None and formal.type_str == param.type_str:
            t = ctx.input_type(i)
            if t is not None:
                return _strip_shape(t)
    if len(tc.allowed_types) == 1:
        return parse_type(tc.allowed_types[0])
    return None


def _strip_shape(t):
    if isinstance(t, ir.TensorType):
        return ir.TensorType(t.elem_type)
    if isinstance(t, ir.SparseTensorType):
        return ir.SparseTensorType(t.elem_type)
    return t


def constraint_elem(ctx: InferenceContext, k: int = 0) -> int:
    """The element type tag of output ``k`` from the type constraints (0 when undetermined)."""
    return elem_of(constraint_type(ctx, k))


def from_constraints(ctx: InferenceContext):
    """Inference function: every output's type from the constraints, shapes unknown."""
    return [constraint_type(ctx, k) for k in range(ctx.num_outputs)]


# -- ready-made rules ------------------------------------------------------------------------------

def same_as_input(i: int = 0, outputs: Sequence[int] = (0,)) -> Callable:
    """Inference function: the listed outputs have the type (and shape) of input ``i``."""

    def rule(ctx: InferenceContext):
        t = ctx.input_type(i)
        for k in outputs:
            ctx.set_output(k, t)

    return rule


def broadcast(ctx: InferenceContext, shapes: Sequence) -> Optional[list]:
    """Multidirectional broadcasting (6.6.2, 6.6.4) of shapes (None = unknown rank -> None)."""
    if any(s is None for s in shapes):
        return None
    try:
        return list(broadcast_multidirectional(shapes).shape)
    except BroadcastError as exc:
        ctx.fail(str(exc))


def broadcast_to(ctx: InferenceContext, target, source) -> Optional[list]:
    """Unidirectional broadcasting (6.6.3): the result is ``target``'s shape."""
    if target is None:
        return None
    if source is not None:
        try:
            broadcast_unidirectional(target, source)
        except BroadcastError as exc:
            ctx.fail(str(exc))
    return list(target)


def elementwise(ctx: InferenceContext, elem: Optional[int] = None, inputs: Optional[Sequence[int]] = None):
    """The output type of an elementwise operator over ``inputs`` (default: all supplied)."""
    idx = [i for i in (inputs if inputs is not None else range(ctx.num_inputs)) if ctx.has_input(i)]
    types = [ctx.input_type(i) for i in idx]
    if elem is None:
        elem = constraint_elem(ctx, 0) or next((elem_of(t) for t in types if elem_of(t)), 0)
    if any(t is None for t in types):
        shape = None
    else:
        shape = broadcast(ctx, [dims_of(t) for t in types])
    return tensor(elem, shape)


_FOLD = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Max": np.maximum, "Min": np.minimum,
    "Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor,
}


def _int_div(a, b):
    if np.any(b == 0):
        return None
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q).astype(np.result_type(a, b))


def _int_mod(a, b, fmod):
    if np.any(b == 0):
        return None
    return np.fmod(a, b) if fmod else np.mod(a, b)


def fold_binary(op: str, a: np.ndarray, b: np.ndarray, ctx: Optional[InferenceContext] = None):
    """Fold an elementwise operator over integer / bool constants (None where not foldable)."""
    if a is None or b is None:
        return None
    if a.dtype.kind not in "iub" or b.dtype.kind not in "iub":
        return None
    if a.size > MAX_CONSTANT_ELEMENTS or b.size > MAX_CONSTANT_ELEMENTS:
        return None
    with np.errstate(all="ignore"):
        if op in _FOLD:
            return np.asarray(_FOLD[op](a, b))
        if op == "Div":
            return _int_div(a, b)
        if op == "Mod":
            return _int_mod(a, b, bool(ctx.attr("fmod", 0)) if ctx is not None else False)
    return None


def fold_symbolic_binary(op: str, a, b):
    """Elementwise Add/Sub/Mul/Div/Max/Min over symbolic extents: only where both are known ints."""
    if a is None or b is None:
        return None
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return None
    if int(np.prod(shape)) > MAX_CONSTANT_ELEMENTS:
        return None
    a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    out = np.empty(shape, dtype=object)
    fa, fb, fo = a.reshape(-1), b.reshape(-1), out.reshape(-1)
    for k in range(fo.size):
        x, y = fa[k], fb[k]
        r = None
        if isinstance(x, int) and isinstance(y, int):
            r = fold_binary(op, np.array([x]), np.array([y]))
            r = None if r is None else int(r[0])
        elif op == "Mul" and ((x == 1 and y is not None) or (y == 1 and x is not None)):
            r = y if x == 1 else x  # N * 1 is N: no computation over the variable
        elif op in ("Add", "Sub") and y == 0 and x is not None:
            r = x
        elif op == "Add" and x == 0 and y is not None:
            r = y
        elif op == "Div" and y == 1 and x is not None:
            r = x
        fo[k] = r
    return out


def elementwise_rule(elem: Optional[int] = None, fold: Optional[str] = None) -> Callable:
    """Inference function of a multidirectionally broadcasting elementwise operator.

    ``elem``: a fixed output element type (BOOL for comparisons), else from the constraints.
    ``fold``: the operator name to fold constant / symbolic integer inputs with.
    """

    def rule(ctx: InferenceContext):
        t = elementwise(ctx, elem)
        value = None
        if fold is not None and ctx.num_inputs == 2:
            a, b = ctx.constant(0), ctx.constant(1)
            if a is not None and b is not None:
                value = fold_binary(fold, a, b, ctx)
            elif fold in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
                sa, sb = ctx.symbolic(0), ctx.symbolic(1)
                if sa is not None and sb is not None:
                    value = fold_symbolic_binary(fold, sa, sb)
        ctx.set_output(0, t, value)

    return rule


def cast_rule(attr: str = "to") -> Callable:
    """Inference function: output element type from an attribute (Cast's ``to``), shape of input 0."""

    def rule(ctx: InferenceContext):
        raw = ctx.attr(attr, 0)
        if isinstance(raw, str):  # Cast-1 gave the type as a string ('FLOAT')
            try:
                to = int(by_name(raw).tag)
            except OnnxkitTypeError:  # not a name of Table 5: the output type is unknown
                to = 0
        else:
            to = int(raw or 0)
        t = ctx.input_type(0)
        value = None
        c = ctx.constant(0)
        row = ELEMENT_TYPES.get(to)
        if c is not None and row is not None and row.dtype.kind in "iub" and c.dtype.kind in "iubf":
            try:
                with np.errstate(all="ignore"):
                    value = c.astype(row.dtype) if c.dtype.kind != "f" or np.all(np.isfinite(c)) else None
            except (ValueError, TypeError, OverflowError):  # numpy's refusal to convert: the value is not folded
                value = None
        elif row is not None and row.dtype.kind in "iu":
            s = ctx.symbolic(0)
            value = s if s is not None and elem_of(t) and ELEMENT_TYPES[elem_of(t)].dtype.kind in "iu" else None
        ctx.set_output(0, tensor(to, dims_of(t)), value)

    return rule


def axes_of(ctx: InferenceContext, input_index: Optional[int] = None, attr: str = "axes"):
    """Axes from an attribute or a constant input.  Returns (axes list | None, known: bool)."""
    if input_index is not None and ctx.has_input(input_index):
        c = ctx.constant(input_index)
        if c is None:
            return None, False
        return [int(x) for x in np.asarray(c).reshape(-1)], True
    if input_index is not None:
        a = ctx.attr(attr) if ctx.has_attr(attr) else None
        return (list(a) if a is not None else None), True
    a = ctx.attr(attr)
    return (list(a) if a is not None else None), True


def reduce_shape(ctx: InferenceContext, dims, axes, keepdims: bool, noop_with_empty_axes: bool = False):
    if dims is None:
        return None
    rank = len(dims)
    if not axes:
        if noop_with_empty_axes:
            return list(dims)
        axes = list(range(rank))
    axes = {normalize_axis(ctx, a, rank) for a in axes}
    out = []
    for k, d in enumerate(dims):
        if k in axes:
            if keepdims:
                out.append(1)
        else:
            out.append(d)
    return out


def reduction_rule(axes_input: Optional[int] = None, elem: Optional[int] = None) -> Callable:
    """Inference function of a Reduce* operator: ``axes`` as attribute or as input ``axes_input``."""

    def rule(ctx: InferenceContext):
        t = ctx.input_type(0)
        e = elem if elem is not None else (constraint_elem(ctx, 0) or elem_of(t))
        dims = dims_of(t)
        keepdims = bool(ctx.attr("keepdims", 1))
        noop = bool(ctx.attr("noop_with_empty_axes", 0))
        axes, known = axes_of(ctx, axes_input)
        if not known:
            if dims is not None and keepdims:
                ctx.set_output(0, tensor(e, [None] * len(dims)))
            else:
                ctx.set_output(0, tensor(e, None))
            return
        ctx.set_output(0, tensor(e, reduce_shape(ctx, dims, axes, keepdims, noop)))

    return rule


def shape_input(ctx: InferenceContext, i: int):
    """Input ``i`` (a 1-D integer tensor giving a shape) as a list of extents, or None."""
    s = ctx.symbolic(i)
    if s is None or s.ndim != 1:
        return None
    return [x if isinstance(x, (int, str)) else None for x in s.tolist()]


def int_list(ctx: InferenceContext, i: int):
    """Input ``i`` as a list of Python ints when it is a known constant, else None."""
    c = ctx.constant(i)
    if c is None or c.dtype.kind not in "iub":
        return None
    return [int(x) for x in c.reshape(-1)]


def scalar(ctx: InferenceContext, i: int):
    c = ctx.constant(i)
    if c is None or c.size != 1:
        return None
    return c.reshape(-1)[0].item()


__all__ = [
    "INT64", "BOOL", "FLOAT", "InferenceContext", "InferenceError", "MAX_CONSTANT_ELEMENTS", "as_symbolic", "is_symbolic",
    "elem_of", "dims_of", "rank_of", "tensor", "is_static", "unify", "check_equal", "normalize_axis", "product",
    "parse_type", "constraint_type", "constraint_elem", "from_constraints", "same_as_input", "broadcast",
    "broadcast_to", "elementwise", "fold_binary", "fold_symbolic_binary", "elementwise_rule", "cast_rule", "axes_of",
    "reduce_shape", "reduction_rule", "shape_input", "int_list", "scalar",
]


def join_types(a, b):
    """A type that holds values of type ``a`` and of type ``b`` (If branches, sequence elements):
    equal parts kept, differing extents unknown, differing ranks an unknown rank."""
    if a is None or b is None:
        return None
    if type(a) is not type(b):
        return None
    if isinstance(a, (ir.TensorType, ir.SparseTensorType)):
        if a.elem_type != b.elem_type:
            return None
        da, db = dims_of(a), dims_of(b)
        if da is None or db is None or len(da) != len(db):
            return type(a)(a.elem_type, None)
        return type(a)(a.elem_type, [x if x == y and x is not None else None for x, y in zip(da, db)])
    if isinstance(a, (ir.SequenceType, ir.OptionalType)):
        e = join_types(a.elem_type, b.elem_type)
        return None if e is None else type(a)(e)
    if isinstance(a, ir.MapType):
        if a.key_type != b.key_type:
            return None
        v = join_types(a.value_type, b.value_type)
        return None if v is None else ir.MapType(a.key_type, v)
    return a if a == b else None


__all__.append("join_types")
