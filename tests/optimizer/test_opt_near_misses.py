"""Near misses of the optimizer's rules (issue 29): a one-element constant whose rank raises the
result's rank, a constant of another element type, a constant just outside a pattern's
tolerance, a (C,) vector on an NCHW value, a rank only a stale value_info states, and IR < 4
initializers a run overrides.  Each model runs with every pass on and compares with the
unoptimized session and with onnxruntime (its optimizer off); the pass counts say whether the
rule fired."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optimizer_cases import TP, agree, helper, init, legacy, model, off, ort_plain, within
from test_opt_attention import _feed_for, _graph
from test_opt_channel_affine import C, _bn_scale

import onnxkit
from onnxkit import InferenceSession
from onnxkit.runtime.optimizer import PASS_NAMES, optimize
from onnxkit.runtime.optimizer.view import GraphView
from onnxkit.runtime.options import GraphOptimizationLevel

RNG = np.random.default_rng(29)
RANK5 = (1, 1, 1, 1, 1)


def count(proto, pass_name: str) -> int:
    """How many rewrites ``pass_name`` alone makes in ``proto``."""
    m = onnxkit.load(proto.SerializeToString())
    return optimize(m, GraphOptimizationLevel.ORT_ENABLE_ALL, disabled=set(PASS_NAMES) - {pass_name}).rewrites[pass_name]


def _f(name, value, shape=(), dtype=np.float32):
    return init(name, np.array(value, dtype).reshape(shape))


def _vi(name, shape, t=TP.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _out_shape(x_shape, shapes):
    return list(np.broadcast_shapes(tuple(x_shape), *shapes))


# -- gelu --------------------------------------------------------------------------------------
def _erf_gelu(shapes=None, s=math.sqrt(2.0), x_shape=(3,), dtypes=None, ir_version=8):
    """``0.5 * (x * (1 + Erf(x / s)))`` with the constants ``s``, ``one``, ``half`` of ``shapes``."""
    shapes, dtypes = shapes or {}, dtypes or {}
    values = {"s": s, "one": 1.0, "half": 0.5}
    nodes = [helper.make_node("Div", ["x", "s"], ["t"]), helper.make_node("Erf", ["t"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["x", "p"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    inits = [_f(k, v, shapes.get(k, ()), dtypes.get(k, np.float32)) for k, v in values.items()]
    y = _out_shape(x_shape, [shapes.get(k, ()) for k in values]) if x_shape is not None else None
    return model(nodes, [_vi("x", None if x_shape is None else list(x_shape))], [_vi("y", y)], inits,
                 ir_version=ir_version)


X3 = {"x": np.array([-1.0, 0.5, 2.0], np.float32)}


@pytest.mark.parametrize("name", ["s", "one", "half"])
def test_gelu_rank_five_one_element_constant_not_fused(name):
    proto = _erf_gelu({name: RANK5})
    assert count(proto, "gelu") == 0
    assert agree(proto, X3)[0].shape == (1, 1, 1, 1, 3)


def test_gelu_one_element_constants_of_the_inputs_rank_fused():
    proto = _erf_gelu({"s": (1,), "one": (1, 1), "half": (1, 1)}, x_shape=(2, 3))
    assert count(proto, "gelu") == 1
    assert agree(proto, {"x": RNG.standard_normal((2, 3)).astype(np.float32)})[0].shape == (2, 3)


def test_gelu_rank_unknown_input_fused_only_with_zero_d_constants():
    """x of unknown rank: a [1] constant may raise a 0-d x to rank 1, a 0-d one never."""
    assert count(_erf_gelu(x_shape=None), "gelu") == 1
    proto = _erf_gelu({"half": (1,)}, x_shape=None)
    assert count(proto, "gelu") == 0
    data = proto.SerializeToString()
    got = InferenceSession(data).run(None, {"x": np.array(0.5, np.float32)})[0]
    assert got.shape == (1,) and within(got, InferenceSession(data, off()).run(None, {"x": np.array(0.5, np.float32)})[0])


def test_gelu_constant_of_another_element_type_not_fused():
    proto = _erf_gelu(dtypes={"s": np.float64})
    assert count(proto, "gelu") == 0


@pytest.mark.parametrize("s", [1.42, math.sqrt(2.0) * (1 + 1e-4)])
def test_gelu_divisor_outside_the_tolerance_not_fused(s):
    """Div by 1.42 (or sqrt 2 off by 1e-4) is not sqrt 2: Gelu would be off by up to 1.2e-3."""
    proto = _erf_gelu(s=s, x_shape=(13,))
    assert count(proto, "gelu") == 0
    x = {"x": np.linspace(-3, 3, 13, dtype=np.float32)}
    data = proto.SerializeToString()
    assert np.array_equal(InferenceSession(data).run(None, x)[0], InferenceSession(data, off()).run(None, x)[0])
    agree(proto, x)


def _tanh_gelu(shapes):
    """GPT-2's ``0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3))))``."""
    values = {"three": 3.0, "k": 0.044715, "scale": math.sqrt(2 / math.pi), "one": 1.0, "half": 0.5}
    nodes = [helper.make_node("Pow", ["x", "three"], ["x3"]), helper.make_node("Mul", ["x3", "k"], ["c"]),
             helper.make_node("Add", ["x", "c"], ["i"]), helper.make_node("Mul", ["i", "scale"], ["u"]),
             helper.make_node("Tanh", ["u"], ["t"]), helper.make_node("Add", ["t", "one"], ["p"]),
             helper.make_node("Mul", ["x", "p"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    inits = [_f(k, v, shapes.get(k, ())) for k, v in values.items()]
    return model(nodes, [_vi("x", [3])], [_vi("y", _out_shape((3,), list(shapes.values())))], inits)


@pytest.mark.parametrize("name", ["three", "k", "scale"])
def test_tanh_gelu_rank_five_one_element_constant_not_fused(name):
    assert count(_tanh_gelu({}), "gelu") == 1
    proto = _tanh_gelu({name: RANK5})
    assert count(proto, "gelu") == 0
    assert agree(proto, X3)[0].shape == (1, 1, 1, 1, 3)


# -- hardswish ---------------------------------------------------------------------------------
def _hardswish(shapes, opset=14):
    """``(x * Clip(x + 3, 0, 6)) / 6`` with the constants of ``shapes``."""
    values = {"three": 3.0, "zero": 0.0, "six": 6.0, "div": 6.0}
    nodes = [helper.make_node("Add", ["x", "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Div", ["m", "div"], ["y"])]
    inits = [_f(k, v, shapes.get(k, ())) for k, v in values.items()]
    return model(nodes, [_vi("x", [3])], [_vi("y", _out_shape((3,), list(shapes.values())))], inits, opset=opset)


@pytest.mark.parametrize("name", ["three", "div"])
def test_hardswish_rank_five_one_element_constant_not_fused(name):
    assert count(_hardswish({}), "hardswish") == 1
    proto = _hardswish({name: RANK5})
    assert count(proto, "hardswish") == 0
    assert agree(proto, {"x": np.array([-4.0, 1.0, 5.0], np.float32)})[0].shape == (1, 1, 1, 1, 3)


def test_hardswish_clip_bound_of_rank_five_not_fused():
    """Clip's bounds must be scalars (onnxruntime refuses the model); onnxkit fuses nothing and
    runs it as the unoptimized session does."""
    proto = _hardswish({"six": RANK5})
    assert count(proto, "hardswish") == 0
    data, x = proto.SerializeToString(), {"x": np.array([-4.0, 1.0, 5.0], np.float32)}
    try:
        expected = InferenceSession(data, off()).run(None, x)[0]
    except onnxkit.errors.OnnxkitError as exc:
        with pytest.raises(type(exc)):
            InferenceSession(data).run(None, x)
    else:
        got = InferenceSession(data).run(None, x)[0]
        assert got.shape == expected.shape and within(got, expected)


# -- attention ---------------------------------------------------------------------------------
def _reshaped(proto, name: str, shape):
    """``proto`` with initializer ``name`` reshaped to ``shape`` and its output's shape unstated."""
    t = next(t for t in proto.graph.initializer if t.name == name)
    t.CopyFrom(init(name, onnx_array(t).reshape(shape)))
    out = proto.graph.output[0].type.tensor_type
    out.ClearField("shape")
    return proto


def onnx_array(t):
    import onnx.numpy_helper

    return onnx.numpy_helper.to_array(t)


@pytest.mark.parametrize("scale,name", [("both", "sq"), ("mul", "c"), ("div", "c"), ("none", "z")])
def test_attention_rank_five_scale_or_guard_constant_not_fused(scale, name):
    proto = _graph(scale=scale, mask=None)
    assert count(proto, "attention") == 1
    proto = _reshaped(proto, name, RANK5)
    assert count(proto, "attention") == 0
    assert agree(proto, _feed_for(proto))[0].ndim == 5


def test_attention_scale_of_another_element_type_not_fused():
    proto = _graph(scale="mul", mask=None)
    t = next(t for t in proto.graph.initializer if t.name == "c")
    t.CopyFrom(init("c", onnx_array(t).astype(np.float64)))
    assert count(proto, "attention") == 0


# -- channel_affine ----------------------------------------------------------------------------
def _unstated_output(proto):
    proto.graph.output[0].type.tensor_type.ClearField("shape")
    return proto


def test_channel_affine_rank_five_one_element_not_folded():
    proto, feed = _bn_scale(shape=RANK5, ops=("Mul",))
    proto = _unstated_output(proto)
    assert count(proto, "channel_affine") == 0
    assert agree(proto, feed)[0].shape == (1, 2, C, 5, 5)


@pytest.mark.parametrize("shape", [(C,), (1, 1, C), (1, 1, 1, C)])
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_channel_affine_last_axis_vector_not_folded(shape, op):
    """A (C,) vector on an (N, C, H, C) value broadcasts along the last axis, not the channels."""
    x = _vi("x", [2, C, 3, C])
    value = RNG.uniform(0.5, 2, C).astype(np.float32).reshape(shape)
    inits = [init("scale", RNG.uniform(0.5, 2, C).astype(np.float32)), init("bias", RNG.standard_normal(C).astype(np.float32)),
             init("mean", RNG.standard_normal(C).astype(np.float32)), init("var", RNG.uniform(0.1, 3, C).astype(np.float32)),
             init("v", value)]
    nodes = [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["p"]),
             helper.make_node(op, ["p", "v"], ["y"])]
    proto = model(nodes, [x], [_vi("y", [2, C, 3, C])], inits)
    assert count(proto, "channel_affine") == 0
    agree(proto, {"x": RNG.standard_normal((2, C, 3, C)).astype(np.float32)})


def test_channel_affine_vector_on_a_rank_two_value_is_per_channel():
    x = _vi("x", [3, C])
    inits = [init("scale", RNG.uniform(0.5, 2, C).astype(np.float32)), init("bias", RNG.standard_normal(C).astype(np.float32)),
             init("mean", RNG.standard_normal(C).astype(np.float32)), init("var", RNG.uniform(0.1, 3, C).astype(np.float32)),
             init("v", RNG.uniform(0.5, 2, C).astype(np.float32))]
    nodes = [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["p"]),
             helper.make_node("Mul", ["p", "v"], ["y"])]
    proto = model(nodes, [x], [_vi("y", [3, C])], inits)
    assert count(proto, "channel_affine") == 1
    agree(proto, {"x": RNG.standard_normal((3, C)).astype(np.float32)})


# -- declared shapes inference did not confirm ---------------------------------------------------
def _reshape_matmul_add():
    """``Add(MatMul(Reshape(a, sh), W), c)``, the Reshape's output declared [6, 4] (stale: sh is fed)."""
    nodes = [helper.make_node("Reshape", ["a", "sh"], ["r"]), helper.make_node("MatMul", ["r", "W"], ["m"]),
             helper.make_node("Add", ["m", "c"], ["y"])]
    proto = model(nodes, [_vi("a", [6, 4]), _vi("sh", ["n"], TP.INT64)], [_vi("y", None)],
                  [init("W", RNG.standard_normal((4, 3)).astype(np.float32)), init("c", RNG.standard_normal(3).astype(np.float32))])
    proto.graph.value_info.append(_vi("r", [6, 4]))
    return proto


def test_matmul_add_does_not_trust_a_declared_rank():
    proto = _reshape_matmul_add()
    assert count(proto, "matmul_add") == 0
    a = RNG.standard_normal((6, 4)).astype(np.float32)
    assert agree(proto, {"a": a, "sh": np.array([2, 3, 4], np.int64)})[0].shape == (2, 3, 3)
    assert agree(proto, {"a": a, "sh": np.array([6, 4], np.int64)})[0].shape == (6, 3)


def test_channel_affine_does_not_trust_a_declared_rank():
    """BN of an x of unstated rank, its output declared rank 4: the (C, 1, 1) Mul is per-channel
    only on a rank-4 value; fed (1, C, 5) it broadcasts to (C, C, 5)."""
    proto, _ = _bn_scale(ops=("Mul",))
    proto.graph.input[0].type.tensor_type.ClearField("shape")
    proto.graph.value_info.append(_vi("p", [2, C, 5, 5]))
    proto = _unstated_output(proto)
    assert count(proto, "channel_affine") == 0
    assert agree(proto, {"x": RNG.standard_normal((1, C, 5)).astype(np.float32)})[0].shape == (C, C, 5)


def test_view_types_come_from_inference_not_declarations():
    view = GraphView(onnxkit.load(_reshape_matmul_add().SerializeToString()))
    assert view.tensor_type("r") == (TP.FLOAT, None)       # declared [6, 4]; inference: rank unknown
    assert view.tensor_type("a") == (TP.FLOAT, [6, 4])     # a graph input: every feed is checked


# -- IR < 4: an initializer a run overrides ------------------------------------------------------
def _check_override(proto, feed: dict, fed: dict, pass_name: str) -> None:
    """``pass_name`` rewrites the IR 3 ``proto``; a run feeding ``fed`` (overrides) gives what
    onnxruntime and the unoptimized session give, which differs from the run without."""
    assert count(proto, pass_name) >= 1
    without, with_override = agree(proto, feed), agree(proto, {**feed, **fed})
    assert not all(np.shape(a) == np.shape(b) and within(a, b) for a, b in zip(without, with_override))


def test_override_of_a_channel_affine_scale_runs_the_model_as_given():
    proto, feed = _bn_scale()
    _check_override(legacy(proto, opset=9), feed, {"Mul_c": np.full((C, 1, 1), 5.0, np.float32)}, "channel_affine")


def test_override_of_an_unsqueezed_channel_affine_shift_runs_the_model_as_given():
    proto, feed = _bn_scale(unsqueezed=True, ops=("Add",))
    _check_override(legacy(proto, opset=13), feed, {"Add_v": np.full(C, 5.0, np.float32)}, "channel_affine")


def test_override_of_dropout_training_mode_runs_the_model_as_given():
    nodes = [helper.make_node("Dropout", ["x", "r", "t"], ["d"]), helper.make_node("Relu", ["d"], ["y"])]
    x = np.ones((4, 64), np.float32)
    proto = legacy(model(nodes, [_vi("x", [4, 64])], [_vi("y", [4, 64])],
                         [init("r", np.float32(0.5)), init("t", np.bool_(False))], opset=13))
    assert count(proto, "identity") == 1
    data = proto.SerializeToString()
    plain = InferenceSession(data).run(None, {"x": x})[0]
    assert np.array_equal(plain, x)
    dropped = InferenceSession(data).run(None, {"x": x, "t": np.array(True)})[0]
    assert set(np.unique(dropped)) <= {0.0, 2.0} and (dropped == 0).any()   # training: some of 256 dropped


def test_override_of_a_gelu_constant_runs_the_model_as_given():
    proto = legacy(_erf_gelu(ir_version=3))
    _check_override(proto, X3, {"half": np.array(5.0, np.float32)}, "gelu")


def test_override_of_a_constant_of_shape_shape_runs_the_model_as_given():
    """The Gelu's 0.5 made by ConstantOfShape(shape) with shape an overridable initializer: fed
    [1, 1, 1, 1, 1], the model's result is rank 5."""
    proto = _erf_gelu()
    g = proto.graph
    kept = [t for t in g.initializer if t.name != "half"]
    del g.initializer[:]
    g.initializer.extend(kept + [init("hshape", np.zeros(0, np.int64))])
    g.node.insert(0, helper.make_node("ConstantOfShape", ["hshape"], ["half"],
                                      value=helper.make_tensor("v", TP.FLOAT, [1], [0.5])))
    proto = legacy(_unstated_output(proto), opset=17)
    dim = next(i for i in proto.graph.input if i.name == "hshape").type.tensor_type.shape.dim[0]
    dim.dim_param = "n"                         # any length may be fed
    assert count(proto, "gelu") == 1
    assert agree(proto, X3)[0].shape == (3,)
    assert agree(proto, {**X3, "hshape": np.ones(5, np.int64)})[0].shape == (1, 1, 1, 1, 3)


def test_override_of_an_attention_scale_runs_the_model_as_given():
    proto = _graph(scale="mul", mask=None)
    proto = legacy(proto)
    feed = _feed_for(proto)
    _check_override(proto, feed, {"c": np.array(0.5, np.float32)}, "attention")


def test_override_of_a_matmul_add_bias_runs_the_model_as_given():
    """The Gemm reads C by name, but a fed C of another rank is no Gemm bias: (2, 1, 3) makes
    the Add's result (2, 5, 3)."""
    nodes = [helper.make_node("MatMul", ["a", "W"], ["m"]), helper.make_node("Add", ["m", "c"], ["y"])]
    proto = legacy(model(nodes, [_vi("a", [5, 4])], [_vi("y", None)],
                         [init("W", RNG.standard_normal((4, 3)).astype(np.float32)),
                          init("c", RNG.standard_normal(3).astype(np.float32))]))
    next(i for i in proto.graph.input if i.name == "c").type.tensor_type.ClearField("shape")   # any shape may be fed
    _check_override(proto, {"a": RNG.standard_normal((5, 4)).astype(np.float32)},
                    {"c": np.full((2, 1, 3), 7.0, np.float32)}, "matmul_add")


def test_override_of_a_reshape_shape_runs_the_model_as_given():
    """The collapsed Reshape reads s2 by name, but a fed s2 with a 0 copies an extent of the
    first Reshape's result, which is no longer there: [0, -1] must give (3, 4), not (2, 6)."""
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["r"]), helper.make_node("Reshape", ["r", "s2"], ["y"])]
    proto = legacy(model(nodes, [_vi("x", [2, 6])], [_vi("y", None)],
                         [init("s1", np.array([3, 4], np.int64)), init("s2", np.array([12, 1], np.int64))]))
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    _check_override(proto, {"x": x}, {"s2": np.array([0, -1], np.int64)}, "reshape")
    assert agree(proto, {"x": x, "s2": np.array([0, -1], np.int64)})[0].shape == (3, 4)


def test_oracle_reads_the_legacy_override():
    """onnxruntime refuses a feed for an IR 3 initializer: :func:`ort_plain` gives it the model as
    IR 8 with that initializer a plain input (the oracle the tests above use)."""
    proto = legacy(model([helper.make_node("Add", ["x", "b"], ["y"])], [_vi("x", [2])], [_vi("y", [2])],
                         [init("b", np.ones(2, np.float32))]))
    x = np.zeros(2, np.float32)
    assert np.array_equal(ort_plain(proto, {"x": x})[0], [1.0, 1.0])
    assert np.array_equal(ort_plain(proto, {"x": x, "b": np.full(2, 3.0, np.float32)})[0], [3.0, 3.0])
