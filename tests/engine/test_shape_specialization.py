"""Shape specialization (onnxkit.runtime.optimizer.specialize): a plan per input-shape signature,
its Shape/Size chains folded, results identical to the plan it came from."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from optimizer_cases import TP, helper, init, model

from onnxkit import InferenceSession, SessionOptions, load
from onnxkit.runtime.optimizer import shape_classes, specialize
from onnxkit.runtime.options import GraphOptimizationLevel

ROOT = Path(__file__).resolve().parents[2]
X = helper.make_tensor_value_info("x", TP.FLOAT, ["n", "m"])
Y = helper.make_tensor_value_info("y", TP.FLOAT, None)


def _plain() -> SessionOptions:
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "specialize")
    return so


def _reshape_chain():
    """y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) * 2: a flatten an exporter writes."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n0"], axis=0),
             helper.make_node("Unsqueeze", ["n0", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"]),
             helper.make_node("Mul", ["r", "two"], ["y"])]
    inits = [init("zero", np.array(0, np.int64)), init("axes", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64)), init("two", np.array(2, np.float32))]
    return model(nodes, [X], [Y], inits).SerializeToString()


def _x(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def test_shape_chain_becomes_constants_and_results_are_identical():
    sess, plain = InferenceSession(_reshape_chain()), InferenceSession(_reshape_chain(), _plain())
    x = _x(3, 4, 5)[..., 0]
    first, second = sess.run(None, {"x": x})[0], sess.run(None, {"x": x})[0]
    assert np.array_equal(first, plain.run(None, {"x": x})[0]) and np.array_equal(second, first)
    assert list(sess._specializer.stats.values()) == [(6, 2)]  # Reshape and Mul are left
    special = sess._specializer.plan_for(specialize.signature([x]))[0]
    assert [s.node.op_type for s in special.steps] == ["Reshape", "Mul"]
    assert np.array_equal(special.constants["target"], [3, -1])


def test_a_varying_extent_makes_one_plan_for_all_its_extents():
    sess, plain = InferenceSession(_reshape_chain()), InferenceSession(_reshape_chain(), _plain())
    spec = sess._specializer
    for n in range(1, specialize.CAPACITY + 6):
        for _ in range(2):
            x = _x(n, 3)
            assert np.array_equal(sess.run(None, {"x": x})[0], plain.run(None, {"x": x})[0])
    assert spec.classes.varying == {(0, 0)}
    assert spec.planned == shape_classes.VARIANTS + 1  # a plan for each of the first n, then one for every n
    general = spec.plan_for(specialize.signature([_x(50, 3)]))[0]
    assert "Shape" in [s.node.op_type for s in general.steps]  # n varies: its extent is read at run time


def test_extents_that_stay_fixed_are_still_folded():
    sess, plain = InferenceSession(_reshape_chain()), InferenceSession(_reshape_chain(), _plain())
    spec = sess._specializer
    for m in (2, 5, 7, 5, 9):
        x = _x(3, m)
        assert np.array_equal(sess.run(None, {"x": x})[0], plain.run(None, {"x": x})[0])
    assert spec.classes.varying == {(0, 1)} and spec.planned == shape_classes.VARIANTS + 1
    general = spec.plan_for(specialize.signature([_x(3, 11)]))[0]
    assert [s.node.op_type for s in general.steps] == ["Reshape", "Mul"]  # n = 3 in every run: folded
    assert np.array_equal(general.constants["target"], [3, -1])
    x = _x(3, 11)
    assert np.array_equal(sess.run(None, {"x": x})[0], x.reshape(3, -1) * 2)


def test_each_rank_has_its_plan_lru_bounded():
    x_any = helper.make_tensor_value_info("x", TP.FLOAT, None)  # any rank
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n0"], axis=0),
             helper.make_node("Unsqueeze", ["n0", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [init("zero", np.array(0, np.int64)), init("axes", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64))]
    sess = InferenceSession(model(nodes, [x_any], [Y], inits).SerializeToString())
    spec = sess._specializer
    for rank in range(1, specialize.CAPACITY + 3):
        for _ in range(2):
            x = _x(*([2] * rank))
            assert np.array_equal(sess.run(None, {"x": x})[0], x.reshape(2, -1))
    assert len(spec._plans) == specialize.CAPACITY and not spec.classes.varying
    assert specialize.signature([_x(2)]) not in spec._plans  # the least recently used went first
    assert specialize.signature([_x(*([2] * (specialize.CAPACITY + 2)))]) in spec._plans


def test_signatures_whose_runs_fail_are_not_kept():
    sess = InferenceSession(_reshape_chain())
    spec = sess._specializer
    for rank in range(1, specialize.CAPACITY + 5):  # a class each (ranks are not compared)
        plan, recording = spec.plan_for(specialize.signature([_x(*([2] * rank))]))  # recorded, never completed
        assert recording
    assert len(spec._recording) == specialize.CAPACITY and not spec._plans and spec.planned == 0


def test_switched_off_by_level_and_by_name():
    so = SessionOptions()
    so.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    assert InferenceSession(_reshape_chain(), so)._specializer is None
    assert InferenceSession(_reshape_chain(), _plain())._specializer is None
    assert InferenceSession(_reshape_chain())._specializer is not None


def test_a_shape_inference_gets_wrong_is_not_folded(monkeypatch):
    real = specialize.Specializer._types

    def wrong(self, sig):
        types, values = real(self, sig)
        from onnxkit import ir

        types["x"] = ir.TensorType(elem_type=1, shape=ir.Shape.of([7, 7]))  # not what the run sees
        return types, {}

    monkeypatch.setattr(specialize.Specializer, "_types", wrong)
    sess = InferenceSession(_reshape_chain())
    x = _x(3, 4)
    for _ in range(3):
        assert np.array_equal(sess.run(None, {"x": x})[0], x.reshape(3, -1) * 2)
    assert list(sess._specializer.stats.values()) == [(6, 6)]


def test_data_dependent_shape_is_not_folded():
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Shape", ["nz"], ["s"]),
             helper.make_node("Cast", ["s"], ["y"], to=TP.FLOAT)]
    m = model(nodes, [X], [Y]).SerializeToString()
    sess = InferenceSession(m)
    for x in (np.array([[0, 1], [1, 1]], np.float32), np.array([[0, 0], [0, 1]], np.float32)):
        sess.run(None, {"x": x})
        assert np.array_equal(sess.run(None, {"x": x})[0], [2, np.count_nonzero(x)])
    assert all(after == 3 for _, after in sess._specializer.stats.values())


def test_folded_output_is_the_callers_own():
    nodes = [helper.make_node("Shape", ["x"], ["y"])]
    m = model(nodes, [X], [helper.make_tensor_value_info("y", TP.INT64, [2])]).SerializeToString()
    sess = InferenceSession(m)
    x = _x(2, 3)
    sess.run(None, {"x": x})
    out = sess.run(None, {"x": x})[0]
    assert list(sess._specializer.stats.values()) == [(1, 0)]
    out[:] = 0
    assert np.array_equal(sess.run(None, {"x": x})[0], [2, 3])


@pytest.mark.parametrize("tail", ["Identity", "Cast"])
def test_an_output_the_recording_run_returned_is_not_the_folded_constant(tail):
    """Issue 29, item 2: Shape -> Identity/Cast as the output; the recording run returns the Shape
    kernel's array (Identity and a same-type Cast return their input), which the specialized plan
    must not keep: writing into it changed every later run ([99, 99] instead of [2, 4])."""
    attrs = {"to": TP.INT64} if tail == "Cast" else {}
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node(tail, ["s"], ["y"], **attrs)]
    m = model(nodes, [X], [helper.make_tensor_value_info("y", TP.INT64, [2])]).SerializeToString()
    sess = InferenceSession(m)
    x = _x(2, 4)
    for _ in range(3):
        out = sess.run(None, {"x": x})[0]
        assert np.array_equal(out, [2, 4])
        out[:] = 99
    assert list(sess._specializer.stats.values()) == [(2, 0)]  # specialized: both nodes folded
    special = sess._specializer.plan_for(specialize.signature([x]))[0]
    assert not special.constants["y"].flags.writeable


def test_the_specialized_plan_keeps_its_own_copy_of_what_the_recording_run_computed(monkeypatch):
    """The recorded Shape value is the run's array, which the run may hand to its caller (an
    output, or through an Identity / same-type Cast); the folded constants share no memory with
    any array the recording run computed (:func:`specialize._kept`)."""
    computed = []
    real = specialize._recorder

    def spying(fn, k, seen):
        def kept_too(x, *rest):
            out = fn(x, *rest)
            computed.append(out)
            return out
        return real(kept_too, k, seen)

    monkeypatch.setattr(specialize, "_recorder", spying)
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Identity", ["s"], ["y"]),
             helper.make_node("Cast", ["s"], ["z"], to=TP.INT64)]
    outs = [helper.make_tensor_value_info(n, TP.INT64, [2]) for n in ("y", "z", "s")]
    sess = InferenceSession(model(nodes, [X], outs).SerializeToString())
    x = _x(2, 4)
    sess.run(None, {"x": x})
    special = sess._specializer.plan_for(specialize.signature([x]))[0]
    assert computed and set(special.constants) == {"y", "z", "s"}
    assert not any(np.shares_memory(c, a) for c in special.constants.values() for a in computed)
    assert all(np.array_equal(c, [2, 4]) and not c.flags.writeable for c in special.constants.values())


def test_guards_on_known_small_shapes_are_dropped_but_limits_still_hold():
    from onnxkit.errors import LimitExceeded
    from onnxkit.limits import Limits

    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Shape", ["a"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["y"], value=helper.make_tensor("v", TP.FLOAT, [1], [1.0]))]
    m = model(nodes, [X], [Y]).SerializeToString()
    sess = InferenceSession(m)
    x = _x(2, 3)
    sess.run(None, {"x": x})
    sess.run(None, {"x": x})
    special = sess._specializer.plan_for(specialize.signature([x]))[0]
    assert [(s.node.op_type, s.guard) for s in special.steps] == []  # the fill is a constant, Add is unread
    small = InferenceSession(m, limits=Limits(max_value_bytes=16))
    for _ in range(2):
        with pytest.raises(LimitExceeded):
            small.run(None, {"x": _x(4, 4)})


# -- real models and the node vectors --------------------------------------------------------------

CORPUS = ("hf_gpt2_dynamo", "hf_bert_ts", "hf_whisper_dynamo", "lstm_tagger_dynamo", "silero_vad_16k_op15")


@pytest.fixture(scope="module")
def corpus():
    sys.path.insert(0, str(ROOT / "tests" / "corpus"))
    from corpus_cache import ensure_corpus, load_inputs

    folder, _ = ensure_corpus(log=lambda line: print(line, file=sys.stderr))
    return folder, load_inputs


def _identical(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return np.array_equal(a, b) if a.dtype.kind in "OUS" else a.tobytes() == b.tobytes()  # bit for bit
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.usefixtures("warm_bodies")  # a cold plan that deferred a body is not specialized
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_model_identical_and_smaller(corpus, name):
    folder, load_inputs = corpus
    path, feed = str(folder / f"{name}.onnx"), load_inputs(folder, name)
    sess, plain = InferenceSession(path), InferenceSession(path, _plain())
    expected = plain.run(None, feed)
    for _ in range(specialize.ROUNDS + 1):  # the recording runs (one per round), then the specialized plan
        assert _identical(sess.run(None, feed), expected)
    ((before, after),) = sess._specializer.stats.values()
    assert after < before


def test_node_vectors_identical_when_specialized(onnx_vectors_dir):
    from onnxkit.conformance import RANDOM_CASES, discover, load_value

    compared = smaller = 0
    for case in discover(onnx_vectors_dir / "node"):
        if any(k in case.name for k in RANDOM_CASES):
            continue
        try:
            m = load(case.model)
            sess = InferenceSession(m)
            fed = list(m.graph.input)
            feeds = [{fed[i].name: load_value(p, type=fed[i].type) for i, p in enumerate(ins)} for ins, _ in case.data_sets]
            first = [sess.run(None, f) for f in feeds]
        except Exception:  # unsupported or failing as given: the conformance tests report those
            continue
        for f, got in zip(feeds, first):
            assert _identical(sess.run(None, f), got), case.name
        compared += 1
        stats = sess._specializer.stats.values() if sess._specializer is not None else ()
        smaller += any(after < before for before, after in stats)
    print(f"{compared} node vectors compared, {smaller} specialized to fewer nodes")
    assert compared > 1000 and smaller > 20


def _declared_chain():
    """y = Reshape(x, [Gather(Shape(r), 0), -1]) with r = Relu(x) declared [3, 4]: an exporter's
    trace-time extent in value_info, true only of a feed with n = 3."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n0"], axis=0),
             helper.make_node("Unsqueeze", ["n0", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [init("zero", np.array(0, np.int64)), init("axes", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64))]
    x = helper.make_tensor_value_info("x", TP.FLOAT, ["n", 4])
    m = model(nodes, [x], [Y], inits)
    m.graph.value_info.append(helper.make_tensor_value_info("r", TP.FLOAT, [3, 4]))
    return m.SerializeToString()


def test_a_class_does_not_trust_a_declared_extent():
    """The class is recorded at n = 3 (its axis' third extent), where the stale declaration holds;
    a later n must still get its own extent."""
    sess = InferenceSession(_declared_chain())
    for n in (1, 2, 3, 7, 3, 9):
        x = _x(n, 4)
        assert np.array_equal(sess.run(None, {"x": x})[0], x.reshape(n, -1)), n
    assert sess._specializer.classes.varying == {(0, 0)}


def test_a_value_inference_gets_wrong_is_not_folded(monkeypatch):
    real = specialize.Specializer._types

    def wrong(self, sig):
        types, values = real(self, sig)
        # what the shape arithmetic gives for every feed of the class (n0 = 3, target = [3, -1]): said wrong
        return types, {k: v + 1 if v.dtype.kind in "iu" else v for k, v in values.items()}

    monkeypatch.setattr(specialize.Specializer, "_types", wrong)
    sess = InferenceSession(_reshape_chain())
    for m in (2, 5, 7, 5, 9):
        x = _x(3, m)
        assert np.array_equal(sess.run(None, {"x": x})[0], x.reshape(3, -1) * 2)
    general = sess._specializer.plan_for(specialize.signature([_x(3, 11)]))[0]
    assert "Gather" in [s.node.op_type for s in general.steps]  # recorded, contradicted, left to run
