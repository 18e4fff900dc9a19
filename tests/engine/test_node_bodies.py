"""Which body each node runs, per input-shape key (issue 33 item 4): kernels report it through
``onnxkit.plugin.reports_bodies``; ``onnxkit.runtime.bodies`` collects it from a plan and
``onnxkit run --profile`` prints it.  The cpu Conv's choices follow the rules its module
docstring states (1x1 without pads: ``pointwise``; windows tiling X: ``patches``; an empty
input: ``portable``; a 3x3 on two spatial axes: the compiled ``planes`` / ``winograd`` where the
compiled path is on, else numpy im2col ``columns``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.plugin import (FormalParameter, KernelTable, OperatorSet, OpSchema, TypeConstraint, hookimpl,
                            reports_bodies)
from onnxkit.registry import build_registry
from onnxkit.runtime import InferenceSession
from onnxkit.runtime.bodies import describe, plan_bodies, session_bodies
from onnxkit.runtime.kernel import bodies_of

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
A = ir.Attribute.make


def _conv(ws, attrs=None, relu=False, channels=3):
    w = ir.Tensor.from_numpy(np.ones(ws, np.float32), "w")
    nodes = [ir.Node(["x", "w"], ["c" if relu else "y"], op_type="Conv", name="conv",
                     attribute=[A(k, v) for k, v in (attrs or {}).items()])]
    if relu:
        nodes.append(ir.Node(["c"], ["y"], op_type="Relu", name="relu"))
    g = ir.Graph(node=nodes, name="g", initializer=[w],
                 input=[ir.ValueInfo("x", ir.tensor_type(1, ["N", channels, "H", "W"]))],
                 output=[ir.ValueInfo("y", ir.tensor_type(1, ["N", ws[0], "H2", "W2"]))])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g)


def _run(model, *shapes):
    sess = InferenceSession(model)
    for shape in shapes:
        sess.run(None, {"x": np.ones(shape, np.float32)})
    return sess


def _compiled_on() -> bool:
    from onnxkit_cpu import compiled

    return bool(compiled.enabled())


@pytest.mark.usefixtures("warm_bodies")
def test_the_cpu_conv_reports_its_body_per_input_shape_key():
    sess = _run(_conv((4, 3, 3, 3), {"pads": [1, 1, 1, 1]}), (1, 3, 8, 8), (0, 3, 8, 8))
    [node] = session_bodies(sess)
    assert (node.node, node.op) == ("conv", "Conv")
    square = node.bodies["X[1, 3, 8, 8] float32, W[4, 3, 3, 3] float32"]
    assert square in ({"planes", "winograd"} if _compiled_on() else {"columns"})
    assert node.bodies["X[0, 3, 8, 8] float32, W[4, 3, 3, 3] float32"] == "portable"
    assert len(node.bodies) == 2
    assert describe(sess.plan) == [f"conv (Conv): X[1, 3, 8, 8] float32, W[4, 3, 3, 3] float32 -> {square}",
                                   "conv (Conv): X[0, 3, 8, 8] float32, W[4, 3, 3, 3] float32 -> portable"]


@pytest.mark.usefixtures("first_run_policy")
def test_a_pointwise_and_a_patch_convolution_are_told_apart():
    one = session_bodies(_run(_conv((4, 3, 1, 1)), (2, 3, 5, 5)))
    assert [n.bodies for n in one] == [{"X[2, 3, 5, 5] float32, W[4, 3, 1, 1] float32": "pointwise"}]
    stem = session_bodies(_run(_conv((4, 3, 8, 8), {"strides": [8, 8]}), (1, 3, 16, 16)))
    assert [n.bodies for n in stem] == [{"X[1, 3, 16, 16] float32, W[4, 3, 8, 8] float32": "patches"}]


@pytest.mark.usefixtures("first_run_policy")
def test_a_key_is_listed_once_the_node_has_run_with_it():
    sess = InferenceSession(_conv((4, 3, 1, 1)))
    assert session_bodies(sess) == []
    sess.run(None, {"x": np.ones((1, 3, 2, 2), np.float32)})
    assert len(session_bodies(sess)[0].bodies) == 1


@pytest.mark.usefixtures("first_run_policy")
def test_a_conv_fused_with_its_relu_still_reports():
    sess = _run(_conv((4, 3, 1, 1), relu=True), (1, 3, 4, 4))
    assert [s.node.op_type for s in sess.plan.steps] == ["Conv"]       # the epilogue pass took the Relu
    assert [n.bodies for n in session_bodies(sess)] == [{"X[1, 3, 4, 4] float32, W[4, 3, 1, 1] float32": "pointwise"}]


def test_a_function_that_reports_nothing_or_fails_reads_as_no_bodies():
    def fn(x):
        return x

    assert bodies_of(fn) == {}

    def broken():
        raise RuntimeError("a report never breaks the caller")

    assert bodies_of(reports_bodies(lambda x: x, broken)) == {}


DOMAIN = "org.onnxkit.test.bodies"


def test_a_plugin_kernel_reports_through_the_plugin_surface():
    schema = OpSchema(domain=DOMAIN, name="Pick", since_version=1, inputs=(FormalParameter("x", "T"),),
                      outputs=(FormalParameter("y", "T"),), type_constraints=(TypeConstraint("T", ("tensor(float)",)),),
                      min_input=1, max_input=1, min_output=1, max_output=1)
    table = KernelTable()

    @table.register("Pick", 1, domain=DOMAIN)
    def pick(ctx):
        chosen = {}

        def run(x):
            chosen[str(list(x.shape))] = "small" if x.size < 4 else "large"
            return x

        return reports_bodies(run, lambda: chosen)

    class Plugin:
        @hookimpl
        def onnxkit_operator_sets(self):
            return [OperatorSet(DOMAIN, 1, {"Pick": schema})]

        @hookimpl
        def onnxkit_portable_kernels(self):
            return table

    g = ir.Graph(node=[ir.Node(["x"], ["y"], op_type="Pick", domain=DOMAIN, name="p")], name="g",
                 input=[ir.ValueInfo("x", ir.tensor_type(1, ["N"]))], output=[ir.ValueInfo("y", ir.tensor_type(1, ["N"]))])
    model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId(DOMAIN, 1)], graph=g)
    sess = InferenceSession(model, registry=build_registry(extra=[("bodies_test", Plugin())]), validate=False)
    for n in (2, 9):
        sess.run(None, {"x": np.ones(n, np.float32)})
    assert plan_bodies(sess.plan) == [("p", f"{DOMAIN}::Pick", {"[2]": "small", "[9]": "large"})]


@pytest.mark.usefixtures("warm_bodies")
def test_onnxkit_run_profile_prints_the_bodies(tmp_path):
    out = subprocess.run([sys.executable, "-m", "onnxkit", "run", str(EXAMPLES / "digits.onnx"), "--input",
                          f"image={EXAMPLES / 'digits_input.npy'}", "--profile"], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "COLUMNS": "200"}, timeout=300)
    assert out.returncode == 0, out.stderr
    # the Conv per input-shape key; MaxPool and Softmax, which choose at planning, as "planned"
    assert "bodies chosen per input-shape key (3):" in out.stdout
    line = next(ln for ln in out.stdout.splitlines() if ln.strip().startswith("conv (Conv): X["))
    assert line.rstrip().rsplit(" -> ", 1)[1] in ({"planes", "winograd"} if _compiled_on() else {"columns"})
    planned = {ln.strip().split(" (")[0]: ln.rstrip().rsplit(" -> ", 1)[1] for ln in out.stdout.splitlines()
               if "): planned -> " in ln}
    assert planned == ({"pool": "compiled (pool)", "softmax": "compiled (activation)"} if _compiled_on()
                       else {"pool": "numpy (compiled loops off)", "softmax": "numpy (compiled loops off)"})


@pytest.mark.usefixtures("first_run_policy")
def test_the_plans_repr_names_each_reported_body():
    sess = _run(_conv((4, 3, 1, 1)), (1, 3, 5, 5))
    text = repr(sess.plan)
    first, *lines = text.splitlines()
    assert first.startswith("GraphPlan(") and f"{len(sess.plan.steps)} steps" in first
    assert lines == ["  " + line for line in describe(sess.plan)]
    assert any("conv (Conv)" in line and "pointwise" in line for line in lines)
