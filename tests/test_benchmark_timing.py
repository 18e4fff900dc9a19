"""The benchmarks' shared timing helper (``benchmarks/timing.py``): interleaved samples carry a
wall time and a CPU share per call, and the share tells a computing callable from a waiting one."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import timing  # noqa: E402


def _spin(seconds=0.004):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_samples_per_callable_with_cpu_share():
    calls = {"spin": 0, "sleep": 0}

    def spin():
        calls["spin"] += 1
        _spin()

    def sleep():
        calls["sleep"] += 1
        time.sleep(0.004)

    samples = timing.interleaved_samples({"spin": spin, "sleep": sleep}, repeat=5, quiesce=False)
    assert set(samples) == {"spin", "sleep"}
    assert all(len(v) == 5 for v in samples.values())
    assert calls == {"spin": 6, "sleep": 6}                  # one warm-up call each, then 5 timed
    assert all(w >= 0.004 for w, _ in samples["spin"] + samples["sleep"])
    # a sleeping callable uses next to no CPU; a spinning one about one CPU while it runs
    assert max(c for _, c in samples["sleep"]) < 0.3
    assert sorted(c for _, c in samples["spin"])[2] > 0.3


def test_inner_calls_divide_the_wall_time():
    samples = timing.interleaved_samples({"spin": _spin}, repeat=3, inner=4, quiesce=False)
    assert all(0.004 <= w < 0.004 * 4 for w, _ in samples["spin"])     # per call, not per timing


def test_medians_match_the_samples():
    fns = {"a": lambda: _spin(0.002)}
    medians = timing.medians(timing.interleaved_samples(fns, repeat=3, quiesce=False))
    assert set(medians) == {"a"} and medians["a"] >= 0.002
