"""Control flow (If, Loop, Scan), sequences and optionals of the cpu backend.

Behaviour the ONNX node vectors do not cover: old operator versions, every Loop mode (trip
count and condition both optional), the loop-iteration limit, outer-scope values in
subgraphs, Scan-8 batching with sequence_lens, Scan-9+ axes and directions, sequence
positions.  Expected values are hand-computed, or come from onnxruntime / the onnx reference
evaluator used as oracles (test-only imports).  The recurrent operators: test_recurrent.py.

Loop and Scan bodies need a few elementwise operators (Add, Mul, Less, ...) that other
kernel families provide; where the installed cpu backend lacks one, a tiny test-only plugin
(:class:`_Fallback`) supplies it, so these tests do not depend on the order in which the
families are written.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import hookimpl, ir
from onnxkit.errors import EvaluationError, LimitExceeded
from onnxkit.limits import Limits
from onnxkit.registry import build_registry, get_registry
from onnxkit.runtime import InferenceSession

A = ir.Attribute.make
F32, I64, BOOL = 1, 7, 9


# -- test-only fallback kernels ----------------------------------------------------------------
def _binary(fn):
    def factory(ctx):
        return lambda a, b: fn(a, b).astype(np.result_type(a), copy=False)

    return factory


def _constant(ctx):
    for name in ("value", "value_float", "value_int", "value_floats", "value_ints"):
        if ctx.has_attr(name):
            v = ctx.attr(name)
            arr = v.numpy() if hasattr(v, "numpy") else np.array(v, dtype=np.float32 if "float" in name else np.int64)
            return lambda: arr
    raise NotImplementedError("test fallback Constant: unsupported form")


def _unsqueeze(ctx):
    if ctx.since_version < 13:
        axes = list(ctx.attr("axes"))
        return lambda x: np.expand_dims(x, tuple(axes))
    return lambda x, axes: np.expand_dims(x, tuple(int(a) for a in axes))


def _slice(ctx):
    def run(x, starts, ends, axes=None, steps=None):
        axes = range(len(starts)) if axes is None else axes
        steps = [1] * len(starts) if steps is None else steps
        idx = [slice(None)] * x.ndim
        for s, e, a, st in zip(starts, ends, axes, steps):
            idx[int(a)] = slice(int(s), int(e), int(st))
        return x[tuple(idx)]

    return run


_FALLBACK = {
    "Add": _binary(np.add), "Sub": _binary(np.subtract), "Mul": _binary(np.multiply),
    "Div": _binary(lambda a, b: a // b if np.result_type(a).kind in "iu" else a / b),
    "Less": lambda ctx: np.less, "Greater": lambda ctx: np.greater, "Not": lambda ctx: np.logical_not,
    "Identity": lambda ctx: (lambda x: x), "Constant": _constant, "Unsqueeze": _unsqueeze, "Slice": _slice,
    "Shape": lambda ctx: (lambda x: np.array(x.shape, dtype=np.int64)),
    "Ceil": lambda ctx: np.ceil, "Relu": lambda ctx: (lambda x: np.maximum(x, 0).astype(x.dtype)),
    "Cast": lambda ctx: (lambda x: x.astype(_dtype(ctx.attr("to")))),
}


def _dtype(tag):
    from onnxkit.dtypes import ELEMENT_TYPES

    return ELEMENT_TYPES[tag].dtype


class _Fallback:
    """Supplies the helper operators above for every definition the cpu backend lacks."""

    @hookimpl
    def onnxkit_kernels(self, backend):
        if backend != "cpu":
            return None
        base = get_registry()
        have = base.kernels.get("cpu", {})
        out = {}
        for op, factory in _FALLBACK.items():
            versions = {s.since_version for v in range(1, 29) if (s := base.bind("", op, v)) is not None}
            for v in versions:
                if ("", op, v) not in have:
                    out[("", op, v)] = factory
        return out


_REGISTRY = None


def registry():
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = build_registry(extra=[("test_control_flow_fallback", _Fallback())])
    return _REGISTRY


def session(model, **kw):
    return InferenceSession(model, registry=registry(), **kw)


# -- model building (onnxkit IR) ---------------------------------------------------------------
def vi(name, elem=F32, shape=None):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def graph(nodes, inputs, outputs, name="g", initializer=()):
    return ir.Graph(node=nodes, name=name, input=inputs, output=outputs, initializer=list(initializer))


def model(g, opset=21):
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", opset)], graph=g)


def node(op, inputs, outputs, **attrs):
    return ir.Node(inputs, outputs, name=f"{op}_{outputs[0] if outputs else ''}", op_type=op,
                   attribute=[A(k, v) for k, v in attrs.items()])


def const(name, value):
    return ir.Tensor.from_numpy(np.asarray(value), name=name)


def scalar_vi(name, elem=F32):
    return vi(name, elem, [])


def seq_vi(name, elem=F32, shape=None):
    return ir.ValueInfo(name, ir.SequenceType(ir.tensor_type(elem, shape)))


def opt_vi(name, inner):
    return ir.ValueInfo(name, ir.OptionalType(inner))


# ==============================================================================================
# Loop
# ==============================================================================================
def counting_loop(m_name="M", cond_name="cond", opset=21, outer_step=False):
    """x_out = x_in + step; cond_out = x_out < 5; scan output: x_in.  ``step`` comes from the
    outer scope when ``outer_step`` (Clause 5.4.3), else from the body's own initializer."""
    body_init = [] if outer_step else [const("step", np.float32(1.0))]
    body = graph(
        [node("Add", ["x_in", "step"], ["x_out"]),
         node("Less", ["x_out", "five"], ["c_out"]),
         node("Identity", ["x_in"], ["scan"])],
        [scalar_vi("i", I64), scalar_vi("c_in", BOOL), scalar_vi("x_in")],
        [scalar_vi("c_out", BOOL), scalar_vi("x_out"), scalar_vi("scan")],
        name="body", initializer=body_init + [const("five", np.float32(5.0))])
    inputs = [vi("x0", F32, [])]
    if m_name:
        inputs.append(vi(m_name, I64, []))
    if cond_name:
        inputs.append(vi(cond_name, BOOL, []))
    init = [const("step", np.float32(1.0))] if outer_step else []
    g = graph([node("Loop", [m_name, cond_name, "x0"], ["x_final", "xs"], body=body)], inputs,
              [vi("x_final", F32, []), vi("xs", F32, [None])], initializer=init)
    return model(g, opset)


def run_loop(m, **feed):
    x_final, xs = session(m).run(None, {k: np.asarray(v) for k, v in feed.items()})
    return float(x_final), xs


@pytest.mark.parametrize("opset", [9, 11, 13, 16, 21, 25])
def test_loop_trip_count_and_condition(opset):
    # for (i = 0; i < M && cond; ++i): stops when x reaches 5 (cond), or after M trips
    m = counting_loop(opset=opset)
    x, xs = run_loop(m, x0=np.float32(0), M=np.int64(10), cond=np.bool_(True))
    assert x == 5.0 and xs.tolist() == [0, 1, 2, 3, 4] and xs.dtype == np.float32
    x, xs = run_loop(m, x0=np.float32(0), M=np.int64(3), cond=np.bool_(True))
    assert x == 3.0 and xs.tolist() == [0, 1, 2]
    x, xs = run_loop(m, x0=np.float32(0), M=np.int64(10), cond=np.bool_(False))
    assert x == 0.0 and xs.shape == (0,) and xs.dtype == np.float32


def test_loop_trip_count_only_ignores_the_body_condition():
    m = counting_loop(cond_name="")
    x, xs = run_loop(m, x0=np.float32(0), M=np.int64(7))
    assert x == 7.0 and xs.tolist() == [0, 1, 2, 3, 4, 5, 6]


def test_loop_condition_only_is_a_while_loop():
    m = counting_loop(m_name="")
    x, xs = run_loop(m, x0=np.float32(1.5), cond=np.bool_(True))
    assert x == 5.5 and xs.tolist() == [1.5, 2.5, 3.5, 4.5]


def test_loop_negative_trip_count_runs_nothing():
    x, xs = run_loop(counting_loop(cond_name=""), x0=np.float32(2), M=np.int64(-3))
    assert x == 2.0 and xs.shape == (0,)


def test_loop_body_reads_outer_scope_values():
    m = counting_loop(outer_step=True)
    x, xs = run_loop(m, x0=np.float32(0), M=np.int64(2), cond=np.bool_(True))
    assert x == 2.0 and xs.tolist() == [0, 1]


def test_loop_without_trip_count_or_condition_stops_at_the_iteration_limit():
    m = counting_loop(m_name="", cond_name="")
    sess = session(m, limits=Limits(max_loop_iterations=10))
    with pytest.raises(LimitExceeded) as info:
        sess.run(None, {"x0": np.float32(0)})
    assert info.value.limit == "max_loop_iterations"


def test_loop_beyond_the_iteration_limit_is_refused():
    sess = session(counting_loop(cond_name=""), limits=Limits(max_loop_iterations=10))
    x, xs = sess.run(None, {"x0": np.float32(0), "M": np.int64(10)})  # exactly at the limit: runs
    assert float(x) == 10.0 and xs.shape == (10,)
    with pytest.raises(LimitExceeded) as info:
        sess.run(None, {"x0": np.float32(0), "M": np.int64(11)})
    assert info.value.limit == "max_loop_iterations" and info.value.value == 11 and info.value.maximum == 10
    # a while loop (condition, no trip count) is stopped at the 11th iteration
    sess = session(counting_loop(m_name=""), limits=Limits(max_loop_iterations=3))
    with pytest.raises(LimitExceeded):
        sess.run(None, {"x0": np.float32(0), "cond": np.bool_(True)})
    # ... but one that ends by itself within the limit is fine, whatever M says
    sess = session(counting_loop(), limits=Limits(max_loop_iterations=10))
    x, _ = sess.run(None, {"x0": np.float32(0), "M": np.int64(1 << 40), "cond": np.bool_(True)})
    assert float(x) == 5.0


def test_loop_limit_with_the_default_registry_and_an_empty_body():
    # the body has no node at all: it hands its condition straight back and scans out i
    body = graph([], [scalar_vi("i", I64), scalar_vi("c_in", BOOL)], [scalar_vi("c_in", BOOL), scalar_vi("i", I64)],
                 name="body")
    g = graph([node("Loop", ["M", ""], ["iters"], body=body)], [vi("M", I64, [])], [vi("iters", I64, [None])])
    sess = InferenceSession(model(g), limits=Limits(max_loop_iterations=10))
    assert sess.run(None, {"M": np.int64(10)})[0].tolist() == list(range(10))
    with pytest.raises(LimitExceeded, match="max_loop_iterations"):
        sess.run(None, {"M": np.int64(11)})
    with pytest.raises(LimitExceeded):
        InferenceSession(model(graph([node("Loop", ["", ""], ["iters"], body=body)], [], [vi("iters", I64, [None])])),
                         limits=Limits(max_loop_iterations=10)).run(None, {})


def test_loop_iteration_number_and_condition_inputs():
    # scan out the iteration number (int64) and the incoming condition
    body = graph(
        [node("Identity", ["i"], ["i_out"]), node("Identity", ["c_in"], ["c_seen"]),
         node("Less", ["i", "two"], ["c_out"])],
        [scalar_vi("i", I64), scalar_vi("c_in", BOOL)],
        [scalar_vi("c_out", BOOL), scalar_vi("i_out", I64), scalar_vi("c_seen", BOOL)],
        name="body", initializer=[const("two", np.int64(2))])
    g = graph([node("Loop", ["M", "cond"], ["is", "cs"], body=body)],
              [vi("M", I64, []), vi("cond", BOOL, [])], [vi("is", I64, [None]), vi("cs", BOOL, [None])])
    i_s, c_s = session(model(g)).run(None, {"M": np.int64(10), "cond": np.bool_(True)})
    assert i_s.dtype == np.int64 and i_s.tolist() == [0, 1, 2]
    assert c_s.tolist() == [True, True, True]


def test_loop_carries_a_sequence_and_an_absent_optional():
    # Loop-16: seq_out = SequenceInsert(seq_in, i); opt passes through untouched (absent)
    body = graph(
        [node("SequenceInsert", ["seq_in", "i"], ["seq_out"]), node("Identity", ["c_in"], ["c_out"]),
         node("Identity", ["opt_in"], ["opt_out"])],
        [scalar_vi("i", I64), scalar_vi("c_in", BOOL), seq_vi("seq_in", I64),
         opt_vi("opt_in", ir.tensor_type(F32, []))],
        [scalar_vi("c_out", BOOL), seq_vi("seq_out", I64), opt_vi("opt_out", ir.tensor_type(F32, []))],
        name="body")
    g = graph([node("SequenceEmpty", [], ["empty"], dtype=I64),
               node("Optional", [], ["none"], type=ir.tensor_type(F32, [])),
               node("Loop", ["M", "", "empty", "none"], ["seq", "opt"], body=body)],
              [vi("M", I64, [])], [seq_vi("seq", I64), opt_vi("opt", ir.tensor_type(F32, []))])
    seq, opt = session(model(g, 16)).run(None, {"M": np.int64(3)})
    assert [int(v) for v in seq] == [0, 1, 2] and opt is None


def test_loop_scan_output_that_changes_shape_is_an_error():
    # scan output = Unsqueeze of a growing sequence's length? simpler: Slice x[:i]
    body = graph(
        [node("Unsqueeze", ["i", "zero"], ["end"]), node("Slice", ["x", "zero", "end"], ["part"]),
         node("Identity", ["c_in"], ["c_out"])],
        [scalar_vi("i", I64), scalar_vi("c_in", BOOL)], [scalar_vi("c_out", BOOL), vi("part", F32, [None])],
        name="body", initializer=[const("zero", np.array([0], dtype=np.int64))])
    g = graph([node("Loop", ["M", ""], ["parts"], body=body)], [vi("M", I64, []), vi("x", F32, [4])],
              [vi("parts", F32, [None, None])])
    sess = session(model(g))
    with pytest.raises(EvaluationError, match="changes shape"):
        sess.run(None, {"M": np.int64(3), "x": np.arange(4, dtype=np.float32)})


# ==============================================================================================
# If
# ==============================================================================================
def if_model(opset, then_out, else_out, then_nodes, else_nodes, out_vi, init=()):
    then_g = graph(then_nodes, [], [then_out], name="then")
    else_g = graph(else_nodes, [], [else_out], name="else")
    g = graph([node("If", ["cond"], [out_vi.name], then_branch=then_g, else_branch=else_g)],
              [vi("cond", BOOL, [])], [out_vi], initializer=init)
    return model(g, opset)


@pytest.mark.parametrize("opset", [9, 11, 21])
def test_if_chooses_a_branch_that_reads_outer_values(opset):
    init = [const("a", np.array([1, 2], dtype=np.float32)), const("b", np.array([10, 20, 30], dtype=np.float32))]
    m = if_model(opset, vi("t", F32, [None]), vi("e", F32, [None]),
                 [node("Identity", ["a"], ["t"])], [node("Identity", ["b"], ["e"])], vi("y", F32, [None]), init)
    sess = session(m)
    assert sess.run(None, {"cond": np.bool_(True)})[0].tolist() == [1, 2]
    assert sess.run(None, {"cond": np.bool_(False)})[0].tolist() == [10, 20, 30]  # shapes may differ (11+)


def test_if_with_sequence_and_optional_outputs():
    m = if_model(16, seq_vi("t"), seq_vi("e"),
                 [node("SequenceConstruct", ["a", "a"], ["t"])], [node("SequenceEmpty", [], ["e"])], seq_vi("y"),
                 [const("a", np.array([1.0], dtype=np.float32))])
    sess = session(m)
    got = sess.run(None, {"cond": np.bool_(True)})[0]
    assert isinstance(got, list) and len(got) == 2
    assert sess.run(None, {"cond": np.bool_(False)})[0] == []
    t = ir.tensor_type(F32, [1])
    m = if_model(16, opt_vi("t", t), opt_vi("e", t), [node("Optional", ["a"], ["t"])],
                 [node("Optional", [], ["e"], type=t)], opt_vi("y", t), [const("a", np.array([1.0], dtype=np.float32))])
    sess = session(m)
    assert sess.run(None, {"cond": np.bool_(True)})[0].tolist() == [1.0]
    assert sess.run(None, {"cond": np.bool_(False)})[0] is None


def test_nested_subgraphs_see_every_enclosing_scope():
    # Loop body holds an If whose branch reads 'a' from the top graph and 'x_in' from the body
    then_g = graph([node("Add", ["x_in", "a"], ["t"])], [], [vi("t", F32, [])], name="then")
    else_g = graph([node("Sub", ["x_in", "a"], ["e"])], [], [vi("e", F32, [])], name="else")
    body = graph([node("If", ["c_in"], ["x_out"], then_branch=then_g, else_branch=else_g),
                  node("Identity", ["c_in"], ["c_out"])],
                 [scalar_vi("i", I64), scalar_vi("c_in", BOOL), scalar_vi("x_in")],
                 [scalar_vi("c_out", BOOL), scalar_vi("x_out")], name="body")
    g = graph([node("Loop", ["M", "cond", "x0"], ["x"], body=body)],
              [vi("M", I64, []), vi("cond", BOOL, []), vi("x0", F32, [])], [vi("x", F32, [])],
              initializer=[const("a", np.float32(2.5))])
    sess = session(model(g))
    assert float(sess.run(None, {"M": np.int64(3), "cond": np.bool_(True), "x0": np.float32(1)})[0]) == 8.5


# ==============================================================================================
# Scan
# ==============================================================================================
def sum_body(feature_shape):
    return graph([node("Add", ["s_in", "x_t"], ["s_out"]), node("Identity", ["s_out"], ["y_t"])],
                 [vi("s_in", F32, feature_shape), vi("x_t", F32, feature_shape)],
                 [vi("s_out", F32, feature_shape), vi("y_t", F32, feature_shape)], name="body")


def test_scan8_batches_with_sequence_lens_and_reverse_direction():
    g = graph([node("Scan", ["lens", "s0", "x"], ["s", "y"], body=sum_body([2]), num_scan_inputs=1,
                    directions=[1])],
              [vi("lens", I64, [2]), vi("s0", F32, [2, 2]), vi("x", F32, [2, 3, 2])],
              [vi("s", F32, [2, 2]), vi("y", F32, [2, 3, 2])])
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    s0 = np.array([[0, 0], [100, 100]], dtype=np.float32)
    s, y = session(model(g, 8)).run(None, {"lens": np.array([3, 1], dtype=np.int64), "s0": s0, "x": x})
    # batch 0: all 3 steps, last to first; batch 1: only step 0, the rest padded with zeros
    assert s.tolist() == [[6, 9], [106, 107]]
    assert y.tolist() == [[[4, 5], [6, 8], [6, 9]], [[106, 107], [0, 0], [0, 0]]]
    s, y = session(model(g, 8)).run(None, {"lens": np.array([2, 3], dtype=np.int64), "s0": s0, "x": x})
    assert s.tolist() == [[2, 4], [100 + 6 + 8 + 10, 100 + 7 + 9 + 11]]
    assert y[0].tolist() == [[2, 3], [2, 4], [0, 0]]


def test_scan8_without_sequence_lens():
    g = graph([node("Scan", ["", "s0", "x"], ["s", "y"], body=sum_body([2]), num_scan_inputs=1)],
              [vi("s0", F32, [2, 2]), vi("x", F32, [2, 3, 2])], [vi("s", F32, [2, 2]), vi("y", F32, [2, 3, 2])])
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    s, y = session(model(g, 8)).run(None, {"s0": np.zeros((2, 2), np.float32), "x": x})
    np.testing.assert_array_equal(s, x.sum(axis=1))
    np.testing.assert_array_equal(y, np.cumsum(x, axis=1))


@pytest.mark.parametrize("opset,out_axis", [(9, 1), (11, 1), (11, -1), (16, 1), (25, -1)])
def test_scan_axes_and_directions(opset, out_axis):
    g = graph([node("Scan", ["s0", "x"], ["s", "y"], body=sum_body([2]), num_scan_inputs=1,
                    scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[out_axis],
                    scan_output_directions=[1])],
              [vi("s0", F32, [2]), vi("x", F32, [2, 3])], [vi("s", F32, [2]), vi("y", F32, [2, 3])])
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    s, y = session(model(g, opset)).run(None, {"s0": np.zeros(2, np.float32), "x": x})
    # columns visited 2, 1, 0: states [3,6], [5,11], [6,15]; prepended, then laid along axis 1
    assert s.tolist() == [6, 15]
    assert y.tolist() == [[6, 5, 3], [15, 11, 6]]


def test_scan9_rejects_negative_axes():
    g = graph([node("Scan", ["s0", "x"], ["s", "y"], body=sum_body([2]), num_scan_inputs=1, scan_input_axes=[-1])],
              [vi("s0", F32, [2]), vi("x", F32, [2, 3])], [vi("s", F32, [2]), vi("y", F32, [3, 2])])
    with pytest.raises(EvaluationError, match="negative"):
        session(model(g, 9), validate=False)


def test_scan_two_inputs_zip_and_outer_scope():
    # y_t = a_t * b_t + k  (k from the outer graph); no state variables
    body = graph([node("Mul", ["a_t", "b_t"], ["p"]), node("Add", ["p", "k"], ["y_t"])],
                 [vi("a_t", F32, []), vi("b_t", F32, [])], [vi("y_t", F32, [])], name="body")
    g = graph([node("Scan", ["a", "b"], ["y"], body=body, num_scan_inputs=2, scan_input_directions=[0, 1])],
              [vi("a", F32, [3]), vi("b", F32, [3])], [vi("y", F32, [3])], initializer=[const("k", np.float32(0.5))])
    (y,) = session(model(g, 11)).run(None, {"a": np.array([1, 2, 3], np.float32), "b": np.array([10, 20, 30], np.float32)})
    assert y.tolist() == [30.5, 40.5, 30.5]


def test_scan_over_an_empty_axis_returns_states_and_empty_outputs():
    g = graph([node("Scan", ["s0", "x"], ["s", "y"], body=sum_body([2]), num_scan_inputs=1)],
              [vi("s0", F32, [2]), vi("x", F32, [None, 2])], [vi("s", F32, [2]), vi("y", F32, [None, 2])])
    s, y = session(model(g, 11)).run(None, {"s0": np.ones(2, np.float32), "x": np.zeros((0, 2), np.float32)})
    assert s.tolist() == [1, 1] and y.shape == (0, 2) and y.dtype == np.float32


# ==============================================================================================
# Sequences
# ==============================================================================================
def seq_model(nodes, inputs, outputs, opset=21, init=()):
    return model(graph(nodes, inputs, outputs, initializer=init), opset)


def arr(*v, dtype=np.float32):
    return np.array(v, dtype=dtype)


def test_sequence_positions_insert_at_erase_negative_and_default():
    nodes = [node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             node("SequenceInsert", ["s", "d", "p_ins"], ["s1"]),      # insert before position
             node("SequenceErase", ["s1", "p_er"], ["s2"]),
             node("SequenceErase", ["s2"], ["s3"]),                    # default: the last
             node("SequenceAt", ["s3", "p_at"], ["t"]),
             node("SequenceLength", ["s3"], ["n"])]
    inputs = [vi(n, F32, [1]) for n in "abcd"] + [vi(p, I64, []) for p in ("p_ins", "p_er", "p_at")]
    m = seq_model(nodes, inputs, [seq_vi("s3", F32, [1]), vi("t", F32, [1]), vi("n", I64, [])])
    feed = {"a": arr(1), "b": arr(2), "c": arr(3), "d": arr(4)}
    # [1,2,3] -insert 4 at -1-> [1,2,4,3] -erase -3-> [1,4,3] -erase last-> [1,4]; at -1 -> 4
    s3, t, n = session(m).run(None, {**feed, "p_ins": np.int64(-1), "p_er": np.int64(-3), "p_at": np.int64(-1)})
    assert [float(v[0]) for v in s3] == [1, 4] and t.tolist() == [4] and int(n) == 2 and n.dtype == np.int64
    # insert at the length appends; erase 0
    s3, t, n = session(m).run(None, {**feed, "p_ins": np.int64(3), "p_er": np.int64(0), "p_at": np.int64(0)})
    assert [float(v[0]) for v in s3] == [2, 3] and t.tolist() == [2]
    with pytest.raises(EvaluationError, match="out of range"):
        session(m).run(None, {**feed, "p_ins": np.int64(5), "p_er": np.int64(0), "p_at": np.int64(0)})
    with pytest.raises(EvaluationError, match="out of range"):
        session(m).run(None, {**feed, "p_ins": np.int64(0), "p_er": np.int64(0), "p_at": np.int64(2)})


def test_sequence_inputs_are_not_modified():
    nodes = [node("SequenceConstruct", ["a", "b"], ["s"]), node("SequenceInsert", ["s", "a"], ["s1"]),
             node("SequenceErase", ["s"], ["s2"])]
    m = seq_model(nodes, [vi("a", F32, [1]), vi("b", F32, [1])], [seq_vi("s"), seq_vi("s1"), seq_vi("s2")])
    s, s1, s2 = session(m).run(None, {"a": arr(1), "b": arr(2)})
    assert (len(s), len(s1), len(s2)) == (2, 3, 1)


def test_sequence_construct_rejects_mixed_types_and_empty_sequence_length_is_zero():
    m = seq_model([node("SequenceEmpty", [], ["e"], dtype=I64), node("SequenceLength", ["e"], ["n"])], [],
                  [vi("n", I64, [])])
    assert int(session(m).run(None, {})[0]) == 0
    m = seq_model([node("SequenceConstruct", ["a", "b"], ["s"])], [vi("a", F32, [1]), vi("b", I64, [1])],
                  [seq_vi("s")])
    with pytest.raises(EvaluationError, match="one element type"):
        session(m, validate=False).run(None, {"a": arr(1), "b": arr(2, dtype=np.int64)})


@pytest.mark.parametrize("opset", [11, 24])
def test_split_to_sequence_forms(opset):
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    nodes = [node("SplitToSequence", ["x", "k"], ["s1"], axis=-1),
             node("SplitToSequence", ["x", "sizes"], ["s2"], axis=1, keepdims=0),   # keepdims ignored
             node("SplitToSequence", ["x"], ["s3"], axis=0, keepdims=0)]
    m = seq_model(nodes, [vi("x", F32, [2, 7]), vi("k", I64, []), vi("sizes", I64, [2])],
                  [seq_vi("s1"), seq_vi("s2"), seq_vi("s3")], opset)
    s1, s2, s3 = session(m).run(None, {"x": x, "k": np.int64(3), "sizes": np.array([5, 2], dtype=np.int64)})
    assert [p.shape for p in s1] == [(2, 3), (2, 3), (2, 1)]
    np.testing.assert_array_equal(np.concatenate(s1, axis=1), x)
    assert [p.shape for p in s2] == [(2, 5), (2, 2)] and s2[1].tolist() == [[5, 6], [12, 13]]
    assert [p.shape for p in s3] == [(7,), (7,)] and s3[1].tolist() == x[1].tolist()
    with pytest.raises(EvaluationError, match="sum to"):
        session(m).run(None, {"x": x, "k": np.int64(3), "sizes": np.array([5, 3], dtype=np.int64)})


def test_concat_from_sequence_new_axis():
    nodes = [node("SplitToSequence", ["x"], ["s"], axis=0),
             node("ConcatFromSequence", ["s"], ["c"], axis=1),
             node("ConcatFromSequence", ["s"], ["st"], axis=-1, new_axis=1)]
    m = seq_model(nodes, [vi("x", F32, [3, 2])], [vi("c", F32, [None, None]), vi("st", F32, [None, None, None])])
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    c, st = session(m).run(None, {"x": x})
    assert c.tolist() == [[0, 1, 2, 3, 4, 5]]              # 3 parts [1,2] joined on axis 1
    assert st.shape == (1, 2, 3) and np.array_equal(st[0], x.T)   # stacked on a new last axis


def test_concat_from_empty_sequence_is_an_error():
    m = seq_model([node("SequenceEmpty", [], ["e"]), node("ConcatFromSequence", ["e"], ["c"], axis=0)], [],
                  [vi("c", F32, [None])])
    with pytest.raises(EvaluationError, match="empty"):
        session(m).run(None, {})


def test_sequence_map_multiple_outputs_extra_inputs_and_outer_scope():
    # body(x, k) -> (x + k + off, Shape(x)); x from the sequence, k a tensor, off from the outer scope
    body = graph([node("Add", ["x_i", "k_i"], ["xk"]), node("Add", ["xk", "off"], ["y"]), node("Shape", ["x_i"], ["shp"])],
                 [vi("x_i", F32, [None]), vi("k_i", F32, [])], [vi("y", F32, [None]), vi("shp", I64, [1])], name="body")
    nodes = [node("SequenceConstruct", ["a", "b"], ["s"]), node("SequenceMap", ["s", "k"], ["ys", "shapes"], body=body)]
    m = seq_model(nodes, [vi("a", F32, [2]), vi("b", F32, [3]), vi("k", F32, [])],
                  [seq_vi("ys", F32, [None]), seq_vi("shapes", I64, [1])], opset=17,
                  init=[const("off", np.float32(100))])
    ys, shapes = session(m).run(None, {"a": arr(1, 2), "b": arr(3, 4, 5), "k": np.float32(10)})
    assert [y.tolist() for y in ys] == [[111, 112], [113, 114, 115]]
    assert [s.tolist() for s in shapes] == [[2], [3]]


# ==============================================================================================
# Optionals
# ==============================================================================================
@pytest.mark.parametrize("opset", [15, 18, 28])
def test_optional_of_a_tensor_and_an_empty_optional(opset):
    t = ir.tensor_type(F32, [2])
    nodes = [node("Optional", ["x"], ["full"]), node("Optional", [], ["empty"], type=t),
             node("OptionalHasElement", ["full"], ["h1"]), node("OptionalHasElement", ["empty"], ["h2"]),
             node("OptionalGetElement", ["full"], ["g"])]
    m = seq_model(nodes, [vi("x", F32, [2])], [vi("h1", BOOL, []), vi("h2", BOOL, []), vi("g", F32, [2]),
                                              opt_vi("empty", t)], opset)
    h1, h2, g, empty = session(m).run(None, {"x": arr(1, 2)})
    assert h1.dtype == np.bool_ and h1.shape == () and bool(h1) and not bool(h2)
    assert g.tolist() == [1, 2] and empty is None


def test_optional_get_element_of_an_empty_optional_is_an_error():
    t = ir.tensor_type(F32, [2])
    m = seq_model([node("Optional", [], ["e"], type=t), node("OptionalGetElement", ["e"], ["g"])], [],
                  [vi("g", F32, [2])], 18)
    with pytest.raises(EvaluationError, match="empty"):
        session(m).run(None, {})


def test_optional_has_element_18_on_a_plain_tensor_sequence_and_a_missing_input():
    nodes = [node("SequenceConstruct", ["x"], ["s"]), node("OptionalHasElement", ["x"], ["h1"]),
             node("OptionalHasElement", ["s"], ["h2"]), node("OptionalHasElement", [""], ["h3"]),
             node("OptionalGetElement", ["s"], ["g"])]
    m = seq_model(nodes, [vi("x", F32, [2])], [vi("h1", BOOL, []), vi("h2", BOOL, []), vi("h3", BOOL, []),
                                              seq_vi("g", F32, [2])], 18)
    h1, h2, h3, g = session(m).run(None, {"x": arr(1, 2)})
    assert (bool(h1), bool(h2), bool(h3)) == (True, True, False) and len(g) == 1
