"""float16 and bfloat16 on the cpu overrides' float32 bodies (a private module, no kernels).

numpy has no BLAS product for float16 (its ``matmul`` is a scalar loop, far slower than
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

float16 is converted by the compiled loops of :mod:`onnxkit_cpu.compiled.half` (numpy's own
``astype`` between float16 and float32 is slow; the loops give its bits: docs/benchmarks.md)
where the kernel's input is typed float16 at planning and compiled loops are on (:class:`Halves`,
made by the factory); bfloat16 (ml_dtypes' conversions are fast already) and the rest by ``astype``.

A constant weight is widened once, not per run: :class:`Wide` keeps the float32 copy of an input
while the same object comes back where :class:`~._plans.Held` says the plan holds it (an
initializer, a folded value, the plan's default), so the body's own caches of derived layouts
(keyed by the object they were given) keep working on the widened copy.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import arrays
from onnxkit.plugin.inference import elem_of

from ..compiled import half as loops
from ._plans import NOT_HELD, Held

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
_TAGS = {F16: 10, F32: 1}     # ONNX element type tags
_HALF_NAMES = frozenset({"float16", "bfloat16"})
_known: dict = {}


def is_half(dtype) -> bool:
    """float16 or bfloat16 (ml_dtypes), the types this module computes in float32."""
    r = _known.get(dtype)
    if r is None:
        r = _known[dtype] = arrays.dtype_name(dtype) in _HALF_NAMES
    return r


class Halves:
    """One kernel's conversions, chosen by its factory: the compiled float16 loops (``up``,
    ``down``) or None for numpy's ``astype``."""

    __slots__ = ("up", "down", "table")

    def __init__(self, up=None, down=None):
        self.up, self.down = up, down
        self.table = None if up is None else _table()

    @classmethod
    def of(cls, ctx, dtype=F16) -> "Halves":
        """The compiled loops where the node's inputs are known of ``dtype`` (float16; a Cast to
        float16: float32) at planning, by a constant input's value or a declared input type (no
        type inference is run for it): asked for then only, so a float32 model plans no loop of
        this module; else numpy's conversions."""
        tag = _TAGS[dtype]
        for i in range(ctx.num_inputs):
            c = ctx.constant(i)
            if c is not None and hasattr(c, "dtype"):
                return cls(loops.widen16.get(), loops.narrow16.get()) if c.dtype == dtype else NUMPY
        for t in ctx.input_types:
            if t is not None:
                return cls(loops.widen16.get(), loops.narrow16.get()) if elem_of(t) == tag else NUMPY
        return NUMPY


NUMPY = Halves()
_TABLE: list = []


def _table():
    """The widening loop's table (:func:`onnxkit_cpu.compiled.half.widening_table`), made once."""
    if not _TABLE:
        _TABLE.append(loops.widening_table())
    return _TABLE[0]


def widen(x, halves: Halves = NUMPY):
    """``x`` as a fresh float32 array (exact); None stays None."""
    if x is None:
        return None
    if halves.up is not None and x.dtype == F16:
        out = np.empty(x.shape, F32)
        halves.up(np.ascontiguousarray(x).reshape(-1).view(np.uint16), halves.table, out.reshape(-1))
        return out
    return x.astype(F32)


def narrow(y, dtype, halves: Halves = NUMPY):
    """``y`` (float32) rounded once to ``dtype``: nearest even, overflow to +/-inf, no warning."""
    y = np.asarray(y)
    if halves.down is not None and dtype == F16 and y.dtype == F32:
        out = np.empty(y.shape, F16)
        flat = np.ascontiguousarray(y).reshape(-1)
        halves.down(flat.view(np.uint32), flat, out.reshape(-1).view(np.uint16))
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        return y.astype(dtype)


class Wide:
    """The float32 copy of one input, kept while the same object comes back where the plan holds
    the input (``held``, a :class:`~._plans.Held`); made again each call otherwise."""

    __slots__ = ("held", "halves", "cache")

    def __init__(self, held=NOT_HELD, halves: Halves = NUMPY):
        self.held, self.halves, self.cache = held, halves, (None, None)

    @classmethod
    def of(cls, ctx, i: int, halves: Halves = NUMPY) -> "Wide":
        """The :class:`Wide` of input ``i`` of ``ctx``'s node."""
        return cls(Held(ctx, i), halves)

    def __call__(self, x):
        if x is None or not is_half(x.dtype):
            return x
        cached = self.cache
        if cached[0] is x:
            return cached[1]
        w = widen(x, self.halves)
        if self.held(x):
            self.cache = (x, w)
        return w


class Narrowed:
    """A float32 ``body`` (one input, one output) run on a half-type input: ``body(widen(x))``
    rounded once to ``x``'s type (:func:`narrow`).  Exact where the body's float32 result
    rounded once is what the portable kernel gives: a max pool (a selection: the widened
    value's narrowing is the value itself), an average pool whose divisors are exact in the half
    type (the portable kernel averages in float32 with the divisor rounded to X's type, then
    rounds once); the caller decides where that holds."""

    __slots__ = ("body", "halves")

    def __init__(self, body, halves: Halves = NUMPY):
        self.body, self.halves = body, halves

    def __call__(self, x):
        return narrow(self.body(widen(x, self.halves)), x.dtype, self.halves)
