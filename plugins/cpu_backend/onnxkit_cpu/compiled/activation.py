"""Compiled loops of the activations and the softmax family (overrides/activation.py).

Every loop takes C-contiguous arrays the override checked (1-D, or rows as stated) and writes
an output the override allocated; none allocates, none raises for data values.

Precision:

* :data:`HARD_SIGMOID` (HardSigmoid, HardSwish) is the numpy body's float sequence — ``r = x *
  alpha``, ``r + beta``, clipped to [0, 1] as ``np.clip`` (NaN and -0 pass), ``* x`` for
  HardSwish — in x's type: bit-identical.
* ``mlas_logistic`` and ``mlas_tanh`` (float32 Sigmoid and Tanh) are onnxruntime's sequence
  (``onnxkit_default_domain``'s ``mlas_logistic`` / ``mlas_tanh``) in float32 with true fused
  multiply-adds (:func:`_fma_intrinsic`) and no fast-math flag: bit-identical to those numpy
  bodies and to onnxruntime's FMA3 kernels.
* The others evaluate in float64 and round once to x's type (float32 results are then within
  about 1 ulp of the exact function, closer than the float32 numpy bodies, whose ``x - max``
  and ``exp`` each round in float32: softmax up to 10 ulp).  Their exponential is :func:`_exp_py`, written here so
  that LLVM vectorizes the loops around it (numba's ``math.exp`` is one libm call per element,
  much slower than numpy's SIMD exp): Cody-Waite reduction ``v = k ln2 + r``, ``|r| <= ln2 / 2``,
  ``exp(r)`` by its Taylor polynomial of degree 13 (truncation < 5e-18 relative), ``2^k`` as
  two exact powers of two built from their bits (so subnormal results round once); relative
  error below 3e-16 over the whole range (tests/test_compiled_norm_act.py), exp(v) = inf above
  709.79, 0 below -745.2, NaN for NaN.
* Gelu 'none' on float32 (loop 'gelu32') is the numpy body's formula (overrides/activation.py
  ``_gelu32``: ``max(x, 0) - exp(-b^2 / 2) P~(b) / Q~(b)``, the portable erfc's rational), in
  float64: its error is that rational's, 2.8e-8 relative at most (the negative tail included),
  then one rounding: within 1 ulp (the float32 body's own rounding of ``b^2 / 2`` costs it up
  to 4e-6 relative near x = -12).  On float64 (loop 'gelu64') it is ``0.5 x erfc(-x / sqrt 2)``
  with libm's erfc (a few ulp, plus ``x / sqrt 2``'s rounding, amplified ~x^2 times in the
  tail: 1e-13 relative at x = -37).
* The loops but HardSigmoid's and the MLAS ones are compiled with ``fastmath={"contract"}`` only: a product and
  a sum may become one fused multiply-add (rounded once instead of twice: as accurate or more;
  it halves the cost of the polynomials).  The errors above are measured so.
* Sums (softmax's denominator) are float64 sums of the row compiled with ``fastmath={"reassoc"}``
  only (:func:`_sum_py`): the order of a sum of n positive terms moves its result by at most
  n 2^-53 relative (7e-13 for a row of 6625), far inside Clause 11's tolerances; no other
  fast-math flag (NaN and inf keep their IEEE behaviour).
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit_default_domain.api import MLAS_LOGISTIC, MLAS_TANH
from onnxkit_cpu.compiled import kernel

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01        # fdlibm's split of ln 2: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_EXP_HI, _EXP_LO = 710.0, -746.0            # exp is inf above / 0 below (after rounding)
#: 1 / k! for k = 13 .. 2 (Horner's rule from the highest power)
_INV_FACT = tuple(1.0 / math.factorial(k) for k in range(13, 1, -1))
_C13, _C12, _C11, _C10, _C9, _C8, _C7, _C6, _C5, _C4, _C3, _C2 = _INV_FACT
_SQRT_HALF = 1.0 / math.sqrt(2.0)

#: MLAS's float32 logistic and tanh (``onnxkit_default_domain``'s ``mlas_logistic`` / ``mlas_tanh``):
#: the clamping range and the coefficients, highest degree first, as float32 values (the
#: ``_LG_*`` and ``_TH_*`` names are compile-time constants of the loops)
(_LG_LO, _LG_HI), (_LG_P0, _LG_P1, _LG_P2, _LG_P3, _LG_P4), (_LG_Q0, _LG_Q1, _LG_Q2, _LG_Q3, _LG_Q4, _LG_Q5) = \
    MLAS_LOGISTIC
(_TH_LO, _TH_HI), (_TH_P0, _TH_P1, _TH_P2, _TH_P3, _TH_P4, _TH_P5, _TH_P6), (_TH_Q0, _TH_Q1, _TH_Q2, _TH_Q3) = MLAS_TANH
(_LG_LO, _LG_HI, _LG_P0, _LG_P1, _LG_P2, _LG_P3, _LG_P4, _LG_Q0, _LG_Q1, _LG_Q2, _LG_Q3, _LG_Q4, _LG_Q5,
 _TH_LO, _TH_HI, _TH_P0, _TH_P1, _TH_P2, _TH_P3, _TH_P4, _TH_P5, _TH_P6, _TH_Q0, _TH_Q1, _TH_Q2, _TH_Q3) = (
    np.float32(v) for v in (_LG_LO, _LG_HI, _LG_P0, _LG_P1, _LG_P2, _LG_P3, _LG_P4, _LG_Q0, _LG_Q1, _LG_Q2, _LG_Q3,
                            _LG_Q4, _LG_Q5, _TH_LO, _TH_HI, _TH_P0, _TH_P1, _TH_P2, _TH_P3, _TH_P4, _TH_P5, _TH_P6,
                            _TH_Q0, _TH_Q1, _TH_Q2, _TH_Q3))
_HALF32, _ZERO32 = np.float32(0.5), np.float32(0.0)

#: compiled helpers, bound by :func:`bind_helpers` before a loop that calls them compiles
_from_bits = _exp = _sum = _fma = None


def _from_bits_intrinsic():
    """An intrinsic reinterpreting an int64's bits as a float64 (numba has no scalar view)."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def from_bits(typingctx, bits):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir.DoubleType())
        return types.float64(types.int64), codegen
    return from_bits


def _fma_intrinsic():
    """An intrinsic ``fma(a, b, c)`` of three float32 values: ``a * b + c`` rounded once
    (LLVM's ``llvm.fma.f32``: one instruction where the CPU has FMA, libm's ``fmaf`` elsewhere;
    vectorized in a loop)."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def fma(typingctx, a, b, c):
        def codegen(context, builder, sig, args):
            f32 = ir.FloatType()
            fn = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32, f32, f32]))
            return builder.call(fn, args)
        return types.float32(types.float32, types.float32, types.float32), codegen
    return fma


def _exp_py(v):
    """exp of float64 ``v`` (module docstring): vectorizable arithmetic only."""
    if v > _EXP_HI:
        v = _EXP_HI
    if v < _EXP_LO:
        v = _EXP_LO
    k = np.floor(v * _LOG2E + 0.5)
    k = k if k == k else 0.0                  # NaN: any k (p is NaN), kept a valid integer
    r = (v - k * _LN2_HI) - k * _LN2_LO
    p = _C13
    p = p * r + _C12
    p = p * r + _C11
    p = p * r + _C10
    p = p * r + _C9
    p = p * r + _C8
    p = p * r + _C7
    p = p * r + _C6
    p = p * r + _C5
    p = p * r + _C4
    p = p * r + _C3
    p = p * r + _C2
    p = p * r + 1.0
    p = p * r + 1.0
    ki = int(k)
    h = ki >> 1                                # 2^k = 2^h 2^(k - h), both normal
    return p * _from_bits((h + 1023) << 52) * _from_bits((ki - h + 1023) << 52)


def _sum_py(a, r):
    """The float64 sum of row ``r`` of the 2-D ``a`` (compiled with reassociation: vectorized)."""
    s = 0.0
    for j in range(a.shape[1]):
        s += a[r, j]
    return s


def _hard_sigmoid(x, y, alpha, beta, swish):
    """``y = clip(x * alpha + beta, 0, 1)`` (``* x`` where ``swish``); alpha, beta of x's type."""
    zero, one = x.dtype.type(0), x.dtype.type(1)
    for i in range(x.shape[0]):
        r = x[i] * alpha
        r = r + beta
        if r < zero:
            r = zero
        elif r > one:
            r = one
        y[i] = r * x[i] if swish else r


def _sigmoid(x, y):
    """``y = 1 / (1 + exp(-x))`` in float64 (exp(-x) = inf gives 0)."""
    for i in range(x.shape[0]):
        y[i] = 1.0 / (1.0 + _exp(-np.float64(x[i])))


def _mlas_logistic(x, y):
    """float32 ``y`` = onnxruntime's sigmoid of float32 ``x``: :data:`MLAS_LOGISTIC`'s sequence
    (``onnxkit_default_domain``'s ``mlas_logistic``), every multiply-add one fused float32
    operation (:func:`_fma_intrinsic`); bit-identical to that numpy body."""
    for i in range(x.shape[0]):
        v = x[i]
        if v < _LG_LO:                        # NaN passes both tests
            v = _LG_LO
        if v > _LG_HI:
            v = _LG_HI
        v2 = v * v
        p = _fma(_fma(_fma(_fma(v2, _LG_P0, _LG_P1), v2, _LG_P2), v2, _LG_P3), v2, _LG_P4)
        q = _fma(_fma(_fma(_fma(_fma(v2, _LG_Q0, _LG_Q1), v2, _LG_Q2), v2, _LG_Q3), v2, _LG_Q4), v2, _LG_Q5)
        r = (p * v) / q + _HALF32
        y[i] = r if not r < _ZERO32 else _ZERO32


def _mlas_tanh(x, y):
    """float32 ``y`` = onnxruntime's tanh of float32 ``x`` (as :func:`_mlas_logistic`)."""
    for i in range(x.shape[0]):
        v = x[i]
        if v < _TH_LO:
            v = _TH_LO
        if v > _TH_HI:
            v = _TH_HI
        v2 = v * v
        p = _fma(_fma(_fma(_fma(_fma(_fma(v2, _TH_P0, _TH_P1), v2, _TH_P2), v2, _TH_P3), v2, _TH_P4), v2, _TH_P5),
                 v2, _TH_P6)
        q = _fma(_fma(_fma(v2, _TH_Q0, _TH_Q1), v2, _TH_Q2), v2, _TH_Q3)
        y[i] = (p * v) / q


def _gelu_tanh(x, y):
    """Gelu 'tanh' ``0.5 x (1 + tanh u) = x / (1 + exp(-2u))``, ``u = c (x + 0.044715 x^3)``,
    in float64: no cancellation in the negative tail; -inf gives NaN (-inf / inf) as the
    definition's ``-inf * 0``, +inf gives +inf."""
    c = 2.0 * math.sqrt(2.0 / math.pi)
    for i in range(x.shape[0]):
        v = np.float64(x[i])
        y[i] = v / (1.0 + _exp(-c * (v + 0.044715 * (v * v * v))))


def _gelu32(x, y, pq, cap):
    """Gelu 'none' of float32 ``x`` by overrides/activation.py's ``_gelu32`` formula in float64:
    ``pq`` (2, 6) float64 rows of P~ and Q~ (lowest power first), ``cap`` the clip of |x|."""
    p0, p1, p2, p3, p4, p5 = pq[0, 0], pq[0, 1], pq[0, 2], pq[0, 3], pq[0, 4], pq[0, 5]
    q0, q1, q2, q3, q4, q5 = pq[1, 0], pq[1, 1], pq[1, 2], pq[1, 3], pq[1, 4], pq[1, 5]
    for i in range(x.shape[0]):
        v = np.float64(x[i])
        b = abs(v)
        if b > cap:
            b = cap
        p = ((((p5 * b + p4) * b + p3) * b + p2) * b + p1) * b + p0
        q = ((((q5 * b + q4) * b + q3) * b + q2) * b + q1) * b + q0
        t = _exp(-0.5 * (b * b)) * (p / q)
        m = 0.0 if v >= 0.0 else v             # min(v, 0), NaN kept
        y[i] = (v - m) - t                     # max(v, 0) - q; -inf - -inf = NaN


def _gelu64(x, y):
    """Gelu 'none' of float64 ``x``: ``0.5 x erfc(-x / sqrt 2)`` (libm's erfc)."""
    for i in range(x.shape[0]):
        v = x[i]
        y[i] = 0.5 * v * math.erfc(-v * _SQRT_HALF)


def _exp_loop(x, y):
    """``y = exp(x)`` by :func:`_exp_py` (float64 ``x``; the tests' handle on it)."""
    for i in range(x.shape[0]):
        y[i] = _exp(x[i])


def _softmax_rows(x, y, log):
    """Softmax (``log``: LogSoftmax) of each row of the 2-D ``x`` into ``y``: ``e = exp(x -
    max)`` in float64 (stored in y), ``s`` its float64 sum, then ``e * (1 / s)`` or ``(x - max)
    - log s``, each rounded once (float32 results: within about 1 ulp).  A row holding NaN
    gives NaN; a row whose maximum is +inf or -inf gives NaN (``inf - inf``), as the numpy
    body.  (Indices are row and column, both known non-negative: LLVM then loads and stores
    whole vectors.)"""
    rows, n = x.shape
    for r in range(rows):
        m = x[r, 0]
        for j in range(1, n):
            if x[r, j] > m:         # NaN skipped (unless first): exp(NaN - m) makes s NaN
                m = x[r, j]
        mf = np.float64(m)
        for j in range(n):
            y[r, j] = _exp(np.float64(x[r, j]) - mf)
        s = _sum(y, r)
        if log:
            ls = math.log(s)
            for j in range(n):
                y[r, j] = (np.float64(x[r, j]) - mf) - ls
        else:
            q = 1.0 / s                 # e * (1 / s): 2^-53 from e / s, then rounded once
            for j in range(n):
                y[r, j] = y[r, j] * q


_EXP = kernel(_exp_py, fastmath={"contract"})
_SUM = kernel(_sum_py, fastmath={"reassoc"})
HARD_SIGMOID = kernel(_hard_sigmoid)
#: no fast-math flag: the float32 and float64 steps must round where the sequence says
MLAS = {"logistic": kernel(_mlas_logistic), "tanh": kernel(_mlas_tanh)}
_LOOPS = {name: kernel(fn, fastmath={"contract"}) for name, fn in (("sigmoid", _sigmoid), ("gelu_tanh", _gelu_tanh),
                                            ("gelu32", _gelu32), ("gelu64", _gelu64),
                                            ("softmax", _softmax_rows), ("exp", _exp_loop))}


def bind_helpers():
    """Compile-bind the helpers the loops call; False where compiled loops are off."""
    global _from_bits, _exp, _sum
    exp = _EXP.get()
    if exp is None:
        return False
    if _from_bits is None:
        _from_bits = _from_bits_intrinsic()
    _exp, _sum = exp, _SUM.get()
    return True


def loop(name: str):
    """The compiled loop ``name`` ('sigmoid', 'gelu_tanh', 'gelu32', 'gelu64', 'softmax',
    'hard_sigmoid', 'mlas_logistic', 'mlas_tanh' or 'exp'; or a float32 loop of
    :mod:`onnxkit_cpu.compiled.act32`, ``act32.NAMES``, imported on first demand), or None where
    compiled loops are off (:mod:`onnxkit_cpu.compiled`)."""
    if name in ("softmax32", "gelu_erf32", "gelu_tanh32", "exp32"):
        from onnxkit_cpu.compiled import act32
        return act32.loop(name)
    if name == "hard_sigmoid":
        return HARD_SIGMOID.get()
    if name in ("mlas_logistic", "mlas_tanh"):
        global _fma
        compiled = MLAS[name[5:]].get()
        if compiled is not None and _fma is None:
            _fma = _fma_intrinsic()
        return compiled
    return _LOOPS[name].get() if bind_helpers() else None
