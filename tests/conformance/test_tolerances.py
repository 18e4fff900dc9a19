"""The tolerance onnxkit guarantees per element type (Clause 11.5, ``onnxkit.tolerances``).

The guarantee is enforced where it matters: the conformance runner compares every ONNX 1-3
vector at these tolerances (tests/conformance/test_conformance.py).  Here: every element type has one,
the measured maxima it rests on do not exceed it, and the comparison means what it says.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from onnxkit.conformance import compare
from onnxkit.dtypes import ELEMENT_TYPES
from onnxkit.statement.measured_tolerances import MEASURED
from onnxkit.tolerances import TOLERANCES


def test_every_element_type_has_a_guaranteed_tolerance():
    assert {e.name for e in ELEMENT_TYPES.values()} == set(TOLERANCES)
    for name in ("INT8", "UINT64", "INT4", "BOOL", "STRING"):
        assert TOLERANCES[name].exact


def test_the_guarantee_is_never_tighter_than_what_was_measured():
    data = MEASURED["types"]
    assert {"FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", "FLOAT8E4M3FN"} <= set(data)
    for name, families in data.items():
        for family, row in families.items():
            assert row["needed_rtol"] <= TOLERANCES[name].rtol, (name, family, row)
            assert row["special_values_match"], (name, family, row)


@pytest.mark.parametrize("dtype, ok, bad", [
    (np.float64, 1e-10, 1e-8),
    (np.float32, 5e-4, 2e-3),
    (np.float16, 5e-4, 4e-3),
    (ml_dtypes.bfloat16, 1e-2, 4e-2),
])
def test_relative_error_within_the_guarantee_passes_and_beyond_fails(dtype, ok, bad):
    e = np.array([1.0, -3.0, 250.0], dtype)
    assert compare(e, (e.astype(np.float64) * (1 + ok)).astype(dtype)) is None
    assert compare(e, (e.astype(np.float64) * (1 + bad)).astype(dtype)) is not None


def test_narrow_floats_and_integers_are_exact_and_special_values_match_only_themselves():
    e = np.array([1.0, 2.0, 0.5], ml_dtypes.float8_e4m3fn)
    one_ulp = np.array([1.125, 2.0, 0.5], ml_dtypes.float8_e4m3fn)
    assert compare(e, e.copy()) is None and compare(e, one_ulp) is not None
    assert compare(np.array([7], np.int64), np.array([8], np.int64)) is not None
    special = np.array([np.nan, np.inf, -np.inf], np.float32)
    assert compare(special, special.copy()) is None
    assert compare(special, np.array([np.nan, -np.inf, -np.inf], np.float32)) is not None
    assert compare(special, np.array([0.0, np.inf, -np.inf], np.float32)) is not None
