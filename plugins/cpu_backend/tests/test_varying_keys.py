"""Nodes whose keys keep being new (issue 43: a decoder's past grows every token): the cpu
Reshape / Expand / Unsqueeze stop remembering what their direct rule decides once
``VARYING_AFTER`` keys were new (``RuledPlans``), Concat its checked axis, and the cpu MatMul
passes a float product's extents by the plain rule after one portable check of its element type,
remembering no signature.  Oracles: onnxruntime on the same stream of keys through one session
(every key new to the plan), numpy, and the refusals of the portable geometry (by their words);
near misses after the node stopped remembering: keys the rule does not answer (a 0 or a second
-1 in a target, a 0 extent with -1), extents that do not fit, other element types."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit_cpu.overrides import shape as cpu_shape  # noqa: E402


def _sessions(nodes, inputs, outputs, opset: int = 17):
    g = h.make_graph(nodes, "g", inputs, outputs)
    data = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8).SerializeToString()
    so = ort.SessionOptions()
    so.log_severity_level = 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnxkit.InferenceSession(data), ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def _agree(mine, theirs, feed: dict, refusal: str = "") -> bool:
    """Both refuse (onnxkit with ``refusal`` in its message), or both give the same arrays."""
    try:
        want = theirs.run(None, feed)
    except Exception:  # noqa: BLE001  (onnxruntime refuses: onnxkit must too)
        want = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if want is None:
            with pytest.raises(onnxkit.errors.OnnxkitError, match=refusal):
                mine.run(None, feed)
            return False
        got = mine.run(None, feed)
    for g_, w in zip(got, want):
        assert g_.shape == w.shape and g_.dtype == w.dtype
        np.testing.assert_allclose(g_, w, rtol=1e-6, atol=1e-6)
    return True


@pytest.fixture
def remembered(monkeypatch):
    """Counts the plans the cpu shape kernels remember."""
    count = [0]
    remember = cpu_shape.remember

    def counting(plans, key, value):
        count[0] += 1
        return remember(plans, key, value)

    monkeypatch.setattr(cpu_shape, "remember", counting)
    return count


def _ints_model(op: str, **attrs):
    return _sessions([h.make_node(op, ["x", "ints"], ["y"], name=op.lower(), **attrs)],
                     [h.make_tensor_value_info("x", T.FLOAT, None), h.make_tensor_value_info("ints", T.INT64, [None])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])


def _feed(shape, ints):
    return {"x": np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape), "ints": np.array(ints, np.int64)}


def test_reshape_of_a_growing_extent_stops_remembering_and_keeps_refusing(remembered):
    mine, theirs = _ints_model("Reshape")
    n_new = cpu_shape.VARYING_AFTER + 14
    for n in range(1, n_new + 1):    # a past of n rows reshaped to a computed target: every key new
        assert _agree(mine, theirs, _feed((1, n, 4), (1, n, 2, 2)))
    assert remembered[0] == cpu_shape.VARYING_AFTER   # from then on decided by the rule, not kept
    # near misses, after the node stopped remembering
    assert _agree(mine, theirs, _feed((1, 7, 4), (1, -1, 2, 2)))        # the rule's -1
    assert _agree(mine, theirs, _feed((1, 7, 4), (0, 7, 4)))            # a 0: the portable geometry copies
    assert _agree(mine, theirs, _feed((0, 7, 4), (-1, 4)))              # a 0 extent with -1
    assert not _agree(mine, theirs, _feed((1, 7, 4), (1, 7, 3)), "reshape")   # counts differ: refused
    assert not _agree(mine, theirs, _feed((1, 7, 4), (-1, -1)), "reshape")    # two -1: refused
    assert not _agree(mine, theirs, _feed((1, 7, 4), (1, -2, 4)), "reshape")  # a negative extent
    assert _agree(mine, theirs, _feed((1, n_new + 1, 4), (1, n_new + 1, 4)))  # and on again


def test_expand_and_unsqueeze_of_a_growing_extent(remembered):
    mine, theirs = _ints_model("Expand")
    for n in range(cpu_shape.VARYING_AFTER + 10):   # 0 rows first: an empty past
        assert _agree(mine, theirs, _feed((1, 2, 1, n, 3), (1, 2, 2, n, 3)))
    before = remembered[0]
    assert _agree(mine, theirs, _feed((1, 2, 1, 5, 3), (2, 1, 1, 1)))     # broadcast the other way
    assert not _agree(mine, theirs, _feed((1, 2, 1, 5, 3), (1, 3, 1, 5, 3)), "expand")  # 2 vs 3
    assert not _agree(mine, theirs, _feed((1, 2, 1, 5, 3), (1, 2, 1, -1, 3)), "")  # a negative target
    assert remembered[0] == before                                        # none of them kept
    mine, theirs = _sessions(
        [h.make_node("Unsqueeze", ["x", "ints"], ["y"], name="unsqueeze")],
        [h.make_tensor_value_info("x", T.FLOAT, None), h.make_tensor_value_info("ints", T.INT64, [None])],
        [h.make_tensor_value_info("y", T.FLOAT, None)], opset=13)
    for n in range(cpu_shape.VARYING_AFTER + 6):
        assert _agree(mine, theirs, _feed((2, n), (n % 3,)))   # axes fed, and changing
    assert not _agree(mine, theirs, _feed((2, 3), (1, 1)), "")  # repeated axes: refused
    assert not _agree(mine, theirs, _feed((2, 3), (7,)), "")    # out of range


def test_concat_of_a_growing_past_stops_remembering_and_keeps_refusing(remembered):
    mine, theirs = _sessions([h.make_node("Concat", ["past", "new"], ["y"], name="concat", axis=-2)],
                             [h.make_tensor_value_info("past", T.FLOAT, None),
                              h.make_tensor_value_info("new", T.FLOAT, None)],
                             [h.make_tensor_value_info("y", T.FLOAT, None)])
    rng = np.random.default_rng(0)
    for n in range(cpu_shape.VARYING_AFTER + 10):   # from an empty past
        feed = {"past": rng.standard_normal((1, 2, n, 4)).astype(np.float32),
                "new": rng.standard_normal((1, 2, 1, 4)).astype(np.float32)}
        assert _agree(mine, theirs, feed)
    assert remembered[0] == cpu_shape.VARYING_AFTER
    bad = {"past": np.ones((1, 2, 5, 4), np.float32), "new": np.ones((1, 3, 1, 4), np.float32)}
    assert not _agree(mine, theirs, bad, "cannot be joined on axis")
    bad = {"past": np.ones((1, 2, 5, 4), np.float32), "new": np.ones((2, 1, 4), np.float32)}
    assert not _agree(mine, theirs, bad, "different ranks")


def _matmul():
    return _sessions([h.make_node("MatMul", ["a", "b"], ["y"], name="product")],
                     [h.make_tensor_value_info("a", T.FLOAT, None), h.make_tensor_value_info("b", T.FLOAT, None)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])


def test_matmul_of_growing_extents_and_its_near_misses():
    mine, theirs = _matmul()
    rng = np.random.default_rng(1)
    for n in range(40):   # attention's scores, then its weighted values: a new extent every run
        q = rng.standard_normal((1, 4, 1, 8)).astype(np.float32)
        k = rng.standard_normal((1, 4, 8, n)).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = mine.run(None, {"a": q, "b": k})[0]
        assert got.tobytes() == np.matmul(q, k).tobytes() and got.shape == (1, 4, 1, n)  # the same call
        assert _agree(mine, theirs, {"a": q, "b": k})
    f = np.float32
    assert not _agree(mine, theirs, {"a": np.ones((1, 4, 1, 8), f), "b": np.ones((1, 4, 7, 5), f)},
                      "inner extents differ")
    assert not _agree(mine, theirs, {"a": np.ones((2, 1, 8), f), "b": np.ones((3, 8, 5), f)}, "do not broadcast")
    assert _agree(mine, theirs, {"a": np.ones((8,), f), "b": np.ones((8, 5), f)})        # 1-D: the portable rule
    assert _agree(mine, theirs, {"a": np.ones((3, 1, 8), f), "b": np.ones((1, 8, 0), f)})  # a 0 extent


def test_matmul_of_float64_after_float32_on_one_node():
    """Each element type takes the portable check once on a node (a cast in front switches it)."""
    g = h.make_graph([h.make_node("Cast", ["a"], ["a2"], to=T.DOUBLE), h.make_node("Cast", ["b"], ["b2"], to=T.DOUBLE),
                      h.make_node("MatMul", ["a", "b"], ["y"], name="product32"),
                      h.make_node("MatMul", ["a2", "b2"], ["y2"], name="product64")], "g",
                     [h.make_tensor_value_info("a", T.FLOAT, None), h.make_tensor_value_info("b", T.FLOAT, None)],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("y2", T.DOUBLE, None)])
    data = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = onnxkit.InferenceSession(data)
        for n in range(0, 24):
            a = np.arange(2 * n, dtype=np.float32).reshape(2, 1, 1, n)
            b = np.arange(3 * n * 5, dtype=np.float32).reshape(3, n, 5) / 7
            y, y2 = sess.run(None, {"a": a, "b": b})
            assert y.shape == (2, 3, 1, 5) and y.tobytes() == np.matmul(a, b).tobytes()
            want = np.matmul(a.astype(np.float64), b.astype(np.float64))
            assert y2.dtype == np.float64 and y2.tobytes() == want.tobytes()
        with pytest.raises(onnxkit.errors.OnnxkitError, match="inner extents differ"):
            sess.run(None, {"a": np.ones((2, 1, 1, 4), np.float32), "b": np.ones((3, 5, 5), np.float32)})
