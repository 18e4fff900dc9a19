"""float16 and bfloat16 on the cpu overrides' float32 bodies (a private module, no kernels).

numpy has no BLAS product for float16 (its ``matmul`` is a scalar loop, 50-100x slower than
float32's) and none of its ufuncs computes float16 natively (each converts every element in and
out), while bfloat16 (ml_dtypes) has no arithmetic of its own at all.  The overrides of the
products (MatMul, Gemm, Conv, the fused Attention) therefore take half-type inputs to float32,
run their float32 body (BLAS), and round the result once to the input's type.  ONNX allows it:
an implementation "may accumulate in a wider precision than the element type" (Clause 11.4 of
the core specification), and no operator definition of MatMul, Gemm, Conv or Attention asks for
half-precision accumulation; onnxruntime's CPU provider computes these products in float32 too.

Rounding once gives the correctly rounded half result of the float32 value: round to nearest
even, a magnitude beyond the type's range +/-inf (float16: beyond 65504, as onnxruntime's result
of a float16 product that overflows after accumulation), NaN kept (``narrow``; numpy's overflow
warning is not raised: an inf is a result).  The widening is exact (every float16 and bfloat16 is
a float32).

A constant weight is widened once, not per run: :class:`Wide` keeps the float32 copy of an input
while the same object comes back where :class:`~._plans.Held` says the plan holds it (an
initializer, a folded value, the plan's default), so the body's own caches of derived layouts
(keyed by the object they were given) keep working on the widened copy.
"""

from __future__ import annotations

import numpy as np

from onnxkit.arrays import dtype_name

from ._plans import NOT_HELD, Held

F32 = np.dtype(np.float32)
_HALF_NAMES = frozenset({"float16", "bfloat16"})
_known: dict = {}


def is_half(dtype) -> bool:
    """float16 or bfloat16 (ml_dtypes), the types this module computes in float32."""
    r = _known.get(dtype)
    if r is None:
        r = _known[dtype] = dtype_name(dtype) in _HALF_NAMES
    return r


def widen(x):
    """``x`` as float32 (exact); None stays None."""
    return None if x is None else x.astype(F32)


def narrow(y, dtype):
    """``y`` (float32) rounded once to ``dtype``: nearest even, overflow to +/-inf, no warning."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(y).astype(dtype)


class Wide:
    """The float32 copy of one input, kept while the same object comes back where the plan holds
    the input (``held``, a :class:`~._plans.Held`); made again each call otherwise."""

    __slots__ = ("held", "cache")

    def __init__(self, held=NOT_HELD):
        self.held, self.cache = held, (None, None)

    @classmethod
    def of(cls, ctx, i: int) -> "Wide":
        """The :class:`Wide` of input ``i`` of ``ctx``'s node."""
        return cls(Held(ctx, i))

    def __call__(self, x):
        if x is None or not is_half(x.dtype):
            return x
        cached = self.cache
        if cached[0] is x:
            return cached[1]
        w = x.astype(F32)
        if self.held(x):
            self.cache = (x, w)
        return w
