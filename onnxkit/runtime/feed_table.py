"""The feed checks of a run with a new signature, read off a table made once per session.

:class:`~onnxkit.runtime.checked.CheckedSignatures` skips the checks of a feed whose signature
passed before; a decoding loop feeds a new signature every token (the past grows by one), so
each of its runs took the full checks (:func:`onnxkit.runtime.session._check_value` per input,
its messages formatted per axis).  :class:`FeedTable` holds, per declared input, what those
checks read (the element type's numpy dtype, the rank, the static extents, the dimension
variables by axis, 6.5.2) and checks a dict of numeric numpy arrays in one pass: the feed's
values in input order and the extents its variables took, or None wherever anything differs or
it cannot tell (a name that is not an input, a required input missing, a value that is not a
numeric numpy array in the machine's byte order, an element type, rank or extent that differs,
a variable bound to two extents).  The session then takes the full checks, which name what is
wrong (or report what is only reported); a feed this table passes would pass them unchanged.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import ir
from ..dtypes import ELEMENT_TYPES, from_numpy_dtype
from ..errors import OnnxkitError

__all__ = ["FeedTable"]

_UNFED = object()


def _row(vi, required: bool):
    """``(name, required, dtype, rank, static, variables)`` of one declared input, or None where
    its type is not a tensor of a plain numeric element type with a known rank."""
    t = vi.type
    if not isinstance(t, ir.TensorType) or t.shape is None:
        return None
    row = ELEMENT_TYPES.get(t.elem_type)
    if row is None or row.dtype.kind not in "biufc":
        return None
    try:
        if from_numpy_dtype(row.dtype).tag != row.tag:  # the dtype's own element type must be the declared one
            return None
    except OnnxkitError:
        return None
    dims = t.shape.values
    static = tuple((axis, d) for axis, d in enumerate(dims) if isinstance(d, int))
    variables = tuple((axis, d, f"input {vi.name!r} axis {axis}") for axis, d in enumerate(dims) if isinstance(d, str))
    return vi.name, required, np.dtype(row.dtype), len(dims), static, variables


class FeedTable:
    """The checks of one session's declared inputs (see the module docstring)."""

    __slots__ = ("rows",)

    def __init__(self, rows: tuple):
        self.rows = rows

    @classmethod
    def of(cls, inputs: list, required: list) -> Optional["FeedTable"]:
        """The table of ``inputs`` (value infos in input order; ``required``: the names without a
        default), or None where one of them is not a tensor the table can check."""
        needed = set(required)
        rows = []
        for vi in inputs:
            row = _row(vi, vi.name in needed)
            if row is None:
                return None
            rows.append(row)
        return cls(tuple(rows))

    def check(self, input_feed) -> Optional[tuple]:
        """``(values in input order, {variable: (extent, where)})`` when ``input_feed`` is a dict
        of numeric numpy arrays that passes every feed check, else None."""
        if type(input_feed) is not dict:
            return None
        values, extents, fed = [], {}, 0
        for name, required, dtype, rank, static, variables in self.rows:
            v = input_feed.get(name, _UNFED)
            if v is _UNFED:
                if required:
                    return None
                values.append(None)
                continue
            if type(v) is not np.ndarray or v.dtype != dtype or not v.dtype.isnative or v.ndim != rank:
                return None
            shape = v.shape
            for axis, d in static:
                if shape[axis] != d:
                    return None
            for axis, var, where in variables:
                n = shape[axis]
                bound = extents.setdefault(var, (n, where))
                if bound[0] != n:
                    return None
            values.append(v)
            fed += 1
        if fed != len(input_feed):  # a name that is not an input (or None fed for one)
            return None
        return values, extents
