"""Element-wise unary math of ai.onnx (every backend): Abs, Neg, Ceil, Floor, Sqrt, Exp, Log,
Reciprocal, the trigonometric and hyperbolic functions and their inverses, Round, Sign, Erf,
IsNaN, IsInf, Not, BitwiseNot, every definition of opsets 1..28.

Rules.  Narrow floats (float16, bfloat16, ...) are computed in float32 and rounded back once;
outputs keep the input element type.  Round rounds half to even.  Sign keeps NaN.  Erf: float64
(and the integer inputs Erf-9 admits, whose results are then truncated to the input type) by
Taylor polynomials to < 1e-15 relative, everything else in float32 by a rational fit to ~5e-7
relative (:func:`erf`, shared with Gelu).  IsInf's ``detect_negative`` / ``detect_positive``
select the signs reported.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable, arrays

from ._common import device_of
from .elementwise import as_array, back, quiet

KERNELS = KernelTable()


# -- erf ---------------------------------------------------------------------------------------
# float64: Taylor polynomials of degree 14 centred on 0, 0.25, ..., 6 (relative error < 1e-15):
# erf^(k)(c) = 2/sqrt(pi) * (-1)^(k-1) * H_{k-1}(c) * exp(-c^2), H the Hermite polynomials.
# Centre 0 is the Maclaurin series, so tiny arguments keep their relative accuracy.
ERF_H, ERF_TOP, ERF_K = 0.25, 6.0, 14


def _erf_table() -> np.ndarray:
    """``[k, i]``: the k-th Taylor coefficient of erf at centre i * ERF_H."""
    n = int(ERF_TOP / ERF_H) + 1
    table = np.zeros((ERF_K + 1, n))
    for i in range(n):
        c = i * ERF_H
        herm = [1.0, 2.0 * c]
        for m in range(1, ERF_K):
            herm.append(2.0 * c * herm[m] - 2.0 * m * herm[m - 1])
        g = 2.0 / math.sqrt(math.pi) * math.exp(-c * c)
        table[0, i] = math.erf(c)
        for k in range(1, ERF_K + 1):
            table[k, i] = (-1) ** (k - 1) * herm[k - 1] * g / math.factorial(k)
    return table


ERF_TAYLOR = _erf_table()
#: float32 and narrower: erf(x) = x * P(x^2) / Q(x^2) on |x| <= 4 (erf(4) rounds to 1 in
#: float32), a least-squares fit of the relative error: below 5e-7 in float32 arithmetic.
ERF_P = (1.1283791529480973, 0.1898384359539563, 0.05265655425223361, 0.003738176117050386,
         0.00028367133870980043, 2.0452349682248336e-06)
ERF_Q = (1.0, 0.5015727947221705, 0.11385917628912247, 0.014912733566180584, 0.0011549132302130815,
         3.7981761538901744e-05)


def _horner(t, coefs):
    r = t * coefs[-1] + coefs[-2]
    for c in coefs[-3::-1]:
        r = r * t + c
    return r


def _erf64(xp, x, table):
    """float64 erf; ``table``: ERF_TAYLOR transposed, as an array of the namespace."""
    a = xp.abs(x)
    idx = xp.minimum(xp.round(a * (1.0 / ERF_H)), float(ERF_TAYLOR.shape[1] - 1))
    d = a - idx * ERF_H
    idx = xp.astype(xp.where(xp.isnan(idx), xp.zeros_like(idx), idx), xp.int64)
    coef = xp.take(table, xp.reshape(idx, (-1,)), axis=0)            # (n, K + 1)
    r = xp.reshape(coef[:, ERF_K], x.shape)
    for k in range(ERF_K - 1, -1, -1):
        r = r * d + xp.reshape(coef[:, k], x.shape)
    r = xp.where(a >= ERF_TOP, xp.ones_like(r), r)
    return xp.copysign(r, x)


def _erf32(xp, x):
    c = xp.clip(x, -4.0, 4.0)
    t = c * c
    r = c * _horner(t, ERF_P) / _horner(t, ERF_Q)
    return xp.clip(r, -1.0, 1.0)


def erf(xp, x, table=None):
    """The error function of ``x`` (any real type): float64 for float64 and integer input,
    else float32.  ``table``: ERF_TAYLOR.T as an array of ``xp`` (made here when None)."""
    if arrays.dtype_name(x.dtype) == "float64" or not arrays.is_float(x.dtype):
        if table is None:
            table = xp.asarray(np.ascontiguousarray(ERF_TAYLOR.T), device=device_of(x))
        return _erf64(xp, xp.astype(x, xp.float64), table)
    return _erf32(xp, x if arrays.dtype_name(x.dtype) == "float32" else xp.astype(x, xp.float32))


@KERNELS.register("Erf", 9, 13)
def erf_kernel(ctx):
    xp = ctx.xp
    table = ctx.from_host(np.ascontiguousarray(ERF_TAYLOR.T))
    # Erf-9 takes integers: the result is truncated to the input's type
    return quiet(lambda x: back(xp, erf(xp, x, table), x.dtype))


# -- the other unary operators -----------------------------------------------------------------
def _unary(body, versions, names):
    """Register ``body(xp) -> fn(x)`` for each op of ``names``; narrow floats in float32."""
    def factory(ctx):
        xp = ctx.xp
        fn = body(xp)

        @quiet
        def run(x):
            if arrays.is_narrow_float(x.dtype):
                return back(xp, fn(xp.astype(x, xp.float32)), x.dtype)
            return as_array(xp, fn(x))
        return run

    for name in names:
        KERNELS.register(name, *versions)(factory)


def _named(fn_name):
    return lambda xp: getattr(xp, fn_name)


_unary(_named("abs"), (1, 6, 13), ["Abs"])
_unary(_named("negative"), (1, 6, 13), ["Neg"])
for _op, _fn in (("Ceil", "ceil"), ("Floor", "floor"), ("Sqrt", "sqrt"), ("Exp", "exp"), ("Log", "log")):
    _unary(_named(_fn), (1, 6, 13), [_op])
_unary(lambda xp: lambda x: 1.0 / x, (1, 6, 13), ["Reciprocal"])
for _op, _fn in (("Sin", "sin"), ("Cos", "cos"), ("Tan", "tan"), ("Asin", "asin"), ("Acos", "acos"),
                 ("Atan", "atan")):
    _unary(_named(_fn), (7, 22), [_op])
for _op, _fn in (("Sinh", "sinh"), ("Cosh", "cosh"), ("Asinh", "asinh"), ("Acosh", "acosh"), ("Atanh", "atanh")):
    _unary(_named(_fn), (9, 22), [_op])
_unary(_named("round"), (11, 22), ["Round"])        # half to even (numpy and torch alike)
_unary(_named("sign"), (9, 13), ["Sign"])           # NaN stays NaN (array API rule)
_unary(_named("logical_not"), (1,), ["Not"])
_unary(_named("bitwise_invert"), (18,), ["BitwiseNot"])


@KERNELS.register("IsNaN", 9, 13, 20)
def is_nan(ctx):
    xp = ctx.xp
    return lambda x: as_array(xp, xp.isnan(xp.astype(x, xp.float32) if arrays.is_narrow_float(x.dtype) else x))


@KERNELS.register("IsInf", 10, 20)
def is_inf(ctx):
    xp = ctx.xp
    neg, pos = bool(ctx.attr("detect_negative")), bool(ctx.attr("detect_positive"))

    def run(x):
        if arrays.is_narrow_float(x.dtype):
            x = xp.astype(x, xp.float32)
        if not (neg or pos):
            return xp.zeros_like(x, dtype=xp.bool)
        r = xp.isinf(x)
        if not neg:
            r = r & (x > 0)
        elif not pos:
            r = r & (x < 0)
        return as_array(xp, r)
    return run
