"""When a cold plan's record is due (issues 43 and 44; :class:`onnxkit.runtime.bodies.FirstRun`).

The ski rental: the warm plan's setup begins once the runs' time spent on the cold plan reaches
the setup's estimate, the runs known to come counted as spent already: a generator that states
its length (:meth:`FirstRun.expect`), or a decoding loop seen in its feeds (the same feeds, some
extents growing by the same step run after run: :data:`DECODING_RUNS` runs forecast).  A stream of
one shape, a tool's few runs and feeds that vary otherwise get no forecast.  The records here are
fed made-up run times (no clock is read); the sessions' clock is the test's.
"""

from __future__ import annotations

import itertools
import subprocess
import threading

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.runtime import InferenceSession
from onnxkit.runtime.bodies import DECODING_EVIDENCE, DECODING_RUNS, FirstRun

pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")


def _record(cost: float) -> FirstRun:
    record = FirstRun()
    record.defer("a loop", cost=cost)
    return record


def _feeds(past: int, token: int = 1, batch: int = 1):
    """A decoder's feeds by position: the token ids, the past (growing), the attention mask."""
    return [np.zeros((batch, token), np.int64), np.zeros((batch, 2, past, 4), np.float32),
            np.zeros((batch, past + token), np.int64)]


def test_a_decoding_loop_is_due_once_evident_when_its_forecast_reaches_the_cost():
    record = _record(cost=1.0)
    run_s = 2.0 / DECODING_RUNS  # the forecast at this run time: two costs
    record.ran_for(0.05, _feeds(64, token=64))  # the prompt
    for past in range(64, 64 + DECODING_EVIDENCE):  # the first token, then growths: not yet evident
        record.ran_for(run_s, _feeds(past))
        assert not record.decoding and not record.due()
    record.ran_for(run_s, _feeds(64 + DECODING_EVIDENCE))
    assert record.decoding and record.due()
    assert record.spent < record.cost  # due on the forecast, not on the time spent


def test_a_forecast_short_of_the_cost_waits_for_the_runs_to_spend_the_rest():
    """An estimate of a compile (seconds): the decoding forecast discounts it, no more."""
    run_s = 0.004
    record = _record(cost=DECODING_RUNS * run_s + 0.2)
    past = 10
    while record.spent + DECODING_RUNS * run_s < record.cost:
        assert not record.due()
        record.ran_for(run_s, _feeds(past))
        past += 1
    assert record.decoding and record.due()
    assert past - 10 >= 0.2 / run_s - 1


@pytest.mark.parametrize("case", ["one-shape", "other-axis-changes", "step-changes", "shrinks", "batch-grows-too",
                                  "new-feed-count", "non-array-differs", "too-few-runs"])
def test_near_misses_of_a_decoding_loop_get_no_forecast(case):
    run_s = 0.1
    record = _record(cost=DECODING_RUNS * run_s / 2)  # a decoding forecast at this run time: due at once
    pasts = list(range(5, 5 + DECODING_EVIDENCE + 3))
    runs = {
        "one-shape": [_feeds(5) for _ in pasts],
        "other-axis-changes": [[*_feeds(p)[:2], np.zeros((1, p + 1 + (p % 2)), np.int64)] for p in pasts],
        "step-changes": [_feeds(p) for p in (5, 6, 8, 9, 11, 12, 14)],
        "shrinks": [_feeds(p) for p in (9, 10, 11, 3, 4, 5)],
        "batch-grows-too": [_feeds(p, batch=1 + (i % 2)) for i, p in enumerate(pasts)],
        "new-feed-count": [_feeds(p)[: 2 + (i % 2)] for i, p in enumerate(pasts)],
        "non-array-differs": [[*_feeds(p), None if i % 2 else np.zeros(3)] for i, p in enumerate(pasts)],
        "too-few-runs": [_feeds(p) for p in pasts[:DECODING_EVIDENCE]],
    }[case]
    for feeds in runs:
        record.ran_for(run_s, feeds)
        assert not record.decoding and not record.due()
    assert record.spent < record.cost


def test_a_stated_length_is_forecast_from_the_first_run():
    record = _record(cost=1.0)
    record.expect(100)
    assert not record.due()  # no run yet: nothing to forecast from
    record.ran_for(0.009)
    assert not record.due()  # 0.009 + 100 x 0.009 < 1
    record.ran_for(0.01)
    assert record.due()  # 0.019 + 100 x 0.01 >= 1
    record.expect(0)
    assert not record.due()  # the forecast withdrawn: the time spent alone


def test_without_runs_to_come_the_rule_is_unchanged():
    record = _record(cost=0.5)
    record.ran_for(0.3)
    assert not record.due() and record.expected == 0 and not record.decoding
    record.ran_for(0.2)
    assert record.due()


def test_a_setup_compiles_only_where_no_deferral_is_cached():
    record = FirstRun()
    record.defer("a loop to compile", cost=0.01, setup=("numba", 0.4), compile_cost=0.5)
    record.defer("another", cost=0.01, setup=("numba", 0.4), compile_cost=0.5)
    assert record.compiles and record.cost == pytest.approx(1.4)  # an empty cache: every loop compiled
    record.defer("a cached loop", cost=0.01, setup=("numba", 0.4))
    # a cache holding one of the plan's loops was filled by a warm run of it: what it did not cache
    # then, its kernels did not use
    assert not record.compiles and record.cost == pytest.approx(0.43)
    assert not FirstRun().compiles


# -- sessions: a cold plan deferring Softmax's compiled loop, the runs' clock the test's -----------

def _softmax_session(dims):
    g = ir.Graph(node=[ir.Node(["x"], ["y"], op_type="Softmax", name="softmax")], name="g",
                 input=[ir.ValueInfo("x", ir.tensor_type(1, dims))],
                 output=[ir.ValueInfo("y", ir.tensor_type(1, dims))])
    return InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g))


@pytest.fixture
def clocked(monkeypatch, fresh_process_patch):
    """``tiered``, a fresh process's cold plan (the setup estimated at 40 s), each main-thread run
    counting 0.5 s, no child process actually started (each start recorded in ``started``)."""
    compiled = pytest.importorskip("onnxkit_cpu.compiled")
    if not compiled.available():
        pytest.skip("numba is not installed: nothing to set up")
    from onnxkit.runtime import plans

    monkeypatch.delenv("ONNXKIT_FIRST_RUN", raising=False)
    monkeypatch.delenv("ONNXKIT_WARM_SETUP", raising=False)
    fresh_process_patch(monkeypatch)
    monkeypatch.setattr(compiled, "SETUP_S", 40.0)
    monkeypatch.setattr(plans, "CHILD", "pass\n")
    started: list = []
    popen = subprocess.Popen

    def recorded(args, *rest, **kw):
        if isinstance(args, list) and args[2:3] == [plans.CHILD]:
            started.append(args)
        return popen(args, *rest, **kw)

    monkeypatch.setattr(subprocess, "Popen", recorded)
    main, ticks, last = threading.main_thread(), itertools.count(), [0.0]

    def perf_counter():
        if threading.current_thread() is main:
            last[0] = next(ticks) * 0.25  # two readings a run: 0.5 s a run
        return last[0]

    monkeypatch.setattr(plans, "time", type("Clock", (), {"perf_counter": staticmethod(perf_counter)}))
    return started


def test_a_decoding_session_starts_its_setup_once_the_loop_is_evident(clocked):
    sess = _softmax_session([1, "past"])
    cold = sess._cold
    assert cold is not None and cold.cost >= 40.0
    rng = np.random.default_rng(3)
    began = None
    for past in range(1, 40):
        x = rng.standard_normal((1, past)).astype(np.float32)
        e = np.exp(x - x.max())
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], e / e.sum(), rtol=1e-5, atol=1e-7)
        if sess._plans._setup is not None:
            began = past
            break
    # evident after DECODING_EVIDENCE growths; its forecast (DECODING_RUNS x 0.5 s) over the cost
    assert began == DECODING_EVIDENCE + 2, began
    assert cold.spent < cold.cost
    assert sess.wait_for_warm_plan(120) is True


def test_a_stream_of_one_shape_waits_for_the_cost(clocked):
    sess = _softmax_session([1, 16])
    cold = sess._cold
    x = np.random.default_rng(4).standard_normal((1, 16)).astype(np.float32)
    runs = 0
    while sess._plans._setup is None and runs < 1000:
        sess.run(None, {"x": x})
        runs += 1
    assert cold.spent >= cold.cost and runs >= cold.cost / 0.5
    assert not cold.decoding
    assert sess.wait_for_warm_plan(120) is True


@pytest.mark.parametrize("cached", [True, False], ids=["cached-loads-here", "compile-in-a-child"])
def test_the_child_process_compiles_only_what_the_cache_lacks(clocked, monkeypatch, cached):
    compiled = pytest.importorskip("onnxkit_cpu.compiled")
    monkeypatch.setattr(compiled.cache_index, "holds", lambda fn: cached)
    sess = _softmax_session([1, 16])
    cold = sess._cold
    assert cold.compiles is (not cached)
    assert cold.cost == pytest.approx(40.0 + len(cold.deferred) * (compiled.LOAD_S if cached else compiled.COMPILE_S))
    x = np.random.default_rng(5).standard_normal((1, 16)).astype(np.float32)
    sess.run(None, {"x": x})
    cold.spent = cold.cost  # as if the runs had spent the estimate: the next run starts the setup
    sess.run(None, {"x": x})
    assert sess.wait_for_warm_plan(120) is True
    assert len(clocked) == (0 if cached else 1)
