"""numpy fast path of Cast / CastLike (portable: ``onnxkit_default_domain/kernels/cast.py``,
which holds the rules and the attribute parsing): float -> integer by one ``astype`` to int64
where numpy's cast raises no 'invalid' floating-point flag (every value finite and within
int64); otherwise, and for every other conversion, the portable body (its careful wrap of
out-of-range values costs about ten passes)."""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit_default_domain.kernels import cast as portable

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


@KERNELS.register("Cast", 1, 6, 9, 13, 19, 21, 23, 24, 25, 28)
def cast(ctx):
    return portable.cast(ctx, values=_values)


@KERNELS.register("CastLike", 15, 19, 21, 23, 24, 25)
def cast_like(ctx):
    return portable.cast_like(ctx, values=_values)
