"""Activations of ai.onnx, written once for every backend: the rectifiers (Relu, LeakyRelu,
PRelu, ThresholdedRelu, Elu, Selu, Celu, Shrink), the smooth functions (Sigmoid, HardSigmoid,
HardSwish, Softplus, Softsign, Tanh, Gelu, Mish, Swish) and the softmax family (Softmax,
LogSoftmax, Hardmax), every definition of opsets 1..28.

Version rules.  Softmax, LogSoftmax and Hardmax before 13 coerce the input to 2-D at
``axis`` (``[a0*...*a(k-1), ak*...*a(n-1)]``, default 1; ``axis`` may equal the rank) and
normalise over the second dimension; from 13 on they work along the single axis ``axis``
(default -1).  Hardmax marks the first maximum.  PRelu before 7 takes a slope of one element,
of X's shape, or of X's channel count (dimension 1); from 7 on the slope broadcasts to X
unidirectionally (6.6.3).  ``consumed_inputs`` (the oldest definitions) is ignored.

Types.  float16, bfloat16 and the 8-bit floats are computed in float32 and rounded back once,
except the softmax family and Relu, which compute float16 in float16 (each step rounded, as
the reference implementation that generated the ONNX vectors does; a sum may accumulate in a
wider type where the namespace does).  Integer inputs (Relu 14, PRelu 9 and 16, Shrink) keep
their type; Shrink computes them in double and truncates.  Softplus is the exact
``max(x, 0) + log1p(exp(-|x|))`` (no threshold), Gelu 'none' is ``0.5 x erfc(-x / sqrt 2)``
(accurate in the negative tail), Gelu 'tanh' is ``x * sigmoid(2u)`` (no cancellation at
``1 + tanh u``).  numpy's floating-point warnings are silenced: the IEEE results (inf, NaN)
are the definition.

The attribute parsers (:func:`gelu_mode`, :func:`normalizer`) and the bodies are public so a
backend override replaces a body and nothing else.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable, arrays, size_guard

from ._common import device_of
from ._common import shape_of, size_of
from ._math import erfc

KERNELS = KernelTable()


def in_float(xp, fn, native16: bool = False):
    """``fn(x, *args)`` run as the types require: narrow floats widened to float32 and the
    result rounded back (float16 kept as it is when ``native16``), float32/float64 and integers
    as they are.  An element-wise ``fn`` (no ``args``) computes a 0-d input as 1-d: numpy's
    functions give scalars, not arrays, for 0-d operands."""
    def run(x, *args):
        if x.ndim == 0 and not args:
            return xp.reshape(run(xp.reshape(x, (1,))), ())
        dt = x.dtype
        with np.errstate(all="ignore"):
            if arrays.is_narrow_float(dt) and not (native16 and arrays.dtype_name(dt) == "float16"):
                return xp.astype(fn(xp.astype(x, xp.float32), *args), dt)
            r = fn(x, *args)
        return r if r.dtype == dt else xp.astype(r, dt)
    return run


def _register(name, *versions, native16=False):
    """Register ``make(ctx, xp) -> fn(x)`` wrapped by :func:`in_float`."""
    def deco(make):
        def factory(ctx):
            xp = ctx.xp
            return in_float(xp, make(ctx, xp), native16)
        factory.__name__ = make.__name__
        KERNELS.register(name, *versions)(factory)
        return make
    return deco


def versions(name: str) -> tuple:
    """The since_versions this family implements for operator ``name`` (for an override)."""
    return tuple(sorted(v for (_, op, v) in KERNELS if op == name))


#: The float attributes of each activation, in order (their defaults are the schema's: Selu-1's
#: alpha and gamma are not Selu-6's).
FLOAT_ATTRS = {
    "LeakyRelu": ("alpha",), "ThresholdedRelu": ("alpha",), "Elu": ("alpha",), "Selu": ("alpha", "gamma"),
    "Celu": ("alpha",), "Shrink": ("bias", "lambd"), "HardSigmoid": ("alpha", "beta"), "Swish": ("alpha",),
}


def float_attrs(ctx) -> list:
    """The node's :data:`FLOAT_ATTRS` as Python floats, in order ([] for an operator without
    any); ctx.fail for a Celu ``alpha`` of 0."""
    values = [float(ctx.attr(name)) for name in FLOAT_ATTRS.get(ctx.op_type, ())]
    if ctx.op_type == "Celu" and values[0] == 0.0:
        ctx.fail("alpha must not be 0")
    return values


def in_type(value: float, x) -> float:
    """``value`` rounded to ``x``'s float type (float32 or float64), as a Python float."""
    return float(np.float32(value)) if arrays.dtype_name(x.dtype) == "float32" else float(value)


def negative_part_scaled(xp, x, slope):
    """``x`` for x >= 0, ``slope * x`` for x < 0, as min(x, 0) * slope + max(x, 0) (exact)."""
    return xp.minimum(x, 0) * slope + xp.maximum(x, 0)


def sigmoid(xp, x):
    """1 / (1 + exp(-x)): exp(-x) overflows to inf for very negative x, giving 0 exactly."""
    return 1 / (1 + xp.exp(-x))


def softplus(xp, x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), without overflow."""
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


# ----------------------------------------------------------------------------- rectifiers
@_register("Relu", 1, 6, 13, 14, native16=True)
def relu(ctx, xp):
    return lambda x: xp.maximum(x, 0)


@_register("LeakyRelu", 1, 6, 16)
def leaky_relu(ctx, xp):
    alpha, = float_attrs(ctx)
    if 0.0 <= alpha <= 1.0:
        return lambda x: xp.maximum(x * alpha, x)       # exact for 0 <= alpha <= 1
    return lambda x: negative_part_scaled(xp, x, alpha)


def prelu_slope(ctx, x_shape: tuple, slope_shape: tuple):
    """The shape PRelu's slope takes against X (host arithmetic): before 7 a slope of X's
    channel count is one slope per channel and a one-element slope a scalar; ctx.fail unless
    the result broadcasts unidirectionally to X."""
    x_shape, slope_shape = tuple(x_shape), tuple(slope_shape)
    size = math.prod(slope_shape)
    if ctx.since_version < 7:
        if slope_shape != x_shape and size != 1:
            if len(slope_shape) == 1 and len(x_shape) >= 2 and slope_shape[0] == x_shape[1]:
                slope_shape = slope_shape + (1,) * (len(x_shape) - 2)        # one slope per channel
        elif size == 1:
            slope_shape = ()
    try:
        ok = np.broadcast_shapes(x_shape, slope_shape) == x_shape
    except ValueError:
        ok = False
    if not ok:
        ctx.fail(f"slope of shape {list(slope_shape)} does not broadcast unidirectionally to X of shape {list(x_shape)}")
    return slope_shape


@KERNELS.register("PRelu", 1, 6, 7, 9, 16)
@size_guard("broadcast")
def prelu(ctx):
    xp = ctx.xp

    def run(x, slope):
        slope = xp.reshape(slope, prelu_slope(ctx, shape_of(x), shape_of(slope)))
        return in_float(xp, lambda v: negative_part_scaled(xp, v, xp.astype(slope, v.dtype)))(x)
    return run


@_register("ThresholdedRelu", 10, 22)
def thresholded_relu(ctx, xp):
    alpha, = float_attrs(ctx)
    return lambda x: xp.where(x > alpha, x, 0)          # NaN is not > alpha: 0


@_register("Elu", 1, 6, 22)
def elu(ctx, xp):
    alpha, = float_attrs(ctx)
    return lambda x: xp.expm1(xp.minimum(x, 0)) * alpha + xp.maximum(x, 0)


@_register("Selu", 1, 6, 22)
def selu(ctx, xp):
    alpha, gamma = float_attrs(ctx)
    return lambda x: (xp.expm1(xp.minimum(x, 0)) * alpha + xp.maximum(x, 0)) * gamma


@_register("Celu", 12, 28)
def celu(ctx, xp):
    alpha, = float_attrs(ctx)

    def fn(x):
        a = in_type(alpha, x)                             # alpha in the element type
        return xp.minimum(xp.expm1(x / a) * a, 0) + xp.maximum(x, 0)
    return fn


@KERNELS.register("Shrink", 9)
def shrink(ctx):
    xp = ctx.xp
    bias, lambd = float_attrs(ctx)

    def body(x):
        return xp.where(x < -lambd, x + bias, xp.where(x > lambd, x - bias, 0.0))

    floats = in_float(xp, body)

    def run(x):
        if arrays.is_float(x.dtype):
            return floats(x)
        r = xp.trunc(body(xp.astype(x, xp.float64)))          # integers: in double, truncated
        return xp.astype(xp.astype(r, xp.int64), x.dtype)
    return run


# ----------------------------------------------------------------------------- smooth
@_register("Sigmoid", 1, 6, 13)
def sigmoid_kernel(ctx, xp):
    return lambda x: sigmoid(xp, x)


@_register("HardSigmoid", 1, 6, 22)
def hard_sigmoid(ctx, xp):
    alpha, beta = float_attrs(ctx)
    return lambda x: xp.clip(x * alpha + beta, 0, 1)


@_register("HardSwish", 14, 22)
def hard_swish(ctx, xp):
    return lambda x: x * xp.clip(x * (1.0 / 6.0) + 0.5, 0, 1)


@_register("Softplus", 1, 22)
def softplus_kernel(ctx, xp):
    return lambda x: softplus(xp, x)


@_register("Softsign", 1, 22)
def softsign(ctx, xp):
    return lambda x: x / (xp.abs(x) + 1)


@_register("Tanh", 1, 6, 13)
def tanh(ctx, xp):
    return xp.tanh


def gelu_mode(ctx) -> str:
    """Gelu's ``approximate``: 'none' or 'tanh'; ctx.fail otherwise."""
    mode = ctx.attr_str("approximate")
    if mode not in ("none", "tanh"):
        ctx.fail(f"approximate must be 'none' or 'tanh', got {mode!r}")
    return mode


#: Gelu 'tanh': u = sqrt(2/pi) * (x + 0.044715 x^3); 0.5 x (1 + tanh u) = x * sigmoid(2u).
GELU_TANH_2C = 2.0 * math.sqrt(2.0 / math.pi)
GELU_TANH_CUBIC = 0.044715


@_register("Gelu", 20)
def gelu(ctx, xp):
    if gelu_mode(ctx) == "tanh":
        return lambda x: x * sigmoid(xp, (x * x * GELU_TANH_CUBIC + 1) * x * GELU_TANH_2C)
    return lambda x: erfc(xp, x * (-1.0 / math.sqrt(2.0))) * x * 0.5


@_register("Mish", 18, 22)
def mish(ctx, xp):
    return lambda x: x * xp.tanh(softplus(xp, x))


@_register("Swish", 24)
def swish(ctx, xp):
    alpha, = float_attrs(ctx)
    return lambda x: x * sigmoid(xp, x * alpha)


# ----------------------------------------------------------------------------- softmax family
def normalizer(ctx, body):
    """``fn(x)`` applying ``body(x, axis)`` (``axis`` a non-negative int) as the version
    requires: before 13 on ``x`` coerced to 2-D at ``axis`` (normalised over dimension 1),
    from 13 along ``axis``; an empty ``x`` is returned as a copy."""
    xp = ctx.xp
    legacy = ctx.since_version < 13
    axis = int(ctx.attr("axis"))  # the schema's default: 1 before 13, -1 from 13

    def fn(x):
        r = x.ndim
        a = axis + r if axis < 0 else axis
        if not (0 <= a < r or (legacy and a == r)):
            ctx.fail(f"axis {axis} is out of range for an input of rank {r}")
        size = size_of(x)
        if size == 0:
            return xp.asarray(x, copy=True)
        if legacy:
            n = math.prod(shape_of(x)[:a])
            return xp.reshape(body(xp.reshape(x, (n, size // n)), 1), tuple(x.shape))
        return body(x, a)
    return fn


def softmax(xp, x, axis):
    e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    return e / xp.sum(e, axis=axis, keepdims=True)


def log_softmax(xp, x, axis):
    d = x - xp.max(x, axis=axis, keepdims=True)
    return d - xp.log(xp.sum(xp.exp(d), axis=axis, keepdims=True))


def hardmax(xp, x, axis):
    """1 at the first maximum along ``axis``, 0 elsewhere."""
    first = xp.argmax(x, axis=axis, keepdims=True)
    where = [1] * x.ndim
    where[axis] = int(x.shape[axis])
    positions = xp.reshape(xp.arange(where[axis], device=device_of(x)), tuple(where))
    return xp.astype(positions == first, x.dtype)


@KERNELS.register("Softmax", 1, 11, 13)
def softmax_kernel(ctx):
    xp = ctx.xp
    return normalizer(ctx, in_float(xp, lambda x, axis: softmax(xp, x, axis), native16=True))


@KERNELS.register("LogSoftmax", 1, 11, 13)
def log_softmax_kernel(ctx):
    xp = ctx.xp
    return normalizer(ctx, in_float(xp, lambda x, axis: log_softmax(xp, x, axis), native16=True))


@KERNELS.register("Hardmax", 1, 11, 13)
def hardmax_kernel(ctx):
    xp = ctx.xp
    return normalizer(ctx, in_float(xp, lambda x, axis: hardmax(xp, x, axis), native16=True))
