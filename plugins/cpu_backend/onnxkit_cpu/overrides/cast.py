"""numpy fast path of Cast / CastLike (portable: ``onnxkit_default_domain/kernels/cast.py``,
which holds the rules and the attribute parsing): float -> integer by one ``astype`` where
every value is finite and within int64 (the portable body's careful wrap of out-of-range
values costs about ten passes; it still serves the other cases)."""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit_default_domain.kernels import cast as portable

KERNELS = KernelTable()


def _values(xp, x, dtype):
    dst = np.dtype(dtype)
    if x.dtype.kind == "f" and dst.kind in "iu" and (x.size == 0 or np.abs(x).max() < 2.0 ** 63):
        r = x.astype(np.int64)                          # NaN and Inf failed the test: truncates
        return r if dst == np.int64 else r.astype(dst)  # integer -> integer: the low bits
    return portable.cast_values(xp, x, dtype)


@KERNELS.register("Cast", 1, 6, 9, 13, 19, 21, 23, 24, 25, 28)
def cast(ctx):
    return portable.cast(ctx, values=_values)


@KERNELS.register("CastLike", 15, 19, 21, 23, 24, 25)
def cast_like(ctx):
    return portable.cast_like(ctx, values=_values)
