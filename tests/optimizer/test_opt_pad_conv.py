"""The ``pad_conv`` pass: a zero-valued constant Pad of the spatial axes folded into the Conv's pads."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer_cases import TP, check_pass, helper, init, model, optimized_ops

RNG = np.random.default_rng(23)


def _pad_conv(opset=17, pads=(0, 0, 1, 2, 0, 0, 2, 1), conv_pads=None, value=None, mode=None, extra_reader=False,
              strides=None, auto_pad=None, axes=None, pads_input=False, rank=4, dtype=np.float32, dilations=None):
    tag = TP.FLOAT if dtype == np.float32 else TP.DOUBLE
    c, m = 3, 4
    spatial = [7, 6, 5][: rank - 2]
    x = helper.make_tensor_value_info("x", tag, [2, c] + spatial)
    y = helper.make_tensor_value_info("y", tag, [f"y{i}" for i in range(rank)])
    cin = c + max(0, pads[1]) + max(0, pads[len(pads) // 2 + 1]) if axes is None else c  # a channel pad widens X
    inits = [init("W", RNG.standard_normal((m, cin) + (3,) * (rank - 2)).astype(dtype)),
             init("B", RNG.standard_normal(m).astype(dtype))]
    inputs = [x]
    attrs = {} if mode is None else {"mode": mode}
    if opset < 11:
        pad = helper.make_node("Pad", ["x"], ["p"], pads=list(pads), **attrs, **({} if value is None else {"value": value}))
    else:
        pad_in = ["x", "pads"]
        if pads_input:
            inputs.append(helper.make_tensor_value_info("pads", TP.INT64, [len(pads)]))
        else:
            inits.append(init("pads", np.array(pads, np.int64)))
        if value is not None or axes is not None:
            inits.append(init("v", np.array(0.0 if value is None else value, dtype)))
            pad_in.append("v")
        if axes is not None:
            inits.append(init("axes", np.array(axes, np.int64)))
            pad_in.append("axes")
        pad = helper.make_node("Pad", pad_in, ["p"], **attrs)
    conv_attrs = {k: v for k, v in (("pads", conv_pads), ("strides", strides), ("auto_pad", auto_pad),
                                    ("dilations", dilations)) if v is not None}
    nodes = [pad, helper.make_node("Conv", ["p", "W", "B"], ["y"], **conv_attrs)]
    outputs = [y]
    if extra_reader:
        nodes.append(helper.make_node("Abs", ["p"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", tag, [f"z{i}" for i in range(rank)]))
    feed = {"x": RNG.standard_normal([2, c] + spatial).astype(dtype)}
    return model(nodes, inputs, outputs, inits, opset=opset), feed


@pytest.mark.parametrize("opset", [9, 13, 19])
def test_folded_within_tolerance(opset):
    proto, feed = _pad_conv(opset=opset)
    check_pass(proto, feed, "pad_conv", 1, ["Conv"])


def test_conv_pads_strides_and_dilations_add_up():
    proto, feed = _pad_conv(conv_pads=[1, 0, 0, 1], strides=[2, 1], dilations=[1, 2])
    check_pass(proto, feed, "pad_conv", 1, ["Conv"])


@pytest.mark.parametrize("rank", [3, 5])
def test_other_ranks_folded(rank):
    pads = [0, 0] + [1] * (rank - 2) + [0, 0] + [2] * (rank - 2)
    proto, feed = _pad_conv(pads=pads, rank=rank)
    check_pass(proto, feed, "pad_conv", 1, ["Conv"])


def test_a_valid_conv_takes_the_pads_as_its_own():
    import onnxkit
    from onnxkit.runtime.optimizer import PASS_NAMES, optimize
    from onnxkit.runtime.options import GraphOptimizationLevel

    proto, feed = _pad_conv(auto_pad="VALID", strides=[2, 2])
    check_pass(proto, feed, "pad_conv", 1, ["Conv"])
    r = optimize(onnxkit.load(proto.SerializeToString()), GraphOptimizationLevel.ORT_ENABLE_ALL,
                 disabled=set(PASS_NAMES) - {"pad_conv"})
    [conv] = r.model.graph.node
    assert list(conv.attr("pads")) == [1, 2, 2, 1] and conv.attr("auto_pad") is None


def test_explicit_zero_value_folded_and_the_new_pads_are_the_sum():
    import onnxkit
    from onnxkit.runtime.optimizer import PASS_NAMES, optimize
    from onnxkit.runtime.options import GraphOptimizationLevel

    proto, feed = _pad_conv(value=0.0, conv_pads=[1, 1, 0, 0])
    check_pass(proto, feed, "pad_conv", 1, ["Conv"])
    r = optimize(onnxkit.load(proto.SerializeToString()), GraphOptimizationLevel.ORT_ENABLE_ALL,
                 disabled=set(PASS_NAMES) - {"pad_conv"})
    [conv] = r.model.graph.node
    assert list(conv.attr("pads")) == [2, 3, 2, 1] and conv.input[0] == "x"


@pytest.mark.parametrize("case", [
    dict(value=1.5),                                # another pad value
    dict(value=-0.0),                               # a negative zero: an all-padding window's sign
    dict(mode="reflect"),
    dict(mode="edge"),
    dict(pads=(0, 1, 1, 1, 0, 0, 1, 1)),            # a channel pad
    dict(pads=(1, 0, 1, 1, 0, 0, 1, 1)),            # a batch pad
    dict(pads=(0, 0, -1, 1, 0, 0, 1, 1)),           # a crop
    dict(extra_reader=True),                        # the padded value read elsewhere
    dict(auto_pad="SAME_UPPER"),
    dict(pads_input=True),                          # pads fed at run time
    dict(opset=19, axes=[2, 3], pads=(1, 1, 1, 1)),  # Pad-18's axes
])
def test_near_misses_not_folded(case):
    proto, feed = _pad_conv(**case)
    if case.get("pads_input"):
        feed["pads"] = np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)
    extra = ["Abs"] if case.get("extra_reader") else []
    if case.get("auto_pad"):   # a checker warning would be in the way of optimized_ops: compare only
        import onnxkit
        from optimizer_cases import only

        sess = onnxkit.InferenceSession(proto.SerializeToString(), only("pad_conv"))
        assert sess.optimized.rewrites["pad_conv"] == 0
        return
    check_pass(proto, feed, "pad_conv", 0, ["Pad", "Conv"] + extra)


def test_ir3_pads_fed_runs_the_model_as_given():
    """Under IR < 4 the pads initializer is an input too: feeding it runs the model as written."""
    import onnxkit
    from optimizer_cases import off, only, within

    proto, feed = _pad_conv(opset=13)
    proto.ir_version = 3
    for t in proto.graph.initializer:
        proto.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    data = proto.SerializeToString()
    sess = onnxkit.InferenceSession(data, only("pad_conv"))
    assert sess.optimized.rewrites["pad_conv"] == 1
    plain = onnxkit.InferenceSession(data, off())
    assert within(sess.run(None, feed)[0], plain.run(None, feed)[0])
    fed = dict(feed, pads=np.array([0, 0, 2, 0, 0, 0, 0, 2], np.int64))
    got, want = sess.run(None, fed)[0], plain.run(None, fed)[0]
    assert got.shape == want.shape and within(got, want)


def _torch_pads_chain(pads, fed_leaf=False, huge=False):
    """Nodes computing ``pads`` as torch's exporter writes them (a Concat of a Constant and a
    ConstantOfShape, Reshape, Slice, Transpose, Reshape, Cast), the output named ``pads``."""
    rank = len(pads) // 2
    spatial = rank - 2
    # torch lists (begin, end) pairs from the last axis: [b_last, e_last, ..., b_2, e_2], then zeros
    torch_order = []
    for axis in reversed(range(2, rank)):
        torch_order += [pads[axis], pads[rank + axis]]
    zeros = 2 * rank - len(torch_order)
    const = helper.make_tensor("tp", TP.INT64, [len(torch_order)], torch_order)
    nodes = [helper.make_node("Constant", [], ["c0"], value=const)]
    inputs, inits = [], []
    if fed_leaf:
        inputs.append(helper.make_tensor_value_info("n_zeros", TP.INT64, [1]))
    else:
        nodes.append(helper.make_node("Constant", [], ["n_zeros"], value=helper.make_tensor(
            "nz", TP.INT64, [1], [10 ** 9 if huge else zeros])))
    nodes += [helper.make_node("ConstantOfShape", ["n_zeros"], ["z"], value=helper.make_tensor("v", TP.INT64, [1], [0])),
              helper.make_node("Concat", ["c0", "z"], ["cat"], axis=0)]
    inits += [init("shape2", np.array([-1, 2], np.int64)), init("st", np.array([-1], np.int64)),
              init("en", np.array([-(2 ** 63)], np.int64)), init("ax", np.array([0], np.int64)),
              init("stp", np.array([-1], np.int64)), init("flat", np.array([-1], np.int64))]
    nodes += [helper.make_node("Reshape", ["cat", "shape2"], ["r2"]),
              helper.make_node("Slice", ["r2", "st", "en", "ax", "stp"], ["rev"]),
              helper.make_node("Transpose", ["rev"], ["tr"], perm=[1, 0]),
              helper.make_node("Reshape", ["tr", "flat"], ["r1"]),
              helper.make_node("Cast", ["r1"], ["pads"], to=TP.INT64)]
    assert spatial >= 1
    return nodes, inputs, inits


@pytest.mark.parametrize("fed_leaf", [False, True])
def test_pads_computed_by_torchs_chain_are_read_as_constants(fed_leaf):
    c, m = 3, 4
    pads = [0, 0, 1, 2, 0, 0, 2, 1]
    chain, extra_inputs, chain_inits = _torch_pads_chain(pads, fed_leaf=fed_leaf)
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2, c, 7, 6])
    y = helper.make_tensor_value_info("y", TP.FLOAT, ["a", "b", "c", "d"])
    inits = chain_inits + [init("W", RNG.standard_normal((m, c, 3, 3)).astype(np.float32)),
                           init("B", RNG.standard_normal(m).astype(np.float32))]
    nodes = chain + [helper.make_node("Pad", ["x", "pads"], ["p"]), helper.make_node("Conv", ["p", "W", "B"], ["y"])]
    proto = model(nodes, [x] + extra_inputs, [y], inits, opset=13)
    feed = {"x": RNG.standard_normal((2, c, 7, 6)).astype(np.float32)}
    if fed_leaf:
        feed["n_zeros"] = np.array([4], np.int64)
    got, ops = optimized_ops(proto, "pad_conv")
    assert got == (0 if fed_leaf else 1) and ("Pad" in ops) == fed_leaf
    check_pass(proto, feed, "pad_conv", got, ops)


def test_a_computed_constant_is_bounded_before_it_is_made(monkeypatch):
    import onnxkit
    from onnxkit.registry import get_registry
    from onnxkit.runtime.optimizer import computed
    from onnxkit.runtime.optimizer.computed import computed_constant
    from onnxkit.runtime.optimizer.view import GraphView

    evaluated, real_step, spied = [], computed._step, set()

    def spying(view, node):  # each node's kernel, noting the calls that make its output
        step = real_step(view, node)
        if step is not None and id(step) not in spied:
            spied.add(id(step))
            kernel = step.fn
            step.fn = lambda *args: (evaluated.append(node.op_type), kernel(*args))[1]
        return step

    monkeypatch.setattr(computed, "_step", spying)
    chain, _, inits = _torch_pads_chain([0, 0, 1, 2, 0, 0, 2, 1], huge=True)
    proto = model(chain, [], [helper.make_tensor_value_info("pads", TP.INT64, None)], inits, opset=13)
    view = GraphView(onnxkit.load(proto.SerializeToString()), get_registry())
    assert computed_constant(view, "z") is None and computed_constant(view, "pads") is None  # 10^9 zeros: not made
    assert "ConstantOfShape" not in evaluated                                   # its kernel never called
    small, _, inits = _torch_pads_chain([0, 0, 1, 2, 0, 0, 2, 1])
    proto = model(small, [], [helper.make_tensor_value_info("pads", TP.INT64, None)], inits, opset=13)
    view = GraphView(onnxkit.load(proto.SerializeToString()), get_registry())
    value, leaves = computed_constant(view, "pads")
    np.testing.assert_array_equal(value, [0, 0, 1, 2, 0, 0, 2, 1])
    assert leaves == {"shape2", "st", "en", "ax", "stp", "flat"} and not value.flags.writeable
