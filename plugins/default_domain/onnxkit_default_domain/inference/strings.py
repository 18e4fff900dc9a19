"""String operators."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import BOOL, INT64, dims_of, elementwise, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)
STRING = 8


@FUNCTIONS.register("StringConcat")
def _concat(ctx):
    return [elementwise(ctx, STRING)]


@FUNCTIONS.register("RegexFullMatch")
def _regex(ctx):
    return [tensor(BOOL, dims_of(ctx.input_type(0)))]


@FUNCTIONS.register("StringNormalizer")
def _normalizer(ctx):
    d = dims_of(ctx.input_type(0))
    if d is None:
        return [tensor(STRING, None)]
    if len(d) == 2:
        return [tensor(STRING, [1, None] if d[0] == 1 else [None, None])]
    return [tensor(STRING, [None] * len(d))]


@FUNCTIONS.register("StringSplit")
def _split(ctx):
    d = dims_of(ctx.input_type(0))
    return [tensor(STRING, None if d is None else d + [None]), tensor(INT64, d)]
