"""If, Loop and Scan, written once (onnxkit_default_domain.kernels.control_flow), on both backends.

On ``gpu`` (torch; its CPU device here) the control-flow nodes and their bodies run on torch, not
on the cpu fallback: each test asserts ``sess.fallbacks`` is empty.  Expected values are
hand-computed.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.errors import EvaluationError, LimitExceeded
from onnxkit.limits import Limits
from onnxkit.runtime import InferenceSession, SessionOptions
from one_node import BACKENDS

pytest.importorskip("torch")
A = ir.Attribute.make
F32, I64, BOOL = 1, 7, 9


def vi(name, elem=F32, shape=None):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def node(op, inputs, outputs, **attrs):
    return ir.Node(inputs, outputs, name=f"{op}_{outputs[0]}", op_type=op, attribute=[A(k, v) for k, v in attrs.items()])


def graph(nodes, inputs, outputs, name="g", initializer=()):
    return ir.Graph(node=nodes, name=name, input=inputs, output=outputs, initializer=list(initializer))


def const(name, value):
    return ir.Tensor.from_numpy(np.asarray(value), name=name)


def session(g, backend, opset=21, **kw):
    sess = InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", opset)], graph=g), backend, **kw)
    assert sess.fallbacks == [], sess.fallbacks  # every node, bodies included, on the session's backend
    return sess


def counting_loop(m_name="M", cond_name="cond"):
    """x_out = x_in + 1; cond_out = x_out < 5; scan outputs x_in and the iteration number."""
    body = graph([node("Add", ["x_in", "one"], ["x_out"]), node("Less", ["x_out", "five"], ["c_out"]),
                  node("Identity", ["x_in"], ["scan"]), node("Identity", ["i"], ["i_out"])],
                 [vi("i", I64, []), vi("c_in", BOOL, []), vi("x_in", F32, [])],
                 [vi("c_out", BOOL, []), vi("x_out", F32, []), vi("scan", F32, []), vi("i_out", I64, [])],
                 name="body", initializer=[const("one", np.float32(1)), const("five", np.float32(5))])
    inputs = [vi("x0", F32, [])] + ([vi(m_name, I64, [])] if m_name else []) + ([vi(cond_name, BOOL, [])] if cond_name else [])
    return graph([node("Loop", [m_name, cond_name, "x0"], ["x_final", "xs", "is"], body=body)], inputs,
                 [vi("x_final", F32, []), vi("xs", F32, [None]), vi("is", I64, [None])])


@pytest.mark.parametrize("backend", BACKENDS)
def test_if_runs_one_branch_on_the_backend(backend):
    then_g = graph([node("Add", ["x", "x"], ["t"])], [], [vi("t", F32, [2])], name="then")
    else_g = graph([node("Neg", ["x"], ["e"])], [], [vi("e", F32, [2])], name="else")
    g = graph([node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
              [vi("c", BOOL, None), vi("x", F32, [2])], [vi("y", F32, [2])])
    sess = session(g, backend)
    x = np.array([1.5, -2.0], np.float32)
    assert sess.run(None, {"c": np.array(True), "x": x})[0].tolist() == [3.0, -4.0]
    assert sess.run(None, {"c": np.array([False]), "x": x})[0].tolist() == [-1.5, 2.0]
    with pytest.raises(EvaluationError, match="exactly one element"):
        sess.run(None, {"c": np.array([True, False]), "x": x})


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_modes_on_the_backend(backend):
    sess = session(counting_loop(), backend)
    x, xs, i_s = sess.run(None, {"x0": np.float32(0), "M": np.int64(10), "cond": np.array(True)})
    assert float(x) == 5.0 and xs.dtype == np.float32 and xs.tolist() == [0, 1, 2, 3, 4]
    assert i_s.dtype == np.int64 and i_s.tolist() == [0, 1, 2, 3, 4]
    x, xs, _ = sess.run(None, {"x0": np.float32(0), "M": np.int64(2), "cond": np.array(True)})
    assert float(x) == 2.0 and xs.tolist() == [0, 1]
    x, xs, i_s = sess.run(None, {"x0": np.float32(0), "M": np.int64(3), "cond": np.array(False)})
    assert float(x) == 0.0 and xs.shape == (0,) and xs.dtype == np.float32 and i_s.dtype == np.int64
    # a trip count only: the body's condition is ignored
    x, xs, _ = session(counting_loop(cond_name=""), backend).run(None, {"x0": np.float32(0), "M": np.int64(7)})
    assert float(x) == 7.0 and xs.tolist() == [0, 1, 2, 3, 4, 5, 6]
    # a condition only: a while loop
    x, _, _ = session(counting_loop(m_name=""), backend).run(None, {"x0": np.float32(1.5), "cond": np.array(True)})
    assert float(x) == 5.5


@pytest.mark.parametrize("backend", BACKENDS)
def test_loop_iteration_limit_and_shape_check_on_the_backend(backend):
    sess = session(counting_loop(cond_name=""), backend, limits=Limits(max_loop_iterations=4))
    assert float(sess.run(None, {"x0": np.float32(0), "M": np.int64(4)})[0]) == 4.0
    with pytest.raises(LimitExceeded) as info:
        sess.run(None, {"x0": np.float32(0), "M": np.int64(5)})
    assert info.value.limit == "max_loop_iterations" and info.value.value == 5
    # a scan output growing with the iteration: x[:i]
    body = graph([node("Unsqueeze", ["i", "zero"], ["end"]), node("Slice", ["x", "zero", "end"], ["part"]),
                  node("Identity", ["c_in"], ["c_out"])],
                 [vi("i", I64, []), vi("c_in", BOOL, [])], [vi("c_out", BOOL, []), vi("part", F32, [None])],
                 name="body", initializer=[const("zero", np.array([0], np.int64))])
    g = graph([node("Loop", ["M", ""], ["parts"], body=body)], [vi("M", I64, []), vi("x", F32, [4])],
              [vi("parts", F32, [None, None])])
    with pytest.raises(EvaluationError, match="changes shape"):
        session(g, backend).run(None, {"M": np.int64(3), "x": np.arange(4, dtype=np.float32)})


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_axes_and_directions_on_the_backend(backend):
    """Running sum over axis 1 of x (2x3), read backwards; the scan output stacked on axis 1 too."""
    body = graph([node("Add", ["s_in", "x_t"], ["s_out"]), node("Identity", ["s_out"], ["y_t"])],
                 [vi("s_in", F32, [2]), vi("x_t", F32, [2])], [vi("s_out", F32, [2]), vi("y_t", F32, [2])], name="body")
    g = graph([node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, scan_input_axes=[-1],
                    scan_input_directions=[1], scan_output_axes=[1], scan_output_directions=[0])],
              [vi("s0", F32, [2]), vi("x", F32, [2, 3])], [vi("s", F32, [2]), vi("y", F32, [2, 3])])
    s, y = session(g, backend).run(None, {"s0": np.zeros(2, np.float32), "x": np.arange(6, dtype=np.float32).reshape(2, 3)})
    assert s.tolist() == [3.0, 12.0]
    assert y.tolist() == [[2.0, 3.0, 3.0], [5.0, 9.0, 12.0]]
    # the output reversed: the last step first
    g.node[0].attribute[-1] = A("scan_output_directions", [1])
    _, y = session(g, backend).run(None, {"s0": np.zeros(2, np.float32), "x": np.arange(6, dtype=np.float32).reshape(2, 3)})
    assert y.tolist() == [[3.0, 3.0, 2.0], [12.0, 9.0, 5.0]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan8_batches_with_sequence_lens_on_the_backend(backend):
    """Scan-8: batch 2, sequences of 3 steps, the second of length 1; unused steps of y are 0."""
    body = graph([node("Add", ["s_in", "x_t"], ["s_out"]), node("Identity", ["s_out"], ["y_t"])],
                 [vi("s_in", F32, [1]), vi("x_t", F32, [1])], [vi("s_out", F32, [1]), vi("y_t", F32, [1])], name="body")
    g = graph([node("Scan", ["lens", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, directions=[0])],
              [vi("lens", I64, [2]), vi("s0", F32, [2, 1]), vi("x", F32, [2, 3, 1])],
              [vi("s", F32, [2, 1]), vi("y", F32, [2, 3, 1])])
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3, 1)
    s, y = session(g, backend, opset=8).run(None, {"lens": np.array([3, 1]), "s0": np.zeros((2, 1), np.float32), "x": x})
    assert s.reshape(-1).tolist() == [6.0, 4.0]
    assert y.reshape(2, 3).tolist() == [[1.0, 3.0, 6.0], [4.0, 0.0, 0.0]]
    with pytest.raises(EvaluationError, match="sequence_lens"):
        session(g, backend, opset=8).run(None, {"lens": np.array([4, 1]), "s0": np.zeros((2, 1), np.float32), "x": x})


def test_gpu_loop_matches_cpu_on_a_float_body():
    pytest.importorskip("torch")
    feeds = {"x0": np.float32(0.25), "M": np.int64(10), "cond": np.array(True)}
    want = session(counting_loop(), "cpu").run(None, feeds)
    got = session(counting_loop(), "gpu").run(None, feeds)
    for w, h in zip(want, got):
        assert w.dtype == h.dtype and w.shape == h.shape
        np.testing.assert_array_equal(w, h)


def test_gpu_if_whose_output_only_the_fallback_reads_keeps_its_scope():
    """If on torch reads x from the enclosing scope; only a uint32 Cast (on the cpu fallback) reads
    its output, so the If's step converts that output itself: its branches still see x."""
    pytest.importorskip("torch")
    then_g = graph([node("Add", ["x", "x"], ["t"])], [], [vi("t", F32, [2])], name="then")
    else_g = graph([node("Neg", ["x"], ["e"])], [], [vi("e", F32, [2])], name="else")
    g = graph([node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
               node("Cast", ["y"], ["z"], to=12)],
              [vi("c", BOOL, []), vi("x", F32, [2])], [vi("z", 12, [2])])
    sess = InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g), "gpu")
    assert [(f.op_type, f.runs_on) for f in sess.fallbacks] == [("Cast", "cpu")]
    (z,) = sess.run(None, {"c": np.array(True), "x": np.array([1.0, 3.0], np.float32)})
    assert z.dtype == np.uint32 and z.tolist() == [2, 6]


# -- a subgraph's reads of enclosing constants fold at planning -------------------------------------
def _branch_reading(name_in, out):
    """A branch computing Slice(name_in, [1], [3]) * 2 (a chain that reads only constants)."""
    return graph([node("Slice", [name_in, "s0", "s1"], ["sl"]), node("Add", ["sl", "sl"], [out])], [], [vi(out, F32, [2])],
                 name=f"br_{out}", initializer=[const("s0", np.array([1])), const("s1", np.array([3]))])


@pytest.mark.parametrize("backend", BACKENDS)
def test_if_branch_chains_over_outer_constants_fold_and_stay_right(backend):
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    g = graph([node("If", ["c"], ["y"], then_branch=_branch_reading("w", "t"),
                    else_branch=graph([node("Neg", ["x"], ["e"])], [], [vi("e", F32, [2])], name="else"))],
              [vi("c", BOOL, None), vi("x", F32, [2])], [vi("y", F32, [2])], initializer=[const("w", w)])
    sess = session(g, backend)
    step = sess.plan.steps[0]
    assert "w" not in step._uses       # the branch no longer reads w at run time: its chain is a constant
    for _ in range(2):
        assert sess.run(None, {"c": np.array(True), "x": np.zeros(2, np.float32)})[0].tolist() == [4.0, 6.0]
    assert sess.run(None, {"c": np.array(False), "x": np.ones(2, np.float32)})[0].tolist() == [-1.0, -1.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_outer_initializer_a_caller_may_override_does_not_fold(backend):
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    g = graph([node("If", ["c"], ["y"], then_branch=_branch_reading("w", "t"), else_branch=_branch_reading("w", "e"))],
              [vi("c", BOOL, None), vi("w", F32, [4])], [vi("y", F32, [2])], initializer=[const("w", w)])
    sess = session(g, backend)
    assert sess.run(None, {"c": np.array(True)})[0].tolist() == [4.0, 6.0]   # the default
    fed = np.array([0.0, 10.0, 20.0, 30.0], np.float32)
    assert sess.run(None, {"c": np.array(True), "w": fed})[0].tolist() == [20.0, 40.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_body_input_shadows_an_outer_constant_of_its_name(backend):
    # the body's own input "w" (a loop-carried value) is what its nodes read, not the outer "w"
    body = graph([node("Identity", ["c_in"], ["c_out"]), node("Add", ["w", "w"], ["w_out"])],
                 [vi("i", I64, []), vi("c_in", BOOL, []), vi("w", F32, [2])], [vi("c_out", BOOL, []), vi("w_out", F32, [2])],
                 name="body")
    g = graph([node("Loop", ["M", "", "x0"], ["x_final"], body=body)], [vi("M", I64, []), vi("x0", F32, [2])],
              [vi("x_final", F32, [2])], initializer=[const("w", np.array([100.0, 100.0], np.float32))])
    sess = InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g), backend,
                            validate=False)
    out = sess.run(None, {"M": np.int64(3), "x0": np.array([1.0, -0.5], np.float32)})[0]
    assert out.tolist() == [8.0, -4.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_branches_fold_over_every_enclosing_graph(backend):
    inner = graph([node("If", ["c"], ["z"], then_branch=_branch_reading("w", "t2"), else_branch=_branch_reading("v", "e2"))],
                  [], [vi("z", F32, [2])], name="mid")
    g = graph([node("If", ["c"], ["y"], then_branch=inner, else_branch=_branch_reading("v", "e"))],
              [vi("c", BOOL, None)], [vi("y", F32, [2])],
              initializer=[const("w", np.array([1.0, 2.0, 3.0, 4.0], np.float32)),
                           const("v", np.array([0.0, -1.0, -2.0, 0.0], np.float32))])
    sess = session(g, backend)
    assert sess.run(None, {"c": np.array(True)})[0].tolist() == [4.0, 6.0]
    assert sess.run(None, {"c": np.array(False)})[0].tolist() == [-2.0, -4.0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("off", ["", "specialize"])
def test_branches_read_the_enclosing_run_of_whichever_plan_ran(backend, off):
    # the top-level plan has two layouts, their slots numbered differently (v = -w computed, or
    # folded while the default w is not fed), and a plan per feed signature unless specialize is
    # off: a branch, nested or not, reads the v and x of the run that holds it, alternating
    inner = graph([node("If", ["c"], ["z"], then_branch=graph([node("Mul", ["v", "x"], ["m"])], [], [vi("m", F32, [4])],
                                                              name="mul"),
                        else_branch=graph([node("Sub", ["v", "x"], ["s"])], [], [vi("s", F32, [4])], name="sub"))],
                  [], [vi("z", F32, [4])], name="mid")
    g = graph([node("Neg", ["w"], ["v"]),
               node("If", ["c"], ["y"], then_branch=inner,
                    else_branch=graph([node("Add", ["v", "x"], ["a"])], [], [vi("a", F32, [4])], name="add"))],
              [vi("c", BOOL, None), vi("x", F32, [4]), vi("w", F32, [4])], [vi("y", F32, [4])],
              initializer=[const("w", np.array([1.0, 2.0, 3.0, 4.0], np.float32))])
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", off)
    sess = InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g), so,
                            backend=backend)
    assert sess.fallbacks == [] and sess.plan.folded is not None
    v0 = -np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    for k in range(3):
        x = np.full(4, k + 1.0, np.float32)
        w = np.array([5.0, -1.0, 0.5, 2.0], np.float32) * (k + 1)
        assert sess.run(None, {"c": np.array(True), "x": x})[0].tolist() == (v0 * x).tolist()
        assert sess.run(None, {"c": np.array([True]), "x": x, "w": w})[0].tolist() == (-w * x).tolist()
        assert sess.run(None, {"c": np.array(False), "x": x, "w": w})[0].tolist() == (x - w).tolist()
        assert sess.run(None, {"c": np.array([False]), "x": x})[0].tolist() == (v0 + x).tolist()
