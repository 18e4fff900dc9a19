"""Exact output sizes of a few value-shaped operators, read off numpy inputs.

The size guard of an ai.onnx operator of kind ``value`` (:mod:`onnxkit.runtime.budget`) asks
inference for its outputs' sizes, remembered per input key (types and small values).  A decoding
loop feeds new extents every token (the past grows by one), so the key of ``Expand``'s shape
input and ``Range``'s limit differ every run and inference ran every token.  The functions here
compute the same bytes directly; each returns None where it cannot read its inputs, and the
guard falls back to inference (which, or the kernel, refuses what is wrong, by name).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["EXACT_BYTES", "expand_bytes", "range_bytes"]


def expand_bytes(args) -> Optional[int]:
    """Expand's output bytes (ai.onnx Expand: the input and the ``shape`` input's value broadcast
    both ways, as inference's ``expand_extents``), or None where the inputs are not a numpy
    tensor and a 1-D int64 shape of non-negative extents that broadcast."""
    if len(args) != 2:
        return None
    x, shape = args
    if type(x) is not np.ndarray or type(shape) is not np.ndarray or shape.dtype != np.int64 or shape.ndim != 1 \
            or x.dtype.kind in "OSUV":
        return None
    target = shape.tolist()
    if any(d < 0 for d in target):
        return None
    try:
        out = np.broadcast_shapes(x.shape, tuple(target))
    except ValueError:
        return None
    n = x.itemsize
    for d in out:
        n *= d
    return n


def range_bytes(args) -> Optional[int]:
    """Range's output bytes for integer scalars (``max(ceil((limit - start) / delta), 0)``
    elements, ai.onnx Range), or None where they are not numpy integer scalars of one type or
    ``delta`` is 0 (inference decides, or the kernel refuses)."""
    if len(args) != 3 or not all(type(a) is np.ndarray and a.ndim == 0 for a in args):
        return None
    dtype = args[0].dtype
    if dtype.kind not in "iu" or args[1].dtype != dtype or args[2].dtype != dtype:
        return None
    s, l, d = (int(a) for a in args)
    if d == 0:
        return None
    return max(-((s - l) // d), 0) * dtype.itemsize


#: default-domain operators of size-guard kind "value" whose output bytes are read off numpy
#: inputs directly: their per-run shapes (a decoder's growing past) would miss the inference
#: memo (:meth:`~onnxkit.runtime.budget.Guard.predict`) every run
EXACT_BYTES = {"Expand": expand_bytes, "Range": range_bytes}
