"""An independent oracle for the gpu backend's unit tests: onnx's ReferenceEvaluator (tests only).

The gpu tests compare the gpu backend with the cpu backend *and*, through
:func:`check_against_reference`, with ``onnx.reference``, so a bug in a helper the two backends
share (output geometry, index arithmetic) cannot hide in their agreement.  Each comparison is
named ``FILE::TEST#K OP-OPSET`` (the K-th comparison of that test).  The reference is no oracle
for some of them: old operator forms it does not implement, attribute combinations it gets
wrong, narrow-type arithmetic done in a different order.  Those comparisons are two named sets
of ``onnxkit/statement/conformance_figures.json`` (``gpu_unit_tests.reference_cannot_run`` and
``gpu_unit_tests.reference_disagrees``), with stated sizes; a comparison in neither must agree,
and one in a set that starts to behave fails too, asking to shrink the set.  Set
``ONNXKIT_RECORD_REFERENCE=FILE`` to append every comparison's outcome to FILE instead of
asserting; ``python plugins/gpu_backend/tests/gpu_oracle.py FILE`` then rebuilds the two sets from
a record of the whole gpu unit test run (after adding or reordering comparisons).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np

_TESTS = str(Path(__file__).resolve().parents[3] / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
import conformance_figures as figures  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def reference_run(model: bytes, feed: dict) -> list:
    """The outputs onnx.reference computes for ``model`` (serialized) on ``feed``."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    proto = onnx.load_from_string(model)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return list(ReferenceEvaluator(proto).run(None, dict(feed)))


def assert_close(got, want, rtol: float, atol: float, what: str = "") -> None:
    """``got`` (an array) equals ``want``: dtype, shape, and values (floats within rtol/atol, NaN
    where NaN; integers and booleans exactly)."""
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), (what, type(got))
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if want.dtype.kind in "fc" or want.dtype == BF16:
        np.testing.assert_allclose(got.astype(np.complex128 if want.dtype.kind == "c" else np.float64),
                                   want.astype(np.complex128 if want.dtype.kind == "c" else np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)



#: Tolerances against the reference for the narrow float types, which it computes in the type
#: itself (every step rounded) where onnxkit computes in float32 and rounds once.
NARROW_TOLERANCE = {np.dtype(np.float16): (1e-2, 1e-3), BF16: (4e-2, 1e-2)}
_CALLS: dict = {}


def comparison_name(op: str, opset: int) -> str:
    """The name of the current test's next comparison: ``FILE::TEST#K OP-OPSET``."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0].split("/")[-1]
    k = _CALLS[test] = _CALLS.get(test, -1) + 1
    return f"{test}#{k} {op}-{opset}"


def _outcome(model: bytes, feed: dict, gots, rtol: float, atol: float) -> str:
    """``agrees``, ``cannot run: ...`` or ``disagrees: ...`` for the gpu outputs ``gots``."""
    try:
        wants = reference_run(model, feed)
    except Exception as exc:  # the reference has no implementation or fails on this form
        return f"cannot run: {type(exc).__name__}: {exc}"
    try:
        assert len(gots) == len(wants), (len(gots), len(wants))
        for k, (got, want) in enumerate(zip(gots, wants)):
            r, a = NARROW_TOLERANCE.get(np.asarray(want).dtype, (rtol, atol))
            assert_close(got, want, r, a, f"output {k}")
    except AssertionError as exc:
        return f"disagrees: {exc}"
    return "agrees"


def check_against_reference(model: bytes, feed: dict, gots, op: str, opset: int, rtol: float, atol: float) -> None:
    """The gpu outputs ``gots`` of ``model`` on ``feed`` agree with onnx.reference, unless this
    comparison is named in one of the figures' sets for what the reference cannot do."""
    name = comparison_name(op, opset)
    outcome = _outcome(model, feed, gots, rtol, atol)
    record = os.environ.get("ONNXKIT_RECORD_REFERENCE")
    if record:
        with open(record, "a", encoding="utf-8") as f:
            f.write(json.dumps([name, outcome[:400]]) + "\n")
        return
    where = {"cannot run": "gpu_unit_tests.reference_cannot_run", "disagrees": "gpu_unit_tests.reference_disagrees"}
    for kind, dotted in where.items():
        if name in figures.named_set(dotted):
            assert outcome.startswith(kind), (f"{name}: named in {dotted} of onnxkit/statement/conformance_figures.json but "
                                              f"now {outcome[:200]}: remove it there and lower the count")
            return
    assert outcome == "agrees", f"{name}: the gpu result and onnx.reference differ: {outcome}"


def write_sets_from_record(record: Path) -> dict:
    """Rewrite the two sets of the figures file from a record (``ONNXKIT_RECORD_REFERENCE``) of a
    whole run of the gpu unit tests; returns {set: count}."""
    rows = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines() if line]
    data = json.loads(figures.FIGURES.read_text(encoding="utf-8"))
    sizes = {}
    for kind, key in (("cannot run", "reference_cannot_run"), ("disagrees", "reference_disagrees")):
        names = sorted(name for name, outcome in rows if outcome.startswith(kind))
        data["gpu_unit_tests"][key] = {"count": len(names), "names": names}
        sizes[key] = len(names)
    figures.FIGURES.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return sizes


if __name__ == "__main__":  # ONNXKIT_RECORD_REFERENCE=R pytest plugins/gpu_backend/tests; python gpu_oracle.py R
    if len(sys.argv) != 2:
        sys.exit("usage: python plugins/gpu_backend/tests/gpu_oracle.py RECORD_FILE")
    print(write_sets_from_record(Path(sys.argv[1])), f"written; now run {figures.WRITE_README}")
