"""numpy fast path of the elementwise math family (portable: ``onnxkit_default_domain/kernels/
elementwise_math.py``, which holds the rules and the coefficients): Erf by the same
polynomials evaluated in place (``out=``, ``take(mode='clip')``), about 1.5x (float32) to 2x
(float64) faster than the portable body on numpy.  :func:`erf` also serves the cpu Gelu."""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, arrays
from onnxkit_default_domain.kernels.elementwise_math import ERF_H, ERF_K, ERF_P, ERF_Q, ERF_TAYLOR, ERF_TOP

KERNELS = KernelTable()


# -- Erf ---------------------------------------------------------------------------------------
def _erf64(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    idx = np.rint(a * (1.0 / ERF_H))
    np.minimum(idx, ERF_TAYLOR.shape[1] - 1, out=idx)
    d = a - idx * ERF_H
    idx = idx.astype(np.intp)                       # NaN -> anything: 'clip' keeps it in range
    r = ERF_TAYLOR[-1].take(idx, mode="clip")
    for k in range(ERF_K - 1, -1, -1):
        r *= d
        r += ERF_TAYLOR[k].take(idx, mode="clip")
    r[a >= ERF_TOP] = 1.0
    return np.copysign(r, x, out=r)


def _erf32(x: np.ndarray) -> np.ndarray:
    c = np.clip(x, -4.0, 4.0)
    t = c * c
    p, q = t * ERF_P[-1], t * ERF_Q[-1]         # both polynomials of t, by Horner's rule, in place
    for cp, cq in zip(ERF_P[-2:0:-1], ERF_Q[-2:0:-1]):
        p += cp
        p *= t
        q += cq
        q *= t
    p += ERF_P[0]
    q += ERF_Q[0]
    p *= c
    p /= q
    return np.clip(p, -1.0, 1.0, out=p)


def erf(x) -> np.ndarray:
    """The error function: float64 for float64 and integer input, else float32."""
    x = np.asarray(x)
    flat = x.reshape(-1)
    with np.errstate(all="ignore"):
        if x.dtype == np.float64 or not arrays.is_float(x.dtype):
            return _erf64(flat.astype(np.float64, copy=False)).reshape(x.shape)
        return _erf32(flat.astype(np.float32, copy=False)).reshape(x.shape)


@KERNELS.register("Erf", 9, 13)
def erf_kernel(ctx):
    def run(x):
        r = erf(x)
        return r if r.dtype == x.dtype else r.astype(x.dtype)   # Erf-9 takes integers: truncated
    return run
