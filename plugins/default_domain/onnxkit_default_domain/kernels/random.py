"""Random-number operators of ai.onnx (non-deterministic without a seed, Clause 8.5; every backend).

RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike, Multinomial and Bernoulli;
the later definitions only add BFLOAT16 to the type lists.

Every kernel draws on the host from ``ctx.rng()``: a numpy ``Generator`` seeded from the
node's ``seed`` attribute (its float32 bit pattern), else from the session's seed, else from
the operating system, and hands the result to the backend (``ctx.from_host``), so that a
seeded node gives the same stream on every backend.  The generator lives as long as the
planned node, so successive runs of one session continue the same stream (as onnxruntime's
kernels do).  Values are drawn in double precision and rounded to the output type.  The
streams are onnxkit's own: ONNX does not specify them, and no two implementations agree even
with the same seed.  Multinomial and Bernoulli read their input on the host.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, arrays, element_type, nondeterministic, size_guard

KERNELS = KernelTable()

_FLOAT_KINDS = ("float16", "float32", "float64", "bfloat16")


def _out_dtype(ctx, default=None):
    tag = ctx.attr("dtype")
    if tag is None:
        return default
    return element_type(int(tag)).dtype


def _host_dtype(dtype) -> np.dtype:
    """The numpy dtype of a backend dtype (numpy, ml_dtypes or torch)."""
    return dtype if isinstance(dtype, np.dtype) else np.dtype(arrays.dtype_name(dtype))


def _float_dtype(ctx, dtype, what: str):
    if dtype is None or np.dtype(dtype).name not in _FLOAT_KINDS:
        ctx.fail(f"{what}: the output element type must be a floating-point type, got {dtype}")
    return dtype


def _shape_attr(ctx):
    shape = ctx.attr("shape")
    if shape is None:
        ctx.fail("the shape attribute is required")
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        ctx.fail(f"shape {list(shape)} has a negative dimension")
    return shape


def _draw(ctx, kind: str):
    """The drawing function of a RandomNormal/RandomUniform(Like) node: ``draw(size)`` gives
    float64 samples of the node's distribution from the node's generator."""
    rng = ctx.rng()
    if kind == "normal":
        mean, scale = float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0))
        return lambda size: rng.normal(mean, scale, size=size)
    low, high = float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0))
    return lambda size: rng.uniform(low, high, size=size)


def _generator(ctx, kind: str):
    """RandomNormal / RandomUniform: the ``shape`` and ``dtype`` attributes fix the output."""
    dtype = _float_dtype(ctx, _out_dtype(ctx, np.dtype(np.float32)), ctx.op_type)
    shape = _shape_attr(ctx)
    draw = _draw(ctx, kind)
    return lambda: ctx.from_host(draw(shape).astype(dtype))


def _generator_like(ctx, kind: str):
    """RandomNormalLike / RandomUniformLike: the input's shape, its type unless ``dtype`` says."""
    fixed = _out_dtype(ctx)
    draw = _draw(ctx, kind)

    def fn(x):
        dtype = _float_dtype(ctx, fixed if fixed is not None else _host_dtype(x.dtype), ctx.op_type)
        return ctx.from_host(draw(tuple(int(d) for d in x.shape)).astype(dtype))

    return fn


@KERNELS.register("RandomNormal", 1, 22)
@KERNELS.register("RandomUniform", 1, 22)
@size_guard("value")
@nondeterministic
def random_generator(ctx):
    return _generator(ctx, "normal" if ctx.op_type == "RandomNormal" else "uniform")


@KERNELS.register("RandomNormalLike", 1, 22)
@KERNELS.register("RandomUniformLike", 1, 22)
@nondeterministic
def random_generator_like(ctx):
    return _generator_like(ctx, "normal" if ctx.op_type == "RandomNormalLike" else "uniform")


@KERNELS.register("Multinomial", 7, 22)
@size_guard("value")
@nondeterministic
def multinomial(ctx):
    dtype = _out_dtype(ctx, np.dtype(np.int32))
    if np.dtype(dtype) not in (np.int32, np.int64):
        ctx.fail(f"dtype must be INT32 or INT64, got {dtype}")
    samples = int(ctx.attr("sample_size"))
    if samples < 0:
        ctx.fail(f"sample_size must be >= 0, got {samples}")
    rng = ctx.rng()

    def fn(x):
        x = ctx.to_host(x)
        if x.ndim != 2:
            ctx.fail(f"input must have shape [batch_size, class_size], got {list(x.shape)}")
        batch, classes = x.shape
        if classes == 0:
            ctx.fail("class_size must be positive")
        logits = x.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            p = np.exp(logits - np.max(logits, axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)
        u = rng.random((batch, samples)) * cdf[:, -1:]
        out = np.empty((batch, samples), dtype=np.int64)
        for b in range(batch):  # one searchsorted per batch row
            out[b] = np.searchsorted(cdf[b], u[b], side="right")
        return ctx.from_host(np.minimum(out, classes - 1).astype(dtype))

    return fn


@KERNELS.register("Bernoulli", 15, 22)
@nondeterministic
def bernoulli(ctx):
    fixed = _out_dtype(ctx)
    rng = ctx.rng()

    def fn(x):
        x = ctx.to_host(x)
        if np.dtype(x.dtype).name not in _FLOAT_KINDS:
            ctx.fail(f"input must hold floating-point probabilities, got {x.dtype}")
        draws = rng.random(x.shape) < x.astype(np.float64)
        return ctx.from_host(draws.astype(fixed if fixed is not None else x.dtype))

    return fn
