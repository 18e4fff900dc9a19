"""Activations of ai.onnx (numpy).

Operators and the since_versions implemented (every definition of opsets 1..28):

Relu 1 6 13 14, LeakyRelu 1 6 16, PRelu 1 6 7 9 16, Elu 1 6 22, Selu 1 6 22, Celu 12 28,
Sigmoid 1 6 13, HardSigmoid 1 6 22, HardSwish 14 22, Softplus 1 22, Softsign 1 22,
Tanh 1 6 13, Gelu 20 (``approximate`` 'none' | 'tanh'), Mish 18 22, ThresholdedRelu 10 22,
Shrink 9, Swish 24, Softmax 1 11 13, LogSoftmax 1 11 13, Hardmax 1 11 13.

Version notes.  Softmax/LogSoftmax/Hardmax before 13 coerce the input to 2-D at ``axis``
(``[a0*...*a(k-1), ak*...*a(n-1)]``) and normalise over the second dimension; from 13 on
they work along the single axis ``axis`` (default -1).  Hardmax marks the first maximum.
The softmax family computes float16 in float16 (each numpy step rounded, as the reference
implementation that generated the ONNX vectors does).
PRelu 1 and 6 take a slope of one element, of X's shape, or of X's channel count (dimension
1); from 7 on the slope broadcasts to X unidirectionally (6.6.3).  ``consumed_inputs`` is
ignored.  Otherwise float16, bfloat16 and the float8 types are computed in float32 and
rounded back.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.runtime import KernelTable

from .elementwise import erf

KERNELS = KernelTable()
_IGNORE = {"all": "ignore"}


def _float(fn, native16=False):
    """A kernel body ``fn(x)`` on float32/float64 (narrower floats widened to float32 and
    the result rounded back, float16 too unless ``native16``; integers are passed through)."""
    def run(x):
        if x.ndim == 0:                    # ufuncs give numpy scalars for 0-d arrays: work in 1-d
            return run(x.reshape(1)).reshape(())
        with np.errstate(**_IGNORE):
            dt = x.dtype
            if (dt == np.float16 and not native16) or dt.kind == "V":
                return np.asarray(fn(x.astype(np.float32))).astype(dt)
            r = np.asarray(fn(x))
            return r if r.dtype == dt else r.astype(dt)
    return run


def _register(name, *versions, native16=False):
    """Register ``make(ctx) -> fn(x)`` wrapped by :func:`_float`."""
    def deco(make):
        KERNELS.register(name, *versions)(lambda ctx: _float(make(ctx), native16))
        return make
    return deco


def _softplus_fn(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), without overflow."""
    t = np.abs(x)
    np.negative(t, out=t)
    np.exp(t, out=t)
    np.log1p(t, out=t)
    t += np.clip(x, 0, np.inf)
    return t


def _negative_part_scaled(x, slope):
    """x for x >= 0, slope*x for x < 0, as max(x,0) + min(x,0)*slope: exact, and without the
    masked selects numpy runs slowly on unpredictable masks."""
    r = np.clip(x, -np.inf, 0) if x.dtype.kind == "f" else np.minimum(x, 0)
    r *= slope
    r += np.clip(x, 0, np.inf) if x.dtype.kind == "f" else np.maximum(x, 0)
    return r


def _sigmoid(x):
    t = np.negative(x)
    np.exp(t, out=t)        # exp(-x) overflows to inf for very negative x: 1/(1+inf) = 0, exact
    t += 1
    return np.divide(1, t, out=t)


# ----------------------------------------------------------------------------- rectifiers
@KERNELS.register("Relu", 1, 6, 13, 14)
def _relu(ctx):
    def run(x):
        if x.dtype.kind == "V":
            return np.clip(x.astype(np.float32), 0, np.inf).astype(x.dtype)
        if x.dtype.kind == "f":
            return np.asarray(np.clip(x, 0, np.inf))        # np.clip is the vectorised loop
        return np.asarray(np.maximum(x, x.dtype.type(0)))
    return run


@_register("LeakyRelu", 1, 6, 16)
def _leaky_relu(ctx):
    alpha = float(ctx.attr("alpha", 0.01))
    if 0.0 <= alpha <= 1.0:
        def fn(x):                          # max(x, alpha*x) is exact for 0 <= alpha <= 1
            r = x * x.dtype.type(alpha)
            return np.maximum(r, x, out=r)
        return fn
    return lambda x: _negative_part_scaled(x, x.dtype.type(alpha))


@KERNELS.register("PRelu", 1, 6, 7, 9, 16)
def _prelu(ctx):
    legacy = ctx.since_version < 7

    def run(x, slope):
        if legacy and slope.shape != x.shape and slope.size != 1:
            if slope.ndim == 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1]:
                slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))     # one slope per channel
        elif legacy and slope.size == 1:
            slope = slope.reshape(())
        try:
            ok = np.broadcast_shapes(x.shape, slope.shape) == x.shape
        except ValueError:
            ok = False
        if not ok:
            ctx.fail(f"slope of shape {slope.shape} does not broadcast unidirectionally to X of shape {x.shape}")
        return _float(lambda v: _negative_part_scaled(v, slope.astype(v.dtype, copy=False)))(x)
    return run


@_register("ThresholdedRelu", 10, 22)
def _thresholded_relu(ctx):
    alpha = float(ctx.attr("alpha", 1.0))

    def fn(x):
        r = x * (x > x.dtype.type(alpha))  # a product, not np.where: numpy's select is slow
        r += 0                             # -0 -> +0
        if not np.isfinite(r.sum()):
            r[np.isnan(r)] = 0             # NaN is not > alpha: 0
        return r
    return fn


@_register("Elu", 1, 6, 22)
def _elu(ctx):
    alpha = float(ctx.attr("alpha", 1.0))

    def fn(x):
        neg = np.expm1(np.clip(x, -np.inf, 0))
        neg *= x.dtype.type(alpha)
        neg += np.clip(x, 0, np.inf)       # x > 0: x;  x <= 0: alpha * (exp(x) - 1)
        return neg
    return fn


@_register("Selu", 1, 6, 22)
def _selu(ctx):
    alpha, gamma = float(ctx.attr("alpha")), float(ctx.attr("gamma"))

    def fn(x):
        r = np.expm1(np.clip(x, -np.inf, 0))
        r *= x.dtype.type(alpha)
        r += np.clip(x, 0, np.inf)
        r *= x.dtype.type(gamma)
        return r
    return fn


@_register("Celu", 12, 28)
def _celu(ctx):
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha == 0.0:
        ctx.fail("alpha must not be 0")

    def fn(x):
        a = x.dtype.type(alpha)
        neg = np.expm1(x / a)
        neg *= a
        np.clip(neg, -np.inf, 0, out=neg)
        neg += np.clip(x, 0, np.inf)
        return neg
    return fn


@_register("Shrink", 9)
def _shrink(ctx):
    bias, lambd = float(ctx.attr("bias", 0.0)), float(ctx.attr("lambd", 0.5))

    def fn(x):
        if x.dtype.kind in "iu":       # integers: computed in double, truncated back
            xf = x.astype(np.float64)
            return np.where(xf < -lambd, xf + bias, np.where(xf > lambd, xf - bias, 0.0))
        t = x.dtype.type
        return np.where(x < t(-lambd), x + t(bias), np.where(x > t(lambd), x - t(bias), t(0)))
    return fn


# ----------------------------------------------------------------------------- smooth
@_register("Sigmoid", 1, 6, 13)
def _sigmoid_kernel(ctx):
    return _sigmoid


@_register("HardSigmoid", 1, 6, 22)
def _hard_sigmoid(ctx):
    alpha, beta = float(ctx.attr("alpha", 0.2)), float(ctx.attr("beta", 0.5))

    def fn(x):
        r = x * x.dtype.type(alpha)
        r += x.dtype.type(beta)
        np.clip(r, 0, 1, out=r)
        return r
    return fn


@_register("HardSwish", 14, 22)
def _hard_swish(ctx):
    def fn(x):
        r = x * x.dtype.type(1.0 / 6.0)
        r += x.dtype.type(0.5)
        np.clip(r, 0, 1, out=r)
        r *= x
        return r
    return fn


@_register("Softplus", 1, 22)
def _softplus(ctx):
    return _softplus_fn


@_register("Softsign", 1, 22)
def _softsign(ctx):
    def fn(x):
        d = np.abs(x)
        d += 1
        return np.divide(x, d, out=d)
    return fn


@_register("Tanh", 1, 6, 13)
def _tanh(ctx):
    return np.tanh


@_register("Gelu", 20)
def _gelu(ctx):
    mode = ctx.attr_str("approximate", "none")
    if mode not in ("none", "tanh"):
        ctx.fail(f"approximate must be 'none' or 'tanh', got {mode!r}")
    if mode == "tanh":
        c2 = 2.0 * math.sqrt(2.0 / math.pi)

        def fn(x):               # 0.5*x*(1 + tanh(u)) = x * sigmoid(2u): no cancellation at 1 + tanh
            t = x * x
            t *= x.dtype.type(0.044715)
            t += 1
            t *= x
            t *= x.dtype.type(c2)
            t = _sigmoid(t)
            t *= x
            return t
        return fn

    def fn(x):
        if x.dtype == np.float32:
            return _gelu32(x)
        t = erf(x * (1.0 / math.sqrt(2.0)))
        t += 1
        t *= x
        t *= 0.5
        return t
    return fn


# erfc(a) = exp(-a^2) * P(a) / Q(a) for 0 <= a <= 10 (a least-squares fit of the relative
# error: < 3e-8 in float64, ~1e-6 in float32 arithmetic where exp(-a^2) dominates).
_ERFC_P = (1.0000000279337016, 1.2495480487493784, 0.7438750972076325, 0.23531385885640696,
           0.03417619159728849)
_ERFC_Q = (1.0, 2.377928648348622, 2.427062535154566, 1.348380753710019, 0.41710660204233035,
           0.06057510184873808)


def _poly(a, coefs):
    r = a * coefs[-1]
    for c in coefs[-2:0:-1]:
        r += c
        r *= a
    r += coefs[0]
    return r


def _gelu32(x):
    """0.5 * x * (1 + erf(x/sqrt 2)) = 0.5 * x * erfc(-x/sqrt 2): erfc of |x|/sqrt 2 is
    accurate in relative terms, so the negative tail keeps its precision (1 + erf cancels)."""
    a = np.abs(x)
    a *= np.float32(1.0 / math.sqrt(2.0))
    np.clip(a, 0, 10, out=a)                   # erfc(10) ~ 2e-45: 0 in float32
    e = _poly(a, _ERFC_P)
    e /= _poly(a, _ERFC_Q)
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    e *= a                                     # erfc(|x|/sqrt 2)
    a = 2 - 2 * e                              # x >= 0: erfc(-z) = 2 - erfc(z)
    a *= x >= 0
    e += a
    e *= x
    e *= np.float32(0.5)
    return e


@_register("Mish", 18, 22)
def _mish(ctx):
    def fn(x):
        t = _softplus_fn(x)
        np.tanh(t, out=t)
        t *= x
        return t
    return fn


@_register("Swish", 24)
def _swish(ctx):
    alpha = float(ctx.attr("alpha", 1.0))

    def fn(x):
        s = _sigmoid(x * x.dtype.type(alpha))
        s *= x
        return s
    return fn


# ----------------------------------------------------------------------------- softmax family
def _normalizer(ctx, body):
    """Apply ``body(x, axis)`` (``axis`` an int, keepdims reductions) as the version requires."""
    legacy = ctx.since_version < 13
    axis = int(ctx.attr("axis", 1 if legacy else -1))

    def fn(x):
        r = x.ndim
        a = axis + r if axis < 0 else axis
        if not (0 <= a < r or (legacy and a == r)):
            ctx.fail(f"axis {axis} is out of range for an input of rank {r}")
        if x.size == 0:
            return x.copy()
        if legacy:
            n = math.prod(x.shape[:a])
            return body(x.reshape(n, x.size // n), 1).reshape(x.shape)
        return body(x, a)
    return fn


def _softmax(x, axis):
    e = x - x.max(axis=axis, keepdims=True)
    np.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _log_softmax(x, axis):
    e = x - x.max(axis=axis, keepdims=True)
    s = np.exp(e).sum(axis=axis, keepdims=True)
    e -= np.log(s)
    return e


def _hardmax(x, axis):
    y = np.zeros_like(x)
    np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return y


@_register("Softmax", 1, 11, 13, native16=True)
def _softmax_kernel(ctx):
    return _normalizer(ctx, _softmax)


@_register("LogSoftmax", 1, 11, 13, native16=True)
def _log_softmax_kernel(ctx):
    return _normalizer(ctx, _log_softmax)


@_register("Hardmax", 1, 11, 13, native16=True)
def _hardmax_kernel(ctx):
    return _normalizer(ctx, _hardmax)
