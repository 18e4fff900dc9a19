""":class:`onnxkit.diagnostics.Diagnostic`, defined when first asked for.

It is :mod:`onnxkit.diagnostics`' class (found there by name, ``__module__``
``onnxkit.diagnostics``, so it pickles and prints as before); a process whose models raise no
finding does not define it (a record class costs time to define, ``benchmarks/records.py``).
"""

from __future__ import annotations

from onnxkit import record_methods, records

__all__ = ["Diagnostic"]


@records.frozen
class Diagnostic:
    """One finding: severity (``"error"`` / ``"warning"``), code, clause, message and location."""

    __module__ = "onnxkit.diagnostics"
    severity: str
    code: str
    clause: str
    message: str
    location: str = ""
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return f"{where}{self.severity}: {self.message} [{self.code}, Clause {self.clause}]"

    def to_json(self) -> dict:
        return {"severity": self.severity, "code": self.code, "clause": self.clause,
                "message": self.message, "location": str(self.location)}
