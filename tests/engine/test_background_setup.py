"""The warm plan set up off the run path (issue 44 item 4; :mod:`onnxkit.runtime.plans`).

Under ``tiered`` the run that finds the cold plan's record due starts a background thread and is
served by the cold plan, as are the runs after it; the thread plans warm and warms the new plan up
on a copy of that run's feeds; the first run to begin after it has ended switches.  A kernel of
its own (``com.example::Twice``: its warm body waits for the test's go-ahead while it is
prepared, so a setup stays pending exactly as long as the test wants) makes every step
deterministic: what ran where is recorded, never a time.  ``wait_for_warm_plan`` is the
documented way to wait for the setup.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.errors import OnnxkitError
from onnxkit.plugin import KernelTable, first_run, hookimpl
from onnxkit.registry import build_registry
from onnxkit.runtime import InferenceSession
from onnxkit.runtime.bodies import describe

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

#: how long a test waits for the background thread before it fails (a hang is a failure, not a timing)
PATIENCE_S = 120


class _Gated:
    """com.example::Twice: ``slow`` on a cold plan (a deferral costing ``cost``), ``fast`` once warm;
    the warm factory waits for :attr:`go` (or raises ``fails``).  Every call is recorded as
    ``(body, thread name)``."""

    def __init__(self, cost: float = 3600.0, fails: BaseException | None = None):
        self.cost, self.fails = cost, fails
        self.go = threading.Event()
        self.prepared: list = []     # (body, thread name)
        self.calls: list = []        # (body, thread name)
        self.during_cold_run = None  # called inside a cold run, once

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
            body = "slow" if record is not None else "fast"
            if record is not None:
                record.defer("fast twice", cost=self.cost)
            else:
                assert self.go.wait(PATIENCE_S), "the test never let the warm factory go on"
                if self.fails is not None:
                    raise self.fails
            self.prepared.append((body, threading.current_thread().name))

            def run(x):
                self.calls.append((body, threading.current_thread().name))
                hook, self.during_cold_run = (self.during_cold_run, None) if body == "slow" else (None, None)
                if hook is not None:
                    hook()
                return x * np.float32(2) if body == "fast" else np.multiply(x, 2, dtype=np.float32)
            return run
        return table if backend == "cpu" else None


def _session(plugin) -> InferenceSession:
    g = ir.Graph(node=[ir.Node(["x"], ["y"], op_type="Twice", domain="com.example", name="twice")], name="g",
                 input=[ir.ValueInfo("x", ir.tensor_type(1, [3]))], output=[ir.ValueInfo("y", ir.tensor_type(1, [3]))])
    model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId("com.example", 1)],
                     graph=g)
    return InferenceSession(model, registry=build_registry(extra=[("example", plugin)]), validate=False)


X = np.array([1.5, -2.0, 0.25], np.float32)
EXPECTED = X * 2  # an independent reference


@pytest.fixture
def tiered(monkeypatch):
    monkeypatch.delenv("ONNXKIT_FIRST_RUN", raising=False)
    monkeypatch.delenv("ONNXKIT_WARM_SETUP", raising=False)


def _due(sess) -> None:
    """One run on the cold plan, then its record as if its runs had spent the estimate."""
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)
    sess._cold.spent = sess._cold.cost


def test_runs_stay_on_the_cold_plan_while_the_setup_is_pending_and_switch_at_the_next_run(tiered):
    plugin = _Gated()
    sess = _session(plugin)
    record, cold_plan = sess._cold, sess.plan
    _due(sess)
    assert sess._plans._setup is None                     # not started before a run finds the record due
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)   # this run starts it ...
    assert sess._plans._setup is not None
    spent = record.spent
    for _ in range(5):                                    # ... and the runs go on, cold, while it is pending
        np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)
    assert sess._cold is record and sess.plan is cold_plan
    assert sess.wait_for_warm_plan(timeout=0) is False    # pending: the factory waits for the test
    main = threading.current_thread().name
    assert plugin.calls == [("slow", main)] * 7
    assert record.spent == spent                          # runs after the setup began are not counted
    plugin.go.set()
    assert sess.wait_for_warm_plan(PATIENCE_S) is True
    assert sess._cold is None and sess.plan is not cold_plan
    assert plugin.prepared == [("slow", main), ("fast", "onnxkit-warm-plan")]   # planned warm in the thread
    warm_up = plugin.calls[7:]
    assert warm_up and set(warm_up) == {("fast", "onnxkit-warm-plan")}       # the warm-up ran there, warm
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)    # the same results after the switch
    assert plugin.calls[-1] == ("fast", main)
    assert sess.wait_for_warm_plan() is True and len(plugin.prepared) == 2   # once


def test_a_run_in_progress_when_the_setup_ends_keeps_the_cold_plan(tiered):
    plugin = _Gated()
    sess = _session(plugin)
    record = sess._cold
    _due(sess)
    main = threading.current_thread().name

    def finish_the_setup_now():  # inside a cold run: the setup ends before this run does
        plugin.go.set()
        assert sess._plans._setup.done.wait(PATIENCE_S)

    sess.run(None, {"x": X})                              # starts the setup
    plugin.during_cold_run = finish_the_setup_now
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)
    assert sess._plans._setup.done.is_set() and sess._plans._setup.error is None
    ran_by_main = [body for body, thread in plugin.calls if thread == main]
    assert ran_by_main == ["slow"] * 3                    # that run finished on the plan it began with
    assert sess._cold is record                           # switched at a run boundary: not yet
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)
    assert sess._cold is None and plugin.calls[-1] == ("fast", main)        # the next run began warm


def test_a_failed_setup_is_reported_once_and_the_session_stays_on_its_cold_plan(tiered):
    plugin = _Gated(fails=RuntimeError("no compiler today"))
    sess = _session(plugin)
    record, cold_plan = sess._cold, sess.plan
    _due(sess)
    sess.run(None, {"x": X})
    plugin.go.set()
    assert sess._plans._setup.done.wait(PATIENCE_S)
    with pytest.warns(RuntimeWarning, match=r"warm plan in the background failed \(.*RuntimeError: no compiler today\)"
                                            r".*keeps running its cold plan"):
        np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)   # reported at the next run
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)    # once: not again
        for _ in range(3):
            np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)
        assert sess.wait_for_warm_plan(PATIENCE_S) is False
    assert sess._cold is record and sess.plan is cold_plan
    assert [body for body, _ in plugin.calls] == ["slow"] * len(plugin.calls)   # never tried again
    assert len(plugin.prepared) == 1


def test_a_failure_found_by_the_wait_is_reported_by_it(tiered):
    plugin = _Gated(fails=ValueError("broken loop"))
    sess = _session(plugin)
    _due(sess)
    sess.run(None, {"x": X})
    plugin.go.set()
    with pytest.warns(RuntimeWarning, match="ValueError: broken loop"):
        assert sess.wait_for_warm_plan(PATIENCE_S) is False
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)


def test_concurrent_runs_stay_correct_across_the_switch(tiered):
    plugin = _Gated()
    sess = _session(plugin)
    _due(sess)
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal(3).astype(np.float32) for _ in range(4)]
    errors, started = [], threading.Barrier(len(feeds) + 1)

    def worker(x):
        try:
            started.wait(PATIENCE_S)
            for i in range(60):
                y = sess.run(None, {"x": x})[0]
                np.testing.assert_array_equal(y, x * 2)
                if i == 30:
                    plugin.go.set()   # the setup ends while the other threads run
        except BaseException as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(x,)) for x in feeds]
    for t in threads:
        t.start()
    started.wait(PATIENCE_S)
    for t in threads:
        t.join(PATIENCE_S)
    assert errors == [] and not any(t.is_alive() for t in threads)
    assert sess.wait_for_warm_plan(PATIENCE_S) is True
    assert sum(1 for body, _ in plugin.prepared if body == "fast") == 1       # one setup for all the threads
    for x in feeds:
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x * 2)


def test_the_wait_answers_for_sessions_without_a_cold_plan_or_a_setup(tiered, monkeypatch):
    plugin = _Gated()
    sess = _session(plugin)
    assert sess.wait_for_warm_plan(0) is False            # cold, and nothing started
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    plugin.go.set()
    assert _session(plugin).wait_for_warm_plan(0) is True  # warm from the start


def test_an_unknown_setup_mode_is_refused_by_name_when_the_session_is_made(tiered, monkeypatch):
    monkeypatch.setenv("ONNXKIT_WARM_SETUP", "fork")
    with pytest.raises(OnnxkitError, match="ONNXKIT_WARM_SETUP='fork' is not one of process, thread"):
        _session(_Gated())


def test_the_second_policy_still_plans_warm_in_the_run_before_the_second(monkeypatch):
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "second")
    plugin = _Gated()
    plugin.go.set()
    sess = _session(plugin)
    sess.run(None, {"x": X})
    sess.run(None, {"x": X})
    main = threading.current_thread().name
    assert plugin.prepared == [("slow", main), ("fast", main)] and sess._plans._setup is None
    assert plugin.calls == [("slow", main), ("fast", main)]


def test_compiled_loops_are_set_up_in_the_thread_and_give_the_same_results(monkeypatch, fresh_process_patch):
    """onnxkit-cpu's Softmax, as a fresh process plans it (numba not imported: numpy body), switched
    to its compiled loop by the background thread (``thread`` mode: no child process)."""
    compiled = pytest.importorskip("onnxkit_cpu.compiled")
    if not compiled.available():
        pytest.skip("numba is not installed: nothing to set up")

    monkeypatch.delenv("ONNXKIT_FIRST_RUN", raising=False)
    monkeypatch.setenv("ONNXKIT_WARM_SETUP", "thread")
    fresh_process_patch(monkeypatch)
    g = ir.Graph(node=[ir.Node(["x"], ["y"], op_type="Softmax", name="softmax")], name="g",
                 input=[ir.ValueInfo("x", ir.tensor_type(1, [4, 16]))],
                 output=[ir.ValueInfo("y", ir.tensor_type(1, [4, 16]))])
    sess = InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g))
    x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)
    reference = np.exp(x - x.max(1, keepdims=True))
    reference /= reference.sum(1, keepdims=True)
    before = sess.run(None, {"x": x})[0]
    assert describe(sess.plan) == ["softmax (Softmax): planned -> numpy (cold plan; compiled later)"]
    sess._cold.spent = sess._cold.cost
    during = sess.run(None, {"x": x})[0]                  # starts the setup; served cold
    assert sess.wait_for_warm_plan(PATIENCE_S) is True
    assert describe(sess.plan) == ["softmax (Softmax): planned -> compiled (activation)"]
    after = sess.run(None, {"x": x})[0]
    for y in (before, during, after):
        np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-7)


def test_a_child_process_that_cannot_start_leaves_the_compiling_to_the_thread(tiered, monkeypatch,
                                                                            fresh_process_patch):
    """``process`` mode where no child can be started: the thread compiles, the switch happens."""
    import subprocess

    from onnxkit.runtime import plans

    compiled = pytest.importorskip("onnxkit_cpu.compiled")
    if not compiled.available():
        pytest.skip("numba is not installed: nothing to set up")

    def refuse(*args, **kwargs):
        raise OSError("no processes in this sandbox")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    fresh_process_patch(monkeypatch)
    g = ir.Graph(node=[ir.Node(["x"], ["y"], op_type="Softmax", name="softmax")], name="g",
                 input=[ir.ValueInfo("x", ir.tensor_type(1, [2, 8]))],
                 output=[ir.ValueInfo("y", ir.tensor_type(1, [2, 8]))])
    sess = InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g))
    assert sess._plans._child is True and plans.warm_setup() == "process"
    x = np.random.default_rng(4).standard_normal((2, 8)).astype(np.float32)
    before = sess.run(None, {"x": x})[0]
    sess._cold.spent = sess._cold.cost
    sess.run(None, {"x": x})
    assert sess.wait_for_warm_plan(PATIENCE_S) is True
    assert describe(sess.plan) == ["softmax (Softmax): planned -> compiled (activation)"]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], before, rtol=1e-5, atol=1e-7)
