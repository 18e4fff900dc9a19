"""A Clip with bounds known at planning (Relu6) folded into the cpu Conv's step by the
``epilogue`` plan pass (onnxkit/runtime/optimizer/epilogue.py, overrides/conv_epilogue.py):
after the Conv or after its Add / Sum, every bit as the separate kernels give it (NaN, inf, -0,
lo > hi, one bound only) on the in-place path, the compiled Add pass and the consumers' own
kernels; one step fewer where it folds, none where a bound is not a one-element constant or the
values in between are read elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

from onnxkit import InferenceSession, SessionOptions  # noqa: E402
from onnxkit.runtime.optimizer import epilogue as epilogue_pass  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import conv as loops  # noqa: E402

RNG = np.random.default_rng(1606)
NP = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64}


def specials(a):
    """``a`` with NaN, +-inf, -0, 0 and values either side of 0 and 6 written in."""
    f = a.reshape(-1)
    values = [np.nan, np.inf, -np.inf, -0.0, 0.0, -0.0, 6.0, 5.999, -1e-30, 7.5][:f.size]
    f[:len(values)] = values
    return a


def model(bounds, *, kernel=1, bias=True, add=None, op="Add", dtype=TP.FLOAT, opset=17, bound_inputs=(),
          extra_nodes=(), extra_outputs=(), attrs=None, x_shape=(2, 3, 5, 6), ir_version=8, defaults=(), r_shape=None):
    """Conv (5 output channels) [-> Add/Sum with ``r`` on ``add``'s side] -> Clip -> ``y``.
    ``bounds``: ``(min, max)``, each None (absent), a value (a scalar initializer of ``dtype``), an
    array (an initializer as given), or a name (``bound_inputs``: graph inputs of that name;
    ``defaults``: input names that also have an initializer).  ``attrs``: Clip-1/6 attributes
    instead."""
    t = NP[dtype]
    w = RNG.standard_normal((5, x_shape[1], kernel, kernel)).astype(t)
    w[2] = -0.0
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        b = RNG.standard_normal(5).astype(t)
        b[1] = -0.0
        inits.append(numpy_helper.from_array(b, "b"))
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c"], pads=[kernel // 2] * 4)]
    inputs = [helper.make_tensor_value_info("x", dtype, ["N", *x_shape[1:]])]
    last = "c"
    if add is not None:
        inputs.append(helper.make_tensor_value_info("r", dtype, r_shape or ["N", 5, *x_shape[2:]]))
        nodes.append(helper.make_node(op, ["c", "r"] if add == 0 else ["r", "c"], ["a"]))
        last = "a"
    clip_in = [last]
    if attrs is None:
        for which, v in zip(("lo", "hi"), bounds):
            if v is None:
                clip_in.append("")
            elif isinstance(v, str):
                clip_in.append(v)
            else:
                inits.append(numpy_helper.from_array(v if isinstance(v, np.ndarray) else np.asarray(v, t), which))
                clip_in.append(which)
        while clip_in[-1] == "":
            clip_in.pop()
    nodes.append(helper.make_node("Clip", clip_in, ["y"], **(attrs or {})))
    nodes.extend(extra_nodes)
    for name in bound_inputs:
        inputs.append(helper.make_tensor_value_info(name, dtype, []))
    for name, value in defaults:
        inits.append(numpy_helper.from_array(np.asarray(value, t), name))
    y_shape = ["N", 5, *x_shape[2:]]
    outputs = [helper.make_tensor_value_info(n, dtype, y_shape) for n in ("y", *extra_outputs)]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)
    return m.SerializeToString()


def unfused(proto, validate=True):
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "epilogue")
    return InferenceSession(proto, so, validate=validate)


def ops(s):
    return [st.op for st in s.plan.steps]


def feed_for(dtype=TP.FLOAT, add=None, x_shape=(2, 3, 5, 6), **more):
    t = NP[dtype]
    feed = {"x": specials(RNG.standard_normal(x_shape).astype(t) * 4)}
    if add is not None:
        feed["r"] = specials(RNG.standard_normal((x_shape[0], 5, *x_shape[2:])).astype(t) * 4)
    feed.update({k: np.asarray(v, t) for k, v in more.items()})
    return feed


def same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def check(proto, feed, fused_ops, plain_ops, validate=True):
    """The fused session's plan is ``fused_ops``, the unfused one's ``plain_ops``; outputs the
    same bits.  Returns the fused session and its outputs."""
    s = InferenceSession(proto, validate=validate)
    ref = unfused(proto, validate)
    assert ops(s) == fused_ops and ops(ref) == plain_ops
    got, want = s.run(None, feed), ref.run(None, feed)
    for g, w in zip(got, want):
        same_bits(g, w)
    return s, got


BOUNDS = [(0.0, 6.0), (-0.0, 6.0), (0.0, -0.0), (6.0, 0.0), (-1.5, None), (None, 2.25), (None, None),
          (np.nan, 6.0), (-np.inf, np.inf)]


@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("kernel,bias", [(1, True), (3, False), (3, True)])
@pytest.mark.parametrize("opset", [11, 13, 17])
def test_conv_clip_folds_bit_identical(bounds, kernel, bias, opset):
    proto = model(bounds, kernel=kernel, bias=bias, opset=opset)
    feed = feed_for()
    s, got = check(proto, feed, ["Conv"], ["Conv", "Clip"])
    assert s.plan.steps[0].inputs == ["x", "w", "b" if bias else ""]     # the bounds are bound in, not inputs
    assert np.isnan(got[0]).any()
    if not any(v is not None and np.isnan(v) for v in bounds):
        want = ort.InferenceSession(proto, providers=["CPUExecutionProvider"]).run(None, feed)[0]
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)


def test_random_bounds_float64_and_one_element_shapes():
    for _ in range(4):
        lo, hi = RNG.standard_normal(2) * 3
        for shape in ((), (1,), (1, 1)):
            proto = model((np.full(shape, lo, np.float64), np.full(shape, hi, np.float64)), dtype=TP.DOUBLE, kernel=3)
            check(proto, feed_for(TP.DOUBLE), ["Conv"], ["Conv", "Clip"])


@pytest.mark.usefixtures("warm_bodies")
@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("op", ["Add", "Sum"])
@pytest.mark.parametrize("kernel", [1, 3])
def test_add_then_clip_on_the_compiled_pass(side, op, kernel, count_calls):
    spy = count_calls(loops, "finish")
    proto = model((0.0, 6.0), kernel=kernel, add=side, op=op)
    s, got = check(proto, feed_for(add=side), ["Conv"], ["Conv", op, "Clip"])
    assert s.plan.steps[0].inputs == ["x", "w", "b", "r"]
    assert spy.calls == (1 if compiled.enabled() else 0)
    assert np.nanmax(got[0]) <= 6 and np.nanmin(got[0]) >= 0


def test_add_then_clip_numpy_in_place_and_broadcasting():
    proto = model((-0.0, 0.5), kernel=3, add=1)
    with compiled.disabled():
        check(proto, feed_for(add=1), ["Conv"], ["Conv", "Add", "Clip"])
    proto = model((-0.0, 0.5), kernel=3, add=1, r_shape=[5, 1, 1])
    feed = feed_for()
    feed["r"] = specials(RNG.standard_normal((5, 1, 1)).astype(np.float32))      # a broadcasting Add: fn
    check(proto, feed, ["Conv"], ["Conv", "Add", "Clip"])


def test_in_place_only_on_the_convs_own_array(monkeypatch):
    """The matching-dtype Clip runs in place (its kernel is not called), after the Conv or its
    Add (compiled pass or numpy); an empty Conv (the portable path), an absent bound (the
    kernel's default) and a Clip-6 (bounds the pass does not know) call the Clip's own kernel."""
    calls = []
    real = epilogue_pass.guarded

    def spy(fn, guard):
        inner = real(fn, guard)
        return lambda *a: calls.append(1) or inner(*a)
    monkeypatch.setattr(epilogue_pass, "guarded", spy)
    s = InferenceSession(model((0.0, 6.0), kernel=3))
    s.run(None, feed_for())
    for kernel in (1, 3):
        InferenceSession(model((0.0, 6.0), kernel=kernel, add=1)).run(None, feed_for(add=1))
        with compiled.disabled():
            InferenceSession(model((0.0, 6.0), kernel=kernel, add=0)).run(None, feed_for(add=0))
    assert calls == []
    InferenceSession(model((0.0, None), kernel=3)).run(None, feed_for())
    assert calls == [1]
    calls.clear()
    assert s.run(None, {"x": np.zeros((0, 3, 5, 6), np.float32)})[0].shape == (0, 5, 5, 6) and calls == [1]
    s = InferenceSession(model(None, attrs={"min": 0.0, "max": 6.0}, opset=6))
    s.run(None, feed_for())
    assert ops(s) == ["Conv"] and calls == [1, 1]


@pytest.mark.parametrize("attrs", [{"min": 0.0, "max": 6.0}, {"min": 0.1}, {"max": -0.0}, {"min": 3.0, "max": 1.0}, {}])
@pytest.mark.parametrize("add", [None, 0])
def test_clip6_attributes_fold(attrs, add):
    proto = model(None, attrs=attrs, opset=7, add=add)
    feed = feed_for(add=add)
    check(proto, feed, ["Conv"], ["Conv", "Clip"] if add is None else ["Conv", "Add", "Clip"])


def test_bound_of_another_dtype_refused_or_computed_by_the_clip_kernel(monkeypatch):
    """float64 bounds of a float32 X: the checker refuses the model; evaluated anyway
    (``validate=False``) it folds, the Clip's own kernel casting them (not the in-place path,
    whose operands would not be the kernel's)."""
    proto = model((np.array(0.1, np.float64), np.array(6.0000001, np.float64)))
    with pytest.raises(Exception, match="type variable T is tensor"):
        InferenceSession(proto)
    calls = []
    real = epilogue_pass.guarded
    monkeypatch.setattr(epilogue_pass, "guarded", lambda fn, guard: (lambda *a: calls.append(1) or real(fn, guard)(*a)))
    s, got = check(proto, feed_for(), ["Conv"], ["Conv", "Clip"], validate=False)
    assert calls == [1] and np.nanmin(got[0]) == np.float32(0.1)


def test_bounds_made_by_constant_nodes_fold():
    lo = helper.make_node("Constant", [], ["lo"], value=numpy_helper.from_array(np.array(0.0, np.float32)))
    hi = helper.make_node("Constant", [], ["hi0"], value=numpy_helper.from_array(np.array([3.0], np.float32)))
    dbl = helper.make_node("Add", ["hi0", "hi0"], ["hi"])
    m = onnx.load_from_string(model(("lo", "hi")))
    m.graph.node.insert(0, dbl)
    m.graph.node.insert(0, hi)
    m.graph.node.insert(0, lo)
    check(m.SerializeToString(), feed_for(), ["Conv"], ["Conv", "Clip"])


def test_not_folded_where_a_bound_is_not_a_constant():
    proto = model(("lo", 6.0), bound_inputs=("lo",))
    check(proto, feed_for(lo=0.5), ["Conv", "Clip"], ["Conv", "Clip"])
    proto = model(("lo", 6.0), add=0, bound_inputs=("lo",))              # the Add still folds
    check(proto, feed_for(add=0, lo=-0.25), ["Conv", "Clip"], ["Conv", "Add", "Clip"])


def test_a_default_bound_folds_in_the_folded_variant_only():
    """A bound that is an input with an initializer: a constant of the folded-defaults plan
    (runs feeding nothing), a runtime value of the plan itself (a run feeding it)."""
    neg = helper.make_node("Neg", ["d"], ["lo"])
    m = onnx.load_from_string(model(("lo", 6.0), bound_inputs=("d",), defaults=(("d", -1.0),)))
    m.graph.node.insert(0, neg)
    proto = m.SerializeToString()
    s = InferenceSession(proto)
    ref = unfused(proto)
    assert ops(s) == ["Neg", "Conv", "Clip"] and [st.op for st in s.plan.folded[1]] == ["Conv"]
    assert [st.op for st in ref.plan.folded[1]] == ["Conv", "Clip"]
    for feed in (feed_for(), feed_for(d=2.0)):
        same_bits(s.run(None, feed)[0], ref.run(None, feed)[0])


def test_a_bound_of_two_elements_fails_as_the_clip():
    proto = model((np.array([0.0, 1.0], np.float32), 6.0))
    s = InferenceSession(proto, validate=False)
    assert ops(s) == ["Conv", "Clip"]
    with pytest.raises(Exception) as fused_error:
        s.run(None, feed_for())
    with pytest.raises(Exception) as plain_error:
        unfused(proto, validate=False).run(None, feed_for())
    assert "'min' must be a scalar" in str(fused_error.value)
    assert str(fused_error.value) == str(plain_error.value)


def test_not_folded_where_the_values_between_are_read_elsewhere():
    # the Conv's output also read by a Neg: nothing folds
    neg = helper.make_node("Neg", ["c"], ["z"])
    check(model((0.0, 6.0), extra_nodes=[neg], extra_outputs=["z"]), feed_for(), ["Conv", "Clip", "Neg"],
          ["Conv", "Clip", "Neg"])
    # the Conv's output a graph output: nothing folds
    check(model((0.0, 6.0), extra_outputs=["c"]), feed_for(), ["Conv", "Clip"], ["Conv", "Clip"])
    # the Add's output read twice, or a graph output in the middle: the Add folds, the Clip stays
    neg = helper.make_node("Neg", ["a"], ["z"])
    check(model((0.0, 6.0), add=0, extra_nodes=[neg], extra_outputs=["z"]), feed_for(add=0),
          ["Conv", "Clip", "Neg"], ["Conv", "Add", "Clip", "Neg"])
    check(model((0.0, 6.0), add=0, extra_outputs=["a"]), feed_for(add=0), ["Conv", "Clip"], ["Conv", "Add", "Clip"])
    # the Clip's own output read twice: it folds (its output is the fused step's)
    neg = helper.make_node("Neg", ["y"], ["z"])
    check(model((0.0, 6.0), extra_nodes=[neg], extra_outputs=["z"]), feed_for(), ["Conv", "Neg"],
          ["Conv", "Clip", "Neg"])


def test_batch_norm_declines_a_clip():
    """A kernel offering epilogues may decline a Clip (BatchNormalization takes a Relu alone)."""
    c = 3
    inits = [numpy_helper.from_array(RNG.standard_normal(c).astype(np.float32) + k * 2, n)
             for k, n in enumerate(["s", "bb", "m", "v"])]
    inits.append(numpy_helper.from_array(np.array(6.0, np.float32), "hi"))
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["n"]),
             helper.make_node("Clip", ["n", "", "hi"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [2, c, 4, 4])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, [2, c, 4, 4])], initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    check(proto, feed_for(x_shape=(2, 3, 4, 4)), ["BatchNormalization", "Clip"], ["BatchNormalization", "Clip"])
