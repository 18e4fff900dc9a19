"""The numerical tolerance onnxkit guarantees per element type (Clause 11.5, Annex A).

Clause 11.5 asks an evaluating consumer to document the tolerance it achieves for each
element type it supports; the specification states none.  onnxkit's position: a computed
value ``a`` meets an expected value ``e`` when ``|a - e| <= atol + rtol * |e|`` with the
``(rtol, atol)`` of its element type below, and NaN, +inf and -inf match only themselves
(Clause 11.3).  Integer, boolean and string types are exact.  Operators that Part 2 declares
non-deterministic are exempt (Clause 11.6).

The figures rest on measurement: ``python tools/measure_tolerances.py`` runs the ONNX 1-3
test package and writes the largest error observed per element type and operator family
to ``onnxkit/statement/measured_tolerances.py``; a guaranteed ``rtol`` is never below what was
measured (``tests/conformance/test_tolerances.py``), and the conformance runner compares every vector
at these tolerances unless the vector states its own, so the suite fails when onnxkit stops
achieving them.

How the arithmetic is done (the reason for the float16/bfloat16 figures): float16 and
bfloat16 operands are computed in float32 and rounded once to the output type, except the
Softmax family, which computes in float16.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records
import numpy as np

from .dtypes import from_numpy_dtype
from .errors import OnnxkitError


@records.frozen
class Tolerance:
    """The guarantee for one element type: ``|a - e| <= atol + rtol * |e|``, or ``exact``."""

    rtol: float = 0.0
    atol: float = 0.0
    exact: bool = False
    why: str = ""


_EXACT = Tolerance(exact=True, why="integers, booleans and strings are computed exactly")

#: Element type name (Table 5) -> the tolerance onnxkit guarantees for it.
TOLERANCES: dict = {
    "DOUBLE": Tolerance(1e-9, 1e-12, why="float64 arithmetic throughout"),
    "FLOAT": Tolerance(1e-3, 1e-7, why="the ONNX 1-3 harness tolerance; float32 accumulation order differs from the reference; "
                      "except the cpu backend's float32 Sigmoid (and Swish) for inputs in [-18, -10.4]: absolute "
                      "error up to 1.8e-7, onnxruntime's MLAS approximation, kept bit-equal (decisions.md)"),
    "FLOAT16": Tolerance(1e-3, 1e-7, why="computed in float32 and rounded once; the float32 tolerance holds"),
    "BFLOAT16": Tolerance(2 ** -6, 1e-7, why="computed in float32 and rounded once; bfloat16 keeps 8 significand bits"),
    "COMPLEX64": Tolerance(1e-3, 1e-7, why="as float32, on the modulus of the difference"),
    "COMPLEX128": Tolerance(1e-9, 1e-12, why="as float64, on the modulus of the difference"),
    "FLOAT8E4M3FN": Tolerance(0.0, 0.0, why="conversions round to nearest even (Clause 6.3): bit-exact"),
    "FLOAT8E4M3FNUZ": Tolerance(0.0, 0.0, why="conversions round to nearest even (Clause 6.3): bit-exact"),
    "FLOAT8E5M2": Tolerance(0.0, 0.0, why="conversions round to nearest even (Clause 6.3): bit-exact"),
    "FLOAT8E5M2FNUZ": Tolerance(0.0, 0.0, why="conversions round to nearest even (Clause 6.3): bit-exact"),
    "FLOAT8E8M0": Tolerance(0.0, 0.0, why="conversions round as Clause 6.3 states: bit-exact"),
    "FLOAT6E2M3": Tolerance(0.0, 0.0, why="conversions round to nearest even (Clause 6.3): bit-exact"),
    "FLOAT6E3M2": Tolerance(0.0, 0.0, why="conversions round to nearest even (Clause 6.3): bit-exact"),
    "FLOAT4E2M1": Tolerance(0.0, 0.0, why="conversions round to nearest even (Clause 6.3): bit-exact"),
}
for _name in ("INT2", "UINT2", "INT4", "UINT4", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32",
              "INT64", "UINT64", "BOOL", "STRING"):
    TOLERANCES[_name] = _EXACT
del _name


def type_key(dtype) -> Optional[str]:
    """The Table 5 name of a numpy/ml_dtypes dtype, or None when it has no element type."""
    if np.dtype(dtype) == object:
        return "STRING"
    try:
        return from_numpy_dtype(dtype).name
    except OnnxkitError:
        return None


def tolerance_for(dtype) -> Optional[Tolerance]:
    """The guaranteed tolerance of values of ``dtype``, or None for a dtype with no element type."""
    key = type_key(dtype)
    return TOLERANCES.get(key) if key else None
