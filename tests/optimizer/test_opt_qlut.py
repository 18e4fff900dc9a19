"""The lookup-table fusion (``qlut``): a region of elementwise operators between one 8-bit tensor
and an 8-bit result becomes ai.onnxkit LookupTable, whose kernel runs the region's own nodes once
on the 256 codes.  Differential: the fused session's outputs equal the unfused session's (the
pass switched off) bit for bit, in the cold plan (numpy bodies) and the warm one (compiled loops),
and agree with onnxruntime (its optimizer off) within one quantization step where the region ends
in one QuantizeLinear (float kernels of two runtimes may round a value at a tie apart).  Random
chains (seeded), GELU's quantized forms (QDQ, and QOperator's com.microsoft nodes), and the near
misses that must not fuse: an interior value read outside, a non-scalar constant, a per-axis
scale, a float16 intermediate, two 8-bit sources, an integer operator."""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnxkit  # noqa: E402
from onnxkit import InferenceSession, SessionOptions  # noqa: E402
from onnxkit.runtime.optimizer import PASS_NAMES, optimize  # noqa: E402
from onnxkit.runtime.options import GraphOptimizationLevel  # noqa: E402
from optimizer_cases import TP, helper, init, ort_plain  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

RNG = np.random.default_rng(44)
SHAPE = [2, 3, 37]
TAGS = {np.uint8: TP.UINT8, np.int8: TP.INT8}
MS = helper.make_opsetid("com.microsoft", 1)

#: unary steps of the random chains: (op, attributes), each defined on every float32 value
UNARY = [("Erf", {}), ("Tanh", {}), ("Sigmoid", {}), ("Relu", {}), ("Abs", {}), ("Neg", {}), ("Exp", {}),
         ("Softplus", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("LeakyRelu", {"alpha": 0.07}),
         ("Elu", {"alpha": 0.9}), ("Floor", {}), ("Ceil", {}), ("Softsign", {}), ("Sin", {})]
#: binary steps with a scalar float32 constant: (op, constant)
BINARY = [("Add", 0.75), ("Sub", -1.5), ("Mul", 0.5), ("Div", math.sqrt(2.0)), ("Max", -0.25), ("Min", 1.25),
          ("Pow", 2.0)]


def _feed(dtype=np.uint8, shape=SHAPE):
    info = np.iinfo(dtype)
    return {"x": RNG.integers(info.min, info.max + 1, shape).astype(dtype)}


def _quant(prefix, scale, zp, dtype):
    return [init(f"{prefix}_s", np.array(scale, np.float32)), init(f"{prefix}_z", np.array(zp, dtype))]


def _model(nodes, inits, dtype=np.uint8, out_dtype=None, outputs=("y",), opsets=(), shape=SHAPE):
    out_dtype = out_dtype or dtype
    outs = [helper.make_tensor_value_info(o, TAGS[out_dtype] if o == "y" else TP.FLOAT, None) for o in outputs]
    graph = helper.make_graph(nodes, "qlut", [helper.make_tensor_value_info("x", TAGS[dtype], shape)], outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), *opsets], ir_version=8)


def _chain(steps, dtype=np.uint8, out_dtype=None, x_scale=0.05, y_scale=0.02):
    """``Q(steps(DQ(x)))`` with the steps in order (a unary op, or a binary op with a scalar constant)."""
    out_dtype = out_dtype or dtype
    zx = 0 if dtype == np.int8 else 121
    zy = -3 if out_dtype == np.int8 else 130
    inits = _quant("x", x_scale, zx, dtype) + _quant("y", y_scale, zy, out_dtype)
    nodes = [helper.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["v0"])]
    for k, (op, arg) in enumerate(steps):
        if isinstance(arg, dict):
            nodes.append(helper.make_node(op, [f"v{k}"], [f"v{k + 1}"], **arg))
        else:
            inits.append(init(f"c{k}", np.array(arg, np.float32)))
            nodes.append(helper.make_node(op, [f"v{k}", f"c{k}"], [f"v{k + 1}"]))
    nodes.append(helper.make_node("QuantizeLinear", [f"v{len(steps)}", "y_s", "y_z"], ["y"]))
    return _model(nodes, inits, dtype, out_dtype)


def _gelu_qdq(dtype=np.uint8):
    """GELU's erf form as the QDQ quantizer writes it: a Q / DQ pair after every float op but the Div."""
    z = 0 if dtype == np.int8 else 128
    inits = _quant("x", 0.04, z, dtype)
    for name, scale in (("e", 1 / 127), ("a", 2 / 255), ("m", 0.03), ("y", 0.02)):
        inits += _quant(name, scale, 0 if dtype == np.int8 else (0 if name == "a" else 100), dtype)
    inits += [init("sqrt2", np.array(math.sqrt(2), np.float32)), init("one", np.array(1.0, np.float32)),
              init("half", np.array(0.5, np.float32))]
    n = helper.make_node
    nodes = [n("DequantizeLinear", ["x", "x_s", "x_z"], ["xd"]), n("Div", ["xd", "sqrt2"], ["d"]),
             n("Erf", ["d"], ["e"]), n("QuantizeLinear", ["e", "e_s", "e_z"], ["eq"]),
             n("DequantizeLinear", ["eq", "e_s", "e_z"], ["ed"]), n("Add", ["ed", "one"], ["a"]),
             n("QuantizeLinear", ["a", "a_s", "a_z"], ["aq"]), n("DequantizeLinear", ["aq", "a_s", "a_z"], ["ad"]),
             n("Mul", ["xd", "ad"], ["m"]), n("QuantizeLinear", ["m", "m_s", "m_z"], ["mq"]),
             n("DequantizeLinear", ["mq", "m_s", "m_z"], ["md"]), n("Mul", ["md", "half"], ["h"]),
             n("QuantizeLinear", ["h", "y_s", "y_z"], ["y"])]
    return _model(nodes, inits, dtype)


def _gelu_qop(dtype=np.uint8):
    """GELU's erf form as the QOperator quantizer writes it: DQ, Div, Erf, Q, then com.microsoft
    QLinearAdd (a constant 1), QLinearMul (x), QLinearMul (a constant 0.5)."""
    z = 0 if dtype == np.int8 else 128
    inits = _quant("x", 0.04, z, dtype) + _quant("e", 1 / 127, z, dtype) + _quant("a", 2 / 255, z, dtype)
    inits += _quant("m", 0.03, z, dtype) + _quant("y", 0.02, z, dtype)
    inits += _quant("one", 1 / 127, 0 if dtype == np.int8 else 0, dtype) + _quant("half", 0.5 / 127, 0, dtype)
    inits += [init("one_q", np.array(127, dtype)), init("half_q", np.array(127, dtype)),
              init("sqrt2", np.array(math.sqrt(2), np.float32))]
    n = helper.make_node
    nodes = [n("DequantizeLinear", ["x", "x_s", "x_z"], ["xd"]), n("Div", ["xd", "sqrt2"], ["d"]),
             n("Erf", ["d"], ["e"]), n("QuantizeLinear", ["e", "e_s", "e_z"], ["eq"]),
             n("QLinearAdd", ["eq", "e_s", "e_z", "one_q", "one_s", "one_z", "a_s", "a_z"], ["aq"],
               domain="com.microsoft"),
             n("QLinearMul", ["x", "x_s", "x_z", "aq", "a_s", "a_z", "m_s", "m_z"], ["mq"], domain="com.microsoft"),
             n("QLinearMul", ["mq", "m_s", "m_z", "half_q", "half_s", "half_z", "y_s", "y_z"], ["y"],
               domain="com.microsoft")]
    return _model(nodes, inits, dtype, opsets=[MS])


def _rewrites(proto) -> tuple:
    """``(qlut's rewrites, op types after it)`` with every other pass off; the result checks clean."""
    m = onnxkit.load(proto.SerializeToString())
    r = optimize(m, GraphOptimizationLevel.ORT_ENABLE_ALL, disabled=set(PASS_NAMES) - {"qlut"})
    report = onnxkit.check_model(r.model)
    assert report.ok, [str(d) for d in report.diagnostics]
    return r.rewrites.get("qlut", 0), [n.op_type for n in r.model.graph.node]


def _sessions(proto):
    data = proto.SerializeToString()
    unfused = SessionOptions()
    unfused.add_session_config_entry("session.disable_passes", "qlut")
    return InferenceSession(data), InferenceSession(data, unfused)


def _differential(proto, feed, steps_apart=1, runs=2) -> list:
    """The fused session's outputs: equal to the unfused session's bit for bit at each of ``runs``
    runs; within ``steps_apart`` codes of onnxruntime's (None: not compared)."""
    fused, unfused = _sessions(proto)
    for _ in range(runs):
        got, want = fused.run(None, feed), unfused.run(None, feed)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), np.argwhere(a != b)[:5]
    if steps_apart is not None:
        for a, c in zip(got, ort_plain(proto, feed)):
            assert a.dtype == c.dtype and a.shape == c.shape
            assert np.abs(a.astype(np.int32) - c.astype(np.int32)).max() <= steps_apart
    return got


def _random_steps(rng, length):
    steps = []
    for _ in range(length):
        steps.append(UNARY[rng.integers(len(UNARY))] if rng.random() < 0.5 else BINARY[rng.integers(len(BINARY))])
    return steps


@pytest.mark.parametrize("seed", range(6))
def test_random_chains_fuse_bit_identical(seed, first_run_policy):
    rng = np.random.default_rng(seed)
    dtype, out_dtype = [(np.uint8, np.uint8), (np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8)][seed % 4]
    steps = _random_steps(rng, 1 + seed % 4)
    proto = _chain(steps, dtype, out_dtype)
    assert _rewrites(proto) == (1, ["LookupTable"]), steps
    _differential(proto, _feed(dtype))


def test_every_listed_operator_fuses(first_run_policy):
    steps = UNARY + BINARY + [("Clip", {}), ("Identity", {}), ("Gelu", {}), ("HardSwish", {}), ("Mish", {})]
    proto = _chain([s for s in steps if s[0] not in ("Gelu", "HardSwish", "Mish")] + [("Tanh", {})], x_scale=0.01)
    assert _rewrites(proto) == (1, ["LookupTable"])
    _differential(proto, _feed(), steps_apart=None)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("form", ["qdq", "qop"])
def test_gelu_as_the_quantizer_writes_it_is_one_table(form, dtype, first_run_policy):
    proto = (_gelu_qdq if form == "qdq" else _gelu_qop)(dtype)
    assert _rewrites(proto) == (1, ["LookupTable"])
    _differential(proto, _feed(dtype), steps_apart=None)
    # every code, against onnxruntime: a step apart at an intermediate Q (a value at a tie the two
    # runtimes' float kernels round apart; QLinearAdd / QLinearMul requantize in float64 here, in
    # float32 there) may carry through the later ones, so some codes differ by a step or two
    feed = {"x": np.arange(256, dtype=np.uint8).view(dtype).reshape(1, 1, 256)}
    proto.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 256
    for d in (0, 1):
        proto.graph.input[0].type.tensor_type.shape.dim[d].dim_value = 1
    fused, unfused = _sessions(proto)
    a, b, c = fused.run(None, feed)[0], unfused.run(None, feed)[0], ort_plain(proto, feed)[0]
    assert np.array_equal(a, b)
    apart = np.abs(a.astype(np.int32) - c.astype(np.int32))
    assert (apart == 0).mean() >= 0.85 and apart.max() <= 2, ((apart == 0).mean(), apart.max())


def test_a_shared_dequantize_stays_for_its_other_readers():
    proto = _chain([("Erf", {})])
    proto.graph.node.append(helper.make_node("Relu", ["v0"], ["r"]))
    proto.graph.output.append(helper.make_tensor_value_info("r", TP.FLOAT, None))
    assert _rewrites(proto) == (1, ["DequantizeLinear", "LookupTable", "Relu"])
    _differential(proto, _feed())


def test_qlinear_operators_of_one_input_fuse():
    inits = _quant("x", 0.05, 128, np.uint8) + _quant("y", 1 / 255, 0, np.uint8) + _quant("l", 0.03, 100, np.uint8)
    n = helper.make_node
    nodes = [n("QLinearSigmoid", ["x", "x_s", "x_z", "y_s", "y_z"], ["s"], domain="com.microsoft"),
             n("QLinearLeakyRelu", ["s", "y_s", "y_z", "l_s", "l_z"], ["y"], domain="com.microsoft", alpha=0.1)]
    proto = _model(nodes, inits, opsets=[MS])
    assert _rewrites(proto) == (1, ["LookupTable"])
    _differential(proto, _feed(), steps_apart=None)


def test_an_interior_8bit_value_read_outside_splits_the_region():
    """``DQ -> Erf -> Q1 -> DQ -> Add -> Q2`` with Q1's codes read by another node too: two tables,
    Q2's reading Q1's codes."""
    proto = _chain([("Erf", {})])
    g = proto.graph
    g.node[-1].output[0] = "q1"
    g.initializer.append(init("one", np.array(1.0, np.float32)))
    g.node.extend([helper.make_node("DequantizeLinear", ["q1", "y_s", "y_z"], ["d1"]),
                   helper.make_node("Add", ["d1", "one"], ["a"]),
                   helper.make_node("QuantizeLinear", ["a", "x_s", "x_z"], ["y"]),
                   helper.make_node("DequantizeLinear", ["q1", "y_s", "y_z"], ["other"])])
    g.output.append(helper.make_tensor_value_info("other", TP.FLOAT, None))
    assert _rewrites(proto) == (2, ["LookupTable", "LookupTable", "DequantizeLinear"])
    _differential(proto, _feed())


def test_a_walk_past_an_8bit_value_into_two_sources_stops_there():
    """``Q(DQ(x1) + DQ(x2))`` then ``DQ -> Erf -> Q``: the walk from the last Q reaches x1 and x2
    through the sum's codes, so the table starts at those codes; the sum itself stays."""
    proto = _chain([("Erf", {})])
    g = proto.graph
    g.input[0].name = "x1"
    g.input.append(helper.make_tensor_value_info("x2", TP.UINT8, SHAPE))
    g.node[0].input[0] = "s"
    n = helper.make_node
    for k, node in enumerate([n("DequantizeLinear", ["x1", "x_s", "x_z"], ["d1"]),
                              n("DequantizeLinear", ["x2", "x_s", "x_z"], ["d2"]), n("Add", ["d1", "d2"], ["sf"]),
                              n("QuantizeLinear", ["sf", "x_s", "x_z"], ["s"])]):
        g.node.insert(k, node)
    assert _rewrites(proto) == (1, ["DequantizeLinear", "DequantizeLinear", "Add", "QuantizeLinear", "LookupTable"])
    feed = {"x1": _feed()["x"], "x2": _feed()["x"]}
    fused, unfused = _sessions(proto)
    assert np.array_equal(fused.run(None, feed)[0], unfused.run(None, feed)[0])


@pytest.mark.parametrize("case", ["interior_output", "interior_reader", "vector_constant", "per_axis", "float16", "two_sources",
                                  "integer_op", "one_node"])
def test_near_misses_do_not_fuse(case):
    proto = _chain([("Div", math.sqrt(2.0)), ("Erf", {})])
    g = proto.graph
    if case == "interior_output":        # the Erf's input is a graph output too
        g.output.append(helper.make_tensor_value_info("v1", TP.FLOAT, None))
        want = (0, ["DequantizeLinear", "Div", "Erf", "QuantizeLinear"])
    elif case == "interior_reader":      # the Erf's input is read by another node (a float value: no cut)
        g.node.append(helper.make_node("Relu", ["v1"], ["r"]))
        g.output.append(helper.make_tensor_value_info("r", TP.FLOAT, None))
        want = (0, ["DequantizeLinear", "Div", "Erf", "QuantizeLinear", "Relu"])
    elif case == "vector_constant":      # Div by a constant of 37 values (one per position of the last axis)
        g.initializer.remove(next(t for t in g.initializer if t.name == "c0"))
        g.initializer.append(init("c0", np.linspace(1, 2, 37).astype(np.float32)))
        want = (0, ["DequantizeLinear", "Div", "Erf", "QuantizeLinear"])
    elif case == "per_axis":             # the DQ's scale and zero point per channel (axis 1): Q's input is the source's
        for name, value in (("x_s", np.array([0.05, 0.04, 0.03], np.float32)), ("x_z", np.array([121, 3, 9], np.uint8))):
            g.initializer.remove(next(t for t in g.initializer if t.name == name))
            g.initializer.append(init(name, value))
        want = (0, ["DequantizeLinear", "Div", "Erf", "QuantizeLinear"])
    elif case == "float16":              # a float16 intermediate (a Cast there and back)
        g.node.insert(2, helper.make_node("Cast", ["v1"], ["h"], to=TP.FLOAT16))
        g.node.insert(3, helper.make_node("Cast", ["h"], ["h32"], to=TP.FLOAT))
        g.node[4].input[0] = "h32"
        want = (0, ["DequantizeLinear", "Div", "Cast", "Cast", "Erf", "QuantizeLinear"])
    elif case == "two_sources":          # Div by a second 8-bit input's dequantization
        g.input.append(helper.make_tensor_value_info("x2", TP.UINT8, SHAPE))
        g.node.insert(1, helper.make_node("DequantizeLinear", ["x2", "x_s", "x_z"], ["w"]))
        g.node[2].input[1] = "w"
        want = (0, ["DequantizeLinear", "DequantizeLinear", "Div", "Erf", "QuantizeLinear"])
    elif case == "integer_op":           # an int32 operator between the DQ and the float ops
        g.node.insert(1, helper.make_node("Cast", ["v0"], ["i"], to=TP.INT32))
        g.node.insert(2, helper.make_node("Cast", ["i"], ["f"], to=TP.FLOAT))
        g.node[3].input[0] = "f"
        want = (0, ["DequantizeLinear", "Cast", "Cast", "Div", "Erf", "QuantizeLinear"])
    else:                                # a lone QuantizeLinear of a float input: nothing to tabulate
        proto = _model([helper.make_node("QuantizeLinear", ["x", "y_s", "y_z"], ["y"])],
                       _quant("y", 0.02, 130, np.uint8))
        proto.graph.input[0].type.tensor_type.elem_type = TP.FLOAT
        assert _rewrites(proto) == (0, ["QuantizeLinear"])
        return
    assert _rewrites(proto) == want
    feed = _feed()
    if case == "two_sources":
        feed["x2"] = np.maximum(_feed()["x"], 130).astype(np.uint8)
    fused, unfused = _sessions(proto)
    for a, b in zip(fused.run(None, feed), unfused.run(None, feed)):
        assert np.array_equal(a, b)


def test_a_model_importing_an_earlier_fused_domain_is_left_alone():
    proto = _chain([("Erf", {})])
    proto.opset_import.append(helper.make_opsetid("ai.onnxkit", 1))
    assert _rewrites(proto) == (0, ["DequantizeLinear", "Erf", "QuantizeLinear"])


def test_the_saved_portable_model_runs_in_onnxruntime(tmp_path):
    proto = _gelu_qdq()
    out = tmp_path / "opt.onnx"
    so = SessionOptions()
    so.optimized_model_filepath = str(out)
    sess = InferenceSession(proto.SerializeToString(), so)
    assert "LookupTable" in [n.op_type for n in sess.optimized.model.graph.node]
    saved = onnx.load(str(out))
    assert "LookupTable" not in [n.op_type for n in saved.graph.node]
    assert all(o.domain != "ai.onnxkit" for o in saved.opset_import)
    feed = _feed()
    sort = ort.SessionOptions()
    sort.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    again = ort.InferenceSession(str(out), sort, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert np.array_equal(again, ort_plain(proto, feed)[0])
    assert np.abs(sess.run(None, feed)[0].astype(np.int32) - again.astype(np.int32)).max() <= 3
