"""The corpus comparison itself: what counts as agreeing with onnxruntime, and expected outcomes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from corpus_outcome import Outcome, agrees, compare, counts, parse_expected  # noqa: E402

F = np.float32


def test_numbers_within_tolerance_agree_and_beyond_do_not():
    ref = np.array([1.0, 100.0, 0.0], F)
    err, why = compare(ref + np.array([5e-5, 0.09, -9e-5], F), ref)
    assert why == "" and err == pytest.approx(0.09, rel=1e-3)
    err, why = compare(ref + np.array([0, 0.2, 0], F), ref)
    assert "exceeds" in why and err == pytest.approx(0.2, rel=1e-3)


def test_nan_and_inf_agree_only_with_themselves():
    assert compare(np.array([np.nan, np.inf], F), np.array([np.nan, np.inf], F))[1] == ""
    assert compare(np.array([np.nan, -np.inf], F), np.array([1.0, np.inf], F))[1] != ""


@pytest.mark.parametrize("got, ref, fragment", [
    (np.zeros((2, 3), F), np.zeros((3, 2), F), "shape"),
    (np.zeros(3, np.float64), np.zeros(3, F), "dtype"),
    (np.array([1, 2, 4]), np.array([1, 2, 3]), "1 of 3 integer elements differ"),
    (np.array([b"a"], object), np.array(["a"], object), "string element b'a'"),
    ([{0: 0.5}], [{1: 0.5}], "map keys"),
    ([np.zeros(2, F)], [np.zeros(2, F), np.zeros(2, F)], "sequence of 2"),
])
def test_differences_are_named(got, ref, fragment):
    assert fragment in compare(got, ref)[1]


def test_maps_compare_by_value():
    assert compare([{"a": np.array(0.25)}], [{"a": 0.2501}])[1] == ""
    assert compare([{"a": 0.3}], [{"a": 0.25}])[1] != ""


def test_expected_outcomes():
    assert parse_expected("match") == ("match", "")
    assert parse_expected("refused: at run: X") == ("refused", "at run: X")
    with pytest.raises(ValueError):
        parse_expected("works")
    refused = Outcome("refused", "at session creation: ValidationError [negative-extent]", "ValidationError: ...")
    assert agrees(refused, "refused: [negative-extent]")
    assert not agrees(refused, "refused: [duplicate-node-name]")
    assert not agrees(refused, "match")
    unsupported = Outcome("unsupported", "com.microsoft::A, com.microsoft::B")
    assert agrees(unsupported, "unsupported: com.microsoft::A, com.microsoft::B")
    assert not agrees(unsupported, "unsupported: com.microsoft::A")  # the whole list, not a part
    assert counts(["match", "match", "crash: x"]) == {"match": 2, "mismatch": 0, "unsupported": 0,
                                                      "refused": 0, "crash": 1}
