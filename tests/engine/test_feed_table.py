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


# -- the compiled table against a loop over its rows (issue 43: one straight-line function) -------------------
def _reference(rows, feed):
    """What the table's checks are, written as a loop over its rows (independent of the compiled code)."""
    if type(feed) is not dict:
        return None
    values, extents, fed = [], {}, 0
    for name, required, dtype, rank, static, variables in rows:
        if name not in feed:
            if required:
                return None
            values.append(None)
            continue
        v = feed[name]
        if not isinstance(v, np.ndarray) or type(v) is not np.ndarray or v.dtype != dtype or v.dtype.byteorder == ">" \
                or v.ndim != rank or any(v.shape[a] != d for a, d in static):
            return None
        for axis, var, where in variables:
            if var in extents and extents[var][0] != v.shape[axis]:
                return None
            extents.setdefault(var, (v.shape[axis], where))
        values.append(v)
        fed += 1
    return None if fed != len(feed) else (values, extents)


def test_the_compiled_table_is_the_loop_over_its_rows():
    rng = np.random.default_rng(43)
    dims = ([2, "n"], ["n", "m"], ["m", 3, "n"], [4], ["k", "k"])
    vis = [ir.ValueInfo(f"i{j}", ir.tensor_type(1 if j % 2 else 7, d)) for j, d in enumerate(dims)]
    for trial in range(60):
        required = [vi.name for vi in vis if rng.random() < 0.5]
        table = FeedTable.of(vis, required)
        for _ in range(12):
            ext = {"n": int(rng.integers(1, 4)), "m": int(rng.integers(1, 4)), "k": int(rng.integers(1, 3))}
            feed = {}
            for j, vi in enumerate(vis):
                if rng.random() < 0.25:
                    continue
                shape = [ext[d] if isinstance(d, str) else d for d in dims[j]]
                if rng.random() < 0.15:  # a near miss: one extent off by one
                    a = int(rng.integers(len(shape)))
                    shape[a] += 1
                dtype = np.float32 if j % 2 else np.int64
                if rng.random() < 0.1:
                    dtype = np.float64
                if rng.random() < 0.1:
                    dtype = np.dtype(dtype).newbyteorder(">")
                feed[vi.name] = np.zeros(shape, dtype)
            if rng.random() < 0.05:
                feed["other"] = np.zeros(1, np.float32)
            got, want = table.check(feed), _reference(table.rows, feed)
            assert (got is None) == (want is None), (required, {k: (v.dtype, v.shape) for k, v in feed.items()})
            if got is not None:
                assert all(a is b for a, b in zip(got[0], want[0])) and len(got[0]) == len(want[0])
                assert got[1] == want[1]


def test_a_dtype_equal_but_not_identical_and_a_strided_feed_pass_as_the_full_checks_pass_them(sess):
    feeds = _feeds(3)
    same = np.dtype(np.float32, metadata={"note": 1})  # equal to float32, another object
    assert same == np.float32 and same is not np.dtype(np.float32)
    feeds["past"] = feeds["past"].astype(same)
    feeds["new"] = np.zeros((1, 2, 2, 8), np.float32)[:, :, :1, ::2]  # not contiguous
    passed = sess._feed_table.check(feeds)
    assert passed is not None and passed[0][0] is feeds["past"] and passed[0][1] is feeds["new"]
    full_values, bindings = sess._feed_values(feeds)
    assert {k: v[0] for k, v in passed[1].items()} == {k: v[0] for k, v in bindings.extents.items()}
    y, _ = sess.run(None, feeds)
    np.testing.assert_array_equal(y, np.concatenate([feeds["past"], feeds["new"]], axis=2))


def test_an_optional_input_binds_a_variable_only_when_fed():
    vis = [ir.ValueInfo("a", ir.tensor_type(1, ["n"])), ir.ValueInfo("b", ir.tensor_type(1, ["n", "m"])),
           ir.ValueInfo("c", ir.tensor_type(1, ["m"]))]
    table = FeedTable.of(vis, ["c"])
    f = np.float32
    assert table.check({"c": np.zeros(5, f)})[1] == {"m": (5, "input 'c' axis 0")}
    assert table.check({"b": np.zeros((2, 5), f), "c": np.zeros(5, f)})[1] == {
        "n": (2, "input 'b' axis 0"), "m": (5, "input 'b' axis 1")}
    assert table.check({"a": np.zeros(3, f), "b": np.zeros((2, 5), f), "c": np.zeros(5, f)}) is None
    assert table.check({"b": np.zeros((2, 4), f), "c": np.zeros(5, f)}) is None
