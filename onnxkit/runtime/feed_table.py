"""The feed checks of a run with a new signature, read off a table made once per session.

:class:`~onnxkit.runtime.checked.CheckedSignatures` skips the checks of a feed whose signature
passed before; a decoding loop feeds a new signature every token (the past grows by one), so
each of its runs took the full checks (:func:`onnxkit.runtime.session._check_value` per input,
its messages formatted per axis).  :class:`FeedTable` holds, per declared input, what those
checks read (the element type's numpy dtype, the rank, the static extents, the dimension
variables by axis, 6.5.2), compiled at the first check into one straight-line function, and
checks a dict of numeric numpy arrays in one pass: the feed's
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

    __slots__ = ("rows", "_check")

    def __init__(self, rows: tuple):
        self.rows = rows
        self._check = None  # the compiled checks (:func:`_compiled`), made at the first check

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
        check = self._check
        if check is None:
            check = self._check = _compiled(self.rows)
        return check(input_feed)


def _compiled(rows: tuple):
    """The checks of ``rows`` as one straight-line function of the feed (no loop over the rows,
    their static extents or their variables; each variable's first extent a local): what a loop
    over the rows would check, in one call.  A feed's dtype passes when it is the row's dtype
    object itself (numpy's canonical dtype, native byte order) or, failing that, equals it in the
    machine's byte order."""
    consts: dict = {"_UNFED": _UNFED, "_nd": np.ndarray}
    code = ["def check(feed):", "    if type(feed) is not dict:", "        return None", "    get = feed.get"]
    first: dict = {}  # variable -> (local name, where)
    late: set = set()  # variables first met in an optional input
    fed = []
    for i, (name, required, dtype, rank, static, variables) in enumerate(rows):
        consts[f"_n{i}"], consts[f"_d{i}"] = name, dtype
        code += [f"    v{i} = get(_n{i}, _UNFED)", f"    if v{i} is _UNFED:"]
        if required:
            code.append("        return None")
        else:
            code.append(f"        v{i} = None")
        code += [f"    else:",
                 f"        if type(v{i}) is not _nd:",
                 f"            return None",
                 f"        t = v{i}.dtype",
                 f"        if t is not _d{i} and (t != _d{i} or not t.isnative):",
                 f"            return None",
                 f"        s = v{i}.shape",
                 f"        if len(s) != {int(rank)}:",
                 f"            return None"]
        for axis, d in static:
            code += [f"        if s[{int(axis)}] != {int(d)}:", "            return None"]
        for axis, var, where in variables:
            if var not in first:
                first[var] = (f"x{len(first)}", where)
                if not required:  # an optional input may be left out: bound by whichever input comes first
                    late.add(var)
                    code[4:4] = [f"    {first[var][0]} = w{first[var][0]} = None"]
            local = first[var][0]
            if var in late:  # a local None while no input bound it
                consts[f"_w{local}_{i}_{axis}"] = where
                code += [f"        if {local} is None:",
                         f"            {local}, w{local} = s[{int(axis)}], _w{local}_{i}_{axis}",
                         f"        elif s[{int(axis)}] != {local}:", "            return None"]
            elif first[var][1] == where:  # its first extent, in a required input
                code.append(f"        {local} = s[{int(axis)}]")
            else:
                code += [f"        if s[{int(axis)}] != {local}:", "            return None"]
        code.append("        fed += 1")
        fed.append(f"v{i}")
    code.insert(4, "    fed = 0")
    code += ["    if fed != len(feed):", "        return None"]
    bound = []
    for k, (var, (local, where)) in enumerate(first.items()):
        consts[f"_v{k}"], consts[f"_w{k}"] = var, where
        if var not in late:
            bound.append(f"_v{k}: ({local}, _w{k})")
    code.append(f"    extents = {{{', '.join(bound)}}}")
    for k, (var, (local, where)) in enumerate(first.items()):
        if var in late:  # bound where the feed gave one of its inputs
            code += [f"    if {local} is not None:", f"        extents[_v{k}] = ({local}, w{local})"]
    code.append(f"    return [{', '.join(fed)}], extents")
    scope = dict(consts)
    exec(compile("\n".join(code) + "\n", "<onnxkit feed table>", "exec"), scope)
    return scope["check"]
