"""numpy fast path of Cast / CastLike (portable: ``onnxkit_default_domain/kernels/cast.py``,
which holds the rules and the attribute parsing): float -> integer by one ``astype`` to int64
where numpy's cast raises no 'invalid' floating-point flag (every value finite and within
int64); otherwise, and for every other conversion, the portable body (its careful wrap of
out-of-range values costs about ten passes).

Cast between the numpy-native types whose portable rule is one ``astype`` (integer or bool to
integer or float, float32/float64 to float32/float64) or none (the same type: the input
itself) is decided once per node and input type and made directly, without the portable
body's per-call type dispatch (the bulk of a small tensor's cost); every other pair, and
CastLike, keeps the path above.  float32 <-> float16 (the converters' Casts at a float16 model's
edges) is :mod:`.half`'s conversion (the compiled loops where the node's input is known float16 or
float32 at planning: numpy's bits, round to nearest even, overflow to inf)."""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, element_type
from onnxkit_default_domain.api import cast as portable

from .half import F16, F32, Halves, narrow, widen

KERNELS = KernelTable()


def _values(xp, x, dtype):
    dst = np.dtype(dtype)
    if x.dtype.kind == "f" and dst.kind in "iu":
        try:
            with np.errstate(invalid="raise"):          # NaN, Inf, beyond int64: no defined result
                r = x.astype(np.int64)                  # truncates toward zero
        except FloatingPointError:
            return portable.cast_values(xp, x, dtype)   # the careful rule for those values
        return r if dst == np.int64 else r.astype(dst)  # integer -> integer: the low bits
    return portable.cast_values(xp, x, dtype)


#: the numpy-native element types of the direct conversions
_NATIVE = frozenset(np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                          np.uint32, np.uint64, np.float32, np.float64))


def _same(x):
    return x


def direct(src: np.dtype, dst: np.dtype):
    """``f(x)`` converting ``src`` to ``dst`` as :func:`~onnxkit_default_domain.kernels.cast.cast_values`
    does where its rule is one ``astype`` or nothing; None for the other pairs (to bool, float
    to integer, a type outside :data:`_NATIVE`)."""
    if src not in _NATIVE or dst not in _NATIVE:
        return None
    if src == dst:
        return _same
    if dst.kind == "b" or (src.kind == "f" and dst.kind in "iu"):
        return None
    if src.kind == "f" and dst.kind == "f" and dst.itemsize < src.itemsize:
        return lambda x: _narrowed(x, dst)
    return lambda x: x.astype(dst)


def _narrowed(x, dst):
    """float64 -> float32: beyond float32's range is +/-inf (IEEE), without numpy's RuntimeWarning."""
    with np.errstate(over="ignore"):
        return x.astype(dst)


@KERNELS.register("Cast", 1, 6, 9, 13, 19, 21, 23, 24, 25, 28)
def cast(ctx):
    other = portable.cast(ctx, values=_values)
    dst = np.dtype(element_type(portable.cast_target(ctx)).dtype)
    halves = Halves.of(ctx, F32) if dst == F16 else None
    if dst not in _NATIVE and halves is None:
        return other
    if halves is not None:
        if halves.down is None:
            return other

        def run16(x):
            return narrow(x, F16, halves) if type(x) is np.ndarray and x.dtype == F32 else other(x)
        return run16
    by_source: dict = {}
    up = Halves.of(ctx) if dst == F32 else None

    def run(x):
        if type(x) is np.ndarray:
            src = x.dtype
            fn = by_source.get(src)
            if fn is None:
                fn = direct(src, dst) or other
                if src == F16 and up is not None and up.up is not None:
                    fn = lambda v: widen(v, up)     # noqa: E731
                if len(by_source) < 16:
                    by_source[src] = fn
            return fn(x)
        return other(x)
    return run


@KERNELS.register("CastLike", 15, 19, 21, 23, 24, 25)
def cast_like(ctx):
    return portable.cast_like(ctx, values=_values)
