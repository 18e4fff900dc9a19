"""Value mapping and maps: CastMap, CategoryMapper, DictVectorizer, LabelEncoder 1/2/4, ZipMap."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable, ir
from onnxkit.plugin.inference import dims_of, elem_of, tensor

from ._util import FLOAT, INT64, ML, STRING, attr_length, definition_keys, given

FUNCTIONS = FunctionTable(definition_keys, domain=ML)

_CAST_TO = {"TO_FLOAT": FLOAT, "TO_INT64": INT64, "TO_STRING": STRING}


@FUNCTIONS.register("CastMap")
def _cast_map(ctx):
    """Element type from ``cast_to``.  The shape is left unknown: the definition calls Y 1-D, the
    runtimes give [1, n] (n = entries, or ``max_map`` when SPARSE)."""
    to = ctx.attr("cast_to", "TO_FLOAT")
    if to not in _CAST_TO:
        ctx.fail(f"cast_to is {to!r}; one of 'TO_FLOAT', 'TO_STRING', 'TO_INT64' is required")
    form = ctx.attr("map_form", "DENSE")
    if form not in ("DENSE", "SPARSE"):
        ctx.fail(f"map_form is {form!r}; one of 'DENSE', 'SPARSE' is required")
    return [tensor(_CAST_TO[to], None)]


def _swap_string_int64(ctx):
    """STRING -> INT64 and INT64 -> STRING, X's shape (CategoryMapper, LabelEncoder 1)."""
    t = ctx.input_type(0)
    e = elem_of(t)
    out = {STRING: INT64, INT64: STRING}.get(e, 0)
    return [tensor(out, dims_of(t))]


@FUNCTIONS.register("CategoryMapper")
def _category_mapper(ctx):
    ints, strings = given(ctx, "cats_int64s"), given(ctx, "cats_strings")
    if ints is not None and strings is not None and len(list(ints)) != len(list(strings)):
        ctx.fail(f"'cats_int64s' ({len(list(ints))}) and 'cats_strings' ({len(list(strings))}) differ in length")
    return _swap_string_int64(ctx)


@FUNCTIONS.register("LabelEncoder", 1, 1)
def _label_encoder_1(ctx):
    return _swap_string_int64(ctx)


_LIST_TYPES = {"strings": STRING, "int64s": INT64, "floats": FLOAT}


def _encoder_side(ctx, prefix: str, with_tensor: bool):
    """(element type, length) of the one ``keys_*`` / ``values_*`` attribute the node gives."""
    names = [f"{prefix}_{s}" for s in _LIST_TYPES] + ([f"{prefix}_tensor"] if with_tensor else [])
    present = [n for n in names if ctx.has_attr(n)]
    if len(present) != 1:
        which = ", ".join(names)
        ctx.fail(f"exactly one of {which} must be given ({len(present)} are)")
    name = present[0]
    v = ctx.attr(name)
    if isinstance(v, ir.Tensor):
        if len(v.dims) != 1:
            ctx.fail(f"'{name}' must be a 1-D tensor, not of shape {list(v.dims)}")
        return int(v.data_type), attr_length(v)
    return _LIST_TYPES[name.split("_", 1)[1]], attr_length(v)


def _label_encoder(ctx, with_tensor: bool):
    """keys_* element type = X's, values_* element type = Y's, Y has X's shape."""
    t = ctx.input_type(0)
    key_type, n_keys = _encoder_side(ctx, "keys", with_tensor)
    value_type, n_values = _encoder_side(ctx, "values", with_tensor)
    e = elem_of(t)
    if e and e != key_type:
        ctx.fail(f"X has element type {e} but the keys are of element type {key_type}")
    if n_keys is not None and n_values is not None and n_keys != n_values:
        ctx.fail(f"{n_keys} keys but {n_values} values")
    if with_tensor and ctx.has_attr("default_tensor"):
        d = ctx.attr("default_tensor")
        if isinstance(d, ir.Tensor) and d.data_type:
            if int(d.data_type) != value_type:
                ctx.fail(f"default_tensor has element type {d.data_type} but the values {value_type}")
            if list(d.dims) != [1]:
                ctx.fail(f"default_tensor must be a 1-D tensor of one element, not of shape {list(d.dims)}")
    return [tensor(value_type, dims_of(t))]


@FUNCTIONS.register("LabelEncoder", 2, 3)
def _label_encoder_2(ctx):
    return _label_encoder(ctx, with_tensor=False)


@FUNCTIONS.register("LabelEncoder", 4)
def _label_encoder_4(ctx):
    return _label_encoder(ctx, with_tensor=True)


@FUNCTIONS.register("DictVectorizer")
def _dict_vectorizer(ctx):
    """Element type of the map's values.  The shape is left unknown: the definition calls Y 1-D
    (of the vocabulary's length) and also [1, C]; onnxruntime gives [1, C]."""
    ints, strings = given(ctx, "int64_vocabulary"), given(ctx, "string_vocabulary")
    if (ints is None) == (strings is None):
        ctx.fail("exactly one of 'int64_vocabulary' and 'string_vocabulary' must be given")
    t = ctx.input_type(0)
    if not isinstance(t, ir.MapType):
        return [tensor(0, None)]
    want = INT64 if ints is not None else STRING
    if t.key_type and t.key_type != want:
        ctx.fail(f"the map's keys are of element type {t.key_type} but the vocabulary of element type {want}")
    return [tensor(elem_of(t.value_type), None)]


@FUNCTIONS.register("ZipMap")
def _zip_map(ctx):
    """seq(map(STRING | INT64, tensor(float))): one map per row of X, keys from the class labels."""
    d = dims_of(ctx.input_type(0))
    if d is not None and not 1 <= len(d) <= 2:
        ctx.fail(f"X has rank {len(d)}; ZipMap takes [N, C] or [C]")
    strings, ints = given(ctx, "classlabels_strings"), given(ctx, "classlabels_int64s")
    strings = list(strings) if strings is not None else []
    ints = list(ints) if ints is not None else []
    if strings and ints:
        ctx.fail("only one of 'classlabels_strings' and 'classlabels_int64s' may be given")
    key = STRING if strings else INT64 if ints else 0
    n = len(strings or ints) or None
    if n is not None and d is not None and isinstance(d[-1], int) and d[-1] != n:
        ctx.fail(f"X has {d[-1]} columns but there are {n} class labels")
    return [ir.SequenceType(ir.MapType(key, tensor(FLOAT, [])))]
