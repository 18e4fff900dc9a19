"""Helpers the com.microsoft kernel families share (any array namespace ``xp``).

The kernels build on the ai.onnx domain package's portable machinery where an operator extends
an ai.onnx one (the convolution of FusedConv, the erfc of Gelu, the quantization helpers):
onnxkit-microsoft depends on onnxkit-default-domain, never on a backend.
"""

from __future__ import annotations

import math

from onnxkit.plugin import arrays
from onnxkit_default_domain.api import device_of  # noqa: F401  (the kernels take it from here)

DOMAIN = "com.microsoft"
SQRT1_2 = 1.0 / math.sqrt(2.0)
#: sqrt(2 / pi), the tanh approximation's constant, and its cubic coefficient
TANH_K, TANH_C = math.sqrt(2.0 / math.pi), 0.044715


def const(xp, value, like):
    """A 0-d array ``value`` of ``like``'s dtype on its device."""
    return xp.asarray(value, dtype=like.dtype, device=device_of(like))


def shape_of(x) -> list:
    return [int(d) for d in x.shape]


def work_dtype(xp, dtype):
    """float32 / float64 as they are; float16 and bfloat16 computed in float32."""
    return dtype if arrays.dtype_name(dtype) in ("float32", "float64") else xp.float32


def widen(xp, x):
    """``x`` in its work dtype (no copy where it already is)."""
    wt = work_dtype(xp, x.dtype)
    return x if x.dtype == wt else xp.astype(x, wt)


def cast(xp, x, dtype):
    return x if x.dtype == dtype else xp.astype(x, dtype)


def check_float(ctx, x, what: str, allowed=("float16", "float32", "float64", "bfloat16")) -> None:
    name = arrays.dtype_name(x.dtype)
    if name not in allowed:
        ctx.fail(f"{what} has element type {name}; {ctx.op_type} takes {', '.join(allowed)}")


def sigmoid(xp, x):
    """1 / (1 + exp(-x)) without overflow warnings: exp of a non-positive argument only."""
    e = xp.exp(-xp.abs(x))
    one = const(xp, 1, x)
    return xp.where(x >= 0, one / (one + e), e / (one + e))


def gelu_erf(xp, x):
    """0.5 x erfc(-x / sqrt 2) (x in float32 or float64)."""
    from onnxkit_default_domain.api import erfc

    return 0.5 * x * erfc(xp, -x * SQRT1_2)


def gelu_tanh(xp, x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), written x * sigmoid(2u)."""
    u = TANH_K * (x + TANH_C * x * x * x)
    return x * sigmoid(xp, 2 * u)


def softmax(xp, x, axis: int = -1):
    """Softmax along ``axis``; a row all -inf gives zeros, not NaN."""
    zero = const(xp, 0, x)
    m = xp.max(x, axis=axis, keepdims=True)
    m = xp.where(xp.isinf(m), zero, m)
    e = xp.exp(x - m)
    s = xp.sum(e, axis=axis, keepdims=True)
    return e / xp.where(s == zero, const(xp, 1, x), s)


def activation(ctx, name: str, params):
    """The elementwise function ``f(xp, y)`` of a fused activation (FusedConv's ``activation`` /
    ``activation_params``, FusedGemm's ``activation`` / ``activation_alpha`` ...); ``params`` is
    the list of its float parameters in order (alpha, beta, gamma).  ctx.fail for an unknown name."""
    p = list(params) + [None] * 3
    alpha, beta, gamma = p[0], p[1], p[2]

    def get(v, default):
        return default if v is None else float(v)

    if name in ("", None):
        return lambda xp, y: y
    if name == "Relu":
        return lambda xp, y: xp.where(y > 0, y, const(xp, 0, y))
    if name == "Tanh":
        return lambda xp, y: xp.tanh(y)
    if name == "Sigmoid":
        return lambda xp, y: sigmoid(xp, y)
    if name == "LeakyRelu":
        a = get(alpha, 0.01)
        return lambda xp, y: xp.where(y >= 0, y, y * a)
    if name == "HardSigmoid":
        a, b = get(alpha, 0.2), get(beta, 0.5)
        return lambda xp, y: xp.clip(y * a + b, 0.0, 1.0)
    if name == "Clip":
        lo, hi = get(alpha, -math.inf), get(beta, math.inf)
        return lambda xp, y: xp.clip(y, lo, hi)
    if name == "Elu":
        a = get(alpha, 1.0)
        return lambda xp, y: xp.where(y >= 0, y, (xp.exp(xp.where(y < 0, y, const(xp, 0, y))) - 1) * a)
    if name == "Selu":
        a, g = get(alpha, 1.67326319217681884765625), get(gamma, 1.05070102214813232421875)
        return lambda xp, y: g * xp.where(y > 0, y, (xp.exp(xp.where(y < 0, y, const(xp, 0, y))) - 1) * a)
    if name == "ThresholdedRelu":
        a = get(alpha, 1.0)
        return lambda xp, y: xp.where(y > a, y, const(xp, 0, y))
    if name == "ScaledTanh":
        a, b = get(alpha, 1.0), get(beta, 1.0)
        return lambda xp, y: a * xp.tanh(b * y)
    if name == "Softsign":
        return lambda xp, y: y / (1 + xp.abs(y))
    if name == "Softplus":
        return lambda xp, y: xp.where(y > 0, y, const(xp, 0, y)) + xp.log1p(xp.exp(-xp.abs(y)))
    ctx.fail(f"activation {name!r} is not one this operator fuses "
             "(Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid, Clip, Elu, Selu, ThresholdedRelu, ScaledTanh, "
             "Softsign, Softplus)")
