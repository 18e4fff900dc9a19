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
* The other loops ('sigmoid', 'gelu_tanh', 'softmax': float64 X) evaluate in float64 and round once to x's type (float32 results are then within
  about 1 ulp of the exact function, closer than the float32 numpy bodies, whose ``x - max``
  and ``exp`` each round in float32: softmax up to 10 ulp).  Their exponential is :func:`_exp_py`, written here so
  that LLVM vectorizes the loops around it (numba's ``math.exp`` is one libm call per element,
  much slower than numpy's SIMD exp): Cody-Waite reduction ``v = k ln2 + r``, ``|r| <= ln2 / 2``,
  ``exp(r)`` by its Taylor polynomial of degree 13 (truncation < 5e-18 relative), ``2^k`` as
  two exact powers of two built from their bits (so subnormal results round once); relative
  error below 3e-16 over the whole range (tests/test_compiled_norm_act.py), exp(v) = inf above
  709.79, 0 below -745.2, NaN for NaN.
* Gelu 'none' on float64 (loop 'gelu64') is ``0.5 x erfc(-x / sqrt 2)``
  with libm's erfc (a few ulp, plus ``x / sqrt 2``'s rounding, amplified ~x^2 times in the
  tail: 1e-13 relative at x = -37).
* The loops but HardSigmoid's and the MLAS ones are compiled with ``fastmath={"contract"}`` only: a product and
  a sum may become one fused multiply-add (rounded once instead of twice: as accurate or more;
  it halves the cost of the polynomials).  The errors above are measured so.
* Sums (softmax's denominator) are float64 sums of the row compiled with ``fastmath={"reassoc"}``
  only (:func:`_sum_py`): the order of a sum of n positive terms moves its result by at most
  n 2^-53 relative (7e-13 for a row of 6625), far inside Clause 11's tolerances; no other
  fast-math flag (NaN and inf keep their IEEE behaviour).

**The float32 loops** ('softmax32', 'gelu_erf32', 'gelu_tanh32', 'erf32', 'exp32') compute the
softmax family, Gelu and Erf of float32 X in float32 arithmetic (16 lanes a vector where the processor has
AVX-512, where the float64 loops have 8).  Compile options add
``fastmath={"contract"}`` (a product and a sum may become one fused multiply-add, rounded once:
as accurate or more) and, for the softmax sums only, ``"reassoc"`` (:func:`_exp_sum_py`,
:func:`_exp_sum64_py`: the order of a sum of positive terms, which LLVM then keeps in vector
accumulators: a float32 sum of n terms within about ``n / 64`` ulp).  No other fast-math flag:
NaN and inf keep their IEEE behaviour.

:func:`_exp32_py` is their exp of a float32 in float32 arithmetic: Cody-Waite reduction ``v = k ln2 + r``
with a float32 split of ln 2 (``k * _LN2_HI_F`` exact), ``|r| <= ln2 / 2``, ``exp(r)`` by its
Taylor polynomial of degree 7 (truncation below 5e-9 relative), ``2^k`` as two exact powers of two
built from their bits.  Within 1 ulp of the exact exp where the result is a normal float32
(tests/test_act32.py sweeps it against float64); results that would be subnormal (arguments below
:data:`_FLUSH`, about -87.34) are 0 — an absolute error below 1.2e-38, far inside Clause 11's
float32 tolerance (atol 1e-7), and no subnormal arithmetic (which the processor runs slowly)
happens; arguments above :data:`_OVER` give inf, -inf gives 0, NaN gives NaN.

Precision of the float32 loops (float32 results against the definitions evaluated in float64; the
tests check these bounds):

* Softmax rows (:func:`_softmax32_rows`): ``e = exp(x - max)`` (``x - max`` rounded once, an
  error the exp turns into ``|x - max|`` ulp relative; the exp within 1 ulp), the float32 sum of
  ``e`` (reassociated), ``p = e * float32(1 / sum)``: within ``3 + |x - max| + n / 64`` ulp of
  the exact softmax (results that would be subnormal are 0).  LogSoftmax: ``(x - max) -
  float32(log(sum))``, the sum in float64: within 3 ulp of ``max(|y|, 1)``.  NaN in a row, a row
  whose maximum is +inf, or a row of -inf gives a row of NaN, as the numpy body.
* Gelu 'none' (:func:`_gelu_erf32`): overrides/activation.py's ``_gelu32`` formula ``max(x, 0) -
  exp(-b^2 / 2) P~(b) / Q~(b)`` (``b = min(|x|, cap)``: the portable erfc's rational, 2.8e-8
  relative) in float32, with ``b^2`` kept as an exact sum of two float32 values (``hi + lo``, the
  ``lo`` by a fused multiply-add) so that ``exp(-b^2 / 2) = exp(-hi / 2) (1 - lo / 2)`` carries no
  rounding of b^2: within 8 ulp over the whole range, the negative tail included (results that
  would be subnormal, |x| beyond about 13.2, are 0).
* Gelu 'tanh' (:func:`_gelu_tanh32`): ``x / (1 + exp(-2u))``, ``u = sqrt(2 / pi) (x + 0.044715
  x^3)`` in float32: ``u``'s roundings are amplified by ``2|u|`` in the tail: within ``6 + 6|u|``
  ulp where the result is above 1e-30 in magnitude (below, exp(-2u) overflows: -0); -inf gives
  NaN as the definition's ``-inf * 0``, +inf gives +inf.
* Erf (:func:`_erf32`): the portable erf's rational ``x P(t) / Q(t)``, ``t = min(x^2, cap)``
  (overrides/elementwise_math.py's numpy body, there as a matrix product of the powers of t),
  by Horner's rule in float32, clipped to [-1, 1]: within 4e-7 relative of erf where the result
  is normal (the fit's error; up to 7 ulp near ±1), within 1 ulp where it is subnormal (a
  subnormal x gives its subnormal result, not 0); ±0 keeps its
  sign, ±inf gives ±1, NaN gives NaN.  It shares no erf with 'gelu_erf32', which needs
  ``erfc`` of |x| without cancellation (Gelu's negative tail), not erf.
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


#: the float32 fused multiply-add intrinsic's maker, for the generated region loops
#: (:mod:`onnxkit_cpu.compiled.fused_elementwise`, whose Sigmoid and Tanh are these loops' sequences)
fma_intrinsic = _fma_intrinsic


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
                                            ("gelu64", _gelu64),
                                            ("softmax", _softmax_rows), ("exp", _exp_loop))}


# ----------------------------------------------------------------------------- float32 loops
_F = np.float32
_LOG2E_F = _F(1.4426950408889634)
_LN2_HI_F, _LN2_LO_F = _F(0.693359375), _F(-2.12194440e-4)      # Cephes' split: k * _LN2_HI_F is exact
_ROUND = _F(12582912.0)                     # 1.5 * 2^23: v + _ROUND rounds v to an integer
_ROUND_BITS = int(np.array(_ROUND).view(np.int32))
#: below: exp is subnormal (flushed to 0); above: exp overflows float32 (inf)
_FLUSH, _OVER = _F(-87.33654), _F(88.72284)
_E7, _E6, _E5, _E4, _E3, _E2, _E1, _E0 = (_F(1.0 / math.factorial(n)) for n in range(7, -1, -1))
_ZERO_F, _ONE_F, _HALF_F, _INF_F = _F(0.0), _F(1.0), _F(0.5), _F(np.inf)
_TANH_C = _F(-2.0 * math.sqrt(2.0 / math.pi))                 # -2u = _TANH_C (x + 0.044715 x^3)
_CUBIC = _F(0.044715)

#: float32 <-> int32 bit casts and the compiled helpers of the float32 loops, bound by :func:`_bind32`
_bits32 = _from_bits32 = _exp32 = _exp_neg32 = _row_max32 = _exp_sum32 = _exp_sum64_32 = None


def _exp32_py(v):
    """exp of float32 ``v`` (module docstring, float32 loops): vectorizable arithmetic only."""
    w = v
    if w < _FLUSH:                  # NaN compares false: kept
        w = _FLUSH
    if w > _OVER:
        w = _OVER
    t = w * _LOG2E_F + _ROUND
    k = t - _ROUND
    r = (w - k * _LN2_HI_F) - k * _LN2_LO_F
    p = _E7
    p = p * r + _E6
    p = p * r + _E5
    p = p * r + _E4
    p = p * r + _E3
    p = p * r + _E2
    p = p * r + _E1
    p = p * r + _E0
    ki = _bits32(t) - np.int32(_ROUND_BITS)
    h = ki >> np.int32(1)
    e = p * _from_bits32((h + np.int32(127)) << np.int32(23)) * _from_bits32((ki - h + np.int32(127)) << np.int32(23))
    if v < _FLUSH:
        e = _ZERO_F
    if v > _OVER:
        e = _INF_F
    return e


def _exp_neg32_py(v):
    """:func:`_exp32_py` for ``v <= 0`` or NaN (the softmax's ``x - max``), with the same results
    there: no overflow test, and ``2^k`` one power of two (``k >= -126``: normal)."""
    w = v
    if w < _FLUSH:                  # NaN compares false: kept
        w = _FLUSH
    t = w * _LOG2E_F + _ROUND
    k = t - _ROUND
    r = (w - k * _LN2_HI_F) - k * _LN2_LO_F
    p = ((((((_E7 * r + _E6) * r + _E5) * r + _E4) * r + _E3) * r + _E2) * r + _E1) * r + _E0
    e = p * _from_bits32((_bits32(t) - np.int32(_ROUND_BITS) + np.int32(127)) << np.int32(23))
    if v < _FLUSH:
        e = _ZERO_F
    return e


def _row_max_py(x, r):
    """The maximum of row ``r`` of the 2-D float32 ``x``, as an integer maximum of the values'
    bits mapped to an order-preserving int32 (``b ^ ((b >> 31) & 0x7fffffff)``: negative floats
    reversed), which LLVM makes one vector reduction (a float maximum with IEEE comparisons it does
    not vectorize).  Where the row holds a NaN the value returned is a NaN or the largest number
    (a NaN's mapped bits lie above +inf's, or below -inf's where its sign bit is set) — harmless:
    the callers then see ``exp(NaN - m)`` = NaN in their sum, which makes the whole row NaN.  Of
    -0 and +0 it may return either (``x - m`` is then the same value)."""
    n = x.shape[1]
    m = np.int32(-2147483648)
    for j in range(n):
        b = _bits32(x[r, j])
        k = b ^ ((b >> np.int32(31)) & np.int32(0x7fffffff))
        m = k if k > m else m
    return _from_bits32(m ^ ((m >> np.int32(31)) & np.int32(0x7fffffff)))


def _exp_sum_py(x, y, r, m):
    """``sum_j exp(x[r, j] - m)`` in float32 (its order reassociated: vectorized), each exp stored
    into ``y[r, j]``."""
    n = x.shape[1]
    s = _ZERO_F
    for j in range(n):
        e = _exp_neg32(x[r, j] - m)
        y[r, j] = e
        s += e
    return s


def _exp_sum64_py(x, r, m):
    """``sum_j exp(x[r, j] - m)`` in float64 (its order reassociated: vectorized; LogSoftmax's
    ``log(sum)`` near 0 is then not limited by a float32 sum's spacing)."""
    n = x.shape[1]
    s = 0.0
    for j in range(n):
        s += np.float64(_exp_neg32(x[r, j] - m))
    return s


def _softmax32_rows(x, y, log):
    """Softmax (``log``: LogSoftmax) of each row of the float32 2-D ``x`` into ``y`` (module
    docstring, float32 loops); ``x`` and ``y`` distinct arrays (aliased, the loops run scalar)."""
    rows, n = x.shape
    for r in range(rows):
        m = _row_max32(x, r)
        if log:
            ls = _F(math.log(_exp_sum64_32(x, r, m)))
            for j in range(n):
                y[r, j] = (x[r, j] - m) - ls
        else:
            q = _F(1.0 / np.float64(_exp_sum32(x, y, r, m)))
            for j in range(n):
                y[r, j] = y[r, j] * q


def _gelu_erf32(x, y, pq, cap):
    """Gelu 'none' of float32 1-D ``x`` (module docstring): ``pq`` float32 (2, 6) rows of P~ and
    Q~, lowest power first (overrides/activation.py ``_gelu32_rows``), ``cap`` the float32 clip of |x|."""
    p0, p1, p2, p3, p4, p5 = pq[0, 0], pq[0, 1], pq[0, 2], pq[0, 3], pq[0, 4], pq[0, 5]
    q0, q1, q2, q3, q4, q5 = pq[1, 0], pq[1, 1], pq[1, 2], pq[1, 3], pq[1, 4], pq[1, 5]
    mhalf = _F(-0.5)
    for i in range(x.shape[0]):
        v = x[i]
        b = abs(v)
        if b > cap:
            b = cap
        p = ((((p5 * b + p4) * b + p3) * b + p2) * b + p1) * b + p0
        q = ((((q5 * b + q4) * b + q3) * b + q2) * b + q1) * b + q0
        hi = b * b
        lo = _fma(b, b, -hi)                   # b^2 = hi + lo exactly
        t = _exp32(mhalf * hi) * (_ONE_F + mhalf * lo) * (p / q)
        m = _ZERO_F if v >= _ZERO_F else v         # min(v, 0), NaN kept
        y[i] = (v - m) - t                     # max(v, 0) - q; -inf - -inf = NaN


def _gelu_tanh32(x, y):
    """Gelu 'tanh' of float32 1-D ``x``: ``x / (1 + exp(-2u))`` (module docstring)."""
    for i in range(x.shape[0]):
        v = x[i]
        y[i] = v / (_ONE_F + _exp32(_TANH_C * (v + _CUBIC * (v * v * v))))


def _erf32(x, y, pq, cap):
    """Erf of float32 1-D ``x`` (module docstring): ``pq`` float32 (2, 6) rows of the portable
    erf's P and Q in ``t = x^2``, lowest power first (overrides/elementwise_math.py ``_ERF32_PQ``),
    ``cap`` the float32 cap of ``t``."""
    p0, p1, p2, p3, p4, p5 = pq[0, 0], pq[0, 1], pq[0, 2], pq[0, 3], pq[0, 4], pq[0, 5]
    q0, q1, q2, q3, q4, q5 = pq[1, 0], pq[1, 1], pq[1, 2], pq[1, 3], pq[1, 4], pq[1, 5]
    for i in range(x.shape[0]):
        v = x[i]
        t = v * v
        if t > cap:                             # NaN passes
            t = cap
        p = ((((p5 * t + p4) * t + p3) * t + p2) * t + p1) * t + p0
        q = ((((q5 * t + q4) * t + q3) * t + q2) * t + q1) * t + q0
        r = (v * p) / q
        if r > _ONE_F:                          # |x| beyond the cap, inf; NaN passes both
            r = _ONE_F
        if r < -_ONE_F:
            r = -_ONE_F
        y[i] = r


def _exp32_loop(x, y):
    """``y = exp(x)`` by :func:`_exp32_py` (float32 1-D; the tests' handle on it)."""
    for i in range(x.shape[0]):
        y[i] = _exp32(x[i])


_EXP32 = kernel(_exp32_py, fastmath={"contract"})
_EXP_NEG32 = kernel(_exp_neg32_py, fastmath={"contract"})
_ROW_MAX32 = kernel(_row_max_py)
_EXP_SUM32 = kernel(_exp_sum_py, fastmath={"contract", "reassoc"})
_EXP_SUM64_32 = kernel(_exp_sum64_py, fastmath={"contract", "reassoc"})
_LOOPS32 = {"softmax32": kernel(_softmax32_rows, fastmath={"contract"}),
          "gelu_erf32": kernel(_gelu_erf32, fastmath={"contract"}),
          "gelu_tanh32": kernel(_gelu_tanh32, fastmath={"contract"}),
          "erf32": kernel(_erf32, fastmath={"contract"}),
          "exp32": kernel(_exp32_loop, fastmath={"contract"})}


def _bind32() -> bool:
    """Compile-bind the float32 loops' helpers; False where compiled loops are off."""
    global _bits32, _from_bits32, _exp32, _exp_neg32, _fma, _row_max32, _exp_sum32, _exp_sum64_32
    exp = _EXP32.get()
    if exp is None:
        return False
    if _bits32 is None:
        from onnxkit_cpu.compiled.attention import _bit_casts
        _bits32, _from_bits32 = _bit_casts()
    if _fma is None:
        _fma = _fma_intrinsic()
    _exp32, _exp_neg32 = exp, _EXP_NEG32.get()
    _row_max32, _exp_sum32, _exp_sum64_32 = _ROW_MAX32.get(), _EXP_SUM32.get(), _EXP_SUM64_32.get()
    return True


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
    """The compiled loop ``name`` ('sigmoid', 'gelu_tanh', 'gelu64', 'softmax',
    'hard_sigmoid', 'mlas_logistic', 'mlas_tanh' or 'exp'; the float32 loops 'softmax32',
    'gelu_erf32', 'gelu_tanh32', 'erf32' or 'exp32'), or None where compiled loops are off
    (:mod:`onnxkit_cpu.compiled`)."""
    if name in _LOOPS32:
        return _LOOPS32[name].get() if _bind32() else None
    if name == "hard_sigmoid":
        return HARD_SIGMOID.get()
    if name in ("mlas_logistic", "mlas_tanh"):
        global _fma
        compiled = MLAS[name[5:]].get()
        if compiled is not None and _fma is None:
            _fma = _fma_intrinsic()
        return compiled
    return _LOOPS[name].get() if bind_helpers() else None
