"""Value mapping and map / sequence-of-map operators of ai.onnx.ml.

Operators and the definitions (since_versions) implemented:

* LabelEncoder 1 (``classes_strings``: STRING -> its index, int64 -> the string at that index),
  2 (``keys_*`` / ``values_*`` / ``default_*`` over strings, int64 and floats) and 4 (also
  ``keys_tensor`` / ``values_tensor`` / ``default_tensor`` of any element type).  The output has
  X's shape and the values' element type; a repeated key: the last one wins; a NaN float key
  matches every NaN input (the specification of version 4, applied to version 2 as well).
  Without ``default_tensor`` the default is "_Unused", -1 or -0.0 by the values' type.
* CategoryMapper 1: STRING -> int64 and int64 -> STRING through the parallel lists
  ``cats_strings`` / ``cats_int64s`` (first pair wins), else ``default_*``.
* CastMap 1: map(int64, string|float) -> [1, n] tensor of float, int64 or STRING, values in
  ascending key order; DENSE: n = number of entries; SPARSE: n = ``max_map``, key k at column k,
  absent keys 0 ("0" for STRING); keys outside 0..max_map-1 are an error.  float -> STRING is
  printed with six decimals, STRING -> int64 takes the integer part (onnxruntime's casts).
* DictVectorizer 1: map -> 1-D tensor of the vocabulary's length (the specification's "1-D
  tensor"; onnxruntime returns [1, n]); keys not in the vocabulary are ignored, absent ones 0
  (or an empty string).
* ZipMap 1: [N, C] float scores -> a list of N dicts {label: score} (Python ``str`` or ``int``
  keys, Python ``float`` values); a 1-D X is one row.

Maps arrive as Python dicts; STRING keys may be ``str`` or ``bytes`` and are compared as text.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, declares_output_bytes

from ._common import bytes_array, is_string_tensor, raw, str_list, text, text_array

KERNELS = KernelTable()
ML = "ai.onnx.ml"


class _Lookup:
    """key -> value over a flat tensor, with a default; strings through a dict, numbers sorted."""

    def __init__(self, keys, values, default, out_dtype):
        self.out_dtype = out_dtype
        self.default = default
        self.string_keys = keys.dtype == object or keys.dtype.kind in "SU"
        if self.string_keys:
            self.table = {text(k): v for k, v in zip(keys, values)}  # the last repeated key wins
            return
        rev_k, rev_v = keys[::-1], values[::-1]
        uk, first = np.unique(rev_k, return_index=True)
        self.keys, self.values = uk, rev_v[first]
        self.nan_value = None
        if uk.dtype.kind == "f" and uk.size and np.isnan(uk[-1]):
            self.nan_value = self.values[-1:]
            self.keys, self.values = uk[:-1], self.values[:-1]

    def __call__(self, ctx, x: np.ndarray) -> np.ndarray:
        if self.string_keys:
            if not is_string_tensor(x):
                ctx.fail(f"X is {x.dtype} but the keys are strings")
            d, table = self.default, self.table
            items = [table.get(v, d) for v in text_array(x).ravel()]
            out = np.empty(len(items), dtype=self.out_dtype)
            out[:] = items
            return out.reshape(x.shape)
        if is_string_tensor(x):
            ctx.fail(f"X is a STRING tensor but the keys are {self.keys.dtype}")
        flat = x.reshape(-1)
        if self.keys.size:
            pos = np.minimum(np.searchsorted(self.keys, flat), self.keys.size - 1)
            found = self.keys[pos] == flat
            picked = self.values[pos]
        else:
            found = np.zeros(flat.shape, dtype=bool)
            picked = np.zeros(flat.shape, dtype=self.values.dtype)
        default = np.empty(1, dtype=self.out_dtype)
        default[0] = self.default
        out = np.where(found, picked, default).astype(self.out_dtype)
        if self.nan_value is not None and flat.dtype.kind == "f":
            out = np.where(np.isnan(flat), self.nan_value.astype(self.out_dtype), out)
        return out.reshape(x.shape)


def _values_array(v, dtype):
    if dtype is object:
        return bytes_array(v)
    return np.asarray(v, dtype=dtype)


@KERNELS.register("LabelEncoder", 1, domain=ML, host_only=True)
def label_encoder_1(ctx):
    classes = str_list(ctx.attr("classes_strings"))
    d_int = int(ctx.attr("default_int64"))
    d_str = raw(ctx.attr_str("default_string"))
    to_index = _Lookup(bytes_array(classes), np.arange(len(classes), dtype=np.int64), d_int, np.int64)
    # first occurrence wins when a class repeats (its index is what an encoder produced)
    to_index.table = {}
    for i, c in enumerate(classes):
        to_index.table.setdefault(c, i)
    names = bytes_array(classes)

    def run(x):
        if is_string_tensor(x):
            return to_index(ctx, x)
        if not isinstance(x, np.ndarray) or x.dtype.kind not in "iu":
            ctx.fail(f"X must be a STRING or int64 tensor, got {getattr(x, 'dtype', type(x).__name__)}")
        flat = x.reshape(-1).astype(np.int64)
        ok = (flat >= 0) & (flat < len(classes))
        out = np.empty(flat.size, dtype=object)
        out[:] = d_str
        if ok.any():
            out[ok] = names[flat[ok]]
        return out.reshape(x.shape)

    return run


def _encoder_lists(ctx, allow_tensors):
    """(keys array, values array, default, output dtype) of LabelEncoder 2 / 4."""
    key_forms = [("keys_strings", object), ("keys_int64s", np.int64), ("keys_floats", np.float32)]
    value_forms = [("values_strings", object), ("values_int64s", np.int64), ("values_floats", np.float32)]
    keys = [(n, _values_array(ctx.attr(n), t)) for n, t in key_forms if ctx.attr(n)]
    values = [(n, _values_array(ctx.attr(n), t)) for n, t in value_forms if ctx.attr(n)]
    if allow_tensors:
        for n, lst in (("keys_tensor", keys), ("values_tensor", values)):
            t = ctx.attr_tensor(n)
            if t is not None:
                a = np.asarray(t).reshape(-1)
                if a.dtype == object or a.dtype.kind in "SU":
                    a = bytes_array(list(a))
                lst.append((n, a))
    if len(keys) != 1 or len(values) != 1:
        ctx.fail(f"exactly one keys_* and one values_* attribute must be given (got "
                 f"{[n for n, _ in keys] or 'none'} and {[n for n, _ in values] or 'none'})")
    (kname, k), (vname, v) = keys[0], values[0]
    if len(k) != len(v):
        ctx.fail(f"{kname} has {len(k)} values but {vname} has {len(v)}")
    out_dtype = object if v.dtype == object else v.dtype
    if vname == "values_tensor" and ctx.attr_tensor("default_tensor") is not None:
        d = np.asarray(ctx.attr_tensor("default_tensor")).reshape(-1)
        if d.size != 1:
            ctx.fail(f"default_tensor must hold one value, got {d.size}")
        default = raw(d[0]) if out_dtype is object else d[0]
    elif out_dtype is object:
        default = raw(ctx.attr_str("default_string")) if vname != "values_tensor" else b"_Unused"
    elif np.dtype(out_dtype).kind in "iu":
        default = int(ctx.attr("default_int64")) if vname != "values_tensor" else -1
    elif np.dtype(out_dtype).kind == "b":
        default = False
    else:
        default = float(ctx.attr("default_float")) if vname != "values_tensor" else -0.0
    return k, v, default, out_dtype


@KERNELS.register("LabelEncoder", 2, domain=ML, host_only=True)
def label_encoder_2(ctx):
    lookup = _Lookup(*_encoder_lists(ctx, allow_tensors=False))
    return lambda x: lookup(ctx, x)


@KERNELS.register("LabelEncoder", 4, domain=ML, host_only=True)
def label_encoder_4(ctx):
    lookup = _Lookup(*_encoder_lists(ctx, allow_tensors=True))
    return lambda x: lookup(ctx, x)


@KERNELS.register("CategoryMapper", 1, domain=ML, host_only=True)
def category_mapper(ctx):
    ints = list(ctx.attr("cats_int64s") or [])
    strings = str_list(ctx.attr("cats_strings"))
    if len(ints) != len(strings):
        ctx.fail(f"cats_int64s has {len(ints)} values but cats_strings has {len(strings)}")
    d_int = int(ctx.attr("default_int64"))
    d_str = raw(ctx.attr_str("default_string"))
    # first pair wins: build the lookups from the reversed lists (their last key wins)
    s2i = _Lookup(bytes_array(strings[::-1]), np.asarray(ints[::-1], dtype=np.int64), d_int, np.int64)
    i2s = _Lookup(np.asarray(ints[::-1], dtype=np.int64), bytes_array(strings[::-1]), d_str, object)

    def run(x):
        if is_string_tensor(x):
            return s2i(ctx, x)
        if not isinstance(x, np.ndarray) or x.dtype.kind not in "iu":
            ctx.fail(f"X must be a STRING or int64 tensor, got {getattr(x, 'dtype', type(x).__name__)}")
        return i2s(ctx, x.astype(np.int64))

    return run


def _scalar(v):
    """A map value (0-d array, numpy or Python scalar) as a Python / numpy scalar."""
    if isinstance(v, np.ndarray):
        if v.size != 1:
            raise ValueError(f"a map value must be a scalar, got shape {list(v.shape)}")
        return v.reshape(-1)[0]
    return v


def _key(k):
    if isinstance(k, np.ndarray):
        k = k.reshape(-1)[0]
    if isinstance(k, (bytes, bytearray, np.bytes_, str, np.str_)):
        return text(k)
    return int(k)


def _check_map(ctx, x):
    if not isinstance(x, dict):
        ctx.fail(f"X must be a map (dict), got {type(x).__name__}")


@KERNELS.register("CastMap", 1, domain=ML, host_only=True)
def cast_map(ctx):
    cast_to = ctx.attr_str("cast_to")
    form = ctx.attr_str("map_form")
    max_map = int(ctx.attr("max_map"))
    if cast_to not in ("TO_FLOAT", "TO_STRING", "TO_INT64"):
        ctx.fail(f"cast_to={cast_to!r} is not one of TO_FLOAT, TO_STRING, TO_INT64")
    if form not in ("DENSE", "SPARSE"):
        ctx.fail(f"map_form={form!r} is not one of DENSE, SPARSE")

    def convert(v):
        v = _scalar(v)
        is_text = isinstance(v, (bytes, bytearray, np.bytes_, str, np.str_))
        if cast_to == "TO_STRING":
            return raw(v) if is_text else f"{float(np.float32(v)):f}".encode()
        if cast_to == "TO_FLOAT":
            return np.float32(float(text(v)) if is_text else v)
        if is_text:
            s = text(v).strip()
            try:
                return int(s)
            except ValueError:
                return int(float(s))
        return int(np.float32(v))

    def run(x):
        _check_map(ctx, x)
        items = sorted((_key(k), v) for k, v in x.items())
        if any(not isinstance(k, int) for k, _ in items):
            ctx.fail("CastMap needs int64 keys")
        try:
            vals = [convert(v) for _, v in items]
        except (ValueError, TypeError) as exc:
            ctx.fail(f"cannot cast a map value: {exc}")
        dtype = {"TO_FLOAT": np.float32, "TO_INT64": np.int64, "TO_STRING": object}[cast_to]
        if form == "DENSE":
            out = np.empty(len(vals), dtype=dtype)
            out[:] = vals
            return out.reshape(1, -1)
        keys = [k for k, _ in items]
        if keys and (keys[0] < 0 or keys[-1] >= max_map):
            ctx.fail(f"key {keys[0] if keys[0] < 0 else keys[-1]} is outside 0..max_map-1 ({max_map - 1})")
        out = np.empty(max_map, dtype=dtype)
        out[:] = b"0" if dtype is object else 0
        for k, v in zip(keys, vals):
            out[k] = v
        return out.reshape(1, -1)

    def size(x):  # [1, entries] or [1, max_map], before the kernel allocates it (onnxkit.runtime.budget)
        return (len(x) if form == "DENSE" else max_map) * (4 if cast_to == "TO_FLOAT" else 8)

    return declares_output_bytes(run, size)


@KERNELS.register("DictVectorizer", 1, domain=ML, host_only=True)
def dict_vectorizer(ctx):
    ints = list(ctx.attr("int64_vocabulary") or [])
    strings = str_list(ctx.attr("string_vocabulary"))
    if bool(ints) == bool(strings):
        ctx.fail("exactly one of int64_vocabulary and string_vocabulary must be given")
    vocab = strings or [int(v) for v in ints]
    index = {}
    for i, v in enumerate(vocab):
        index.setdefault(v, i)
    declared = ctx.output_type(0)   # declared, else inferred: the element type of an empty map's output

    def out_dtype(values):
        for v in values:
            v = _scalar(v)
            if isinstance(v, (bytes, bytearray, np.bytes_, str, np.str_)):
                return object
            if isinstance(v, np.generic):
                return v.dtype
            return np.int64 if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else np.float32
        elem = getattr(declared, "elem_type", None)
        return {1: np.float32, 7: np.int64, 11: np.float64, 8: object}.get(elem, np.float32)

    def run(x):
        _check_map(ctx, x)
        dtype = out_dtype(x.values())
        out = np.empty(len(vocab), dtype=dtype)
        out[:] = b"" if dtype is object else 0
        for k, v in x.items():
            j = index.get(_key(k))
            if j is not None:
                v = _scalar(v)
                out[j] = raw(v) if dtype is object else v
        return out

    return declares_output_bytes(run, lambda x: len(vocab) * 8)  # at most 8 octets an element


@KERNELS.register("ZipMap", 1, domain=ML, host_only=True)
def zip_map(ctx):
    ints = [int(v) for v in (ctx.attr("classlabels_int64s") or [])]
    strings = str_list(ctx.attr("classlabels_strings"))
    if bool(ints) == bool(strings):
        ctx.fail("exactly one of classlabels_int64s and classlabels_strings must be given")
    labels = strings or ints

    def run(x):
        if not isinstance(x, np.ndarray) or x.dtype.kind != "f":
            ctx.fail(f"X must be a float tensor, got {getattr(x, 'dtype', type(x).__name__)}")
        x2 = x.reshape(1, -1) if x.ndim == 1 else x
        if x2.ndim != 2 or x2.shape[1] != len(labels):
            ctx.fail(f"X has shape {list(x.shape)} but there are {len(labels)} class labels")
        return [dict(zip(labels, row)) for row in x2.astype(np.float64).tolist()]

    key_bytes = sum(len(raw(k)) for k in strings) if strings else 8 * len(ints)

    def size(x):  # one map a row: (bytes of every key and value, rows), before any map is built
        rows = (x.shape[0] if x.ndim == 2 else 1) if x.ndim else 1
        return rows * (key_bytes + 8 * len(labels)), rows

    return declares_output_bytes(run, size)
