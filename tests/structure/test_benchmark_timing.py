"""The benchmarks' shared timing helper (``benchmarks/timing.py``): interleaved samples carry a
wall time and a CPU share per call, and the share tells a computing callable from a waiting one.

The clocks are simulated (``timing.time`` replaced by a fake whose wall and CPU clocks advance only
when a callable says so), so no assertion here depends on the scheduler or the machine's load."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import timing  # noqa: E402


class FakeClock:
    """``perf_counter`` / ``process_time`` that move only through :meth:`compute` and :meth:`wait`."""

    def __init__(self):
        self.wall = 100.0
        self.cpu = 10.0

    def perf_counter(self):
        return self.wall

    def process_time(self):
        return self.cpu

    def compute(self, seconds, cpus=1.0):
        self.wall += seconds
        self.cpu += seconds * cpus

    def wait(self, seconds):
        self.wall += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(timing, "time", fake)
    monkeypatch.setattr(timing.gc, "collect", lambda: 0)  # a full collection per timing is slow in a big process
    return fake


def test_samples_per_callable_with_cpu_share(clock):
    calls = {"spin": 0, "sleep": 0, "pool": 0}

    def spin():
        calls["spin"] += 1
        clock.compute(0.004)

    def sleep():
        calls["sleep"] += 1
        clock.wait(0.004)

    def pool():                                                   # two threads computing
        calls["pool"] += 1
        clock.compute(0.002, cpus=2.0)

    samples = timing.interleaved_samples({"spin": spin, "sleep": sleep, "pool": pool},
                                         repeat=5, quiesce=False)
    assert set(samples) == {"spin", "sleep", "pool"}
    assert all(len(v) == 5 for v in samples.values())
    assert calls == {"spin": 7, "sleep": 7, "pool": 7}           # two warm-up calls each, then 5 timed
    assert [w for w, _ in samples["spin"]] == pytest.approx([0.004] * 5)
    assert [c for _, c in samples["spin"]] == pytest.approx([1.0] * 5)
    assert [c for _, c in samples["sleep"]] == pytest.approx([0.0] * 5)
    assert [c for _, c in samples["pool"]] == pytest.approx([2.0] * 5)


def test_rounds_rotate_the_order(clock):
    seen = []
    fns = {n: (lambda n=n: (seen.append(n), clock.compute(0.001))) for n in "abc"}
    timing.interleaved_samples(fns, repeat=3, quiesce=False)
    assert seen[6:] == list("abc") + list("bca") + list("cab")  # after the two warm-up rounds


def test_inner_calls_divide_the_wall_time(clock):
    samples = timing.interleaved_samples({"spin": lambda: clock.compute(0.004)}, repeat=3, inner=4,
                                         quiesce=False)
    assert [w for w, _ in samples["spin"]] == pytest.approx([0.004] * 3)   # per call, not per timing


def test_medians_match_the_samples(clock):
    durations = iter([0.0, 0.0, 0.003, 0.001, 0.002])            # two warm-ups, then three timings
    medians = timing.medians(timing.interleaved_samples({"a": lambda: clock.compute(next(durations))},
                                                        repeat=3, quiesce=False))
    assert set(medians) == {"a"} and medians["a"] == pytest.approx(0.002)


def test_a_zero_wall_time_has_zero_share(clock):
    samples = timing.interleaved_samples({"noop": lambda: None}, repeat=2, quiesce=False)
    assert samples["noop"] == [(0.0, 0.0), (0.0, 0.0)]
