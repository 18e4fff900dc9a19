"""float32 logistic (sigmoid) and tanh as onnxruntime's CPU kernels compute them, any array namespace.

onnxruntime's recurrent kernels (its LSTM, and the DynamicQuantizeLSTM built on it) evaluate
their gates with MLAS's rational approximations (the coefficients Eigen uses): the input
clamped to a range, ``p(x) = x * P(x^2)`` and ``q(x) = Q(x^2)`` by Horner's rule with fused
multiply-adds (its x86-64 kernels), then ``p / q`` (logistic: ``+ 0.5``, clamped to [0, 1]).
These differ from the correctly rounded functions by a few float32 units in the last place.
Where the result is quantized afterwards (DynamicQuantizeLSTM quantizes every step's hidden
state) such a difference can move a value across a rounding boundary, so the kernel reproduces
the approximation.  A fused multiply-add is computed in float64 (the product of two float32
values is exact there) and rounded once to float32: equal to the fused result but where the
float64 sum lands on a float32 tie (measured: no difference on 2^20 random inputs).
"""

from __future__ import annotations

import numpy as np

#: logistic: (lower, upper), P's coefficients from the highest degree, Q's likewise
LOGISTIC = ((-18.0, 18.0),
            (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
             2.48287947061529e-01),
            (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
             1.16817656904453e-01, 9.93151921023180e-01))
#: tanh: likewise
TANH = ((-9.0, 9.0),
        (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
         1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03),
        (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03))


def _f32(value) -> float:
    """A float32 coefficient as the float64 value it holds."""
    return float(np.float32(value))


def _horner(xp, x2_64, coefficients):
    """``((c0 * x2 + c1) * x2 + c2) ...`` in float32 with every step fused (float64, rounded once)."""
    acc = None
    for k, c in enumerate(coefficients):
        if k == 0:
            continue
        a = _f32(coefficients[0]) * x2_64 if acc is None else xp.astype(acc, xp.float64) * x2_64
        acc = xp.astype(a + _f32(c), xp.float32)
    return acc


def _rational(xp, x, table):
    (lo, hi), pc, qc = table
    v = xp.clip(x, lo, hi)
    v2 = v * v                                       # float32, rounded
    v2_64 = xp.astype(v2, xp.float64)
    p = _horner(xp, v2_64, pc) * v
    q = _horner(xp, v2_64, qc)
    return p / q


def logistic(xp, x):
    """float32 ``x`` -> onnxruntime's float32 sigmoid of it (MlasComputeLogistic)."""
    return xp.clip(_rational(xp, x, LOGISTIC) + 0.5, 0.0, 1.0)


def tanh(xp, x):
    """float32 ``x`` -> onnxruntime's float32 tanh of it (MlasComputeTanh)."""
    return _rational(xp, x, TANH)
