"""The output check of a new output signature read off a compiled table (issue 43; ``checked._output_table``).

A decoding loop's outputs have a new signature every token, so the session checked them against
their declarations every run.  ``CheckedSignatures.fetch`` first asks a straight-line function
made once from the check's rows whether the outputs pass with nothing to bind or report; where
it says no, the full check runs (and reports).  Checked here: the table's answer is what the
full check does (against an independent reading of the declarations), near misses (another
element type, rank or fixed extent, a variable that disagrees with the feed or between two
outputs, a dtype equal to the declared one but another object), and through a session: a
changed output type is still reported when its signature is new.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxkit
from onnxkit import ir
from onnxkit.errors import ConformanceWarning
from onnxkit.runtime.checked import _output_table
from onnxkit.runtime.policy import OutputCheck, Reporter

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

F, I64 = 1, 7
DECLARED = [("y", F, [1, "n", 4]), ("z", I64, ["n", "m"]), ("w", F, None), ("u", 0, [2])]


def _outputs():
    out = []
    for name, elem, dims in DECLARED:
        t = ir.TensorType(elem, None) if dims is None else ir.tensor_type(elem, dims)
        out.append(ir.ValueInfo(name, t))
    return out


def _expected(values, extents) -> bool:
    """Whether the declarations above hold for ``values`` with the feed's ``extents`` (written out here)."""
    bound = {k: v[0] for k, v in extents.items()}
    for (name, elem, dims), v in zip(DECLARED, values):
        if elem and v.dtype != {F: np.float32, I64: np.int64}[elem]:
            return False
        if dims is None:
            continue
        if v.ndim != len(dims):
            return False
        for d, n in zip(dims, v.shape):
            if isinstance(d, int) and d != n:
                return False
            if isinstance(d, str) and bound.setdefault(d, n) != n:
                return False
    return True


def test_the_table_passes_exactly_what_the_check_passes_without_a_report():
    check = OutputCheck(_outputs(), Reporter(False, 3))
    passes = _output_table([n for n, _, _ in DECLARED], check)
    assert passes is not None
    rng = np.random.default_rng(43)
    for _ in range(400):
        n, m = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        shapes = [[1, n, 4], [n, m], [3], [2]]
        dtypes = [np.float32, np.int64, np.float32, np.float64]
        k = int(rng.integers(0, 8))
        if k < 4:  # one near miss somewhere
            what = int(rng.integers(0, 4))
            if what == 0:
                shapes[k] = shapes[k] + [1]
            elif what == 1 and len(shapes[k]) > 0:
                shapes[k][int(rng.integers(len(shapes[k])))] += 1
            elif what == 2:
                dtypes[k] = np.float64 if dtypes[k] != np.float64 else np.float32
            else:
                dtypes[k] = np.dtype(dtypes[k], metadata={"x": 1})  # equal, another object
        values = [np.zeros(s, d) for s, d in zip(shapes, dtypes)]
        extents = {} if rng.random() < 0.5 else {"n": (n if rng.random() < 0.8 else n + 1, "input 'a' axis 0")}
        want = _expected(values, extents)
        assert passes(values, extents) == want, ([v.shape for v in values], [v.dtype for v in values], extents)
        if want:  # the full check reports nothing
            from onnxkit.runtime.feeds import InputError
            from onnxkit.runtime.policy import Bindings

            b = Bindings(Reporter(True, 3), InputError)
            b.extents = dict(extents)
            OutputCheck(_outputs(), Reporter(True, 3))([n for n, _, _ in DECLARED], values, b)


def _cast_model(to: int):
    """y = Cast(x, to) with y declared float[1, "n"] (x float[1, "n"])."""
    g = ir.Graph(node=[ir.Node(["x"], ["y"], op_type="Cast", name="cast", attribute=[ir.Attribute.make("to", to)])],
                 name="g", input=[ir.ValueInfo("x", ir.tensor_type(F, [1, "n"]))],
                 output=[ir.ValueInfo("y", ir.tensor_type(F, [1, "n"]))])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g)


def test_a_new_output_signature_of_another_type_is_still_reported():
    sess = onnxkit.InferenceSession(_cast_model(F))
    for n in range(1, 6):  # new signatures: the table passes them
        (y,) = sess.run(None, {"x": np.full((1, n), 1.5, np.float32)})
        assert y.dtype == np.float32 and y.shape == (1, n)
    assert sess._checked._passes is not None
    # the same session's table, outputs of another type: the full check runs and reports
    check = sess._checked
    entry = next(iter(check.memo.values()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check.fetch([np.zeros((1, 7), np.float64)], [None], entry, frozenset())
    assert any(issubclass(w.category, ConformanceWarning) and "y" in str(w.message) for w in caught)
