"""numpy fast paths for the activations of ``onnxkit_default_domain.kernels.activation``.

Only the bodies differ from the portable family: in-place numpy arithmetic (``out=`` into
arrays made here) where the portable body makes one array per step, ``np.clip`` where the
namespace's ``maximum``/``clip`` are slower, products with masks where numpy's ``where`` is
slow, ``put_along_axis`` for Hardmax.  The definitions served, the attributes
(:func:`float_attrs`, :func:`gelu_mode`), the type rules (:func:`in_float`), PRelu's slope
geometry and the softmax family's axis handling (:func:`normalizer`) are the portable
family's, and so is every input a fast path does not take (integers, float64 Gelu).
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit_default_domain.fused import FUSED_DOMAIN
from onnxkit_default_domain.kernels import activation as portable
from onnxkit_default_domain.kernels._math import ERFC32_CLIP, ERFC32_P, ERFC32_Q

KERNELS = KernelTable()


def _fast(name, native16=False):
    """Register ``make(*float_attrs) -> fn(x)`` (a numpy body on float32/float64) for every
    definition of ``name`` the portable family implements, with its type rules."""
    def deco(make):
        def factory(ctx):
            return portable.in_float(ctx.xp, make(*portable.float_attrs(ctx)), native16)
        factory.__name__ = make.__name__
        KERNELS.register(name, *portable.versions(name))(factory)
        return make
    return deco


def _sigmoid(x):
    t = np.negative(x)
    np.exp(t, out=t)        # exp(-x) overflows to inf for very negative x: 1/(1+inf) = 0, exact
    t += 1
    return np.divide(1, t, out=t)


def _softplus(x):
    t = np.abs(x)
    np.negative(t, out=t)
    np.exp(t, out=t)
    np.log1p(t, out=t)
    t += np.clip(x, 0, np.inf)
    return t


def _negative_part_scaled(x, slope):
    """max(x, 0) + min(x, 0) * slope, without the masked selects numpy runs slowly."""
    r = np.clip(x, -np.inf, 0)
    r *= slope
    r += np.clip(x, 0, np.inf)
    return r


# ----------------------------------------------------------------------------- rectifiers
@KERNELS.register("Relu", *portable.versions("Relu"))
def relu(ctx):
    xp = ctx.xp
    other = portable.in_float(xp, portable.relu(ctx, xp), native16=True)
    return lambda x: np.asarray(np.clip(x, 0, np.inf)) if x.dtype.kind == "f" else other(x)


@_fast("LeakyRelu")
def leaky_relu(alpha):
    if not 0.0 <= alpha <= 1.0:
        return lambda x: _negative_part_scaled(x, x.dtype.type(alpha))

    def fn(x):                          # max(x, alpha*x) is exact for 0 <= alpha <= 1
        r = x * x.dtype.type(alpha)
        return np.maximum(r, x, out=r)
    return fn


@KERNELS.register("PRelu", *portable.versions("PRelu"))
def prelu(ctx):
    xp = ctx.xp
    other = portable.prelu(ctx)

    def run(x, slope):
        if x.dtype.kind != "f":
            return other(x, slope)
        slope = slope.reshape(portable.prelu_slope(ctx, x.shape, slope.shape))
        return portable.in_float(xp, lambda v: _negative_part_scaled(v, slope.astype(v.dtype, copy=False)))(x)
    return run


@_fast("ThresholdedRelu")
def thresholded_relu(alpha):
    def fn(x):
        r = x * (x > x.dtype.type(alpha))  # a product, not np.where: numpy's select is slow
        r += 0                             # -0 -> +0
        if not np.isfinite(r.sum()):
            r[np.isnan(r)] = 0             # NaN is not > alpha: 0
        return r
    return fn


@_fast("Elu")
def elu(alpha):
    def fn(x):
        neg = np.expm1(np.clip(x, -np.inf, 0))
        neg *= x.dtype.type(alpha)
        neg += np.clip(x, 0, np.inf)
        return neg
    return fn


@_fast("Selu")
def selu(alpha, gamma):
    def fn(x):
        r = elu(alpha)(x)
        r *= x.dtype.type(gamma)
        return r
    return fn


@_fast("Celu")
def celu(alpha):
    def fn(x):
        a = x.dtype.type(alpha)
        neg = np.expm1(x / a)
        neg *= a
        np.clip(neg, -np.inf, 0, out=neg)
        neg += np.clip(x, 0, np.inf)
        return neg
    return fn


# ----------------------------------------------------------------------------- smooth
@_fast("Sigmoid")
def sigmoid():
    return _sigmoid


@_fast("HardSigmoid")
def hard_sigmoid(alpha, beta):
    def fn(x):
        r = x * x.dtype.type(alpha)
        r += x.dtype.type(beta)
        return np.clip(r, 0, 1, out=r)
    return fn


@_fast("HardSwish")
def hard_swish():
    def fn(x):
        r = hard_sigmoid(1.0 / 6.0, 0.5)(x)
        r *= x
        return r
    return fn


@_fast("Softplus")
def softplus():
    return _softplus


@_fast("Softsign")
def softsign():
    def fn(x):
        d = np.abs(x)
        d += 1
        return np.divide(x, d, out=d)
    return fn


@_fast("Mish")
def mish():
    def fn(x):
        t = _softplus(x)
        np.tanh(t, out=t)
        t *= x
        return t
    return fn


@_fast("Swish")
def swish(alpha):
    def fn(x):
        s = _sigmoid(x * x.dtype.type(alpha))
        s *= x
        return s
    return fn


def _poly(a, coefs):
    """Horner's rule in place on a new array."""
    r = a * coefs[-1]
    for c in reversed(coefs[1:-1]):
        r += c
        r *= a
    return np.add(r, coefs[0], out=r)


def _gelu32(x):
    """0.5 * x * erfc(-x / sqrt 2) for float32 ``x``, with the portable erfc's coefficients."""
    a = np.abs(x)
    a *= np.float32(1.0 / math.sqrt(2.0))
    np.clip(a, 0, ERFC32_CLIP, out=a)
    e = _poly(a, ERFC32_P)
    e /= _poly(a, ERFC32_Q)
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    e *= a                                     # erfc(|x| / sqrt 2)
    a = 2 - 2 * e                              # x >= 0: erfc(-z) = 2 - erfc(z)
    a *= x >= 0
    e += a
    e *= x
    e *= np.float32(0.5)
    return e


def _gelu_tanh(x):
    t = x * x
    t *= x.dtype.type(portable.GELU_TANH_CUBIC)
    t += 1
    t *= x
    t *= x.dtype.type(portable.GELU_TANH_2C)
    t = _sigmoid(t)
    t *= x
    return t


@KERNELS.register("Gelu", 1, domain=FUSED_DOMAIN)     # ai.onnxkit Gelu-1 is ai.onnx Gelu-20
@KERNELS.register("Gelu", *portable.versions("Gelu"))
def gelu(ctx):
    xp = ctx.xp
    if portable.gelu_mode(ctx) == "tanh":
        return portable.in_float(xp, _gelu_tanh)
    other = portable.gelu(ctx, xp)
    return portable.in_float(xp, lambda x: _gelu32(x) if x.dtype == np.float32 else other(x))


# ----------------------------------------------------------------------------- softmax family
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


for _name, _body in (("Softmax", _softmax), ("LogSoftmax", _log_softmax), ("Hardmax", _hardmax)):
    KERNELS.register(_name, *portable.versions(_name))(
        lambda ctx, body=_body: portable.normalizer(ctx, portable.in_float(ctx.xp, body, native16=True)))
