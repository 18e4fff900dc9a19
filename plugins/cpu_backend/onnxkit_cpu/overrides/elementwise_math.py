"""numpy fast paths of the elementwise math family (portable: ``onnxkit_default_domain/kernels/
elementwise_math.py``, which holds the rules and the coefficients): Erf, and Abs, Neg, Sqrt,
Exp, Log, Floor, Ceil, Reciprocal and IsNaN as one direct ufunc call on float32/float64 (see
:func:`~onnxkit_cpu.overrides.elementwise.direct_factory`).

Erf:

float64 (and integers): the portable Taylor polynomials evaluated in place (``out=``,
``take(mode='clip')``), faster than the portable body.  float32 (and narrower): the
portable rational ``x * P(t) / Q(t)``, ``t = x^2``, with both polynomials in one matrix
product: the rows ``t^0 .. t^5`` (four in-place products) times the ``(2, 6)`` coefficient
matrix.  The coefficients are all positive, so the sum of the terms is as well conditioned as
Horner's rule (the results differ from the portable body by a few ulps; the error stays below
4e-7 relative, the fit's), and the ~25 numpy passes of Horner's rule become ~10.  ``t`` is
capped at 16 (|x| = 4, where erf rounds to 1 in float32) and the quotient clipped to [-1, 1]
(beyond 4, ``|x| * P(16) / Q(16)`` exceeds 1).  NaN gives NaN; the warnings of inf * inf are off.
The powers array is per thread and kept between calls of one small size (its row of ones
written once); the result is always a new array.

Where compiled loops are on at planning (:mod:`onnxkit_cpu.compiled`: not in a session's cold
plan), float32 Erf (and float16 / bfloat16, widened to float32 and rounded once) is one compiled
pass of the same rational by Horner's rule (:mod:`onnxkit_cpu.compiled.activation`'s 'erf32',
which states its precision), its elements split across the run's intra-op threads; the numpy
body above serves the cold plan and, with the float64 one, every other input.
"""

from __future__ import annotations

import threading

import numpy as np

from onnxkit.plugin import KernelTable, arrays, parallel_for, splits_across_threads
from onnxkit_cpu.compiled import activation as loops
from onnxkit_cpu.overrides.elementwise import direct_factory
from onnxkit_cpu.overrides.half import Halves, is_half, narrow, widen
from onnxkit_default_domain.api import elementwise_math as portable
from onnxkit_default_domain.api import ERF_H, ERF_K, ERF_P, ERF_Q, ERF_TAYLOR, ERF_TOP

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


#: rows: P's and Q's coefficients, lowest power first (the portable fit's, rounded to float32)
_ERF32_PQ = np.array([ERF_P, ERF_Q], dtype=np.float32)
_ERF32_T_CAP = np.float32(16.0)


_SCRATCH = threading.local()
#: the largest input whose powers array a thread keeps for its next call (rows * 4 bytes each)
_KEEP_POWERS = 1 << 16


def powers_buffer(rows: int, n: int) -> np.ndarray:
    """A ``(rows, n)`` float32 array whose row 0 holds ones, rows 1.. to be written (and row 0
    never): the calling thread's own, kept for its next call of the same shape when ``n`` is
    small.  Erf and the cpu Gelu evaluate their rationals on it."""
    buf = getattr(_SCRATCH, "powers", None)
    if buf is None or buf.shape != (rows, n):
        buf = np.empty((rows, n), dtype=np.float32)
        buf[0] = 1
        if n <= _KEEP_POWERS:
            _SCRATCH.powers = buf
    return buf


def _erf32(x: np.ndarray) -> np.ndarray:
    """erf of a 1-d float32 array (module docstring); a new array."""
    powers = powers_buffer(_ERF32_PQ.shape[1], x.shape[0])
    t = np.multiply(x, x, out=powers[1])
    np.minimum(t, _ERF32_T_CAP, out=t)
    for k in range(2, powers.shape[0]):
        np.multiply(powers[k - 1], t, out=powers[k])
    pq = np.matmul(_ERF32_PQ, powers)
    p = pq[0]
    p *= x
    p /= pq[1]
    return np.clip(p, -1.0, 1.0, out=p)


_F32 = np.dtype(np.float32)


@np.errstate(all="ignore")
def erf(x) -> np.ndarray:
    """The error function: float64 for float64 and integer input, else float32."""
    x = np.asarray(x)
    flat = x.reshape(-1)
    if x.dtype is _F32:
        return _erf32(flat).reshape(x.shape)
    if x.dtype == np.float64 or not arrays.is_float(x.dtype):
        return _erf64(flat.astype(np.float64, copy=False)).reshape(x.shape)
    return _erf32(flat.astype(np.float32, copy=False)).reshape(x.shape)


#: elements of a compiled Erf block worth a thread of its own (as overrides/activation.py's
#: ``ELEMENT_WORK``, which cannot be imported here: that module imports this one)
ELEMENT_WORK = 32768


def _compiled32(loop):
    """Erf of a float32 array of any shape by the compiled ``loop`` (:mod:`onnxkit_cpu.compiled.
    activation`'s 'erf32') into a new array, its elements split across the run's intra-op threads
    (each element computed alike whatever the split)."""
    def f(x):
        xf = np.ascontiguousarray(x).reshape(-1)
        y = np.empty(x.shape, _F32)
        yf = y.reshape(-1)

        def block(lo, hi):
            loop(xf[lo:hi], yf[lo:hi], _ERF32_PQ, _ERF32_T_CAP)

        parallel_for(block, xf.shape[0], grain=ELEMENT_WORK, name="erf.elements")
        return y
    return f


splits_across_threads(("", "Erf"))


@KERNELS.register("Erf", 9, 13)
def erf_kernel(ctx):
    """Erf: float32 (and float16 / bfloat16, widened) by the compiled loop where compiled loops are
    on at planning, else (and for other types) by :func:`erf`."""
    halves = Halves.of(ctx)
    loop = loops.loop("erf32")
    erf32 = erf if loop is None else _compiled32(loop)

    def run(x):
        if x.dtype is _F32:
            return erf32(x)
        if is_half(x.dtype):    # float16 / bfloat16: the float32 erf, rounded once (.half's conversions)
            return narrow(erf32(widen(x, halves)), x.dtype, halves)
        r = erf(x)
        return r if r.dtype == x.dtype else r.astype(x.dtype)   # Erf-9 takes integers: truncated
    return run


# -- the other unary operators: one ufunc call -------------------------------------------------
# float32/float64 (and, for Abs and Neg, integers) straight to the ufunc the portable body
# calls; Reciprocal as its 1 / x; narrow floats and other types take the portable kernel.
for _name, _ufunc, _exact in (("Abs", np.abs, True), ("Neg", np.negative, True), ("Sqrt", np.sqrt, False),
                              ("Exp", np.exp, False), ("Log", np.log, False), ("Floor", np.floor, False),
                              ("Ceil", np.ceil, False), ("Reciprocal", lambda x, out: np.divide(1, x, out=out), False)):
    KERNELS.register(_name, *portable.KERNELS.versions(_name))(
        direct_factory(portable, _name, _ufunc, arity=1, exact=_exact))
KERNELS.register("IsNaN", *portable.KERNELS.versions("IsNaN"))(   # no floating-point flag raised: not quieted
    direct_factory(portable, "IsNaN", np.isnan, arity=1, exact=False, quiet_floats=False))
