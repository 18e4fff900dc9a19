"""The elementwise-region fusion (``elementwise``): a region of float32 elementwise nodes whose
interior values are read inside it alone becomes ai.onnxkit Elementwise, whose cpu kernel runs one
generated compiled loop (warm plan) or the region's own nodes (cold plan).  Differential: the
fused session equals the unfused session (the pass switched off) bit for bit under each first-run
policy, at one and two intra-op threads, and agrees with onnxruntime (its optimizer off) within
float32 tolerance.  Seeded random chains over inputs of every broadcast layout (full, scalar,
last-axis vector, per-row), and the near misses that must not fuse or must stop the region: an
interior value read outside, a leaf broadcast on another axis, a float64 node, a lone node, a Pow
by another exponent, a MatMul's Add (the epilogue's).  The generated loop itself: any block split
of its elements gives the same bits."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnxkit  # noqa: E402
from onnxkit import InferenceSession, SessionOptions  # noqa: E402
from onnxkit.runtime.optimizer import PASS_NAMES, optimize  # noqa: E402
from onnxkit.runtime.optimizer.portable import portable  # noqa: E402
from onnxkit.runtime.options import GraphOptimizationLevel  # noqa: E402
from optimizer_cases import TP, helper, init, ort_plain  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

B, ROWS, N = 2, 5, 48
#: the input shapes of each broadcast layout against [B, ROWS, N]
SHAPES = {"F": [B, ROWS, N], "S": [], "V": [N], "R": [B, ROWS, 1], "F2": [ROWS, N]}
UNARY = ["Neg", "Abs", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh", ("Pow", 2.0), ("Pow", 3.0), ("Pow", 0.5)]
BINARY = ["Add", "Sub", "Mul", "Div"]


def _value(rng, shape):
    a = np.array(rng.standard_normal(shape), np.float32)
    a *= 3
    if a.size > 3:
        a.reshape(-1)[:4] = np.array([0.0, -0.0, np.inf, np.nan], np.float32)[: a.size]
    return a


def _random_model(seed: int, length: int = 6):
    """A chain of ``length`` random steps from one full input, each binary step reading a new
    input of a random layout or an earlier value; the last value the graph's output."""
    rng = np.random.default_rng(seed)
    inputs = [("x0", SHAPES["F"])]
    values, nodes, inits = ["x0"], [], []
    for k in range(length):
        out = f"v{k}"
        if rng.random() < 0.45:
            op = UNARY[rng.integers(len(UNARY))]
            if isinstance(op, tuple):
                inits.append(init(f"e{k}", np.array(op[1], np.float32)))
                nodes.append(helper.make_node("Pow", [values[-1], f"e{k}"], [out]))
            else:
                nodes.append(helper.make_node(op, [values[-1]], [out]))
        else:
            op = BINARY[rng.integers(len(BINARY))]
            if rng.random() < 0.6:
                kind = list(SHAPES)[rng.integers(len(SHAPES))]
                other = f"x{len(inputs)}"
                inputs.append((other, SHAPES[kind]))
            else:
                other = values[rng.integers(len(values))]
            pair = [values[-1], other] if rng.random() < 0.5 else [other, values[-1]]
            nodes.append(helper.make_node(op, pair, [out]))
        values.append(out)
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(n, TP.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(values[-1], TP.FLOAT, None)], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return proto, {n: _value(rng, s) for n, s in inputs}


def _rewrites(proto):
    m = onnxkit.load(proto.SerializeToString())
    r = optimize(m, GraphOptimizationLevel.ORT_ENABLE_ALL, disabled=set(PASS_NAMES) - {"elementwise"})
    report = onnxkit.check_model(r.model)
    assert report.ok, [str(d) for d in report.diagnostics]
    return r.rewrites.get("elementwise", 0), [n.op_type for n in r.model.graph.node], r.model


def _options(threads: int = 1, fuse: bool = True) -> SessionOptions:
    so = SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.split_kernels", "1")
    if fuse:
        so.add_session_config_entry("session.enable_passes", "elementwise")   # an opt-in pass
    else:
        so.add_session_config_entry("session.disable_passes", "elementwise")
    return so


def _same(a, b):
    """The same bits at every element but a NaN, which is a NaN in both (its sign and payload
    are not compared: x86 hands on one operand's NaN, and numpy's loops order operands their own
    way)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b))
    a, b = np.where(nan, 0, a), np.where(nan, 0, b)
    assert np.array_equal(a.view(np.int32), b.view(np.int32)), np.argwhere(a.view(np.int32) != b.view(np.int32))[:5]


def _differential(proto, feed, threads=(1, 2)):
    data = proto.SerializeToString()
    want = InferenceSession(data, _options(1, fuse=False)).run(None, feed)
    for t in threads:
        got = InferenceSession(data, _options(t)).run(None, feed)
        for a, b in zip(got, want):
            _same(a, b)
    with np.errstate(all="ignore"):
        for a, c in zip(got, ort_plain(proto, feed)):
            finite = np.isfinite(c)
            assert np.array_equal(np.isnan(a), np.isnan(c))
            assert np.allclose(a[finite], c[finite], rtol=2e-5, atol=1e-6)
    return got


@pytest.mark.parametrize("seed", range(8))
def test_random_chains_fuse_bit_identical(seed, first_run_policy):
    proto, feed = _random_model(seed)
    count, ops, _ = _rewrites(proto)
    assert count >= 1 and "Elementwise" in ops, ops
    _differential(proto, feed)


def _swish_norm(shape_mean=(B, ROWS, 1), elem=TP.FLOAT, out_mean=False, pow_e=2.0):
    """``y = z * Sigmoid(z)``, ``z = (x - m) / Sqrt(m2 * m2 + eps) * g + b`` over the inputs
    x [B, ROWS, N], m ``shape_mean``, g, b [N]."""
    nodes = [helper.make_node("Sub", ["x", "m"], ["d"]), helper.make_node("Pow", ["m", "two"], ["m2"]),
             helper.make_node("Add", ["m2", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]), helper.make_node("Mul", ["n", "g"], ["ng"]),
             helper.make_node("Add", ["ng", "b"], ["z"]), helper.make_node("Sigmoid", ["z"], ["sz"]),
             helper.make_node("Mul", ["z", "sz"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TP.FLOAT, [B, ROWS, N]),
              helper.make_tensor_value_info("m", elem, list(shape_mean))]
    outputs = [helper.make_tensor_value_info("y", TP.FLOAT, None)] + (
        [helper.make_tensor_value_info("d", TP.FLOAT, None)] if out_mean else [])
    rng = np.random.default_rng(3)
    inits = [init("eps", np.array(1e-5, np.float32)), init("two", np.array(pow_e, np.float32)),
             init("g", rng.standard_normal(N).astype(np.float32)), init("b", rng.standard_normal(N).astype(np.float32))]
    if elem == TP.DOUBLE:        # a float64 m: its Pow, Add and Sqrt are float64; a Cast into the chain
        nodes[3:4] = [helper.make_node("Sqrt", ["ve"], ["s64"]), helper.make_node("Cast", ["s64"], ["s"], to=TP.FLOAT),
                      helper.make_node("Cast", ["m"], ["m32"], to=TP.FLOAT)]
        nodes[0] = helper.make_node("Sub", ["x", "m32"], ["d"])
        inits[:2] = [init("eps", np.array(1e-5)), init("two", np.array(pow_e))]
    graph = helper.make_graph(nodes, "swish_norm", inputs, outputs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feed = {"x": _value(rng, [B, ROWS, N]),
            "m": np.array(rng.standard_normal(shape_mean), np.float64 if elem == TP.DOUBLE else np.float32)}
    return proto, feed


def test_a_norm_and_swish_chain_is_one_node(first_run_policy):
    proto, feed = _swish_norm()
    assert _rewrites(proto)[:2] == (1, ["Elementwise"])
    _differential(proto, feed)


def test_an_interior_value_read_outside_stops_the_region_there():
    proto, feed = _swish_norm(out_mean=True)
    count, ops, model = _rewrites(proto)
    assert count == 1 and ops == ["Sub", "Elementwise"], ops
    assert "d" in model.graph.node[1].input            # d is a leaf of the region, not inside it
    _differential(proto, feed)


def test_an_interior_value_read_by_another_node_stops_the_region_there():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [B, ROWS, N])
    nodes = [helper.make_node("Neg", ["x"], ["t"]), helper.make_node("Abs", ["t"], ["u"]),
             helper.make_node("Sigmoid", ["u"], ["y1"]), helper.make_node("Tanh", ["y1"], ["y"]),
             helper.make_node("ReduceSum", ["u"], ["y2"], keepdims=1)]
    proto = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TP.FLOAT, None),
                                                                  helper.make_tensor_value_info("y2", TP.FLOAT, None)]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    count, ops, model = _rewrites(proto)
    assert count == 2 and ops == ["Elementwise", "Elementwise", "ReduceSum"], ops
    assert [n.op_type for n in model.graph.node[1].attr("body").node] == ["Sigmoid", "Tanh"]
    _differential(proto, {"x": _value(np.random.default_rng(4), [B, ROWS, N])})


def test_a_leaf_broadcast_on_another_axis_leaves_its_readers_out():
    proto, feed = _swish_norm(shape_mean=(1, ROWS, 1))   # m broadcasts on axes 0 and 2: not a layout
    count, ops, model = _rewrites(proto)
    # Sub and Pow read m; Div reads s, of m's shape: out; Pow -> Add -> Sqrt is a region of its own
    assert count == 2 and ops == ["Sub", "Elementwise", "Div", "Elementwise"], ops
    bodies = [[n.op_type for n in node.attr("body").node] for node in model.graph.node if node.op_type == "Elementwise"]
    assert bodies == [["Pow", "Add", "Sqrt"], ["Mul", "Add", "Sigmoid", "Mul"]]
    _differential(proto, feed)


def test_a_float64_node_is_not_in_a_region():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [B, ROWS, N])
    nodes = [helper.make_node("Neg", ["x"], ["t1"]), helper.make_node("Abs", ["t1"], ["t2"]),
             helper.make_node("Cast", ["t2"], ["c"], to=TP.DOUBLE), helper.make_node("Sqrt", ["c"], ["s"]),
             helper.make_node("Cast", ["s"], ["d"], to=TP.FLOAT), helper.make_node("Add", ["d", "x"], ["e"]),
             helper.make_node("Relu", ["e"], ["y"])]
    proto = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TP.FLOAT, None)]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    count, ops, _ = _rewrites(proto)
    assert count == 2 and ops == ["Elementwise", "Cast", "Sqrt", "Cast", "Elementwise"], ops
    _differential(proto, {"x": _value(np.random.default_rng(2), [B, ROWS, N])})


def test_a_pow_by_another_exponent_is_not_in_a_region():
    proto, feed = _swish_norm(pow_e=1.5)
    count, ops, _ = _rewrites(proto)
    assert count == 1 and "Pow" in ops and ops[-1] == "Elementwise", ops
    _differential(proto, feed)


def test_a_lone_node_and_a_matmuls_epilogue_are_left_alone():
    x = helper.make_tensor_value_info("x", TP.FLOAT, [B, N])
    lone = helper.make_model(helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "g", [x],
                                               [helper.make_tensor_value_info("y", TP.FLOAT, None)]),
                             opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert _rewrites(lone)[0] == 0
    w = init("w", np.ones((N, N), np.float32))
    bias = init("bias", np.ones(N, np.float32))
    mm = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "bias"], ["q"]),
                            helper.make_node("Relu", ["q"], ["y"])], "g", [x],
                           [helper.make_tensor_value_info("y", TP.FLOAT, None)], [w, bias])
    proto = helper.make_model(mm, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    m = onnxkit.load(proto.SerializeToString())
    assert optimize(m, GraphOptimizationLevel.ORT_ENABLE_ALL).rewrites["elementwise"] == 0


def test_a_region_of_initializers_alone_is_left_to_planning():
    """A weight standardization ``(w - mean(w)) * 0.5`` of a large initializer is computed from
    initializers alone (planning folds it): not a region; the same chain on an input is."""
    w = init("w", np.random.default_rng(1).standard_normal((64, 32, 3, 3)).astype(np.float32))
    half = init("half", np.array(0.5, np.float32))
    nodes = [helper.make_node("ReduceMean", ["w"], ["m"], axes=[3]), helper.make_node("Sub", ["w", "m"], ["d"]),
             helper.make_node("Mul", ["d", "half"], ["ws"]), helper.make_node("Conv", ["x", "ws"], ["y"])]
    x = helper.make_tensor_value_info("x", TP.FLOAT, [1, 32, 8, 8])
    proto = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                                                [w, half]), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert _rewrites(proto)[0] == 0
    nodes[0:3] = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1, 2, 3]), helper.make_node("Sub", ["x", "m"], ["d"]),
                  helper.make_node("Mul", ["d", "half"], ["ws"]), helper.make_node("Conv", ["ws", "w"], ["y"])]
    nodes.pop()
    proto = helper.make_model(helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                                                [w, half]), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    assert _rewrites(proto)[:2] == (1, ["ReduceMean", "Elementwise", "Conv"])


def test_the_portable_form_is_the_region_and_runs_in_onnxruntime():
    proto, feed = _swish_norm()
    saved = portable(_rewrites(proto)[2])
    assert [n.op_type for n in saved.graph.node] == ["Sub", "Pow", "Add", "Sqrt", "Div", "Mul", "Add", "Sigmoid", "Mul"]
    data = onnxkit.save_model_to_bytes(saved) if hasattr(onnxkit, "save_model_to_bytes") else None
    if data is not None:
        got = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feed)[0]
        want = ort_plain(proto, feed)[0]
        assert np.allclose(got, want, rtol=1e-6, atol=1e-7, equal_nan=True)


def test_the_warm_plan_runs_the_generated_loop_split_across_two_threads(warm_bodies, monkeypatch):
    from onnxkit.runtime import threads

    from onnxkit_cpu import compiled

    if not compiled.enabled():
        pytest.skip("numba is not importable here: the loop is the compiled path")
    seen = []
    monkeypatch.setattr(threads, "observer", lambda name, k: seen.append((name, k)))
    proto, _ = _swish_norm()
    big = {"x": np.random.default_rng(5).standard_normal((B, ROWS * 400, N)).astype(np.float32),
           "m": np.random.default_rng(6).standard_normal((B, ROWS * 400, 1)).astype(np.float32)}
    for n in proto.graph.input:                       # the extents of the big feed
        n.type.tensor_type.shape.dim[1].dim_value = ROWS * 400
    data = proto.SerializeToString()
    want = InferenceSession(data, _options(1, fuse=False)).run(None, big)[0]
    got = InferenceSession(data, _options(2)).run(None, big)[0]
    _same(got, want)
    assert ("elementwise.region", 2) in seen, seen


def test_any_block_split_of_the_generated_loop_gives_the_same_bits(warm_bodies):
    from onnxkit_cpu import compiled
    from onnxkit_cpu.compiled.fused_elementwise import region_loop

    if not compiled.enabled():
        pytest.skip("numba is not importable here: the loop is the compiled path")
    proto, feed = _swish_norm()
    model = _rewrites(proto)[2]
    node = model.graph.node[-1]
    loop = region_loop(node.attr("body"), "FRSVV")
    assert loop is not None and list(node.input) == ["x", "m", "eps", "g", "b"]
    rng = np.random.default_rng(9)
    x = _value(rng, [B, ROWS, N]).reshape(-1)
    args = (x, rng.standard_normal(B * ROWS).astype(np.float32), np.array([1e-5], np.float32),
            rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32))
    whole = np.empty(x.size, np.float32)
    loop(0, x.size, N, whole, *args)
    cuts = sorted(set(rng.integers(1, x.size, 7).tolist()) | {0, x.size})
    split = np.full(x.size, np.nan, np.float32)
    for lo, hi in zip(cuts, cuts[1:]):
        loop(lo, hi, N, split, *args)
    _same(split, whole)
    # each element from the body's float32 operations in order (numpy), the sigmoid in float64
    f = np.float32
    r, j = np.divmod(np.arange(x.size), N)
    m = args[1][r]
    with np.errstate(all="ignore"):
        z = (f(x - m) / np.sqrt(f(m * m) + args[2][0])) * args[3][j] + args[4][j]
        want = z * (1 / (1 + np.exp(-z.astype(np.float64))))
    ok = np.isfinite(want)
    assert np.allclose(whole[ok], want[ok], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x_shape, g_shape", [([1, 1, N], [N]), ([1, 3, N], [1, N]), ([4, N], [4, 1]), ([N], [])])
def test_the_warm_plan_computes_each_layout_by_the_loop(x_shape, g_shape, warm_bodies, monkeypatch):
    """Inputs of lower rank than Y (a full [N] against [1, 1, N]), vectors, rows and scalars run the
    generated loop, not the body (a layout the run's check refused fell to the body on every call)."""
    from onnxkit_cpu import compiled
    from onnxkit_cpu.overrides import fused_elementwise

    if not compiled.enabled():
        pytest.skip("numba is not importable here: the loop is the compiled path")
    calls = []
    made = fused_elementwise.loops.region_loop

    def counted(body, layouts):
        loop = made(body, layouts)
        return None if loop is None else (lambda *args: calls.append(layouts) or loop(*args))

    monkeypatch.setattr(fused_elementwise.loops, "region_loop", counted)
    nodes = [helper.make_node("Mul", ["x", "g"], ["a"]), helper.make_node("Sigmoid", ["a"], ["s"]),
             helper.make_node("Add", ["s", "g"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, x_shape),
                                           helper.make_tensor_value_info("g", TP.FLOAT, g_shape)],
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    rng = np.random.default_rng(11)
    feed = {"x": _value(rng, x_shape), "g": np.array(rng.standard_normal(g_shape), np.float32)}
    assert _rewrites(proto)[:2] == (1, ["Elementwise"])
    _differential(proto, feed, threads=(1,))
    assert calls, "the body ran, not the loop"
