"""Generator kernels of ai.onnx (cpu backend): tensors made from attributes and shapes.

Operators and the since_versions (definitions) implemented:

* Constant 1, 9 (``value``), 11 (``sparse_value``, made dense), 12, 13, 19, 21, 23, 24, 25
  (``value_float(s)``, ``value_int(s)``, ``value_string(s)``)
* ConstantOfShape 9, 20, 21, 23, 24, 25
* Range 11, 27 (``stash_type`` for float16 / bfloat16)
* EyeLike 9, 22
"""

from __future__ import annotations

import numpy as np

from onnxkit.dtypes import element_type
from onnxkit.errors import OnnxkitTypeError
from onnxkit.runtime import KernelTable

from .shape import int_list

KERNELS = KernelTable()


def _dtype_attr(ctx, name: str):
    """The numpy dtype of an element-type attribute (None if absent); ctx.fail for a bad tag."""
    tag = ctx.attr(name)
    if tag is None:
        return None
    try:
        return element_type(int(tag)).dtype
    except OnnxkitTypeError as exc:
        ctx.fail(f"attribute '{name}': {exc}")


# -- Constant ----------------------------------------------------------------------------------
def _strings(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


#: attribute -> (first since_version that defines it, how its value becomes an array)
_CONSTANT_FORMS = {
    "value": (1, lambda v: v.numpy()),
    "sparse_value": (11, lambda v: v.to_dense()),
    "value_float": (12, lambda v: np.array(v, dtype=np.float32)),
    "value_floats": (12, lambda v: np.array(list(v), dtype=np.float32).reshape(-1)),
    "value_int": (12, lambda v: np.array(v, dtype=np.int64)),
    "value_ints": (12, lambda v: np.array(list(v), dtype=np.int64).reshape(-1)),
    "value_string": (12, lambda v: np.array(v, dtype=object)),
    "value_strings": (12, _strings),
}


def constant_array(ctx) -> np.ndarray:
    """The value of a Constant node as a host array (STRING ones of dtype object); ctx.fail
    for a missing, doubled or not yet defined attribute.  The gpu backend uses it too."""
    given = [name for name in _CONSTANT_FORMS if ctx.has_attr(name)]
    if len(given) != 1:
        ctx.fail(f"exactly one of value, sparse_value or value_* must be given, not {given or 'none'}")
    name = given[0]
    since, make = _CONSTANT_FORMS[name]
    if ctx.since_version < since:
        ctx.fail(f"attribute '{name}' is defined from Constant-{since}")
    value = ctx.attr(name)
    if value is None:
        ctx.fail(f"attribute '{name}' holds no value")
    return np.asarray(make(value))


@KERNELS.register("Constant", 1, 9, 11, 12, 13, 19, 21, 23, 24, 25)
def constant(ctx):
    array = constant_array(ctx)
    array.flags.writeable = False   # the same array is every run's output: nobody may change it
    return lambda: array


# -- ConstantOfShape ---------------------------------------------------------------------------
def fill_value(ctx) -> np.ndarray:
    """ConstantOfShape's ``value`` attribute as a 0-d host array (float32 0 when absent)."""
    value = ctx.attr_tensor("value")
    if value is None:
        value = np.zeros((), dtype=np.float32)
    if value.size != 1:
        ctx.fail(f"'value' must hold exactly one element, got {value.size}")
    return np.asarray(value).reshape(())


def check_extents(ctx, dims: list) -> list:
    """``dims`` (the ``shape`` input as a list of ints); ctx.fail if one is negative."""
    if any(d < 0 for d in dims):
        ctx.fail(f"shape {dims} holds a negative extent")
    return dims


@KERNELS.register("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def constant_of_shape(ctx):
    fill = fill_value(ctx)

    def fn(shape):
        dims = check_extents(ctx, int_list(shape))
        return np.broadcast_to(fill, dims).copy()

    return fn


# -- Range -------------------------------------------------------------------------------------
def range_length(ctx, s, l, d) -> int:
    """How many elements Range(start=s, limit=l, delta=d) has: exact for Python ints, by
    ceil((l - s) / d) for floats (which must be finite); ctx.fail for a delta of 0.
    Host-side arithmetic only: the gpu backend uses it too."""
    if d == 0:
        ctx.fail("delta must not be 0")
    if isinstance(s, int) and isinstance(l, int) and isinstance(d, int):
        return max(-((s - l) // d), 0)   # ceil((l - s) / d), exactly
    if not np.isfinite([s, l, d]).all():
        ctx.fail(f"start {s}, limit {l} and delta {d} must be finite")
    return max(int(np.ceil((l - s) / d)), 0)


def _range(ctx, start, limit, delta, compute=None):
    start, limit, delta = (np.asarray(v) for v in (start, limit, delta))
    for what, v in (("start", start), ("limit", limit), ("delta", delta)):
        if v.size != 1:
            ctx.fail(f"{what} must be a scalar, got shape {list(v.shape)}")
    dtype = start.dtype
    if dtype.kind in "iu":
        s, l, d = int(start.reshape(())), int(limit.reshape(())), int(delta.reshape(()))
        n = range_length(ctx, s, l, d)
        out = np.arange(n, dtype=dtype)
        if d != 1:
            out *= dtype.type(d)
        if s:
            out += dtype.type(s)
        return out
    s, l, d = (float(v.reshape(()).astype(np.float64)) for v in (start, limit, delta))
    n = range_length(ctx, s, l, d)
    work = np.dtype(np.float64 if compute is None else compute)
    out = np.arange(n, dtype=work)
    out *= np.array(d).astype(dtype).astype(work)
    out += np.array(s).astype(dtype).astype(work)
    return out.astype(dtype, copy=False)


@KERNELS.register("Range", 11)
def range_v11(ctx):
    return lambda start, limit, delta: _range(ctx, start, limit, delta)


@KERNELS.register("Range", 27)
def range_v27(ctx):
    stash = ctx.attr("stash_type", 1)
    stash_dtype = _dtype_attr(ctx, "stash_type")

    def fn(start, limit, delta):
        dtype = np.asarray(start).dtype
        low = dtype == np.float16 or dtype.name == "bfloat16"
        if low and stash_dtype is not None and stash_dtype != dtype:
            if stash_dtype not in (np.float32, np.float64):
                ctx.fail(f"stash_type {stash} is not FLOAT or DOUBLE")
            return _range(ctx, start, limit, delta, compute=stash_dtype)
        if low:   # computed in the element type itself
            return _range(ctx, start, limit, delta, compute=dtype)
        return _range(ctx, start, limit, delta)

    return fn


# -- EyeLike -----------------------------------------------------------------------------------
@KERNELS.register("EyeLike", 9, 22)
def eye_like(ctx):
    k = int(ctx.attr("k", 0))
    out_dtype = _dtype_attr(ctx, "dtype")

    def fn(x):
        if np.ndim(x) != 2:
            ctx.fail(f"input must have rank 2, got {np.ndim(x)}")
        n, m = x.shape
        return np.eye(n, m, k, dtype=bool).astype(out_dtype or x.dtype)

    return fn
