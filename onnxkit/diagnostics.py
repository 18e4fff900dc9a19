"""Findings of the validator (Clause 10) and of inference (Clause 9.4).

A :class:`Diagnostic` is one condition found: its severity (onnxkit's position on 10.5: an
*error* means the model's result is undefined or cannot be computed; a *warning* a condition
that cannot change the result; see :mod:`onnxkit.checker.codes`), a stable ``code``
(kebab-case, listed in docs/diagnostics.md), the clause it comes from, a message, and where: a
location such as ``graph 'main' / node 3 'conv1' (Conv) / input 1 'W'`` (a string, or a lazy
:class:`onnxkit.locations.Location` that renders as one when printed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from onnxkit import records
from onnxkit import record_methods

if TYPE_CHECKING:
    from .diagnostic_record import Diagnostic

ERROR = "error"
WARNING = "warning"


def __getattr__(name: str):
    """:class:`Diagnostic`, defined in :mod:`onnxkit.diagnostic_record` when first asked for: a
    process whose models raise no finding makes none (a record class costs time to define)."""
    if name == "Diagnostic":
        from .diagnostic_record import Diagnostic

        return Diagnostic
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_made = None  # the Diagnostic class, once defined


def diagnostic(severity: str, code: str, clause: str, message: str, location: str = "") -> Diagnostic:
    """``Diagnostic(severity, code, clause, message, location)`` (its class defined on the first one)."""
    global _made
    cls = _made
    if cls is None:
        from .diagnostic_record import Diagnostic as cls

        _made = cls
    return cls(severity, code, clause, message, location)


def error(code: str, clause: str, message: str, location: str = "") -> Diagnostic:
    return diagnostic(ERROR, code, clause, message, location)


def warning(code: str, clause: str, message: str, location: str = "") -> Diagnostic:
    return diagnostic(WARNING, code, clause, message, location)


@records.define
class Report:
    """Every diagnostic found, in the order found (10.5: all conditions, not the first)."""

    diagnostics: list = records.field(factory=list)
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    @property
    def errors(self) -> list:
        return [d for d in self.diagnostics if d.severity == ERROR]

    @property
    def warnings(self) -> list:
        return [d for d in self.diagnostics if d.severity == WARNING]

    @property
    def ok(self) -> bool:
        """True when there is no error: a session runs the model (warnings allowed, save under strict)."""
        return not self.errors

    def codes(self) -> set:
        return {d.code for d in self.diagnostics}

    def extend(self, items: Iterable[Diagnostic]) -> None:
        self.diagnostics.extend(items)

    def to_json(self) -> dict:
        return {"errors": len(self.errors), "warnings": len(self.warnings),
                "diagnostics": [d.to_json() for d in self.diagnostics]}
