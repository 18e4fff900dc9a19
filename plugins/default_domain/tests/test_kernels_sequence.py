"""Sequences and optionals, written once (onnxkit_default_domain.kernels.sequence), on both backends.

On ``gpu`` (torch; its CPU device here) the nodes run on torch, not on the cpu fallback: each
session asserts ``sess.fallbacks`` is empty.  Expected values are hand-computed.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.errors import EvaluationError
from onnxkit.runtime import InferenceSession
from one_node import BACKENDS

pytest.importorskip("torch")
A = ir.Attribute.make
F32, I64, BOOL = 1, 7, 9


def vi(name, elem=F32, shape=None):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def seq_vi(name, elem=F32, shape=None):
    return ir.ValueInfo(name, ir.SequenceType(ir.tensor_type(elem, shape)))


def node(op, inputs, outputs, **attrs):
    return ir.Node(inputs, outputs, name=f"{op}_{outputs[0]}", op_type=op, attribute=[A(k, v) for k, v in attrs.items()])


def session(nodes, inputs, outputs, backend, opset=21):
    g = ir.Graph(node=nodes, name="g", input=inputs, output=outputs)
    sess = InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", opset)], graph=g), backend)
    assert sess.fallbacks == [], sess.fallbacks
    return sess


@pytest.mark.parametrize("backend", BACKENDS)
def test_construct_insert_erase_at_length(backend):
    nodes = [node("SequenceConstruct", ["a", "b"], ["s"]), node("SequenceInsert", ["s", "c", "zero"], ["s2"]),
             node("SequenceErase", ["s2", "minus1"], ["s3"]), node("SequenceAt", ["s3", "p"], ["y"]),
             node("SequenceLength", ["s3"], ["n"])]
    inputs = [vi("a", F32, [2]), vi("b", F32, [2]), vi("c", F32, [2]), vi("zero", I64, []), vi("minus1", I64, []),
              vi("p", I64, [])]
    sess = session(nodes, inputs, [vi("y", F32, [2]), vi("n", I64, [])], backend)
    feed = {"a": np.array([1, 2], np.float32), "b": np.array([3, 4], np.float32), "c": np.array([5, 6], np.float32),
            "zero": np.array(0), "minus1": np.array(-1)}
    # [a, b] -> [c, a, b] -> [c, a]
    for p, want in ((0, [5, 6]), (1, [1, 2]), (-1, [1, 2]), (-2, [5, 6])):
        y, n = sess.run(None, dict(feed, p=np.array(p)))
        assert y.tolist() == want and n.dtype == np.int64 and int(n) == 2
    with pytest.raises(EvaluationError, match="out of range"):
        sess.run(None, dict(feed, p=np.array(2)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequence_at_matches_cpu_on_gpu(backend):
    """SequenceAt on the backend gives the very tensor the cpu backend gives (dtype and values)."""
    nodes = [node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0), node("SequenceAt", ["s", "p"], ["y"])]
    inputs = [vi("x", I64, [2, 3]), vi("p", I64, [])]
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    want = session(nodes, inputs, [vi("y", I64, [2])], "cpu").run(None, {"x": x, "p": np.array(2)})[0]
    got = session(nodes, inputs, [vi("y", I64, [2])], backend).run(None, {"x": x, "p": np.array(2)})[0]
    assert got.dtype == want.dtype == np.int64 and got.tolist() == want.tolist() == [2, 5]


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_to_sequence_and_concat_from_sequence(backend):
    nodes = [node("SplitToSequence", ["x", "split"], ["s"], axis=0),
             node("ConcatFromSequence", ["s"], ["cat"], axis=1),
             node("ConcatFromSequence", ["s"], ["stk"], axis=0, new_axis=1)]
    inputs = [vi("x", F32, [None, 2]), vi("split", I64, [])]
    sess = session(nodes, inputs, [vi("cat", F32, None), vi("stk", F32, None)], backend)
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    cat, stk = sess.run(None, {"x": x, "split": np.array(2)})   # pieces [0:2], [2:4]
    assert cat.tolist() == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert stk.shape == (2, 2, 2) and stk.tolist() == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    with pytest.raises(EvaluationError, match="cannot be concatenated on axis 1"):
        sess.run(None, {"x": x[:3], "split": np.array(2)})        # pieces of 2 and 1 rows
    sizes = session([node("SplitToSequence", ["x", "split"], ["s"], axis=-1), node("SequenceAt", ["s", "p"], ["y"])],
                    [vi("x", F32, [2, 5]), vi("split", I64, [2]), vi("p", I64, [])], [vi("y", F32, None)], backend)
    y = sizes.run(None, {"x": np.arange(10, dtype=np.float32).reshape(2, 5), "split": np.array([1, 4]), "p": np.array(1)})[0]
    assert y.tolist() == [[1, 2, 3, 4], [6, 7, 8, 9]]
    with pytest.raises(EvaluationError, match="sum to"):
        sizes.run(None, {"x": np.zeros((2, 5), np.float32), "split": np.array([1, 2]), "p": np.array(0)})


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequence_map_and_optionals(backend):
    body = ir.Graph(node=[node("Add", ["t", "kk"], ["u"])], name="body", input=[vi("t", F32, [2]), vi("kk", F32, [])],
                    output=[vi("u", F32, [2])])
    nodes = [node("SequenceConstruct", ["a", "b"], ["s"]), node("SequenceMap", ["s", "k"], ["m"], body=body),
             node("Optional", ["a"], ["o"]), node("OptionalHasElement", ["o"], ["has"]),
             node("OptionalGetElement", ["o"], ["got"]), node("SequenceAt", ["m", "one"], ["y"])]
    inputs = [vi("a", F32, [2]), vi("b", F32, [2]), vi("k", F32, []), vi("one", I64, [])]
    sess = session(nodes, inputs, [vi("has", BOOL, []), vi("got", F32, [2]), vi("y", F32, [2])], backend, opset=18)
    has, got, y = sess.run(None, {"a": np.array([1, 2], np.float32), "b": np.array([3, 4], np.float32),
                                  "k": np.array(10, np.float32), "one": np.array(1)})
    assert has.dtype == np.bool_ and bool(has) and got.tolist() == [1, 2] and y.tolist() == [13, 14]
