"""The validation policy of a session: what refuses a model or a run, and what is only reported.

Clause 8.6 says a consumer that detects a violation SHALL NOT produce a result; Clause 10.5
leaves severities to the implementation.  onnxkit's position (:mod:`onnxkit.checker.codes`):
an *error* (the result is undefined or cannot be computed) always refuses; a *warning* (a
condition that cannot change the result) is reported and the model runs, unless the session
is ``strict``, which refuses every violation of a SHALL.

What this module decides, for :class:`onnxkit.runtime.session.InferenceSession`:

* :func:`admit`: at session creation, the checker's report: refuse (``ValidationError``) or
  report the warnings in one summary line;
* :func:`read_as_onnxruntime` (:mod:`onnxkit.checker.readings`): what an admitted model's
  warnings accept is then read as onnxruntime reads it (a domain it imports implicitly,
  Constant's sparse ``value``, nodes out of topological order); the session evaluates that
  reading, a copy where anything changes;
* :class:`Bindings`: during the feed check, a dimension variable bound to two extents (6.5.2)
  is a warning by default and the session's input error under ``strict``;
* :class:`OutputCheck`: after a run, an output whose value contradicts its declared type or
  shape (a dimension variable included, bound across feeds and outputs) is a warning by
  default (the computed value is returned, as onnxruntime does) and an ``EvaluationError``
  under ``strict``.  What to check is worked out once, at session creation; a model that
  declares nothing checkable costs nothing per run.

Reports go to Python's :mod:`warnings` (category :class:`onnxkit.errors.ConformanceWarning`)
and to the ``onnxkit.check`` logger, one line each, each kind once per session.
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from .. import ir
from ..checker.codes import CODES, refuses
from ..checker.readings import read_as_onnxruntime  # noqa: F401  (the session reads the admitted model through it)
from ..diagnostics import warning
from ..dtypes import ELEMENT_TYPES, from_numpy_dtype, tag_name
from ..errors import ConformanceWarning, EvaluationError, OnnxkitError, ValidationError
from ..log import get_logger

if TYPE_CHECKING:
    from ..diagnostics import Diagnostic


#: Run-time conditions (not checker codes: only evaluation can find them).
DIM_CONFLICT = ("dimension-variable-conflict", "6.5.2")
OUTPUT_CONTRADICTS = ("output-contradicts-declared", "7.1, 9.4")


def summary(diagnostics: Sequence[Diagnostic], subject: str) -> str:
    """One line: how many, of which codes, and the first one in full."""
    counts = Counter(d.code for d in diagnostics)
    kinds = ", ".join(f"{c} x{n}" if n > 1 else c for c, n in counts.items())
    return f"{subject}: {len(diagnostics)} warning(s) [{kinds}]; first: {diagnostics[0]}"


def _advisory(d: Diagnostic) -> bool:
    """A warning that breaks no SHALL (a deprecated operator, a repeated import...): logged only."""
    row = CODES.get(d.code)
    return row is not None and not row.violation


def report(diagnostics: Sequence[Diagnostic], subject: str, quiet: bool = False) -> None:
    """Report warnings once, as one line, on the ``onnxkit.check`` logger and, where one of them
    breaks a SHALL, through :mod:`warnings` (``ConformanceWarning``); advisory warnings alone
    (conditions that break nothing) are only logged, so a clean export stays quiet; ``quiet``
    (the caller's log severity is error or above, :func:`onnxkit.log.quiet`): logged only."""
    if not diagnostics:
        return
    line = summary(diagnostics, subject)
    # get_logger adds the library's NullHandler: without a configured handler, the ``warnings``
    # line is the one a user sees, not a second copy from logging's last-resort handler
    get_logger("check").warning(line)
    if not quiet and not all(_advisory(d) for d in diagnostics):
        warnings.warn(line, ConformanceWarning, stacklevel=4)


def admit(check_report, strict: bool, quiet: bool = False) -> None:
    """Refuse the model on what the policy refuses (``ValidationError``), else report its warnings."""
    refused = [d for d in check_report.diagnostics if refuses(d, strict)]
    if refused:
        why = "strict=True refuses every violation (Clause 8.6)" if strict and not check_report.errors else \
            "it is not evaluated (Clause 15.5)"
        raise ValidationError(refused, f"the model does not conform, {why}")
    report(check_report.warnings, "the model is evaluated despite", quiet)


class Reporter:
    """The once-per-session memory of run-time reports; under ``strict`` a report is an exception."""

    def __init__(self, strict: bool, severity=-1):
        self.strict = strict
        self.severity = severity  # the session's log_severity_level: 3 and above silence warnings
        self._seen: set = set()

    def condition(self, kind: tuple, message: str, where: str, error_cls,
                  subject: str = "evaluation goes on despite") -> None:
        """One run-time condition: raise ``error_cls`` under strict, else warn (once per kind and place)."""
        if self.strict:
            raise error_cls(f"{where}: {message} (Clause {kind[1]}; strict=True)")
        key = (kind[0], where)
        if key in self._seen:
            return
        self._seen.add(key)
        from ..log import quiet

        report([warning(kind[0], kind[1], message, where)], subject, quiet(self.severity))


class Bindings:
    """The extents dimension variables take in one run (6.5.2: one variable, one extent, model-wide)."""

    __slots__ = ("extents", "reporter", "error_cls")

    def __init__(self, reporter: Reporter, error_cls):
        self.extents: dict = {}
        self.reporter = reporter
        self.error_cls = error_cls

    def bind(self, var: str, extent: int, where: str) -> None:
        """Bind ``var`` to ``extent`` at ``where``; a second, different extent is a reported conflict."""
        bound = self.extents.setdefault(var, (extent, where))
        if bound[0] != extent:
            self.reporter.condition(DIM_CONFLICT, f"dimension variable {var!r} is {extent} here but {bound[0]} in "
                                    f"{bound[1]}", where, self.error_cls)


def _checkable(t) -> bool:
    """True if a value of declared type ``t`` has something a run can contradict."""
    if isinstance(t, ir.TensorType):
        return t.elem_type in ELEMENT_TYPES or t.shape is not None
    if isinstance(t, (ir.SequenceType, ir.OptionalType)):
        return _checkable(t.elem_type)
    return False


def contradiction(value, t, bindings: Bindings, where: str) -> Optional[str]:
    """Why ``value`` cannot be of declared type ``t`` (None if it can); binds dimension variables."""
    if isinstance(t, ir.OptionalType):
        return None if value is None else contradiction(value, t.elem_type, bindings, where)
    if isinstance(t, ir.SequenceType):
        if not isinstance(value, list):
            return f"declared {t}, computed a {type(value).__name__}"
        for i, v in enumerate(value):
            why = contradiction(v, t.elem_type, bindings, f"{where}[{i}]")
            if why:
                return why
        return None
    if not isinstance(t, ir.TensorType):
        return None
    if not isinstance(value, np.ndarray):
        return f"declared {t}, computed a {type(value).__name__}"
    want = ELEMENT_TYPES.get(t.elem_type)
    if want is not None:
        try:
            got = from_numpy_dtype(value.dtype).tag
        except OnnxkitError:
            got = None
        if got != want.tag:
            return f"declared element type {tag_name(want.tag)}, computed numpy dtype {value.dtype}"
    if t.shape is None:
        return None
    dims = t.shape.values
    if len(dims) != value.ndim:
        return f"declared shape {list(dims)} (rank {len(dims)}), computed shape {list(value.shape)}"
    for axis, (d, n) in enumerate(zip(dims, value.shape)):
        if isinstance(d, int) and d != n:
            return f"declared shape {list(dims)}, computed shape {list(value.shape)} (axis {axis})"
        if isinstance(d, str):
            bindings.bind(d, n, f"{where} axis {axis}")
    return None


def _tensor_row(name: str, t) -> Optional[tuple]:
    """What :func:`contradiction` checks of a numpy array declared tensor type ``t`` (output
    ``name``), read once: ``(dtype or None, rank or None, ((axis, extent), ...), ((axis, variable,
    where), ...))``, or None where ``t`` is not a tensor type of a known element type whose numpy
    dtype names it back."""
    if not isinstance(t, ir.TensorType):
        return None
    dtype = None
    want = ELEMENT_TYPES.get(t.elem_type)
    if want is not None:
        try:
            if from_numpy_dtype(want.dtype).tag != want.tag:
                return None
        except OnnxkitError:
            return None
        dtype = want.dtype
    if t.shape is None:
        return dtype, None, (), ()
    dims = t.shape.values
    static = tuple((axis, d) for axis, d in enumerate(dims) if isinstance(d, int))
    variables = tuple((axis, d, f"output {name!r} axis {axis}") for axis, d in enumerate(dims) if isinstance(d, str))
    return dtype, len(dims), static, variables


class OutputCheck:
    """Declared-vs-computed for the graph outputs, planned once per session (``checks`` empty: nothing to do).

    A numpy array of its declared element type and rank whose fixed extents are the declared
    ones passes in one comparison per extent (its variables bound as :func:`contradiction`
    binds them: the same places); anything else is checked, and reported, by
    :func:`contradiction`."""

    def __init__(self, outputs: Sequence[ir.ValueInfo], reporter: Reporter):
        self.reporter = reporter
        self.checks = {vi.name: vi.type for vi in outputs if _checkable(vi.type)}
        self.rows = {name: _tensor_row(name, t) for name, t in self.checks.items()}

    def __call__(self, names: Sequence[str], values: Sequence, bindings: Bindings) -> None:
        """Check each returned output ``names[i]`` = ``values[i]`` against its declared type."""
        checks, rows = self.checks, self.rows
        bindings.error_cls = EvaluationError  # the feeds are checked; what conflicts now is the result
        extents = bindings.extents
        for name, value in zip(names, values):
            row = rows.get(name)
            if row is not None and type(value) is np.ndarray:
                dtype, rank, static, variables = row
                if (dtype is None or value.dtype == dtype) and (rank is None or value.ndim == rank):
                    shape = value.shape
                    if all(shape[axis] == d for axis, d in static):
                        for axis, var, where in variables:
                            n = shape[axis]
                            bound = extents.get(var)
                            if bound is None:
                                extents[var] = (n, where)
                            elif bound[0] != n:
                                bindings.bind(var, n, where)  # the conflict, reported there
                        continue
            t = checks.get(name)
            if t is None:
                continue
            where = f"output {name!r}"
            why = contradiction(value, t, bindings, where)
            if why:
                self.reporter.condition(OUTPUT_CONTRADICTS, why, where, EvaluationError,
                                        "the computed value is returned despite")
