"""float32 logistic (sigmoid) and tanh as onnxruntime's CPU kernels compute them.

onnxruntime computes float32 Sigmoid and Tanh (ai.onnx, its recurrent kernels' gates, its
Gelu 'tanh' and FastGelu) with MLAS's rational approximations, the coefficients Eigen uses
(MlasComputeLogistic, MlasComputeTanh).  On x86-64 its FMA3 kernel evaluates, per element:

* ``v = min(max(x, lo), hi)`` (NaN passes: the input is the second operand of ``vmaxps``);
* ``v2 = v * v`` rounded to float32;
* ``P(v2)`` and ``Q(v2)`` by Horner's rule from the highest coefficient, every step one fused
  multiply-add rounded once to float32;
* ``p = v * P(v2)`` and ``p / q``, each rounded to float32;
* logistic only: ``+ 0.5`` and ``max(r, 0)``; there is no upper clamp, so the logistic may
  return ``1 + 2^-23`` and tanh ``+-(1 + 2^-22)`` near the ends of their ranges, as
  onnxruntime does.

:func:`logistic` and :func:`tanh` reproduce that sequence bit for bit (the cpu backend's
Sigmoid and Tanh, its fused activations, and com.microsoft DynamicQuantizeLSTM's gates use
them).  A fused multiply-add is computed as a float64 product of two float32 values (exact)
plus the float32 coefficient, rounded to float64 and then to float32: that double rounding
equals the single one for every float32 input in the clamped ranges (checked exhaustively by
``tools/mlas_activation_error.py``, which also measures the approximations' error against the
exact functions; the figures are in docs/decisions.md).  Any array namespace works; numpy
arrays take a blocked path with two passes per Horner step for ``P`` and ``Q`` together (the float64
product, then the sum written into a float32 array); a numpy array of at most :data:`SMALL`
elements, none of them NaN, takes the same sequence on Python floats (each product and sum a
float64 operation, each rounding to float32 by ``struct``'s C cast): the same operations in the
same order, so the same bits, without the block path's two dozen numpy calls.  :data:`LOGISTIC` and :data:`TANH` are the tables a compiled body must
reproduce: ``((lo, hi), P's coefficients, Q's coefficients)``, highest degree first, each a
Python float holding the float32 coefficient's value.
"""

from __future__ import annotations

import struct

import numpy as np


def _f32(values) -> tuple:
    return tuple(float(np.float32(v)) for v in values)


#: logistic: the clamping range, then ``P`` (odd: ``p = v P(v^2)``) and ``Q``, highest degree first
LOGISTIC = ((-18.0, 18.0),
            _f32((4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
                  2.48287947061529e-01)),
            _f32((6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
                  1.16817656904453e-01, 9.93151921023180e-01)))
#: tanh: likewise
TANH = ((-9.0, 9.0),
        _f32((-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
              1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)),
        _f32((1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)))


#: elements of one numpy block: the block's float32 and float64 buffers stay in the CPU's cache
#: across the sequence's two dozen passes (memory-bound on whole arrays)
BLOCK = 16384


def _stacked(table) -> tuple:
    """``table`` for the numpy body: the range as float32 and, per Horner step, ``P``'s and ``Q``'s
    coefficients as one float64 column (``P`` padded with leading zeros: ``0 * v^2 + c`` is ``c``
    exactly, so a padded step changes nothing)."""
    (lo, hi), pc, qc = table
    n = max(len(pc), len(qc))
    pc, qc = (0.0,) * (n - len(pc)) + tuple(pc), (0.0,) * (n - len(qc)) + tuple(qc)
    return np.float32(lo), np.float32(hi), tuple(np.array([[p], [q]], np.float64) for p, q in zip(pc, qc))


_STACKED: dict = {}

#: the most elements the Python-float path takes (beyond, the block path's numpy calls cost less)
SMALL = 8

_F32 = struct.Struct("<f")


def _rational_small(values: list, table, logistic: bool) -> list:
    """The sequence (and, ``logistic``, its ``+ 0.5`` and ``max(r, 0)``) over ``values``, Python
    floats holding float32 values, none NaN: each step the block path's float64 operation, then
    rounded to float32 (``struct`` packs by a C cast to float: round to nearest even; no value
    of the clamped sequence overflows float32)."""
    (lo, hi), pc, qc = table
    pack, unpack = _F32.pack, _F32.unpack
    out = []
    for x in values:
        v = min(max(x, lo), hi)
        v2 = unpack(pack(v * v))[0]
        p = pc[0]
        for c in pc[1:]:
            p = unpack(pack(p * v2 + c))[0]
        q = qc[0]
        for c in qc[1:]:
            q = unpack(pack(q * v2 + c))[0]
        r = unpack(pack(unpack(pack(v * p))[0] / q))[0]
        if logistic:
            r = unpack(pack(r + 0.5))[0]
            if r < 0.0:
                r = 0.0
        out.append(r)
    return out


def _small(x, table, logistic: bool):
    """The Python-float path's result for a numpy float32 ``x`` it takes (at most :data:`SMALL`
    elements, no NaN: a NaN's payload is left to the block path), else None."""
    if x.size > SMALL:
        return None
    values = x.reshape(-1).tolist()
    for v in values:
        if v != v:
            return None
    return np.array(_rational_small(values, table, logistic), np.float32).reshape(x.shape)


def _rational_numpy(x, table):
    """``p / q`` of the sequence over float32 ``x`` (any shape), ``P`` and ``Q`` side by side in one
    ``(2, k)`` array so each Horner step is two numpy calls for both (``np.multiply`` into float64,
    then ``np.add`` written into float32: the float64 sum rounded once more, to float32), in blocks
    of :data:`BLOCK` elements through preallocated buffers."""
    lo, hi, steps = _STACKED.get(id(table)) or _STACKED.setdefault(id(table), _stacked(table))
    flat = x.reshape(-1)
    out = np.empty(flat.shape, np.float32)
    n = min(BLOCK, flat.shape[0])
    v, acc, d, t = np.empty(n, np.float32), np.empty((2, n), np.float32), np.empty(n, np.float64), np.empty((2, n), np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
        for s in range(0, flat.shape[0], BLOCK):
            e = min(s + BLOCK, flat.shape[0])
            k = e - s
            vk, dk, ak, tk = v[:k], d[:k], acc[:, :k], t[:, :k]
            np.clip(flat[s:e], lo, hi, out=vk)     # NaN passes
            np.multiply(vk, vk, out=ak[0])
            dk[...] = ak[0]
            np.multiply(steps[0], dk, out=tk)
            np.add(tk, steps[1], out=ak, casting="unsafe")
            for c in steps[2:]:
                np.multiply(ak, dk, out=tk)
                np.add(tk, c, out=ak, casting="unsafe")
            pk = ak[0]
            pk *= vk
            np.divide(pk, ak[1], out=out[s:e])
    return out.reshape(x.shape)


def _horner(xp, v2_64, coefficients):
    acc = None
    for c in coefficients[1:]:
        a = coefficients[0] * v2_64 if acc is None else xp.astype(acc, xp.float64) * v2_64
        acc = xp.astype(a + c, xp.float32)
    return acc


def _rational(xp, x, table):
    if isinstance(x, np.ndarray):
        return _rational_numpy(x, table)
    (lo, hi), pc, qc = table
    v = xp.clip(x, lo, hi)
    v2 = v * v
    v2_64 = xp.astype(v2, xp.float64)
    return (_horner(xp, v2_64, pc) * v) / _horner(xp, v2_64, qc)


def logistic(xp, x):
    """float32 ``x`` (any shape) -> onnxruntime's float32 sigmoid of it, a new array."""
    if isinstance(x, np.ndarray) and x.size <= SMALL:
        r = _small(x, LOGISTIC, True)
        if r is not None:
            return r
    r = _rational(xp, x, LOGISTIC)
    if isinstance(r, np.ndarray):
        r += np.float32(0.5)
        return np.maximum(r, np.float32(0.0), out=r)      # NaN passes
    r = r + 0.5
    return xp.where(r < 0.0, xp.zeros_like(r), r)


def tanh(xp, x):
    """float32 ``x`` (any shape) -> onnxruntime's float32 tanh of it, a new array."""
    if isinstance(x, np.ndarray) and x.size <= SMALL:
        r = _small(x, TANH, False)
        if r is not None:
            return r
    return _rational(xp, x, TANH)
