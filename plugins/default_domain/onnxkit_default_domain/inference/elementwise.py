"""Inference of the elementwise operators (arithmetic, comparison, logic, bitwise, unary math,
Where, Clip) and of Cast/CastLike.  :func:`legacy_b_shape`, the broadcasting of the binary
operators before opset 7, is shared with their kernels
(``onnxkit_default_domain/kernels/elementwise.py``)."""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import (BOOL, cast_rule, dims_of, elem_of, elementwise, elementwise_rule, fold_binary,
                                      same_as_input, tensor)

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)

# Before opset 7 the binary operators broadcast B to A only with broadcast=1 (unidirectionally,
# from ``axis``): the output has A's shape.  From 7 on they broadcast multidirectionally (6.6.2).


def legacy_b_shape(a_dims, b_dims, axis=None):
    """Where B goes under the broadcasting of definitions before 7 (``broadcast=1``): B's extents
    aligned with A's from position ``axis`` (suffix-matched when ``axis`` is None), each equal to
    A's there or 1.  Extents are ``int | str | None`` (None/str: unknown/symbolic, taken to fit).

    Returns ``(shape, start)``: ``shape`` is B's shape padded with trailing 1s to A's rank (so
    that B then broadcasts multidirectionally to A), ``()`` for a one-element B, or None where B
    does not fit A at position ``start``.  Used by inference and by the kernels alike."""
    a_nd, b_nd = len(a_dims), len(b_dims)
    if b_nd <= a_nd and all(d == 1 for d in b_dims):
        return (), None
    start = a_nd - b_nd if axis is None else (axis + a_nd if axis < 0 else axis)
    if start < 0 or start + b_nd > a_nd:
        return None, start
    for bd, ad in zip(b_dims, list(a_dims)[start:start + b_nd]):
        if isinstance(bd, int) and isinstance(ad, int) and bd not in (ad, 1):
            return None, start
    return tuple(b_dims) + (1,) * (a_nd - start - b_nd), start


def _legacy_binary(elem=None):
    def rule_(ctx):
        a = ctx.input_type(0)
        e = elem if elem is not None else (elem_of(a) or elem_of(ctx.input_type(1)))
        if not ctx.attr("broadcast", 0) and a is not None and ctx.input_type(1) is not None:
            return [elementwise(ctx, e)]
        a_dims, b_dims = dims_of(a), dims_of(ctx.input_type(1))
        if a_dims is not None and b_dims is not None:
            axis = ctx.attr("axis") if ctx.has_attr("axis") else None
            if legacy_b_shape(a_dims, b_dims, axis)[0] is None:
                ctx.fail(f"B of shape {list(b_dims)} cannot be broadcast to A of shape {list(a_dims)} "
                         f"(legacy broadcasting, axis {axis})")
        return [tensor(e, a_dims)]
    return rule_


for _op in ("Add", "Sub", "Mul", "Div"):
    FUNCTIONS.register(_op, 1, 6)(_legacy_binary())
    FUNCTIONS.register(_op, 7)(elementwise_rule(fold=_op))
FUNCTIONS.register("Pow", 1, 1)(_legacy_binary())
FUNCTIONS.register("Mod")(elementwise_rule(fold="Mod"))
FUNCTIONS.register(["BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"])(elementwise_rule())


@FUNCTIONS.register("Pow", 7)
def _pow(ctx):
    t = elementwise(ctx, elem_of(ctx.input_type(0)))
    return [t]


for _op in ("And", "Or", "Xor"):
    FUNCTIONS.register(_op, 1, 1)(_legacy_binary(BOOL))
    FUNCTIONS.register(_op, 7)(elementwise_rule(BOOL, fold=_op))
for _op in ("Equal", "Less", "Greater"):
    FUNCTIONS.register(_op, 1, 6)(_legacy_binary(BOOL))
    FUNCTIONS.register(_op, 7)(elementwise_rule(BOOL, fold=_op))


def _symbolic_equal(a, b):
    """Equal over extents: decided where both are ints, or where one is a variable (an extent, so
    never negative) and the other a negative int; otherwise undecided (None)."""
    if a is None or b is None:
        return None
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return None
    fa, fb = np.broadcast_to(a, shape).reshape(-1), np.broadcast_to(b, shape).reshape(-1)
    out = []
    for x, y in zip(fa, fb):
        if isinstance(x, int) and isinstance(y, int):
            out.append(x == y)
        elif isinstance(x, str) and isinstance(y, int) and y < 0 or isinstance(y, str) and isinstance(x, int) and x < 0:
            out.append(False)
        else:
            return None
    return np.array(out, dtype=bool).reshape(shape)


@FUNCTIONS.register("Equal", 7)
def _equal(ctx):
    elementwise_rule(BOOL, fold="Equal")(ctx)
    if ctx.output_values[0] is None:
        ctx.set_value(0, _symbolic_equal(ctx.symbolic(0), ctx.symbolic(1)))
FUNCTIONS.register("LessOrEqual")(elementwise_rule(BOOL, fold="LessOrEqual"))
FUNCTIONS.register("GreaterOrEqual")(elementwise_rule(BOOL, fold="GreaterOrEqual"))


@FUNCTIONS.register(["Max", "Min", "Sum", "Mean"])
def _variadic(ctx):
    t = elementwise(ctx)
    value = None
    if ctx.op_type in ("Max", "Min", "Sum") and ctx.num_inputs >= 1:
        cs = [ctx.constant(i) for i in range(ctx.num_inputs)]
        if all(c is not None for c in cs):
            op = {"Sum": "Add"}.get(ctx.op_type, ctx.op_type)
            value = cs[0]
            for c in cs[1:]:
                value = fold_binary(op, value, c)
                if value is None:
                    break
    ctx.set_output(0, t, value)


@FUNCTIONS.register("Where")
def _where(ctx):
    t = elementwise(ctx, elem_of(ctx.input_type(1)) or elem_of(ctx.input_type(2)))
    value = None
    c, x, y = ctx.constant(0), ctx.constant(1), ctx.constant(2)
    if c is not None and x is not None and y is not None and x.dtype.kind in "iub" and y.dtype.kind in "iub":
        value = np.where(c.astype(bool), x, y)
    elif c is not None:
        sx, sy = ctx.symbolic(1), ctx.symbolic(2)
        if sx is not None and sy is not None:
            try:
                value = np.where(c.astype(bool), sx, sy).astype(object)
            except ValueError:
                value = None
    ctx.set_output(0, t, value)


_UNARY_SAME = ["Abs", "Neg", "Ceil", "Floor", "Round", "Sqrt", "Exp", "Log", "Reciprocal", "Sign", "Sin", "Cos",
               "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf", "Not", "BitwiseNot"]
FUNCTIONS.register(_UNARY_SAME)(same_as_input(0))


@FUNCTIONS.register(["Neg", "Abs"], 6)
def _neg_abs(ctx):
    t = ctx.input_type(0)
    c = ctx.constant(0)
    value = None
    if c is not None and c.dtype.kind in "iu":
        value = -c if ctx.op_type == "Neg" else np.abs(c)
    ctx.set_output(0, t, value)


@FUNCTIONS.register(["IsNaN", "IsInf"])
def _is_class(ctx):
    return [tensor(BOOL, dims_of(ctx.input_type(0)))]


FUNCTIONS.register("Clip")(same_as_input(0))
FUNCTIONS.register("Cast")(cast_rule("to"))


@FUNCTIONS.register("CastLike")
def _cast_like(ctx):
    target = elem_of(ctx.input_type(1))
    t = ctx.input_type(0)
    from onnxkit.plugin.dtypes import ELEMENT_TYPES

    value = None
    c = ctx.constant(0)
    row = ELEMENT_TYPES.get(target)
    if c is not None and row is not None and row.dtype.kind in "iub" and c.dtype.kind in "iub":
        value = c.astype(row.dtype)
    elif row is not None and row.dtype.kind in "iu" and elem_of(t) and ELEMENT_TYPES[elem_of(t)].dtype.kind in "iu":
        value = ctx.symbolic(0)
    ctx.set_output(0, tensor(target, dims_of(t)), value)


@FUNCTIONS.register("Identity")
def _identity(ctx):
    v = ctx.symbolic(0)
    c = ctx.constant(0)
    ctx.set_output(0, ctx.input_type(0), c if c is not None else v)


# SwiGLU(A, B) = Swish(A) * B, broadcasting multidirectionally as Mul does
FUNCTIONS.register("SwiGLU")(elementwise_rule())
