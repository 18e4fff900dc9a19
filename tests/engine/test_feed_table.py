"""The feed checks of a new signature in one pass (issue 43 item 1; :mod:`onnxkit.runtime.feed_table`).

A decoding loop feeds a new signature every token, so the checked-signature memo never hits and
every run took the full checks.  :class:`FeedTable` checks a dict of numeric numpy arrays in one
pass; wherever anything differs it answers None and the full checks run (and name it).  Checked:
on passing feeds it gives what the full checks give (the same arrays, the same variable
extents); every kind of bad feed is left to the full checks, whose errors and reports are
unchanged; a session serves a stream of new shapes through it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxkit
from onnxkit import ir
from onnxkit.errors import ConformanceWarning
from onnxkit.runtime.feed_table import FeedTable
from onnxkit.runtime.feeds import InputError

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")


def _model():
    """y = Concat(past, new) on axis 2 (past [1, 2, "past", 4] float, new [1, 2, 1, 4]), m = mask + 0 with a
    default for ``bias`` (an initializer that is also an input)."""
    f, i64 = 1, 7
    nodes = [ir.Node(["past", "new"], ["y"], op_type="Concat", name="concat", attribute=[ir.Attribute.make("axis", 2)]),
             ir.Node(["mask", "bias"], ["m"], op_type="Add", name="add")]
    g = ir.Graph(node=nodes, name="g",
                 input=[ir.ValueInfo("past", ir.tensor_type(f, [1, 2, "past", 4])),
                        ir.ValueInfo("new", ir.tensor_type(f, [1, 2, 1, 4])),
                        ir.ValueInfo("mask", ir.tensor_type(i64, [1, "total"])),
                        ir.ValueInfo("bias", ir.tensor_type(i64, [1]))],
                 output=[ir.ValueInfo("y", ir.tensor_type(f, [1, 2, "total", 4])),
                         ir.ValueInfo("m", ir.tensor_type(i64, [1, "total"]))],
                 initializer=[ir.Tensor.from_numpy(np.array([0], np.int64), "bias")])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g)


def _feeds(p: int) -> dict:
    rng = np.random.default_rng(p)
    return {"past": rng.standard_normal((1, 2, p, 4)).astype(np.float32),
            "new": rng.standard_normal((1, 2, 1, 4)).astype(np.float32),
            "mask": np.ones((1, p + 1), np.int64)}


@pytest.fixture
def sess():
    return onnxkit.InferenceSession(_model())


def test_passing_feeds_give_what_the_full_checks_give(sess):
    table = sess._feed_table
    assert isinstance(table, FeedTable)
    for p in (0, 1, 5, 17):
        feeds = _feeds(p)
        for extra in ({}, {"bias": np.array([3], np.int64)}):
            feeds.update(extra)
            passed = table.check(feeds)
            assert passed is not None
            values, extents = passed
            full_values, bindings = sess._feed_values(feeds)
            assert len(values) == len(full_values) and all(a is b for a, b in zip(values, full_values))
            assert {k: v[0] for k, v in extents.items()} == {k: v[0] for k, v in bindings.extents.items()}
            assert extents == {"past": (p, "input 'past' axis 2"), "total": (p + 1, "input 'mask' axis 1")}


BAD = {
    "a dtype": lambda f: f.update(new=f["new"].astype(np.float64)),
    "the byte order": lambda f: f.update(new=f["new"].astype(">f4")),
    "a rank": lambda f: f.update(mask=f["mask"][0]),
    "a static extent": lambda f: f.update(new=np.zeros((1, 2, 2, 4), np.float32)),
    "a name that is not an input": lambda f: f.update(other=np.zeros(1, np.float32)),
    "a required input missing": lambda f: f.pop("new"),
    "a list": lambda f: f.update(mask=[[1, 1]]),
    "None": lambda f: f.update(new=None),
    "a scalar": lambda f: f.update(mask=np.int64(1)),
}


@pytest.mark.parametrize("what", sorted(BAD))
def test_what_differs_is_left_to_the_full_checks(sess, what):
    feeds = _feeds(2)
    BAD[what](feeds)
    assert sess._feed_table.check(feeds) is None


def test_a_variable_bound_to_two_extents_is_left_to_the_full_checks():
    table = FeedTable.of([ir.ValueInfo("a", ir.tensor_type(1, ["n"])), ir.ValueInfo("b", ir.tensor_type(1, ["n"]))],
                         ["a", "b"])
    assert table.check({"a": np.zeros(2, np.float32), "b": np.zeros(3, np.float32)}) is None
    values, extents = table.check({"a": np.zeros(3, np.float32), "b": np.zeros(3, np.float32)})
    assert extents == {"n": (3, "input 'a' axis 0")}


def test_the_full_checks_still_name_and_report_what_is_wrong(sess):
    feeds = _feeds(2)
    feeds["new"] = feeds["new"].astype(np.float64)
    with pytest.raises(InputError, match="new"):
        sess.run(None, feeds)
    feeds = _feeds(2)
    feeds["new"] = np.zeros((1, 2, 2, 4), np.float32)
    with pytest.raises(InputError, match="axis 2 must be 1"):
        sess.run(None, feeds)
    feeds = _feeds(2)
    feeds["mask"] = np.ones((1, 5), np.int64)  # total 5 in the feed; the outputs bind total 3: reported
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sess.run(None, feeds)
    assert any(issubclass(w.category, ConformanceWarning) and "total" in str(w.message) for w in caught)


def test_a_stream_of_new_shapes_is_checked_by_the_table(sess, monkeypatch):
    full = []
    feed_values = type(sess)._feed_values
    monkeypatch.setattr(type(sess), "_feed_values", lambda self, f: full.append(1) or feed_values(self, f))
    for p in range(12):  # a new signature every run
        feeds = _feeds(p)
        y, m = sess.run(None, feeds)
        np.testing.assert_array_equal(y, np.concatenate([feeds["past"], feeds["new"]], axis=2))
        np.testing.assert_array_equal(m, feeds["mask"])
    assert full == []
    feeds = _feeds(3)
    feeds["new"] = feeds["new"].astype(np.float64)
    with pytest.raises(InputError):
        sess.run(None, feeds)
    assert full == [1]


def test_inputs_the_table_cannot_check_leave_it_out():
    g = ir.Graph(node=[ir.Node(["s"], ["t"], op_type="Identity", name="id")], name="g",
                 input=[ir.ValueInfo("s", ir.tensor_type(8, [2]))], output=[ir.ValueInfo("t", ir.tensor_type(8, [2]))])
    sess = onnxkit.InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g))
    assert sess._feed_table is None
    assert list(sess.run(None, {"s": np.array(["a", "b"], object)})[0]) == ["a", "b"]
