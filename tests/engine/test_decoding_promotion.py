"""A decoding session's cold plan is promoted (issue 44, issue 43 item 1; :mod:`onnxkit.runtime.plans`).

A decoding loop feeds a new shape every run (the past grows by one position); under ``tiered`` its
runs' times add up on the cold plan's record across shapes until they reach the warm plan's
estimated setup, which then begins in the background.  The setup's child process (niced) may get
next to no CPU on a busy machine: the runs after the setup began count towards a patience of the
same estimate, past which the child is ended and started again un-niced (compiling in this
process would hold its interpreter lock against the runs), so a long stream is promoted.
Deterministic: the runs' clock is the test's (each run of the main thread counts a fixed step),
and the child is one that never ends by itself while niced.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.runtime import InferenceSession
from onnxkit.runtime.bodies import describe

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")

PATIENCE_S = 120  # how long the test waits for the background thread (a hang is a failure)
#: the niceness each child process of the setup was asked to add, in the order they started
STARTS: list = []


def _softmax_session():
    g = ir.Graph(node=[ir.Node(["x"], ["y"], op_type="Softmax", name="softmax")], name="g",
                 input=[ir.ValueInfo("x", ir.tensor_type(1, [1, "past"]))],
                 output=[ir.ValueInfo("y", ir.tensor_type(1, [1, "past"]))])
    return InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g))


def _reference(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.fixture
def starved(monkeypatch, fresh_process_patch):
    """``tiered``, ``process`` mode, a fresh process's cold plan (Softmax's compiled loop deferred, its
    setup estimated at 40 s, numba's cache holding nothing), a child process that never ends while niced (started un-niced it
    ends at once, leaving the compiling to the thread; each start's niceness to add is appended
    to :data:`STARTS`), and a clock that advances by a quarter of the estimate
    at each reading of the main thread (other threads read it unchanged)."""
    compiled = pytest.importorskip("onnxkit_cpu.compiled")
    if not compiled.available():
        pytest.skip("numba is not installed: nothing to set up")

    from onnxkit.runtime import plans

    monkeypatch.delenv("ONNXKIT_FIRST_RUN", raising=False)
    monkeypatch.delenv("ONNXKIT_WARM_SETUP", raising=False)
    fresh_process_patch(monkeypatch)
    monkeypatch.setattr(compiled, "SETUP_S", 40.0)
    monkeypatch.setattr(compiled.cache_index, "holds", lambda fn: False)  # an empty cache: a child compiles
    monkeypatch.setattr(plans, "CHILD", "import sys, time\nif sys.argv[7] != '0':\n    time.sleep(3600)\n")
    popen = subprocess.Popen
    STARTS.clear()

    def recorded(args, *rest, **kw):
        if isinstance(args, list) and args[2:3] == [plans.CHILD]:
            STARTS.append(args[-1])
        return popen(args, *rest, **kw)

    monkeypatch.setattr(subprocess, "Popen", recorded)
    main, ticks, last = threading.main_thread(), itertools.count(), [0.0]
    step = 10.0 / 2  # two readings a run: each run counts 5 s of the estimate's 40 (and the deferrals' own)

    def perf_counter():
        if threading.current_thread() is main:
            last[0] = next(ticks) * step
        return last[0]

    monkeypatch.setattr(plans, "time", type("Clock", (), {"perf_counter": staticmethod(perf_counter)}))
    return plans


def test_a_decoding_stream_of_new_shapes_is_promoted_though_its_child_never_ends(starved):
    sess = _softmax_session()
    rng = np.random.default_rng(7)
    cold = sess._cold
    assert cold is not None and describe(sess.plan) == ["softmax (Softmax): planned -> numpy (cold plan; compiled later)"]
    cost = cold.cost
    assert cost >= 40.0
    started_at = None
    for i in range(1, 200):  # a new shape every run, the past growing by one or two positions in turn (a
        past = i + i // 2   # loop whose growth has no one step: no decoding forecast, test_first_run_forecast.py)
        x = rng.standard_normal((1, past)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], _reference(x), rtol=1e-5, atol=1e-7)
        setup = sess._plans._setup
        if setup is not None and started_at is None:
            started_at = i
            assert cold.spent >= cost  # the runs of every shape were counted on one record
        if setup is not None and setup.waited >= setup.patience:
            break
    assert started_at is not None and started_at <= cost / 5 + 2, started_at  # no reset per new shape
    spent = cold.spent
    assert setup.waited >= setup.patience == cost and cold.spent == spent  # after it began: the patience only
    assert sess.wait_for_warm_plan(PATIENCE_S) is True  # the child (asleep for an hour) was ended
    assert setup.child_ended is True
    assert STARTS == [str(starved.CHILD_NICE), "0"]  # ... and started again un-niced, once
    [body] = describe(sess.plan)  # compiled, whichever of its loops serves Softmax
    assert body.startswith("softmax (Softmax): planned -> compiled (activation"), body
    for past in (200, 201):
        x = rng.standard_normal((1, past)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], _reference(x), rtol=1e-5, atol=1e-7)


def test_the_child_is_waited_for_while_the_runs_stay_within_the_patience(starved):
    """No runs after the setup began: the child (which never ends) is still waited for, the session
    stays cold: the patience is the runs' time, not the clock's."""
    sess = _softmax_session()
    x = np.random.default_rng(8).standard_normal((1, 5)).astype(np.float32)
    while sess._plans._setup is None:
        sess.run(None, {"x": x})
    setup = sess._plans._setup
    assert sess.wait_for_warm_plan(1.0) is False and setup.child_ended is False
    assert sess._cold is not None and STARTS == [str(starved.CHILD_NICE)]
    setup.waited = setup.patience  # as if the runs had spent it: the child is ended at the next look
    assert sess.wait_for_warm_plan(PATIENCE_S) is True and setup.child_ended is True
    assert STARTS == [str(starved.CHILD_NICE), "0"]


def test_a_child_that_computes_is_waited_for_past_the_patience(starved, monkeypatch):
    """Past the patience a child is ended only when starved (less than CHILD_STARVED of a core)."""
    shares = [1.0]
    monkeypatch.setattr(starved, "_cpu_share", lambda pid, began: shares[0])
    sess = _softmax_session()
    x = np.random.default_rng(9).standard_normal((1, 6)).astype(np.float32)
    while sess._plans._setup is None:
        sess.run(None, {"x": x})
    setup = sess._plans._setup
    setup.waited = setup.patience
    assert sess.wait_for_warm_plan(1.0) is False and setup.child_ended is False  # computing: waited for
    assert STARTS == [str(starved.CHILD_NICE)]
    shares[0] = starved.CHILD_STARVED / 2
    assert sess.wait_for_warm_plan(PATIENCE_S) is True and setup.child_ended is True
    assert STARTS == [str(starved.CHILD_NICE), "0"]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="the share is read from Linux's /proc")
def test_the_cpu_share_is_the_process_times_over_the_time_elapsed():
    from onnxkit.runtime import plans

    began = time.perf_counter() - 100.0
    times = os.times()
    share = plans._cpu_share(os.getpid(), began)
    elapsed = time.perf_counter() - began
    assert share is not None and abs(share * elapsed - (times.user + times.system)) < 0.1
    assert plans._cpu_share(2 ** 22 + 12345, began) is None  # no such process
