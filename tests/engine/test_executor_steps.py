"""The executor's steps (issue 42): the run loop reads named fields, layouts are owned by their
plan (a replaced kernel tells the plans that run it, no class-global counter), and the per-node
fallback plans a node with the fallback backend's own planner (no planner changes its backend)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from onnxkit import InferenceSession, ir
from onnxkit.errors import LimitExceeded, UnsupportedOperatorError
from onnxkit.limits import Limits
from onnxkit.runtime import loop, plan
from onnxkit.runtime.optimizer import specialize
from onnxkit.runtime.plan import Step

ROOT = Path(__file__).resolve().parents[2]
T = ir.tensor_type


def _model(nodes, inputs, outputs, initializer=(), functions=(), extra_opsets=(), opset=21):
    g = ir.Graph(node=nodes, name="g", input=inputs, output=outputs, initializer=list(initializer))
    m = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", opset), *extra_opsets], graph=g)
    m.functions = list(functions)
    return m


def _chain():
    """y = (x - c) * x - x: Sub, Mul, Sub over float32[n] (the operand order shows)."""
    f = T(1, ["n"])
    nodes = [ir.Node(["x", "c"], ["a"], op_type="Sub", name="sub1"), ir.Node(["a", "x"], ["b"], op_type="Mul", name="mul"),
             ir.Node(["b", "x"], ["y"], op_type="Sub", name="sub2")]
    c = ir.Tensor.from_numpy(np.array([1.0], np.float32), "c")
    return _model(nodes, [ir.ValueInfo("x", f)], [ir.ValueInfo("y", f)], [c])


def _steps_kept():
    """Session options keeping the chain's three nodes three steps (no Elementwise region)."""
    from onnxkit import SessionOptions

    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "elementwise")
    return so


# -- named fields ---------------------------------------------------------------------------------

def test_the_loop_reads_laid_steps_by_name_never_by_position():
    tree = ast.parse((ROOT / "onnxkit/runtime/loop.py").read_text(encoding="utf-8"))
    # the only positional reads: a step's input slots and output names while it is laid out
    by_position = [ast.unparse(n) for n in ast.walk(tree)
                   if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and type(n.slice.value) is int
                   and not (isinstance(n.value, ast.Name) and n.value.id in ("ins", "outs"))]
    assert by_position == [], f"loop.py reads tuples by position: {by_position}"
    fields = loop.LaidStep._fields
    assert fields == ("call", "arity", "in0", "in1", "ins", "out", "multi", "kill", "special", "step", "release")
    # every loop over a layout's steps unpacks each into one name per field
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For) and "fast" in ast.unparse(n.iter)]
    assert {n.lineno for n in loops} and all(
        isinstance(n.target, ast.Tuple) and len(n.target.elts) == len(fields)
        and all(isinstance(e, ast.Name) for e in n.target.elts) for n in loops), [ast.unparse(n.target) for n in loops]


def test_laid_steps_name_what_the_loop_calls_and_where_it_reads_and_writes():
    sess = InferenceSession(_chain(), _steps_kept())
    x = np.array([3.0, -2.0], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], (x - 1) * x - x)
    p = sess.plan
    layout = p._layout(0, p.constants, p.steps)
    laid = layout.laid_steps()
    assert [s.step for s in laid] == p.steps and all(len(t) == len(loop.LaidStep._fields) for t in layout.fast)
    for s in laid:
        step = s.step
        assert s.call is step.fn and bool(s.special) == (step.guard is not None or bool(step.scope))
        assert s.arity == len(step.inputs) == 2
        assert s.ins == tuple(layout.slots[n] for n in step.inputs) and (s.in0, s.in1) == s.ins
        assert s.out == layout.slots[step.outputs[0]] and s.multi == ((0, s.out),)
        assert set(s.kill) == {layout.slots[n] for n in step.free}


def test_step_has_no_class_wide_generation_counter():
    assert not hasattr(Step, "generation") and "generation" not in Step.__slots__
    for path in (ROOT / "onnxkit").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and n.attr in ("generation", "origin_generation"):
                pytest.fail(f"{path.relative_to(ROOT)}:{n.lineno}: {ast.unparse(n)}")


# -- layouts owned by the plan ---------------------------------------------------------------------

def _spy(step, calls: list, tag: str):
    real = step.fn

    def spy(*args):
        calls.append(tag)
        return real(*args)

    step.fn = spy
    return real


def test_a_replaced_kernel_is_seen_by_its_plan_and_no_other_plan_lays_out_again():
    x = np.array([3.0, -2.0], np.float32)
    a, b = InferenceSession(_chain(), _steps_kept()).plan, InferenceSession(_chain(), _steps_kept()).plan
    want = a.run([x])[0]
    b.run([x])
    kept = b._layouts[0]
    calls: list = []
    step = next(s for s in a.steps if s.node.name == "mul")
    _spy(step, calls, "mul")
    np.testing.assert_array_equal(a.run([x])[0], want)
    assert calls == ["mul"]
    b.run([x])
    assert b._layouts[0] is kept  # b runs none of a's steps: its layout stands
    step.fn = lambda *args: np.zeros(2, np.float32)  # and again: the plan is told each time
    assert a.run([x])[0].tolist() == (-x).tolist()


def _shape_chain():
    """y = Reshape(x, Concat(Shape(x)[0:1], [-1])) * 3: its Shape arithmetic folds in a specialized plan."""
    f = T(1, ["n", "m"])
    nodes = [ir.Node(["x"], ["s"], op_type="Shape", name="shape"),
             ir.Node(["s", "zero", "one", "zero"], ["n0"], op_type="Slice", name="slice"),
             ir.Node(["n0", "minus1"], ["target"], op_type="Concat", name="concat",
                     attribute=[ir.Attribute.make("axis", 0)]),
             ir.Node(["x", "target"], ["r"], op_type="Reshape", name="reshape"),
             ir.Node(["r", "three"], ["y"], op_type="Mul", name="mul")]
    inits = [ir.Tensor.from_numpy(np.array([0], np.int64), "zero"), ir.Tensor.from_numpy(np.array([1], np.int64), "one"),
             ir.Tensor.from_numpy(np.array([-1], np.int64), "minus1"),
             ir.Tensor.from_numpy(np.array(3.0, np.float32), "three")]
    return _model(nodes, [ir.ValueInfo("x", f)], [ir.ValueInfo("y", T(1, None))], inits)


def test_a_replaced_kernel_is_seen_by_a_specialized_plan_made_from_its_plan():
    sess = InferenceSession(_shape_chain())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(3):
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x * 3)
    special, recording = sess._specializer.plan_for(specialize.signature([x]))
    assert not recording and [s.node.op_type for s in special.steps] == ["Reshape", "Mul"]
    assert special._layouts[0] is not None  # laid out before the kernel is replaced
    calls: list = []
    base_mul = next(s for s in sess.plan.steps if s.node.op_type == "Mul")
    _spy(base_mul, calls, "mul")
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x * 3)   # the specialized plan runs
    np.testing.assert_array_equal(special.run([x])[0], x * 3)
    np.testing.assert_array_equal(sess.plan.run([x])[0], x * 3)          # and the plan itself
    assert calls == ["mul"] * 3
    spec_mul = next(s for s in special.steps if s.node.op_type == "Mul")
    assert spec_mul is not base_mul and spec_mul.fn is base_mul.fn


def test_the_plan_folding_defaults_runs_a_kernel_assigned_to_the_plan_s_step():
    """d is an input with a default (an initializer): the plan used while it is not fed folds
    Mul(d, d) and runs copies of the other steps, which take a kernel assigned to the plan's."""
    f = T(1, [2])
    nodes = [ir.Node(["d", "d"], ["dd"], op_type="Mul", name="dd"), ir.Node(["x", "dd"], ["y"], op_type="Add", name="add")]
    d = ir.Tensor.from_numpy(np.array([2.0, 3.0], np.float32), "d")
    sess = InferenceSession(_model(nodes, [ir.ValueInfo("x", f), ir.ValueInfo("d", f)], [ir.ValueInfo("y", f)], [d]))
    x = np.array([1.0, 1.0], np.float32)
    assert sess.run(None, {"x": x})[0].tolist() == [5.0, 10.0]
    assert sess.plan.folded is not None and len(sess.plan.folded[1]) == 1
    calls: list = []
    _spy(next(s for s in sess.plan.steps if s.node.name == "add"), calls, "add")
    assert sess.run(None, {"x": x})[0].tolist() == [5.0, 10.0]
    assert calls == ["add"]


def test_a_copy_runs_its_source_s_kernel_until_given_its_own():
    node = ir.Node(["x"], ["y"], op_type="Neg")
    step = Step(np.negative, ["x"], ["y"], node, False)
    follows, own = step.copy(), step.copy()
    own.fn = np.abs
    again = follows.copy()
    step.fn = np.exp
    assert (follows.fn, again.fn, own.fn) == (np.exp, np.exp, np.abs)


# -- the fallback: a planner of its own ---------------------------------------------------------

torch = pytest.importorskip("torch")


@pytest.fixture
def planners(monkeypatch):
    """Spies on every Planner: (planner, backend name) of each node it plans, and each
    assignment to ``backend_name``/``backend`` after the planner was made."""
    seen = {"nodes": [], "swaps": []}
    real_node, real_setattr = plan.Planner.compile_node, object.__setattr__

    def compile_node(self, node, *args, **kwargs):
        seen["nodes"].append((self, self.backend_name, node.name))
        return real_node(self, node, *args, **kwargs)

    def setattr_(self, name, value):
        if name in ("backend_name", "backend") and name in self.__dict__:
            seen["swaps"].append((name, self.__dict__[name], value))
        real_setattr(self, name, value)

    monkeypatch.setattr(plan.Planner, "compile_node", compile_node)
    monkeypatch.setattr(plan.Planner, "__setattr__", setattr_)
    return seen


def _uint32_then_float():
    """y = Relu(Cast<float>(a + b)), a and b uint32: Add and Cast are planned on cpu, Relu on gpu."""
    nodes = [ir.Node(["a", "b"], ["s"], op_type="Add", name="add"),
             ir.Node(["s"], ["f"], op_type="Cast", name="cast", attribute=[ir.Attribute.make("to", 1)]),
             ir.Node(["f"], ["y"], op_type="Relu", name="relu")]
    return _model(nodes, [ir.ValueInfo("a", T(12, [3])), ir.ValueInfo("b", T(12, [3]))], [ir.ValueInfo("y", T(1, [3]))])


def test_the_fallback_plans_with_a_planner_of_its_own_and_no_planner_changes_backend(planners):
    sess = InferenceSession(_uint32_then_float(), "gpu")
    assert [(fb.node, fb.runs_on) for fb in sess.fallbacks] == [("add", "cpu"), ("cast", "cpu")]
    assert planners["swaps"] == []
    by_planner: dict = {}
    for p, name, node in planners["nodes"]:
        by_planner.setdefault(id(p), (p, set(), []))[1].add(name)
        by_planner[id(p)][2].append(node)
    kinds = sorted((sorted(names), nodes) for _, names, nodes in by_planner.values())
    assert kinds == [(["cpu"], ["add", "cast"]), (["gpu"], ["add", "cast", "relu"])]
    assert all(p.backend_name == names.pop() for p, names, _ in by_planner.values())
    (y,) = sess.run(None, {"a": np.array([1, 2, 4000000000], np.uint32), "b": np.array([1, 9, 4000000000], np.uint32)})
    np.testing.assert_array_equal(y, np.array([2, 11, 3705032704], np.float32))


def _uint32_loop(body_nodes, wrap_in_if=False, limits=None, extra_opsets=()):
    """A Loop over a uint32 state (gpu does not compute uint32: the Loop is planned on cpu) whose body
    runs ``body_nodes`` (s -> t) then ``s_out = t``; its result cast to float; the Loop inside an
    If's then-branch (planned on gpu) when ``wrap_in_if``."""
    u = T(12, [2])
    body = ir.Graph(node=[*body_nodes, ir.Node(["t"], ["s_out"], op_type="Identity"),
                          ir.Node(["c"], ["c_out"], op_type="Identity")], name="body",
                    input=[ir.ValueInfo("i", T(7, [])), ir.ValueInfo("c", T(9, [])), ir.ValueInfo("s", u)],
                    output=[ir.ValueInfo("c_out", T(9, [])), ir.ValueInfo("s_out", u)])
    inner = [ir.Node(["M", "", "s0"], ["s_final"], op_type="Loop", name="loop", attribute=[ir.Attribute.make("body", body)]),
             ir.Node(["s_final"], ["f"], op_type="Cast", name="cast", attribute=[ir.Attribute.make("to", 1)])]
    if wrap_in_if:
        then = ir.Graph(node=inner, name="then", output=[ir.ValueInfo("f", T(1, [2]))])
        other = ir.Graph(node=[ir.Node(["z"], ["g"], op_type="Identity")], name="else",
                         output=[ir.ValueInfo("g", T(1, [2]))])
        nodes = [ir.Node(["cond"], ["f"], op_type="If", name="if",
                         attribute=[ir.Attribute.make("then_branch", then), ir.Attribute.make("else_branch", other)])]
    else:
        nodes = inner
    nodes = [*nodes, ir.Node(["f"], ["y"], op_type="Relu", name="relu")]
    inputs = [ir.ValueInfo("M", T(7, [])), ir.ValueInfo("s0", u), ir.ValueInfo("cond", T(9, [])),
              ir.ValueInfo("z", T(1, [2]))]
    m = _model(nodes, inputs, [ir.ValueInfo("y", T(1, [2]))], extra_opsets=extra_opsets)
    return InferenceSession(m, "gpu", limits=limits, validate=False)


FEED = {"M": np.array(3, np.int64), "s0": np.array([1, 2], np.uint32), "cond": np.array(True), "z": np.zeros(2, np.float32)}


def test_an_unsupported_operator_inside_a_node_planned_on_the_fallback_is_reported_before_running():
    with pytest.raises(UnsupportedOperatorError, match="Nothing"):
        _uint32_loop([ir.Node(["s"], ["t"], op_type="Nothing", domain="com.nowhere")],
                     extra_opsets=[ir.OperatorSetId("com.nowhere", 1)])


def _double():
    return ir.Function(name="Double", domain="com.example", input=["v"], output=["w"],
                       node=[ir.Node(["v", "v"], ["w"], op_type="Add")], opset_import=[ir.OperatorSetId("", 21)])


def test_function_calls_planned_on_the_fallback_count_toward_the_session_s_limit():
    """Two calls of a local function in the Loop's body (planned on cpu), one more on gpu after it."""
    body = [ir.Node(["s"], ["h"], op_type="Double", domain="com.example"),
            ir.Node(["h"], ["t"], op_type="Double", domain="com.example")]
    opsets = [ir.OperatorSetId("com.example", 1)]
    with pytest.raises(LimitExceeded, match="max_function_calls"):
        _uint32_loop_with_call_after(body, opsets, Limits(max_function_calls=2))
    sess = _uint32_loop_with_call_after(body, opsets, Limits(max_function_calls=3))
    assert [fb.node for fb in sess.fallbacks] == ["loop", "cast"]
    feed = {"M": FEED["M"], "s0": FEED["s0"]}
    np.testing.assert_array_equal(sess.run(None, feed)[0], [128.0, 256.0])  # s * 4**3, then doubled


def _uint32_loop_with_call_after(body, opsets, limits):
    u = T(12, [2])
    graph_body = ir.Graph(node=[*body, ir.Node(["t"], ["s_out"], op_type="Identity"),
                                ir.Node(["c"], ["c_out"], op_type="Identity")], name="body",
                          input=[ir.ValueInfo("i", T(7, [])), ir.ValueInfo("c", T(9, [])), ir.ValueInfo("s", u)],
                          output=[ir.ValueInfo("c_out", T(9, [])), ir.ValueInfo("s_out", u)])
    nodes = [ir.Node(["M", "", "s0"], ["s_final"], op_type="Loop", name="loop",
                     attribute=[ir.Attribute.make("body", graph_body)]),
             ir.Node(["s_final"], ["f0"], op_type="Cast", name="cast", attribute=[ir.Attribute.make("to", 1)]),
             ir.Node(["f0"], ["y"], op_type="Double", domain="com.example", name="after")]
    m = _model(nodes, [ir.ValueInfo("M", T(7, [])), ir.ValueInfo("s0", u)], [ir.ValueInfo("y", T(1, [2]))],
               functions=[_double()], extra_opsets=opsets)
    return InferenceSession(m, "gpu", limits=limits, validate=False)


def test_a_node_planned_on_the_fallback_inside_a_subgraph_counts_its_nesting_depth():
    """If (gpu) > then-branch > Loop (cpu: uint32) > body: the body is at depth 2 on either backend."""
    body = [ir.Node(["s", "s"], ["t"], op_type="Add")]
    with pytest.raises(LimitExceeded, match="max_subgraph_depth"):
        _uint32_loop(body, wrap_in_if=True, limits=Limits(max_subgraph_depth=1))
    sess = _uint32_loop(body, wrap_in_if=True, limits=Limits(max_subgraph_depth=2))
    assert [fb.node for fb in sess.fallbacks] == ["loop", "cast"]
    np.testing.assert_array_equal(sess.run(None, FEED)[0], [8.0, 16.0])
