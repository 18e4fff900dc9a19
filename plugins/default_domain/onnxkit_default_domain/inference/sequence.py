"""Sequence and optional operators (Clause 6.8.1, 6.8.3)."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable, ir
from onnxkit.plugin.inference import BOOL, FLOAT, INT64, dims_of, elem_of, int_list, join_types, normalize_axis, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)


def _elem(t):
    return t.elem_type if isinstance(t, ir.SequenceType) else None


@FUNCTIONS.register("SequenceEmpty")
def _empty(ctx):
    return [ir.SequenceType(tensor(int(ctx.attr("dtype", FLOAT)), None))]


@FUNCTIONS.register("SequenceConstruct")
def _construct(ctx):
    types = [ctx.input_type(i) for i in range(ctx.num_inputs)]
    if not types or any(t is None for t in types):
        e = next((elem_of(t) for t in types if elem_of(t)), 0)
        return [ir.SequenceType(tensor(e, None))]
    j = types[0]
    for t in types[1:]:
        j = join_types(j, t)
    return [ir.SequenceType(j) if j is not None else None]


@FUNCTIONS.register("SequenceInsert")
def _insert(ctx):
    s, t = ctx.input_type(0), ctx.input_type(1)
    e = _elem(s)
    if e is None or t is None:
        el = elem_of(e) or elem_of(t)
        return [ir.SequenceType(tensor(el, None))]
    j = join_types(e, t)
    return [ir.SequenceType(j if j is not None else tensor(elem_of(e), None))]


@FUNCTIONS.register("SequenceErase")
def _erase(ctx):
    return [ctx.input_type(0)]


@FUNCTIONS.register("SequenceAt")
def _at(ctx):
    return [_elem(ctx.input_type(0))]


@FUNCTIONS.register("SequenceLength")
def _length(ctx):
    return [tensor(INT64, [])]


@FUNCTIONS.register("ConcatFromSequence")
def _concat_from_sequence(ctx):
    e = _elem(ctx.input_type(0))
    d = dims_of(e)
    if d is None:
        return [tensor(elem_of(e), None)]
    new_axis = bool(ctx.attr("new_axis", 0))
    r = len(d) + (1 if new_axis else 0)
    axis = normalize_axis(ctx, int(ctx.attr("axis")), r)
    out = list(d)
    if new_axis:
        out.insert(axis, None)
    else:
        out[axis] = None
    return [tensor(elem_of(e), out)]


def split_pieces(dim, split):
    """The extents of SplitToSequence's pieces along its axis, of extent ``dim`` (``int | str |
    None``): ``split`` None gives pieces of 1, an int pieces of that size (the last one shorter
    when it does not divide ``dim``), a list the pieces it lists.  None where ``dim`` is needed
    and unknown.  The kernel checks the sizes before it uses them; inference and the kernel
    both cut by this function."""
    if isinstance(split, (list, tuple)):
        return [int(v) for v in split]
    if not isinstance(dim, int):
        return None
    if split is None:
        return [1] * dim
    return [split] * (dim // split) + ([dim % split] if dim % split else [])


@FUNCTIONS.register("SplitToSequence")
def _split_to_sequence(ctx):
    t = ctx.input_type(0)
    d = dims_of(t)
    el = elem_of(t)
    if d is None:
        return [ir.SequenceType(tensor(el, None))]
    axis = normalize_axis(ctx, int(ctx.attr("axis", 0)), len(d))
    out = list(d)
    if not ctx.has_input(1):
        if ctx.attr("keepdims", 1):
            out[axis] = 1
        else:
            del out[axis]
        return [ir.SequenceType(tensor(el, out))]
    split = ctx.constant(1)
    if split is not None and split.ndim == 0 and int(split) > 0:
        pieces = split_pieces(d[axis], int(split))
        out[axis] = int(split) if pieces == [] else _common(pieces)
    elif split is not None and split.ndim == 1:
        out[axis] = _common(split_pieces(d[axis], int_list(ctx, 1)))
    else:
        out[axis] = None
    return [ir.SequenceType(tensor(el, out))]


def _common(pieces):
    """The one extent every piece has, or None (no pieces, unknown, or several extents)."""
    return pieces[0] if pieces and len(set(pieces)) == 1 else None


@FUNCTIONS.register("Optional")
def _optional(ctx):
    if ctx.has_input(0):
        t = ctx.input_type(0)
        return [ir.OptionalType(t) if t is not None else None]
    t = ctx.attr("type")
    return [ir.OptionalType(t) if isinstance(t, ir.Type) else None]


@FUNCTIONS.register("OptionalGetElement")
def _get_element(ctx):
    t = ctx.input_type(0)
    if isinstance(t, ir.OptionalType):
        return [t.elem_type]
    return [t]


@FUNCTIONS.register("OptionalHasElement")
def _has_element(ctx):
    return [tensor(BOOL, [])]
