"""The ``attention`` pass: scaled dot-product attention, ``softmax(scale * Q K^T + mask) V``,
becomes one Attention node (ai.onnxkit Attention-2; ai.onnx Attention from opset 23 where the
pattern has no NaN guard), with results within tolerance of the unfused graph and of
onnxruntime, and the patterns it must not fuse left alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optimizer_cases import TP, check_pass, helper, init, model, off, only, optimized_ops

import onnxkit
from onnxkit import InferenceSession
from onnxkit.runtime.optimizer import PASS_NAMES, optimize
from onnxkit.runtime.options import GraphOptimizationLevel

B, H, S, D = 3, 2, 9, 32
RNG = np.random.default_rng(11)


def _feed(**extra):
    feed = {"q": (RNG.standard_normal((B, H, S, D)) * 0.4).astype(np.float32),     # scores ~ N(0, 1) unscaled
            "k": (RNG.standard_normal((B, S, H, D)) * 0.4).astype(np.float32),
            "v": RNG.standard_normal((B, H, S, D)).astype(np.float32),
            "pad": np.ones((B, 1, S, S), dtype=bool)}
    feed["pad"][1, :, :, 6:] = False     # batch entry 1: its last 3 keys are padding
    feed.update(extra)
    return feed


def _c(name, value):
    return init(name, np.array(value, np.float32))


def _vi(name, shape, t=TP.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _graph(scale="both", mask="where", guard=True, axis=-1, opset=17, kt="transpose", extra_output=None,
           zero=0.0, factor=None):
    """An attention layer as the exporters write it.  ``scale``: 'both' (Q and K^T each times
    ``factor``, by default 1/sqrt(sqrt(D)), torch's SDPA export), 'div' / 'mul' (the scores
    divided by sqrt(D) / multiplied by ``factor`` or 1/sqrt(D) after the MatMul), 'none', or
    'tensor' (multiplied by a graph input); ``mask``: 'where'
    (``Where(pad, 0, -inf)`` added), 'first' (the same, added as ``mask + scores``) or None;
    ``guard``: ``Where(IsNaN(p), zero, p)`` after the Softmax; ``kt``: K^T as a Transpose of
    the (B, S, H, D) keys, or 'input' (a graph input of its own)."""
    nodes, inits = [], []
    qk, kk = "q", "kt"
    if kt == "transpose":
        nodes.append(helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]))
    f = factor if factor is not None else 1 / math.sqrt(math.sqrt(D))
    if scale == "both":
        nodes += [helper.make_node("Mul", ["q", "sq"], ["qs"]), helper.make_node("Mul", ["kt", "sk"], ["ks"])]
        inits += [_c("sq", f), _c("sk", f)]
        qk, kk = "qs", "ks"
    nodes.append(helper.make_node("MatMul", [qk, kk], ["scores"]))
    last = "scores"
    if scale in ("div", "mul", "tensor"):
        if scale == "div":
            nodes.append(helper.make_node("Div", ["scores", "c"], ["scaled"]))
            inits.append(_c("c", math.sqrt(D)))
        else:
            nodes.append(helper.make_node("Mul", ["c", "scores"], ["scaled"]))
            if scale == "mul":
                inits.append(_c("c", 1 / math.sqrt(D) if factor is None else factor))
        last = "scaled"
    if mask:
        nodes.append(helper.make_node("Where", ["pad", "mzero", "minf"], ["m"]))
        inits += [_c("mzero", [0.0]), _c("minf", [-math.inf])]
        nodes.append(helper.make_node("Add", ["m", last] if mask == "first" else [last, "m"], ["biased"]))
        last = "biased"
    nodes.append(helper.make_node("Softmax", [last], ["p"], axis=axis))
    last = "p"
    if guard:
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"]), helper.make_node("Where", ["nan", "z", "p"], ["pg"])]
        inits.append(_c("z", [zero]))
        last = "pg"
    nodes.append(helper.make_node("MatMul", [last, "v"], ["y"]))
    inputs = [_vi("q", [B, H, S, D]), _vi("v", [B, H, S, D])]
    inputs.append(_vi("k", [B, S, H, D]) if kt == "transpose" else _vi("kt", [B, H, D, S]))
    if mask:
        inputs.append(_vi("pad", [B, 1, S, S], TP.BOOL))
    if scale == "tensor":
        inputs.append(_vi("c", []))
    outputs = [_vi("y", [B, H, S, D])] + ([_vi(extra_output, [B, H, S, S])] if extra_output else [])
    return model(nodes, inputs, outputs, inits, opset=opset)


def _feed_for(proto):
    names = {i.name for i in proto.graph.input}
    feed = _feed()
    if "kt" in names:
        feed["kt"] = np.ascontiguousarray(np.transpose(feed.pop("k"), (0, 2, 3, 1)))
    if "c" in names:
        feed["c"] = np.array(0.125, np.float32)
    return {k: v for k, v in feed.items() if k in names}


def _fused(proto):
    m = optimize(onnxkit.load(proto.SerializeToString()), GraphOptimizationLevel.ORT_ENABLE_ALL,
                 disabled=set(PASS_NAMES) - {"attention"}).model
    node = next(n for n in m.graph.node if n.op_type == "Attention")
    return node, {o.domain: o.version for o in m.opset_import}, m


@pytest.mark.parametrize("scale", ["both", "div", "mul", "none"])
@pytest.mark.parametrize("mask", ["where", "first", None])
def test_guarded_attention_becomes_one_node(scale, mask):
    proto = _graph(scale=scale, mask=mask)
    check_pass(proto, _feed_for(proto), "attention", 1, ["Transpose"] + (["Where"] if mask else []) + ["Attention"])
    node, opsets, _ = _fused(proto)
    assert node.domain == "ai.onnxkit" and node.attr("nan_to_zero") == 1
    assert opsets == {"": 17, "ai.onnxkit": 2}
    expected = {"both": 1 / math.sqrt(D), "div": 1 / math.sqrt(D), "mul": 1 / math.sqrt(D), "none": 1.0}[scale]
    assert node.attr("scale") == pytest.approx(expected, rel=1e-6)
    assert len(node.input) == (4 if mask else 3)


def test_the_keys_transpose_is_repermuted():
    _, _, m = _fused(_graph())
    (t,) = [n for n in m.graph.node if n.op_type == "Transpose"]
    assert list(t.input) == ["k"] and list(t.attr("perm")) == [0, 2, 1, 3]


def test_keys_given_transposed_get_a_transpose():
    proto = _graph(kt="input")
    check_pass(proto, _feed_for(proto), "attention", 1, ["Where", "Transpose", "Attention"])
    _, _, m = _fused(proto)
    (t,) = [n for n in m.graph.node if n.op_type == "Transpose"]
    assert list(t.input) == ["kt"] and list(t.attr("perm")) == [0, 1, 3, 2]


def test_unguarded_attention_without_mask_becomes_one_node():
    proto = _graph(mask=None, guard=False)
    check_pass(proto, _feed_for(proto), "attention", 1, ["Transpose", "Attention"])
    node, opsets, _ = _fused(proto)
    assert node.domain == "ai.onnxkit" and node.attr("nan_to_zero") == 0 and opsets["ai.onnxkit"] == 2


def test_from_opset_23_unguarded_attention_is_still_ai_onnxkit_attention():
    """onnxkit's ai.onnx Attention-23 gives zeros for a row of -inf scores (onnx.reference's
    choice), the unfused Softmax NaN: the fused node is ai.onnxkit Attention-2, nan_to_zero 0."""
    proto = _graph(mask=None, guard=False, opset=23)
    check_pass(proto, _feed_for(proto), "attention", 1, ["Transpose", "Attention"])
    node, opsets, _ = _fused(proto)
    assert node.domain == "ai.onnxkit" and node.attr("nan_to_zero") == 0 and opsets == {"": 23, "ai.onnxkit": 2}
    guarded, opsets, _ = _fused(_graph(opset=23))
    assert guarded.domain == "ai.onnxkit" and guarded.attr("nan_to_zero") == 1


@pytest.mark.parametrize("opset", [17, 23])
def test_unguarded_row_of_minus_infinity_gives_nan_as_the_unfused_graph(opset):
    """A query row of 0s and one -inf against positive keys: every score of the row is -inf, the
    unfused Softmax gives NaN (onnxruntime's), and so does the fused node (the fuzzer's report:
    fused 0 against unfused NaN)."""
    from optimizer_cases import ort_plain

    proto = _graph(mask=None, guard=False, opset=opset)
    feed = _feed_for(proto)
    feed["q"][1, 0, 3, :] = 0
    feed["q"][1, 0, 3, 5] = -np.inf
    feed["k"] = np.abs(feed["k"]) + 0.1
    data = proto.SerializeToString()
    sess = InferenceSession(data, only("attention"))
    assert sess.optimized.rewrites["attention"] == 1
    got, want = sess.run(None, feed)[0], ort_plain(proto, feed)[0]
    assert np.isnan(want[1, 0, 3]).all() and not np.isnan(want[1, 0, 2]).any()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_fully_masked_rows_and_nan_match_the_unfused_graph():
    proto = _graph()
    feed = _feed_for(proto)
    feed["pad"][0, :, 2, :] = False             # query 2 of batch 0 attends nothing: the guard's zeros
    feed["q"][2, 1, 4, 5] = np.nan               # a NaN query row: its probabilities are all NaN -> 0
    feed["k"][1, 3, 0, 0] = np.inf               # an infinite key: +-inf / NaN scores
    data = proto.SerializeToString()
    got = InferenceSession(data, only("attention")).run(None, feed)[0]
    plain = InferenceSession(data, off()).run(None, feed)[0]
    assert np.array_equal(np.isnan(got), np.isnan(plain))
    assert np.all(got[0, :, 2] == 0)
    np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [17, 23])
@pytest.mark.parametrize("where", ["q", "k", "v"])
def test_unguarded_nan_propagates_as_in_the_unfused_graph(opset, where):
    """An unguarded pattern, fused as ai.onnxkit Attention-2 (nan_to_zero 0) or from opset 23 as
    ai.onnx Attention, gives NaN exactly where the unfused graph does, onnxruntime's: a NaN in Q
    makes its row's scores NaN, one in K a column of scores of every query (so every row of its
    head), one in V the outputs that read it; never 0 in their place (a report of fuzzer failures,
    fused 0 against unfused NaN, was checked against this)."""
    from optimizer_cases import ort_plain

    proto = _graph(mask=None, guard=False, opset=opset)
    feed = _feed_for(proto)
    at = {"q": (1, 0, 3, 5), "k": (2, 4, 1, 7), "v": (0, 1, 6, 2)}[where]    # k is (B, S, H, D)
    feed[where][at] = np.nan
    data = proto.SerializeToString()
    sess = InferenceSession(data, only("attention"))
    assert sess.optimized.rewrites["attention"] == 1
    got, want = sess.run(None, feed)[0], ort_plain(proto, feed)[0]
    assert np.isnan(want).any() and not np.isnan(want).all()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _left_alone(proto, ops):
    assert optimized_ops(proto, "attention") == (0, ops)
    data = proto.SerializeToString()
    feed = _feed_for(proto)
    assert np.array_equal(InferenceSession(data, only("attention")).run(None, feed)[0],
                          InferenceSession(data, off()).run(None, feed)[0])


def test_a_scale_that_is_not_a_constant_is_left_alone():
    _left_alone(_graph(scale="tensor"), ["Transpose", "MatMul", "Mul", "Where", "Add", "Softmax", "IsNaN", "Where",
                                         "MatMul"])


def test_a_softmax_on_another_axis_is_left_alone():
    _left_alone(_graph(axis=2), ["Transpose", "Mul", "Mul", "MatMul", "Where", "Add", "Softmax", "IsNaN", "Where",
                                 "MatMul"])


@pytest.mark.parametrize("name", ["scores", "p", "biased"])
def test_an_intermediate_that_is_a_graph_output_is_left_alone(name):
    proto = _graph(extra_output=name)
    assert optimized_ops(proto, "attention")[0] == 0


def test_an_intermediate_read_elsewhere_is_left_alone():
    proto = _graph()
    proto.graph.node.append(helper.make_node("Relu", ["scores"], ["r"]))
    proto.graph.output.append(_vi("r", [B, H, S, S]))
    assert optimized_ops(proto, "attention")[0] == 0


def test_an_unguarded_mask_and_other_guards_are_left_alone():
    # a fully masked row gives NaN unguarded, zeros from Attention: not the same function
    assert optimized_ops(_graph(guard=False), "attention")[0] == 0
    assert optimized_ops(_graph(zero=1.0), "attention")[0] == 0       # NaN -> 1 is no guard of Attention's
    assert optimized_ops(_graph(scale="mul", factor=-0.5), "attention")[0] == 0   # no square root of a negative scale


def test_the_basic_level_does_not_fuse():
    m = onnxkit.load(_graph().SerializeToString())
    assert optimize(m, GraphOptimizationLevel.ORT_ENABLE_BASIC).rewrites.get("attention", 0) == 0
    assert optimize(m, GraphOptimizationLevel.ORT_ENABLE_EXTENDED).rewrites["attention"] == 1
