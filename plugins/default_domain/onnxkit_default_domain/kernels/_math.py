"""Special functions the portable kernels need and the array API standard lacks: ``erfc``.

:func:`erfc` works with any array namespace ``xp`` on float32 and float64 arrays (narrower
floats are widened by the caller).  It is accurate in *relative* terms over the whole line,
the tail included, so ``0.5 * x * erfc(-x / sqrt 2)`` (Gelu) keeps its precision where
``1 + erf`` would cancel:

* float64: a Taylor polynomial of degree 20 around the nearest multiple of 1/8 for
  ``|z| < 8`` (relative error below 1e-14), the asymptotic series
  ``exp(-z^2) / (z sqrt pi) * sum (-1)^n (2n-1)!! / (2 z^2)^n`` above (14 terms: below 1e-15);
* float32: ``exp(-a^2) * P(a) / Q(a)`` for ``a = |z|`` (a least-squares fit of the relative
  error on [0, 10]: < 3e-8 in float64, ~1e-6 in float32 arithmetic), ``a`` clipped at
  :data:`ERFC32_CLIP`, where ``exp(-a^2)`` is 0 in float32.

Negative arguments use ``erfc(-a) = 2 - erfc(a)``.  NaN gives NaN; erfc(+inf) = 0,
erfc(-inf) = 2.  Nothing here warns on numpy (no overflow or invalid operation is evaluated).
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import arrays

from ._common import device_of

# -- float32 ------------------------------------------------------------------------------------
#: erfc(a) = exp(-a^2) * P(a) / Q(a), 0 <= a <= 10.
ERFC32_P = (1.0000000279337016, 1.2495480487493784, 0.7438750972076325, 0.23531385885640696,
            0.03417619159728849)
ERFC32_Q = (1.0, 2.377928648348622, 2.427062535154566, 1.348380753710019, 0.41710660204233035,
            0.06057510184873808)
#: Where float32 erfc is 0: exp(-10.5^2) ~ 1e-48 underflows (erfc(10) ~ 2e-45 is one subnormal).
ERFC32_CLIP = 10.5


def poly(a, coefs):
    """``sum coefs[k] * a**k`` by Horner's rule (a new array; ``a`` is not written)."""
    r = a * coefs[-1]
    for c in coefs[-2:0:-1]:
        r = (r + c) * a
    return r + coefs[0]


def _erfc32_positive(xp, a):
    """erfc(a) for float32 ``a >= 0`` (NaN passes through)."""
    a = xp.clip(a, 0, ERFC32_CLIP)
    return xp.exp(-(a * a)) * (poly(a, ERFC32_P) / poly(a, ERFC32_Q))


# -- float64 ------------------------------------------------------------------------------------
_H, _TOP, _K, _ASYMPTOTIC_TERMS = 0.125, 8.0, 20, 14


def _taylor_table() -> np.ndarray:
    """``table[k, i]``: the k-th Taylor coefficient of erfc around ``c = i * _H``.

    g = erfc' = -2/sqrt(pi) exp(-t^2) solves g' = -2 t g, so g's coefficients around c obey
    (k+1) b[k+1] = -2 (c b[k] + b[k-1]); erfc's are erfc(c) and b[k-1] / k."""
    n = int(_TOP / _H) + 1
    table = np.zeros((_K + 1, n))
    for i in range(n):
        c = i * _H
        b = [-2.0 / math.sqrt(math.pi) * math.exp(-c * c)]
        while len(b) < _K:
            k = len(b) - 1
            b.append(-2.0 * (c * b[k] + (b[k - 1] if k else 0.0)) / (k + 1))
        table[:, i] = [math.erfc(c)] + [bk / (k + 1) for k, bk in enumerate(b)]
    return table


_TABLE = _taylor_table()
#: (-1)^n (2n-1)!! for the asymptotic series in t = 1 / (2 z^2).
_ASYMPTOTIC = tuple((-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(_ASYMPTOTIC_TERMS))


_TABLES: dict = {}


def _table(xp, like):
    """The Taylor table as an array of ``xp`` on the device of ``like`` (made once per device)."""
    dev = device_of(like)
    key = (xp.__name__, str(dev))
    if key not in _TABLES:
        _TABLES[key] = xp.asarray(_TABLE, device=dev)
    return _TABLES[key]


def _erfc64_positive(xp, a):
    """erfc(a) for float64 ``a >= 0`` (NaN passes through)."""
    shape = tuple(a.shape)
    a = xp.reshape(a, (-1,))                             # take: 1-d indices
    near = a < _TOP
    t = xp.where(near, a, _TOP)                         # NaN, inf -> _TOP: the index stays valid
    idx = xp.round(t * (1.0 / _H))
    d = t - idx * _H
    idx = xp.astype(idx, xp.int64)
    table = _table(xp, a)
    r = xp.take(table[_K, ...], idx)
    for k in range(_K - 1, -1, -1):
        r = r * d + xp.take(table[k, ...], idx)
    z = xp.where(near, _TOP, a)                          # the asymptotic branch on z >= 8 only
    s = poly(1.0 / (2.0 * z * z), _ASYMPTOTIC)
    tail = xp.exp(-(z * z)) / (z * math.sqrt(math.pi)) * s
    return xp.reshape(xp.where(near, r, tail), shape)


def erfc(xp, z):
    """The complementary error function of a float32 or float64 array (a new array)."""
    a = xp.abs(z)
    e = _erfc64_positive(xp, a) if arrays.dtype_name(z.dtype) == "float64" else _erfc32_positive(xp, a)
    return xp.where(z < 0, 2 - e, e)
