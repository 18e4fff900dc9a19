"""What the family modules share: the definitions' keys, element type tags, attribute helpers."""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from onnxkit.plugin import DataType, ir
from onnxkit.plugin.inference import dims_of

ML = "ai.onnx.ml"
FLOAT = int(DataType.FLOAT)
DOUBLE = int(DataType.DOUBLE)
INT64 = int(DataType.INT64)
STRING = int(DataType.STRING)
UINT8 = int(DataType.UINT8)


@lru_cache(maxsize=1)
def definition_keys() -> tuple:
    """``(domain, op_type, since_version)`` of every ai.onnx.ml definition (the schema data's keys
    alone: no definition is built): where :class:`onnxkit.plugin.FunctionTable` finds each
    operator's since_versions."""
    from ..schemas import schema_data

    return tuple(schema_data().keys)


# -- attributes --------------------------------------------------------------------------------

def given(ctx, name: str):
    """The node's own value of attribute ``name`` (None when the node does not give it)."""
    return ctx.attr(name) if ctx.has_attr(name) else None


def nonempty(ctx, name: str) -> Optional[list]:
    """A list attribute the node gives with at least one entry, else None."""
    v = given(ctx, name)
    if v is None or isinstance(v, ir.Tensor):
        return None
    v = list(v)
    return v or None


def attr_length(v) -> Optional[int]:
    """Entries of a list attribute, or of a 1-D TENSOR attribute (None for other ranks)."""
    if v is None:
        return None
    if isinstance(v, ir.Tensor):
        return int(v.dims[0]) if len(v.dims) == 1 else None
    if isinstance(v, (list, tuple)):
        return len(v)
    return 1


def exclusive(ctx, *pairs) -> None:
    """Fail when both attributes of a pair (``nodes_values`` / ``nodes_values_as_tensor``) are given."""
    for a, b in pairs:
        if ctx.has_attr(a) and ctx.has_attr(b):
            ctx.fail(f"only one of the attributes '{a}' and '{b}' may be given")


def class_labels(ctx, ints_name: str, required: bool = False):
    """(label element type, number of classes or None) from ``classlabels_strings`` / ``ints_name``.

    STRING when ``classlabels_strings`` has entries, else INT64 (the definitions' rule)."""
    strings = nonempty(ctx, "classlabels_strings")
    ints = nonempty(ctx, ints_name)
    if strings is not None and ints is not None:
        ctx.fail(f"only one of 'classlabels_strings' and '{ints_name}' may be given")
    if strings is not None:
        return STRING, len(strings)
    if ints is not None:
        return INT64, len(ints)
    if required:
        ctx.fail(f"one of 'classlabels_strings' and '{ints_name}' must be given")
    return INT64, None


def batch(ctx, t, what: str = "X", max_rank: int = 2):
    """The number of rows N of a [N, C] or [C] input (a 1-D input is one row).

    Returns ``(N, known_rank)``: N is int / str / None; ``known_rank`` False when the rank is unknown."""
    d = dims_of(t)
    if d is None:
        return None, False
    if len(d) == 0 or len(d) > max_rank:
        ctx.fail(f"{what} has rank {len(d)}; the operator takes [N, C] or [C]")
    if len(d) == 1:
        return 1, True
    return d[0], True
