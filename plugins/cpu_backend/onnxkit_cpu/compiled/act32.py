"""float32 compiled loops of the softmax family and Gelu, in float32 arithmetic (16 lanes a vector
where the processor has AVX-512, where the float64 loops of compiled/activation.py have 8).

Every loop takes C-contiguous float32 arrays the override checked and writes an output the
override allocated; none allocates, none raises for data values.  Compile options add
``fastmath={"contract"}`` (a product and a sum may become one fused multiply-add, rounded once:
as accurate or more) and, for the softmax sums only, ``"reassoc"`` (:func:`_exp_sum_py`,
:func:`_exp_sum64_py`: the order of a sum of positive terms, which LLVM then keeps in vector
accumulators: a float32 sum of n terms within about ``n / 64`` ulp).  No other fast-math flag:
NaN and inf keep their IEEE behaviour.

:func:`_exp32_py` is exp of a float32 in float32 arithmetic: Cody-Waite reduction ``v = k ln2 + r``
with a float32 split of ln 2 (``k * _LN2_HI`` exact), ``|r| <= ln2 / 2``, ``exp(r)`` by its
Taylor polynomial of degree 7 (truncation below 5e-9 relative), ``2^k`` as two exact powers of two
built from their bits.  Within 1 ulp of the exact exp where the result is a normal float32
(tests/test_act32.py sweeps it against float64); results that would be subnormal (arguments below
:data:`_FLUSH`, about -87.34) are 0 — an absolute error below 1.2e-38, far inside Clause 11's
float32 tolerance (atol 1e-7), and no subnormal arithmetic (which the processor runs slowly)
happens; arguments above :data:`_OVER` give inf, -inf gives 0, NaN gives NaN.

Precision of the loops (float32 results against the definitions evaluated in float64; the
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
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit_cpu.compiled import kernel

_F = np.float32
_LOG2E = _F(1.4426950408889634)
_LN2_HI, _LN2_LO = _F(0.693359375), _F(-2.12194440e-4)      # Cephes' split: k * _LN2_HI is exact
_ROUND = _F(12582912.0)                     # 1.5 * 2^23: v + _ROUND rounds v to an integer
_ROUND_BITS = int(np.array(_ROUND).view(np.int32))
#: below: exp is subnormal (flushed to 0); above: exp overflows float32 (inf)
_FLUSH, _OVER = _F(-87.33654), _F(88.72284)
_E7, _E6, _E5, _E4, _E3, _E2, _E1, _E0 = (_F(1.0 / math.factorial(n)) for n in range(7, -1, -1))
_ZERO, _ONE, _HALF, _INF = _F(0.0), _F(1.0), _F(0.5), _F(np.inf)
_TANH_C = _F(-2.0 * math.sqrt(2.0 / math.pi))                 # -2u = _TANH_C (x + 0.044715 x^3)
_CUBIC = _F(0.044715)

#: float32 <-> int32 bit casts and the compiled helpers, bound by :func:`loop` before a loop compiles
_bits = _from_bits = _exp = _fma = _row_max = _exp_sum = _exp_sum64 = None


def _exp32_py(v):
    """exp of float32 ``v`` (module docstring): vectorizable arithmetic only."""
    w = v
    if w < _FLUSH:                  # NaN compares false: kept
        w = _FLUSH
    if w > _OVER:
        w = _OVER
    t = w * _LOG2E + _ROUND
    k = t - _ROUND
    r = (w - k * _LN2_HI) - k * _LN2_LO
    p = _E7
    p = p * r + _E6
    p = p * r + _E5
    p = p * r + _E4
    p = p * r + _E3
    p = p * r + _E2
    p = p * r + _E1
    p = p * r + _E0
    ki = _bits(t) - np.int32(_ROUND_BITS)
    h = ki >> np.int32(1)
    e = p * _from_bits((h + np.int32(127)) << np.int32(23)) * _from_bits((ki - h + np.int32(127)) << np.int32(23))
    if v < _FLUSH:
        e = _ZERO
    if v > _OVER:
        e = _INF
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
        b = _bits(x[r, j])
        k = b ^ ((b >> np.int32(31)) & np.int32(0x7fffffff))
        m = k if k > m else m
    return _from_bits(m ^ ((m >> np.int32(31)) & np.int32(0x7fffffff)))


def _exp_sum_py(x, y, r, m):
    """``sum_j exp(x[r, j] - m)`` in float32 (its order reassociated: vectorized), each exp stored
    into ``y[r, j]``."""
    n = x.shape[1]
    s = _ZERO
    for j in range(n):
        e = _exp(x[r, j] - m)
        y[r, j] = e
        s += e
    return s


def _exp_sum64_py(x, r, m):
    """``sum_j exp(x[r, j] - m)`` in float64 (its order reassociated: vectorized; LogSoftmax's
    ``log(sum)`` near 0 is then not limited by a float32 sum's spacing)."""
    n = x.shape[1]
    s = 0.0
    for j in range(n):
        s += np.float64(_exp(x[r, j] - m))
    return s


def _softmax32_rows(x, y, log):
    """Softmax (``log``: LogSoftmax) of each row of the float32 2-D ``x`` into ``y`` (module
    docstring)."""
    rows, n = x.shape
    for r in range(rows):
        m = _row_max(x, r)
        if log:
            ls = _F(math.log(_exp_sum64(x, r, m)))
            for j in range(n):
                y[r, j] = (x[r, j] - m) - ls
        else:
            q = _F(1.0 / np.float64(_exp_sum(x, y, r, m)))
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
        t = _exp(mhalf * hi) * (_ONE + mhalf * lo) * (p / q)
        m = _ZERO if v >= _ZERO else v         # min(v, 0), NaN kept
        y[i] = (v - m) - t                     # max(v, 0) - q; -inf - -inf = NaN


def _gelu_tanh32(x, y):
    """Gelu 'tanh' of float32 1-D ``x``: ``x / (1 + exp(-2u))`` (module docstring)."""
    for i in range(x.shape[0]):
        v = x[i]
        y[i] = v / (_ONE + _exp(_TANH_C * (v + _CUBIC * (v * v * v))))


def _exp32_loop(x, y):
    """``y = exp(x)`` by :func:`_exp32_py` (float32 1-D; the tests' handle on it)."""
    for i in range(x.shape[0]):
        y[i] = _exp(x[i])


_EXP = kernel(_exp32_py, fastmath={"contract"})
_ROW_MAX = kernel(_row_max_py)
_EXP_SUM = kernel(_exp_sum_py, fastmath={"contract", "reassoc"})
_EXP_SUM64 = kernel(_exp_sum64_py, fastmath={"contract", "reassoc"})
_LOOPS = {"softmax32": kernel(_softmax32_rows, fastmath={"contract"}),
          "gelu_erf32": kernel(_gelu_erf32, fastmath={"contract"}),
          "gelu_tanh32": kernel(_gelu_tanh32, fastmath={"contract"}),
          "exp32": kernel(_exp32_loop, fastmath={"contract"})}
NAMES = tuple(_LOOPS)


def _bind() -> bool:
    global _bits, _from_bits, _exp, _fma, _row_max, _exp_sum, _exp_sum64
    exp = _EXP.get()
    if exp is None:
        return False
    if _bits is None:
        from onnxkit_cpu.compiled.activation import _fma_intrinsic
        from onnxkit_cpu.compiled.attention import _bit_casts
        _bits, _from_bits = _bit_casts()
        _fma = _fma_intrinsic()
    _exp, _row_max, _exp_sum, _exp_sum64 = exp, _ROW_MAX.get(), _EXP_SUM.get(), _EXP_SUM64.get()
    return True


def loop(name: str):
    """The compiled float32 loop ``name`` (:data:`NAMES`), or None where compiled loops are off
    (:mod:`onnxkit_cpu.compiled`)."""
    return _LOOPS[name].get() if _bind() else None
