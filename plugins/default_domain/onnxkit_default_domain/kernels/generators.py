"""Generators of ai.onnx: tensors made from attributes and shapes (every backend).

Constant 1 9 11 12 13 19 21 23 24 25 (``value``; ``sparse_value`` made dense from 11;
``value_float(s)``, ``value_int(s)``, ``value_string(s)`` from 12), ConstantOfShape 9 20 21 23
24 25, Range 11 27 (``stash_type`` for float16 / bfloat16), EyeLike 9 22.

Attribute values are read and checked on the host, once, when the session is planned; the
tensors are then made by the backend's namespace.  Range declares its output bytes
(:func:`~onnxkit.plugin.declares_output_bytes`: its length from the three scalars, as the kernel
counts it), so its size guard asks no shape inference when the limit changes every run (a
decoder's positions).
"""

from __future__ import annotations

import numpy as np

import math

from onnxkit.plugin import KernelTable, OnnxkitError, arrays, declares_output_bytes, element_type, size_guard

KERNELS = KernelTable()


def _dtype_attr(ctx, name: str):
    """The numpy dtype of an element-type attribute (None if absent); ctx.fail for a bad tag."""
    tag = ctx.attr(name)
    if tag is None:
        return None
    try:
        return element_type(int(tag)).dtype
    except OnnxkitError as exc:
        ctx.fail(f"attribute '{name}': {exc}")


# -- Constant ----------------------------------------------------------------------------------
def _strings(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


#: attribute -> (first since_version that defines it, how its value becomes a host array)
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
    for a missing, doubled or not yet defined attribute."""
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
    value = ctx.from_host(array)    # kernels never write into their inputs: sharing it is safe
    return lambda: value


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
@size_guard("value")
def constant_of_shape(ctx):
    xp = ctx.xp
    fill = ctx.from_host(fill_value(ctx))

    def fn(shape):
        dims = check_extents(ctx, ctx.ints(shape))
        return xp.asarray(xp.broadcast_to(fill, tuple(dims)), copy=True)

    return fn


# -- Range -------------------------------------------------------------------------------------
def range_length(ctx, s, l, d) -> int:
    """How many elements Range(start=s, limit=l, delta=d) has: exact for Python ints, by
    ceil((l - s) / d) for floats (which must be finite); ctx.fail for a delta of 0."""
    if d == 0:
        ctx.fail("delta must not be 0")
    if isinstance(s, int) and isinstance(l, int) and isinstance(d, int):
        return max(-((s - l) // d), 0)   # ceil((l - s) / d), exactly
    if not np.isfinite([s, l, d]).all():
        ctx.fail(f"start {s}, limit {l} and delta {d} must be finite")
    return max(int(np.ceil((l - s) / d)), 0)


def _range(ctx, start, limit, delta, compute=None):
    """Range computed in ``compute`` (a numpy dtype; float64 for floats when None): the
    scalars are read on the host, start and delta rounded to the element type first."""
    xp = ctx.xp
    host = [v if type(v) is np.ndarray else ctx.to_host(v) for v in (start, limit, delta)]
    for what, v in zip(("start", "limit", "delta"), host):
        if v.size != 1:
            ctx.fail(f"{what} must be a scalar, got shape {list(v.shape)}")
    dtype = host[0].dtype
    if arrays.is_integer(dtype):
        s, l, d = (int(v.reshape(())) for v in host)
        n = range_length(ctx, s, l, d)
        out = xp.arange(n, dtype=xp.int64)
        if d != 1:
            out *= d
        if s:
            out += s
        return out if dtype == np.int64 else xp.astype(out, start.dtype)
    s, l, d = (float(v.reshape(()).astype(np.float64)) for v in host)
    n = range_length(ctx, s, l, d)
    work = np.dtype(np.float64 if compute is None else compute)
    wdt = ctx.dtype(work)
    out = xp.arange(n, dtype=wdt)
    rounded = [float(np.array(v).astype(dtype).astype(work)) for v in (d, s)]
    out = out * xp.asarray(rounded[0], dtype=wdt) + xp.asarray(rounded[1], dtype=wdt)
    return xp.astype(out, start.dtype)


def range_bytes(ctx):
    """The bytes of Range's output from its three scalars, counted as :func:`_range` counts them
    (exactly for integers, ``ceil((limit - start) / delta)`` in float64 otherwise); inputs the
    kernel refuses (not scalars, a zero delta, a bound that is not finite) raise ValueError or
    ArithmeticError here, which the size guard reads as 0: the kernel then fails, by name."""
    def nbytes(start, limit, delta):
        s, l, d = ((v if type(v) is np.ndarray else ctx.to_host(v)).reshape(()).item() for v in (start, limit, delta))
        if type(s) is int and type(l) is int and type(d) is int:
            n = -((s - l) // d)
        else:
            n = math.ceil((float(l) - float(s)) / float(d))
        return max(n, 0) * (start if type(start) is np.ndarray else ctx.to_host(start)).dtype.itemsize
    return nbytes


@KERNELS.register("Range", 11)
@size_guard("value")
def range_v11(ctx):
    return declares_output_bytes(lambda start, limit, delta: _range(ctx, start, limit, delta), range_bytes(ctx))


@KERNELS.register("Range", 27)
@size_guard("value")
def range_v27(ctx):
    stash = ctx.attr("stash_type")
    stash_dtype = _dtype_attr(ctx, "stash_type")

    def fn(start, limit, delta):
        dtype = ctx.to_host(start).dtype
        low = arrays.dtype_name(dtype) in ("float16", "bfloat16")
        if low and stash_dtype is not None and stash_dtype != dtype:
            if stash_dtype not in (np.float32, np.float64):
                ctx.fail(f"stash_type {stash} is not FLOAT or DOUBLE")
            return _range(ctx, start, limit, delta, compute=stash_dtype)
        if low:   # computed in the element type itself
            return _range(ctx, start, limit, delta, compute=dtype)
        return _range(ctx, start, limit, delta)

    return declares_output_bytes(fn, range_bytes(ctx))


# -- EyeLike -----------------------------------------------------------------------------------
@KERNELS.register("EyeLike", 9, 22)
@size_guard("value")
def eye_like(ctx):
    xp = ctx.xp
    k = int(ctx.attr("k"))
    out_dtype = _dtype_attr(ctx, "dtype")
    out_dt = None if out_dtype is None else ctx.dtype(out_dtype)

    def fn(x):
        if x.ndim != 2:
            ctx.fail(f"input must have rank 2, got {x.ndim}")
        n, m = x.shape
        return xp.astype(xp.eye(int(n), int(m), k=k, dtype=xp.bool), out_dt or x.dtype)

    return fn
