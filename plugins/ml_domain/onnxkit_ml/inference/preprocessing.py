"""Feature preprocessing: ArrayFeatureExtractor, Binarizer, Imputer, Normalizer, Scaler,
OneHotEncoder, FeatureVectorizer (all version 1)."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import check_equal, dims_of, elem_of, same_as_input, tensor, unify

from ._util import FLOAT, ML, STRING, definition_keys, given

FUNCTIONS = FunctionTable(definition_keys, domain=ML)

# Binarizer and Imputer: Y has X's type and shape.
FUNCTIONS.register(("Binarizer", "Imputer"))(same_as_input(0))


@FUNCTIONS.register("ArrayFeatureExtractor")
def _array_feature_extractor(ctx):
    """Z = X[..., indices]: X's leading extents, then the number of indices; a 1-D X is one row."""
    t, y = ctx.input_type(0), ctx.input_type(1)
    e, d = elem_of(t), dims_of(t)
    if d is None:
        return [tensor(e, None)]
    if len(d) == 0:
        ctx.fail("X must have rank 1 or more (the indices select along its last axis)")
    lead = [1] if len(d) == 1 else d[:-1]
    return [tensor(e, lead + [_count(dims_of(y))])]


def _count(dims):
    """The number of elements of a tensor of extents ``dims``: static, one variable (the other
    extents 1), or unknown."""
    if dims is None:
        return None
    n, var = 1, None
    for x in dims:
        if isinstance(x, int):
            n *= x
        elif isinstance(x, str) and var is None:
            var = x
        else:
            return None
    if var is None:
        return n
    return var if n == 1 else None


@FUNCTIONS.register("Normalizer")
def _normalizer(ctx):
    """Per-row normalization of a [N, C] or [C] tensor: float, X's shape."""
    d = dims_of(ctx.input_type(0))
    if d is not None and not 1 <= len(d) <= 2:
        ctx.fail(f"X has rank {len(d)}; Normalizer takes [N, C] or [C]")
    return [tensor(FLOAT, d)]


@FUNCTIONS.register("Scaler")
def _scaler(ctx):
    """(X - offset) * scale: float, X's shape."""
    return [tensor(FLOAT, dims_of(ctx.input_type(0)))]


@FUNCTIONS.register("OneHotEncoder")
def _one_hot_encoder(ctx):
    """X's shape plus one axis of the number of categories; float."""
    ints, strings = given(ctx, "cats_int64s"), given(ctx, "cats_strings")
    if (ints is None) == (strings is None):
        ctx.fail("exactly one of 'cats_int64s' and 'cats_strings' must be given")
    e = elem_of(ctx.input_type(0))
    if e == STRING and strings is None:
        ctx.fail("X holds strings but only 'cats_int64s' is given")
    if e and e != STRING and ints is None:
        ctx.fail("X is numeric but only 'cats_strings' is given")
    cats = len(list(ints if ints is not None else strings))
    d = dims_of(ctx.input_type(0))
    return [tensor(FLOAT, None if d is None else d + [cats])]


@FUNCTIONS.register("FeatureVectorizer")
def _feature_vectorizer(ctx):
    """[N, sum(inputdimensions)] float: the inputs' rows concatenated, each cut or padded to its
    ``inputdimensions`` entry.  N is the inputs' first extent; a 1-D input is read as a row by
    the definition and as a column by the reference implementation, so it does not fix N."""
    types = [ctx.input_type(i) for i in range(ctx.num_inputs) if ctx.has_input(i)]
    rows = []
    for k, t in enumerate(types):
        d = dims_of(t)
        if d is None:
            continue
        if not 1 <= len(d) <= 2:
            ctx.fail(f"input {k} has rank {len(d)}; FeatureVectorizer takes [N, C] or [C] inputs")
        if len(d) == 2:
            rows.append(d[0])
    for a in rows[1:]:
        check_equal(ctx, rows[0], a, "the inputs' numbers of rows differ")
    n = unify(*rows) if rows else None
    widths = given(ctx, "inputdimensions")
    c = None
    if widths is not None:
        widths = [int(w) for w in widths]
        if len(widths) != len(types):
            ctx.fail(f"'inputdimensions' has {len(widths)} entries for {len(types)} inputs")
        c = sum(widths)
    return [tensor(FLOAT, [n, c])]
