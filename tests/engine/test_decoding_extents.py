"""A new extent every run (issue 43): what a decoding step does per new signature.

A decoder's past grows one position a token, so every run brings a feed signature not seen
before.  Such a run is served by the feed table's checks, the checked-signature memo (the run's
signature computed once, handed to the plan choice and to the output fetch) and the shape
classes' replacement of the varying extents (:meth:`ShapeClasses.key
<onnxkit.runtime.optimizer.specialize.ShapeClasses.key>`, which classifies afresh only what it
cannot prove of an earlier class).  Checked here:

* :class:`ShapeClasses` gives, over random streams of signatures (ranks, element types, absent
  inputs, axes that start or stop varying), the class and the varying axes its full
  classification gives (a reference instance that classifies every signature);
* a session of a model doing a decoder's shape arithmetic (Shape, Gather, Unsqueeze, Concat,
  Expand, Reshape, Range over the grown past) computes, run after run with a new past length,
  what the same session unoptimized and onnxruntime compute, through near misses: a zero
  past, an extent that becomes 1 where it was larger and back, a broadcast that changes between
  runs, an axis that stops being 1;
* feed and output checks still refuse on the path of a new signature.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxkit
from onnxkit.runtime.feeds import InputError
from onnxkit.runtime.optimizer.shape_classes import ShapeClasses

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")


# -- the shape classes against their full classification -------------------------------------------
def _random_stream(rng, n: int) -> list:
    """``n`` signatures of three inputs: the first's axis 1 grows (a past), its axis 0 sometimes
    changes; the second is sometimes absent, of another element type or rank; the third's axes
    take a few values each."""
    dtypes = (np.dtype(np.float32), np.dtype(np.int64))
    out, past = [], 0
    for _ in range(n):
        past += int(rng.integers(0, 3))
        a = (np.dtype(np.float32), (int(rng.choice([1, 1, 1, 2])), past, 4))
        if rng.random() < 0.2:
            b = None
        else:
            rank = int(rng.choice([2, 2, 3]))
            b = (dtypes[int(rng.integers(0, 2))], tuple(int(rng.integers(0, 3)) for _ in range(rank)))
        c = (np.dtype(np.float32), (int(rng.choice([1, 5])), int(rng.choice([0, 1, 7, 8]))))
        out.append((a, b, c))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_shape_classes_give_what_full_classification_gives(seed):
    rng = np.random.default_rng(seed)
    fast, full = ShapeClasses(), ShapeClasses()
    stream = _random_stream(rng, 120)
    stream += stream[::-3]  # signatures met before, in another order
    for sig in stream:
        assert fast.key(sig) == full._classify(sig), sig
        assert fast.varying == full.varying
    assert fast.varying  # the stream made axes vary (the fast path was taken)


def test_an_axis_that_varies_later_is_noticed():
    """A signature whose varying extent is new but another extent is too: classified afresh (the
    other axis is counted, and varies after enough extents)."""
    classes = ShapeClasses()
    f = np.dtype(np.float32)
    for past in range(6):  # axis 1 varies
        classes.key(((f, (1, past, 4)),))
    assert classes.varying == {(0, 1)}
    keys = [classes.key(((f, (1, 10 + k, 4 + k)),)) for k in range(4)]  # axis 2 now takes new extents too
    assert classes.varying == {(0, 1), (0, 2)}
    assert keys[0] == ((f, (1, "onnxkit_varying_0_1", 4)),)
    assert keys[1] == ((f, (1, "onnxkit_varying_0_1", 5)),)
    assert keys[-1] == ((f, (1, "onnxkit_varying_0_1", "onnxkit_varying_0_2")),)


# -- a session against the unoptimized one and onnxruntime -----------------------------------------
def _model_bytes() -> bytes:
    """A decoder's KV-cache shape arithmetic: present = Concat(past, new) on axis 2; its length
    t read by Shape -> Gather; the heads repeated by Unsqueeze -> Expand to [1, 2, 2, t, 4] ->
    Reshape to [1, 4, t, 4] (targets built by Unsqueeze / Concat of t); plus ``bias`` [b, 4]
    (b is 1 or t: the broadcast changes between runs) and positions Range(0, t) as a column."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64

    def const(name, values):
        return helper.make_tensor(name, i64, [len(values)], values)

    nodes = [
        helper.make_node("Concat", ["past", "new"], ["present"], axis=2),
        helper.make_node("Shape", ["present"], ["shape"]),
        helper.make_node("Gather", ["shape", "two"], ["t"], axis=0),
        helper.make_node("Unsqueeze", ["t", "zero"], ["t1"]),
        helper.make_node("Concat", ["head5", "t1", "four"], ["target5"], axis=0),
        helper.make_node("Unsqueeze", ["present", "two1"], ["present5"]),
        helper.make_node("Expand", ["present5", "target5"], ["repeated"]),
        helper.make_node("Concat", ["head4", "t1", "four"], ["target4"], axis=0),
        helper.make_node("Reshape", ["repeated", "target4"], ["heads"]),
        helper.make_node("Add", ["heads", "bias"], ["y"]),
        helper.make_node("Range", ["zero_s", "t", "one_s"], ["positions"]),
        helper.make_node("Cast", ["positions"], ["positions_f"], to=f),
        helper.make_node("Unsqueeze", ["positions_f", "one"], ["column"]),
        helper.make_node("Mul", ["heads", "column"], ["y2"]),
    ]
    inits = [const("zero", [0]), const("one", [1]), const("two1", [2]), const("four", [4]),
             const("head5", [1, 2, 2]), const("head4", [1, 4]),
             helper.make_tensor("two", i64, [], [2]), helper.make_tensor("zero_s", i64, [], [0]),
             helper.make_tensor("one_s", i64, [], [1])]
    g = helper.make_graph(nodes, "decode", [
        helper.make_tensor_value_info("past", f, [1, 2, "past", 4]),
        helper.make_tensor_value_info("new", f, [1, 2, "step", 4]),
        helper.make_tensor_value_info("bias", f, ["b", 4])],
        [helper.make_tensor_value_info("present", f, [1, 2, "total", 4]),
         helper.make_tensor_value_info("y", f, [1, 4, "total", 4]),
         helper.make_tensor_value_info("y2", f, [1, 4, "total", 4])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _feeds(rng, past: int, step: int, bias: int) -> dict:
    return {"past": rng.standard_normal((1, 2, past, 4)).astype(np.float32),
            "new": rng.standard_normal((1, 2, step, 4)).astype(np.float32),
            "bias": rng.standard_normal((bias, 4)).astype(np.float32)}


#: (past, step, bias rows: None = as many as the present's length) of each run
RUNS = ([(p, 1, 1) for p in range(0, 9)]            # a new past length every run, the axis then varies
        + [(p, 1, None) for p in range(9, 14)]     # the broadcast of bias changes (t rows, not 1)
        + [(0, 1, 1), (0, 1, None), (14, 1, 1)]    # a zero past again, then longer
        + [(15, 3, 1), (16, 3, None), (17, 1, 1)]  # the step axis stops being 1 and becomes 1 again
        + [(1, 1, 1), (18, 1, None)])              # an extent that becomes 1 where it was larger


def test_new_extents_every_run_against_the_unoptimized_session_and_onnxruntime(first_run_policy):
    data = _model_bytes()
    sess = onnxkit.InferenceSession(data)
    so = onnxkit.SessionOptions()
    so.graph_optimization_level = onnxkit.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = onnxkit.InferenceSession(data, so)
    theirs = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(43)
    for past, step, bias in RUNS:
        feeds = _feeds(rng, past, step, past + step if bias is None else bias)
        want = theirs.run(None, feeds)
        for got in (sess.run(None, feeds), plain.run(None, feeds), sess.run(["y2", "present"], feeds)):
            if len(got) == 2:
                got = [got[1], None, got[0]]
            for g, w in zip(got, want):
                if g is not None:
                    assert g.dtype == w.dtype and g.shape == w.shape, (past, step, bias)
                    np.testing.assert_array_equal(g, w)
                    assert g.flags.writeable and g.flags.owndata or g.base is not None
    assert sess._plans.specializer.classes.varying  # the past axis was seen to vary


def test_checks_still_refuse_on_the_path_of_a_new_signature():
    sess = onnxkit.InferenceSession(_model_bytes())
    rng = np.random.default_rng(0)
    for past in range(6):
        sess.run(None, _feeds(rng, past, 1, 1))
    bad = _feeds(rng, 7, 1, 1)
    bad["past"] = bad["past"].astype(np.float64)
    with pytest.raises(InputError):
        sess.run(None, bad)
    bad = _feeds(rng, 8, 1, 1)
    bad["new"] = np.zeros((1, 3, 1, 4), np.float32)  # a static extent (2) contradicted
    with pytest.raises(InputError):
        sess.run(None, bad)
    bad = _feeds(rng, 9, 1, 1)
    bad["extra"] = bad["bias"]
    with pytest.raises(InputError):
        sess.run(None, bad)
    seen = _feeds(rng, 5, 1, 1)  # a signature that passed before, with a name that is not an input
    seen["extra"] = seen["bias"]
    with pytest.raises(InputError):
        sess.run(None, seen)
    out = sess.run(None, _feeds(rng, 10, 1, 1))  # and a good feed after them
    assert out[0].shape == (1, 2, 11, 4)


# -- the cold plan of a fresh process: specialized for a varying class only -------------------------
def _cold_session(monkeypatch, fresh_process_patch):
    """A tiered session in a fresh process's state (Softmax's compiled loop deferred: the cold plan
    stays) of :func:`_model_bytes` with a Softmax over ``y``."""
    compiled = pytest.importorskip("onnxkit_cpu.compiled")
    if not compiled.available():
        pytest.skip("numba is not installed: nothing is deferred")
    monkeypatch.delenv("ONNXKIT_FIRST_RUN", raising=False)
    fresh_process_patch(monkeypatch)
    model = onnx.load_from_string(_model_bytes())
    model.graph.node.append(helper.make_node("Softmax", ["y"], ["p"], axis=-1))
    model.graph.output.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 4, "total", 4]))
    data = model.SerializeToString()
    sess = onnxkit.InferenceSession(data)
    assert sess._cold is not None and sess._cold.deferred
    return sess, ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def test_a_cold_plan_is_specialized_for_a_varying_class_only(monkeypatch, fresh_process_patch):
    sess, theirs = _cold_session(monkeypatch, fresh_process_patch)
    spec = sess._plans.specializer
    rng = np.random.default_rng(5)
    planned = []
    for past in range(8):
        feeds = _feeds(rng, past, 1, 1)
        for g, w in zip(sess.run(None, feeds), theirs.run(None, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
        planned.append(spec.planned)
    assert sess._cold is not None  # still the cold plan
    assert planned[:2] == [0, 0]  # fixed signatures: not specialized (the warm plan will serve them)
    assert spec.classes.varying and planned[-1] >= 1 and planned[-1] == planned[-3]  # one class, planned once


def test_the_warm_plan_starts_from_the_shape_classes_the_cold_one_saw(monkeypatch, fresh_process_patch):
    sess, theirs = _cold_session(monkeypatch, fresh_process_patch)
    rng = np.random.default_rng(6)
    for past in range(6):
        sess.run(None, _feeds(rng, past, 1, 1))
    cold_classes = sess._plans.specializer.classes
    assert cold_classes.varying
    sess._plans.promote()
    warm = sess._plans.specializer
    assert sess._cold is None and warm.classes is not cold_classes
    assert warm.classes.varying == cold_classes.varying
    before = warm.planned
    for past in (6, 7, 8):  # the varying class: one plan, not one per new past length first
        feeds = _feeds(rng, past, 1, 1)
        for g, w in zip(sess.run(None, feeds), theirs.run(None, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    assert warm.planned - before <= 1


def test_a_cold_plan_specializes_a_fixed_signature_after_many_runs(monkeypatch, fresh_process_patch):
    """A stream of one chunk shape on the cold plan: unspecialized for its first
    COLD_SPECIALIZE_AFTER - 1 runs, then served by its own specialized plan, with the same results."""
    from onnxkit.runtime.plans import COLD_SPECIALIZE_AFTER

    sess, theirs = _cold_session(monkeypatch, fresh_process_patch)
    spec = sess._plans.specializer
    rng = np.random.default_rng(7)
    feeds = _feeds(rng, 3, 1, 1)
    want = theirs.run(None, feeds)
    planned = []
    for _ in range(COLD_SPECIALIZE_AFTER + 2):
        for g, w in zip(sess.run(None, feeds), want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
        planned.append(spec.planned)
    assert sess._cold is not None  # still the cold plan
    assert not spec.classes.varying
    assert planned[COLD_SPECIALIZE_AFTER - 2] == 0  # the first runs: not specialized
    assert planned[-1] == planned[COLD_SPECIALIZE_AFTER] == 1  # then one plan for that signature, made once
