"""The cold plan (issue 32 item 1): a fresh session's first runs take the bodies that need no slow
one-time setup; the session plans again, once, between two runs, when its runs have spent the
setup the kernels estimated (``tiered``, the default), or before its second run (``second``)
(:mod:`onnxkit.runtime.bodies`).  onnxkit-cpu's numba loops are the case in point: the first
results of a fresh process come from numpy bodies without numba imported; once promoted, the
compiled loops (the same results within their modules' tolerances).

What is checked is what ran and what was imported (``sys.modules`` in a fresh subprocess, the
bodies a plan reports, the record's accounts), never a time.  These tests choose the policy
themselves; the rest of the suite runs the default in a process that has numba loaded, with the
conftest's ``first_run_policy`` (a fresh process's cold plan, or ``warm``) where it matters
(tests/engine/test_first_run_matrix.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.plugin import KernelTable, first_run, hookimpl
from onnxkit.registry import build_registry
from onnxkit.runtime import InferenceSession
from onnxkit.runtime.bodies import FirstRun, cold_record, planning_cold

_CHILD = r'''
import json, sys
import numpy as np
if sys.argv[1] == "numba-first":
    import numba  # noqa: F401  (a process where numba is already loaded)
import onnxkit
from onnxkit import ir
from onnxkit.runtime.bodies import describe
A = ir.Attribute.make
w = ir.Tensor.from_numpy(np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
g = ir.Graph(node=[ir.Node(["x", "w"], ["c"], op_type="Conv", name="conv", attribute=[A("pads", [1, 1, 1, 1])]),
                   ir.Node(["c"], ["y"], op_type="Softmax", name="softmax")],
             name="g", initializer=[w], input=[ir.ValueInfo("x", ir.tensor_type(1, [1, 3, 8, 8]))],
             output=[ir.ValueInfo("y", ir.tensor_type(1, [1, 4, 8, 8]))])
model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g)
s = onnxkit.InferenceSession(model)
x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
out, record = {"after_session": "numba" in sys.modules}, s._cold
first = s.run(None, {"x": x})[0]
out["after_first"], out["first_bodies"] = "numba" in sys.modules, describe(s.plan)
second = s.run(None, {"x": x})[0]
out["after_second"], out["second_bodies"] = "numba" in sys.modules, describe(s.plan)
runs = 2
while s._cold is not None and s._plans._setup is None and runs < 200000:  # tiered: until the runs have spent
    s.run(None, {"x": x})                                                  # the estimate (the setup then begins
    runs += 1                                                              # in the background)
s.wait_for_warm_plan()
out["promoted"], out["bodies"] = s._cold is None, describe(s.plan)
out["after_promotion"] = "numba" in sys.modules
if record is not None:
    out["spent"], out["cost"], out["before"] = record.spent, record.cost, record.spent - record.last
out["diff"] = float(np.abs(first.astype(np.float64) - s.run(None, {"x": x})[0]).max())
np.save(sys.argv[2], first)
print("RESULT " + json.dumps(out))
'''


def _fresh(tmp_path, mode: str, policy):
    env = {k: v for k, v in os.environ.items() if k not in ("ONNXKIT_FIRST_RUN", "ONNXKIT_CPU_COMPILED")}
    if policy is not None:
        env["ONNXKIT_FIRST_RUN"] = policy
    target = tmp_path / f"{mode}-{policy}.npy"
    proc = subprocess.run([sys.executable, "-c", _CHILD, mode, str(target)], capture_output=True, text=True,
                          env=env, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[7:]), np.load(target)


def _numba_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("numba") is not None


def _body(lines, node="conv (Conv)"):
    [line] = [ln for ln in lines if ln.startswith(node)]
    return line.rsplit(" -> ", 1)[1]


def test_a_fresh_process_answers_from_numpy_bodies_until_its_runs_have_spent_numbas_setup(tmp_path):
    cold, first = _fresh(tmp_path, "plain", None)
    assert cold["after_session"] is False and cold["after_first"] is False   # numba not loaded for the first result
    assert _body(cold["first_bodies"]) == "columns"                         # numpy im2col + BLAS
    # a kernel choosing at planning reports it per node ("planned"), compiled or numpy and why
    assert _body(cold["first_bodies"], "softmax (Softmax)") == "numpy (cold plan; compiled later)"
    assert cold["after_second"] is False and cold["second_bodies"] == cold["first_bodies"]   # a tiny model's runs
    assert cold["promoted"] is True                                          # ... do reach the estimate
    assert cold["before"] < cold["cost"] <= cold["spent"]                    # promoted on the first run past it
    if _numba_installed():
        assert cold["after_promotion"] is True
        assert _body(cold["bodies"]) in ("planes", "winograd")
        assert _body(cold["bodies"], "softmax (Softmax)") == "compiled (activation)"
    else:  # nothing to switch to: the numpy bodies stay
        assert _body(cold["bodies"]) == "columns"
    assert cold["diff"] <= 1e-5                                            # the switch changes no result
    warm, warm_first = _fresh(tmp_path, "plain", "warm")
    np.testing.assert_allclose(first, warm_first, rtol=1e-5, atol=1e-6)
    if _numba_installed():
        assert warm["after_session"] is True and _body(warm["first_bodies"]) in ("planes", "winograd")


def test_the_second_policy_promotes_before_the_second_run_whatever_the_cost(tmp_path):
    out, _ = _fresh(tmp_path, "plain", "second")
    assert out["after_first"] is False and _body(out["first_bodies"]) == "columns"
    if _numba_installed():
        assert out["after_second"] is True and _body(out["second_bodies"]) in ("planes", "winograd")
    assert out["spent"] < out["cost"]                                      # promoted before the runs spent it


@pytest.mark.skipif(not _numba_installed(), reason="needs numba (a process that has it loaded)")
def test_a_process_that_loaded_numba_plans_compiled_loops_from_the_first_run(tmp_path):
    out, _ = _fresh(tmp_path, "numba-first", None)
    assert _body(out["first_bodies"]) in ("planes", "winograd")
    assert out["first_bodies"] == out["second_bodies"]


# -- the host mechanism, with a plugin kernel of its own ------------------------------------------

class _Plugin:
    """A com.example::Twice kernel that defers its 'fast' body on a cold plan."""

    def __init__(self, defers: bool, cost: float = 0.0):
        self.defers, self.cost, self.prepared, self.called_cold = defers, cost, [], []

    @hookimpl
    def onnxkit_operator_sets(self):
        from onnxkit.plugin import FormalParameter, OperatorSet, OpSchema, TypeConstraint

        schema = OpSchema(domain="com.example", name="Twice", since_version=1, inputs=(FormalParameter("x", "T"),),
                          outputs=(FormalParameter("y", "T"),),
                          type_constraints=(TypeConstraint("T", ("tensor(float)",)),),
                          min_input=1, max_input=1, min_output=1, max_output=1)
        return [OperatorSet("com.example", 1, {"Twice": schema})]

    @hookimpl
    def onnxkit_kernels(self, backend):
        table = KernelTable()

        @table.register("Twice", 1, domain="com.example")
        def twice(ctx):
            record = first_run()
            cold = self.defers and record is not None
            if cold:
                record.defer("fast twice", cost=self.cost)
            self.prepared.append("slow" if cold else "fast")

            def run(x):
                self.called_cold.append(first_run() is not None)  # a body chosen per call asks here
                return x * np.float32(2)
            return run
        return table if backend == "cpu" else None


def _twice_session(plugin):
    registry = build_registry(extra=[("example", plugin)])
    g = ir.Graph(node=[ir.Node(["x"], ["y"], op_type="Twice", domain="com.example", name="twice")], name="g",
                 input=[ir.ValueInfo("x", ir.tensor_type(1, [2]))], output=[ir.ValueInfo("y", ir.tensor_type(1, [2]))])
    model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId("com.example", 1)],
                     graph=g)
    return InferenceSession(model, registry=registry, validate=False)


@pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
def test_a_deferring_kernel_is_planned_again_once_before_the_second_run(monkeypatch):
    monkeypatch.delenv("ONNXKIT_FIRST_RUN", raising=False)
    plugin = _Plugin(defers=True)
    sess = _twice_session(plugin)
    x = np.array([1, 2], np.float32)
    assert plugin.prepared == ["slow"]
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], [2, 4])
    assert plugin.prepared == ["slow"]                      # never mid-run, never before the run ended
    assert sess._specializer is None or not sess._specializer.stats   # a plan to be replaced is not specialized
    first_plan = sess.plan
    for _ in range(3):
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], [2, 4])
    assert plugin.prepared == ["slow", "fast"] and sess.plan is not first_plan


@pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
def test_a_costly_deferral_keeps_the_cold_plan_until_the_runs_have_spent_it(monkeypatch):
    monkeypatch.delenv("ONNXKIT_FIRST_RUN", raising=False)
    plugin = _Plugin(defers=True, cost=3600.0)
    sess = _twice_session(plugin)
    cold_plan, record = sess.plan, sess._cold
    for _ in range(5):
        np.testing.assert_array_equal(sess.run(None, {"x": np.ones(2, np.float32)})[0], [2, 2])
    assert plugin.prepared == ["slow"] and sess.plan is cold_plan and sess._cold is record
    assert 0 < record.spent < record.cost == 3600.0
    assert plugin.called_cold == [True] * 5                 # every run on the cold plan is a cold one
    assert sess._specializer is None or not sess._specializer.stats   # a plan to be replaced is not specialized
    record.spent = 3600.0  # as if the runs had taken that long: the next run starts the warm plan's setup
    sess.run(None, {"x": np.ones(2, np.float32)})           # ... in the background, and is served cold
    assert sess.wait_for_warm_plan()                        # (tests/engine/test_background_setup.py)
    assert plugin.prepared == ["slow", "fast"] and sess._cold is None and sess.plan is not cold_plan
    assert plugin.called_cold.count(True) == 6              # the warm-up's runs (in the thread) are not cold
    sess.run(None, {"x": np.ones(2, np.float32)})
    assert plugin.called_cold.count(True) == 6 and plugin.called_cold[-1] is False


@pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
def test_the_second_policy_ignores_the_cost(monkeypatch):
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "second")
    plugin = _Plugin(defers=True, cost=3600.0)
    sess = _twice_session(plugin)
    sess.run(None, {"x": np.ones(2, np.float32)})
    assert plugin.prepared == ["slow"]
    sess.run(None, {"x": np.ones(2, np.float32)})
    assert plugin.prepared == ["slow", "fast"]


def test_the_record_counts_a_shared_setup_once_and_is_due_when_spent():
    record = FirstRun()
    assert not record.due()                                    # no run yet
    record.ran_for(0.01)
    assert record.due()                                        # nothing deferred: due after the first run
    record.defer("a", cost=0.1, setup=("compiler", 0.5))
    record.defer("b", cost=0.2, setup=("compiler", 0.5))
    record.defer("a", cost=0.1, setup=("compiler", 0.5))       # the same deferral again: counted once
    assert record.deferred == ["a", "b"] and record.cost == pytest.approx(0.8)
    assert not record.due()
    record.ran_for(0.78)
    assert not record.due() and record.last == 0.78
    record.ran_for(0.02)
    assert record.due() and record.spent == pytest.approx(0.81)
    assert FirstRun(tiered=False).due() is False
    second = FirstRun(tiered=False)
    second.defer("a", cost=9.0)
    second.ran_for(0.001)
    assert second.due()


def test_an_unknown_policy_is_refused_by_name(monkeypatch):
    from onnxkit.errors import OnnxkitError

    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "lukewarm")
    with pytest.raises(OnnxkitError, match="ONNXKIT_FIRST_RUN='lukewarm' is not one of tiered, second, warm"):
        cold_record()
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", " Tiered ")
    assert cold_record().tiered is True


@pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
def test_a_plan_that_deferred_nothing_is_not_planned_again(monkeypatch):
    monkeypatch.delenv("ONNXKIT_FIRST_RUN", raising=False)
    plugin = _Plugin(defers=False)
    sess = _twice_session(plugin)
    plan = sess.plan
    sess.run(None, {"x": np.ones(2, np.float32)})
    assert sess._specializer is None or sess._specializer.stats     # a plan that stays is specialized at once
    for _ in range(2):
        sess.run(None, {"x": np.ones(2, np.float32)})
    assert plugin.prepared == ["fast"] and sess.plan is plan


@pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
def test_the_warm_policy_plans_the_warm_bodies_from_the_start(monkeypatch):
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    assert cold_record() is None
    plugin = _Plugin(defers=True)
    sess = _twice_session(plugin)
    sess.run(None, {"x": np.ones(2, np.float32)})
    sess.run(None, {"x": np.ones(2, np.float32)})
    assert plugin.prepared == ["fast"]


def test_first_run_is_none_outside_a_cold_plan_and_the_record_inside():
    assert first_run() is None
    record = FirstRun()
    with planning_cold(record):
        assert first_run() is record
        first_run().defer("x")
        first_run().defer("x")
    assert first_run() is None and record.deferred == ["x"]


@pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
def test_every_compiled_family_reports_compiled_or_numpy_per_node(monkeypatch):
    """LayerNormalization (norm), Gelu-20 (activation), MaxPool (pool), LSTM (rnn): warm, the
    compiled family is named; with compiled loops off, numpy is."""
    from onnxkit.runtime.bodies import describe
    from onnxkit_cpu import compiled

    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    A = ir.Attribute.make
    scale = ir.Tensor.from_numpy(np.ones(8, np.float32), "scale")
    g = ir.Graph(node=[ir.Node(["x", "scale"], ["n"], op_type="LayerNormalization", name="ln"),
                       ir.Node(["n"], ["a"], op_type="Gelu", name="gelu"),
                       ir.Node(["a"], ["y"], op_type="MaxPool", name="pool",
                               attribute=[A("kernel_shape", [1, 2]), A("strides", [1, 2])])],
                 name="g", initializer=[scale], input=[ir.ValueInfo("x", ir.tensor_type(1, [1, 2, 4, 8]))],
                 output=[ir.ValueInfo("y", ir.tensor_type(1, [1, 2, 4, 4]))])
    model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 22)], graph=g)
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 8)).astype(np.float32)

    def planned(sess):
        sess.run(None, {"x": x})
        return {line.split(" (")[0]: line.rsplit(" -> ", 1)[1] for line in describe(sess.plan)}

    if compiled.available():
        warm = planned(InferenceSession(model))
        assert warm["ln"] == "compiled (norm)" and warm["gelu"] == "compiled (activation)"
        assert warm["pool"] == "compiled (pool)"
    with compiled.disabled():
        off = planned(InferenceSession(model))
    assert off == {"ln": "numpy (compiled loops off)", "gelu": "numpy (compiled loops off)",
                   "pool": "numpy (compiled loops off)"}
