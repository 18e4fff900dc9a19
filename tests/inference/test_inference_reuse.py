"""``infer_model(model, reuse=first)`` (onnxkit.inference.reuse): the optimizer's view infers a
model without its declarations reusing the checker's inference node by node; its types are what
inferring afresh gives, up to the names of fresh dimensions, with fewer inference calls."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from onnxkit import ir, load
from onnxkit.dtypes import DataType
from onnxkit.inference import engine as engine_module, infer_model
from onnxkit.inference.reuse import reused, same_value
from onnxkit.runtime.optimizer.view import undeclared

F, I64 = int(DataType.FLOAT), int(DataType.INT64)
ROOT = Path(__file__).resolve().parents[2]


def canonical(result) -> dict:
    """``{(path, name): type text}`` with the result's fresh dimension names renamed in order of
    first appearance (sorted keys): two results are equal up to a renaming of fresh names exactly
    when these are equal (a fresh name standing for two dimensions in one is told apart)."""
    renamed: dict = {}

    def rename(match):
        name = match.group(0)
        if name not in result.fresh:
            return name
        return renamed.setdefault(name, f"fresh{len(renamed)}")

    return {k: re.sub(r"[A-Za-z_][A-Za-z0-9_]*", rename, str(result.types[k])) for k in sorted(result.types, key=str)}


@pytest.fixture
def calls(monkeypatch):
    """The inference functions called (one InferenceContext each)."""
    made = []
    real = engine_module.InferenceContext

    class Counting(real):
        def __init__(self, *args, **kwargs):
            made.append(args[1].op_type)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(engine_module, "InferenceContext", Counting)
    return made


def vi(name, elem, shape):
    return ir.ValueInfo(name=name, type=ir.TensorType(elem, shape))


def node(op, inputs, outputs, **attrs):
    return ir.Node(input=list(inputs), output=list(outputs), op_type=op,
                   attribute=[ir.Attribute.make(k, v) for k, v in attrs.items()])


def declared_midway():
    """Range to a fed limit makes a fresh extent; ``t`` (an Identity of it) is declared ``[K]``, a
    declaration nodes read (so a session's view infers again): Identity(t) gives K with the
    declaration and the fresh extent without it, and Concat(t, t) makes a fresh extent of its own."""
    z = ir.Tensor.from_numpy(np.array(0, np.int64), name="z")
    one = ir.Tensor.from_numpy(np.array(1, np.int64), name="one")
    nodes = [node("Range", ["z", "n", "one"], ["r"]), node("Identity", ["r"], ["t"]), node("Identity", ["t"], ["u"]),
             node("Concat", ["t", "t"], ["c"], axis=0), node("Shape", ["x"], ["s"]), node("Reshape", ["x", "s"], ["y"])]
    g = ir.Graph(node=nodes, name="g", input=[vi("x", F, [2, 3]), vi("n", I64, [])],
                 output=[vi("u", I64, None), vi("c", I64, None), vi("y", F, None)],
                 value_info=[vi("t", I64, ["K"])], initializer=[z, one])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 18)], graph=g)


def test_a_node_whose_input_a_declaration_shaped_is_inferred_again(calls):
    m = declared_midway()
    first = infer_model(m)
    assert first.type_of("u").shape.values == ("K",)  # the declaration reached Identity's input
    afresh = infer_model(undeclared(m))
    calls.clear()
    again = infer_model(undeclared(m), reuse=first)
    assert canonical(again) == canonical(afresh)
    extent = again.type_of("r").shape.values[0]
    assert extent in first.fresh and again.type_of("u").shape.values == (extent,)  # not the declaration's K
    assert sorted(calls) == ["Concat", "Identity"]  # the nodes reading t; Range, Identity(r), Shape, Reshape reused
    summed = again.type_of("c").shape.values[0]
    assert summed in again.fresh and summed != extent  # the recomputed Concat took a name the first did not use
    assert np.array_equal(again.values["s"], [2, 3]) and again.type_of("y").shape.values == (2, 3)


def test_without_reuse_every_node_is_inferred(calls):
    m = declared_midway()
    infer_model(undeclared(m))
    assert len(calls) == len(m.graph.node)


MODELS = ("silero_vad_16k_op15", "hf_bert_ts", "silero_vad_op18_ifless", "lstm_tagger_ts", "small_resnet_ts")


@pytest.fixture(scope="module")
def corpus():
    """The real-world corpus folder, built on first use as tests/corpus does."""
    sys.path.insert(0, str(ROOT / "tests" / "corpus"))
    from corpus_cache import ensure_corpus

    return ensure_corpus(log=lambda line: print(line, file=sys.stderr))[0]


@pytest.mark.parametrize("name", MODELS)
def test_on_real_models_reuse_gives_the_types_inferring_afresh_gives(corpus, name, calls):
    """silero_vad's If branches declare their outputs (the view infers it again in a session):
    reusing the checker's inference gives every graph's types as inferring afresh does."""
    from onnxkit.checker.readings import read_as_onnxruntime
    from onnxkit.limits import DEFAULT_LIMITS
    from onnxkit.registry import get_registry

    m = read_as_onnxruntime(load(str(corpus / f"{name}.onnx")), get_registry(), DEFAULT_LIMITS)
    first = infer_model(m)
    calls.clear()
    afresh = infer_model(undeclared(m))
    fresh_calls = len(calls)
    calls.clear()
    again = infer_model(undeclared(m), reuse=first)
    assert canonical(again) == canonical(afresh)
    assert again.paths() == afresh.paths()
    assert len(calls) < fresh_calls / 4  # all but the nodes holding subgraphs reused


def test_same_value_compares_dtype_shape_and_elements():
    a = np.array([1, 2], np.int64)
    assert same_value(None, None) and same_value(a, a.copy())
    assert not same_value(a, None) and not same_value(None, a)
    assert not same_value(a, a.astype(np.int32))               # the dtype counts
    assert not same_value(a, a.reshape(2, 1))                  # the shape counts
    assert not same_value(a, np.array([1, 3], np.int64))
    assert not same_value(np.array([np.nan]), np.array([np.nan]))  # NaN: inferred again
    sym = np.array([2, "N", None], dtype=object)
    assert same_value(sym, np.array([2, "N", None], dtype=object))
    assert not same_value(sym, np.array([2, "M", None], dtype=object))


def test_reused_needs_the_same_definition_and_inputs():
    from onnxkit.registry import get_registry

    relu14, relu6 = get_registry().bind("", "Relu", 14), get_registry().bind("", "Relu", 6)
    t = ir.TensorType(F, [2, 3])
    results = {("", 0): (relu14, [t], [None], [t], [None])}
    assert reused(results, ("", 0), relu14, [ir.TensorType(F, [2, 3])], [None]) == ([t], [None])
    assert reused(results, ("", 1), relu14, [t], [None]) is None
    assert reused(results, ("", 0), relu6, [t], [None]) is None
    assert reused(results, ("", 0), relu14, [ir.TensorType(F, [2, 4])], [None]) is None
    assert reused(results, ("", 0), relu14, [t], [np.zeros((2, 3), np.float32)]) is None
    assert reused(results, ("", 0), relu14, [t, t], [None, None]) is None


def test_a_session_view_reuses_the_checkers_inference(calls):
    """A session's optimizer view infers the model without its declarations (t's K is not taken
    for a fact) reusing the checker's inference: the Cast of u to its own type is removed on the
    types inferring afresh gives, and only the nodes reading t and the Cast are inferred again."""
    from onnxkit import InferenceSession, SessionOptions

    m = declared_midway()
    g = m.graph
    g.node += [node("Cast", ["u"], ["cu"], to=I64), node("Identity", ["cu"], ["ou"])]
    g.output.append(vi("ou", I64, None))
    so = SessionOptions()
    so.intra_op_num_threads = 1
    sess = InferenceSession(m, so)
    assert sorted(calls[len(g.node):]) == ["Cast", "Concat", "Identity", "Identity"]  # after the checker's, a call a node
    assert sess.optimized.rewrites["cast"] == 1
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    u, c, y, cu = sess.run(None, {"x": x, "n": np.array(4, np.int64)})  # cu: ou, the Cast's value
    r = np.arange(4, dtype=np.int64)
    assert np.array_equal(u, r) and np.array_equal(c, np.concatenate([r, r])) and np.array_equal(y, x)
    assert np.array_equal(cu, r) and cu.dtype == np.int64
