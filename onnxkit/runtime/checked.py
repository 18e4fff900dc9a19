"""Feed signatures a session has checked: the per-run checks skipped where they cannot fail.

``InferenceSession.run`` checks each feed against the declared inputs (element type, rank,
static extents, dimension variables bound consistently, 6.5.2) and each output against its
declaration.  For a feed of numeric numpy arrays those checks are a function of the feed's
*signature* alone — the element type and shape of each input, in input order, None for an input
not fed — and, for the output check, of the outputs' signature.  :class:`CheckedSignatures`
remembers (at most :data:`SIZE`) the signatures that passed, with the extents their dimension
variables took, so a run with a signature seen before skips straight to evaluation; a string,
object, sequence or map feed, a dict subclass, or a signature not seen before takes the full
checks (which then remember it).  Only for backends whose values are numpy arrays.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from .feeds import InputError, fresh_outputs
from .policy import Bindings

#: the most feed signatures remembered (and output signatures per feed signature)
SIZE = 64
_UNFED = object()


def _plain(v) -> bool:
    return type(v) is np.ndarray and v.dtype.kind not in "OSU"


class Signature:
    """A feed signature that passed the checks: how many inputs it feeds, the extents its
    dimension variables took, and the output signatures that passed the output check with it."""

    __slots__ = ("fed", "extents", "outputs", "reporter")

    def __init__(self, fed: int, extents: dict, reporter):
        self.fed, self.extents, self.outputs, self.reporter = fed, extents, set(), reporter

    def bindings(self) -> Bindings:
        """Fresh :class:`Bindings` holding the extents the feed bound."""
        b = Bindings(self.reporter, InputError)
        b.extents = dict(self.extents)
        return b


class CheckedSignatures:
    """The signatures one session has checked (see the module docstring)."""

    def __init__(self, input_names: list, output_names: list, output_check, reporter):
        self.input_names, self.output_names = input_names, output_names
        self.output_check = output_check
        self.reporter = reporter
        self.memo: dict = {}  # feed signature -> Signature
        self._passes = None  # the output check's table (:func:`_output_table`), made at its first use

    def seen(self, input_feed):
        """``(values in input order, signature, Signature)`` when ``input_feed`` is a dict of
        numeric numpy arrays: the :class:`Signature` None where that signature has not passed the
        checks before (or the feed names something that is not an input); None for any other feed."""
        if type(input_feed) is not dict:
            return None
        values, sig = [], []
        for name in self.input_names:
            v = input_feed.get(name, _UNFED)
            if v is _UNFED:
                values.append(None)
                sig.append(None)
            elif _plain(v):
                values.append(v)
                sig.append((v.dtype, v.shape))
            else:
                return None
        key = tuple(sig)
        entry = self.memo.get(key)
        if entry is not None and entry.fed != len(input_feed):  # a name that is not an input: checked
            entry = None
        return values, key, entry

    def remember(self, values: list, bindings: Bindings, key: Optional[tuple] = None) -> Optional[Signature]:
        """Note the signature of checked feed ``values`` (in input order; ``key``: that signature,
        where the caller has it) and return its :class:`Signature`; None where a value is not a
        numeric numpy array (nothing is noted)."""
        if key is None:
            if not all(v is None or _plain(v) for v in values):
                return None
            key = tuple(None if v is None else (v.dtype, v.shape) for v in values)
        if len(self.memo) >= SIZE:
            self.memo.clear()
        entry = self.memo[key] = Signature(sum(v is not None for v in values), dict(bindings.extents), self.reporter)
        return entry

    def fetch(self, outs: list, feeds: list, entry: Signature, kept_ids: frozenset):
        """All outputs of a run whose feed signature was seen, when each is a numeric numpy array,
        as the caller's own arrays; the output check runs unless this output signature passed it
        with this feed signature before.  None: the session's general fetch applies."""
        osig = []
        for v in outs:
            if not _plain(v):
                return None
            osig.append((v.dtype, v.shape))
        osig = tuple(osig)
        check = self.output_check
        if check.checks and osig not in entry.outputs:
            passes = self._passes
            if passes is None:
                passes = self._passes = _output_table(self.output_names, check) or _never
            if not passes(outs, entry.extents):  # something the check reports, or a form the table leaves to it
                check(self.output_names, outs, entry.bindings())
            if len(entry.outputs) < SIZE:
                entry.outputs.add(osig)
        return fresh_outputs(outs, kept_ids, feeds)


def _never(outs, extents) -> bool:
    return False


def _output_table(names: list, check) -> Optional[Callable]:
    """``passes(outs, extents)``: whether the numpy arrays ``outs`` (the graph's outputs in
    order) pass ``check`` (an :class:`~onnxkit.runtime.policy.OutputCheck`) with the feed's
    variable ``extents`` and nothing to report: each checked output of its declared element type
    and rank, its fixed extents the declared ones, each variable's extents one (the feed's where
    it bound it); one straight-line function, as the feed table's.  False where the check would
    bind or report anything otherwise; None where an output checked has no row (the check
    decides every run)."""
    rows = []
    for i, name in enumerate(names):
        if name not in check.checks:
            continue
        row = check.rows.get(name)
        if row is None:
            return None
        rows.append((i, row))
    consts: dict = {}
    code = ["def passes(outs, extents):", "    get = extents.get"]
    first: dict = {}  # variable -> local name
    for i, (dtype, rank, static, variables) in rows:
        code += [f"    s = outs[{i}]"]
        if dtype is not None:
            consts[f"_d{i}"] = np.dtype(dtype)
            code += [f"    if s.dtype is not _d{i} and s.dtype != _d{i}:", "        return False"]
        code.append("    s = s.shape")
        if rank is not None:
            code += [f"    if len(s) != {int(rank)}:", "        return False"]
        for axis, d in static:
            code += [f"    if s[{int(axis)}] != {int(d)}:", "        return False"]
        for axis, var, _ in variables:
            if var in first:
                code += [f"    if s[{int(axis)}] != {first[var]}:", "        return False"]
                continue
            local = first[var] = f"x{len(first)}"
            consts[f"_v{local}"] = var
            code += [f"    {local} = s[{int(axis)}]", f"    b = get(_v{local})",
                     f"    if b is not None and b[0] != {local}:", "        return False"]
    code.append("    return True")
    scope = dict(consts)
    exec(compile("\n".join(code) + "\n", "<onnxkit output table>", "exec"), scope)
    return scope["passes"]

