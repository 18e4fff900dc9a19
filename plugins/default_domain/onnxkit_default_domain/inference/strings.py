"""String operators."""

from __future__ import annotations

from onnxkit.plugin.inference import BOOL, INT64, dims_of, elementwise, tensor

from ._util import rule

FUNCTIONS: dict = {}
STRING = 8


@rule(FUNCTIONS, "StringConcat")
def _concat(ctx):
    return [elementwise(ctx, STRING)]


@rule(FUNCTIONS, "RegexFullMatch")
def _regex(ctx):
    return [tensor(BOOL, dims_of(ctx.input_type(0)))]


@rule(FUNCTIONS, "StringNormalizer")
def _normalizer(ctx):
    d = dims_of(ctx.input_type(0))
    if d is None:
        return [tensor(STRING, None)]
    if len(d) == 2:
        return [tensor(STRING, [1, None] if d[0] == 1 else [None, None])]
    return [tensor(STRING, [None] * len(d))]


@rule(FUNCTIONS, "StringSplit")
def _split(ctx):
    d = dims_of(ctx.input_type(0))
    return [tensor(STRING, None if d is None else d + [None]), tensor(INT64, d)]
