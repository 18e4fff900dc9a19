"""Seeded runs of many models: generate, check, minimize, save, count.

Model ``k`` of seed ``s`` is built by family ``FAMILY_ORDER[k % len]`` (every family equally
often) from ``numpy.random.default_rng([s, k])``, and checked with feeds from
``default_rng([s * 1_000_003 + k, 1])``: deterministic per seed, whatever the number of jobs.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from typing import Optional

from onnxkit import records
import numpy as np
import onnx

from .build import Builder
from .oracle import Verdict, check, describe_model

#: seconds one model may take before it counts as a hang
MODEL_TIMEOUT = 60


def families() -> dict:
    from . import fastpaths, fusions, passes, planpasses, qdq

    return {**fusions.FAMILIES, **passes.FAMILIES, **planpasses.FAMILIES, **fastpaths.FAMILIES, **qdq.FAMILIES}


def generate(seed: int, k: int) -> tuple:
    """``(family name, model)`` of model ``k`` of ``seed``."""
    fams = families()
    order = sorted(fams)
    name = order[k % len(order)]
    b = Builder(np.random.default_rng([seed, k]))
    fams[name](b)
    return name, b.model()


def feed_seed(seed: int, k: int) -> int:
    return seed * 1_000_003 + k


@records.define
class Outcome:
    seed: int
    k: int
    family: str
    verdict: Verdict
    summary: str = ""
    saved: str = ""


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def run_one(seed: int, k: int, out_dir: Optional[str] = None, minimize: bool = True) -> Outcome:
    """Generate, check and (on failure) minimize and save model ``k`` of ``seed``."""
    try:
        family, model = generate(seed, k)
    except Exception as exc:  # noqa: BLE001 - a generator slip is the fuzzer's failure, reported
        v = Verdict("fail", "fuzzer", detail=f"generator: {type(exc).__name__}: {exc}"[:300])
        return Outcome(seed, k, "?", v, summary=f"seed {seed} model {k}: {v.detail}")
    fs = feed_seed(seed, k)
    use_alarm = hasattr(signal, "SIGALRM")
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(MODEL_TIMEOUT)
    try:
        verdict = check(model, fs)
    except _Timeout:
        verdict = Verdict("fail", "hang", detail=f"no answer in {MODEL_TIMEOUT} s")
    except Exception as exc:  # noqa: BLE001 - the fuzzer's own slip is reported, not fatal
        verdict = Verdict("fail", "fuzzer", detail=f"{type(exc).__name__}: {exc}"[:300])
    finally:
        if use_alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
    outcome = Outcome(seed, k, family, verdict)
    if verdict.status == "fail":
        small = model
        if minimize and verdict.kind not in ("hang", "fuzzer"):
            from .minimize import minimize as shrink

            small = shrink(model, fs, verdict)
        outcome.summary = (f"seed {seed} model {k} ({family}): {verdict.kind} [{verdict.engine}] "
                           f"{check(small, fs).detail if small is not model else verdict.detail} :: "
                           f"{describe_model(small)}")
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            path = os.path.join(out_dir, f"s{seed}_m{k}_{family}_{verdict.kind}.onnx")
            onnx.save(small, path)
            with open(path[:-5] + ".txt", "w") as f:
                f.write(outcome.summary + "\n")
            outcome.saved = path
    return outcome


def _job(args):
    seed, k, out_dir, minimize = args
    return run_one(seed, k, out_dir, minimize)


@records.define
class Report:
    models: int = 0
    failures: list = records.field(factory=list)
    exclusions: Counter = records.field(factory=Counter)
    by_family: Counter = records.field(factory=Counter)
    elapsed: float = 0.0

    def add(self, o: Outcome) -> None:
        self.models += 1
        self.by_family[o.family] += 1
        if o.verdict.status == "fail":
            self.failures.append(o)
        elif o.verdict.status == "excluded":
            self.exclusions[o.verdict.reason] += 1

    def text(self) -> str:
        lines = [f"models tried: {self.models}", f"failures: {len(self.failures)}",
                 "exclusions: " + (", ".join(f"{k} {v}" for k, v in sorted(self.exclusions.items())) or "none"),
                 f"elapsed: {self.elapsed:.1f} s"]
        lines += [f"  FAIL {o.summary}" + (f" -> {o.saved}" if o.saved else "") for o in self.failures]
        return "\n".join(lines)


def run_many(models: int, seed: int = 0, jobs: int = 1, out_dir: Optional[str] = None, minimize: bool = True,
             start: int = 0, progress=None) -> Report:
    """Check models ``start .. start + models - 1`` of ``seed`` on ``jobs`` processes."""
    t0 = time.perf_counter()
    report = Report()
    tasks = [(seed, k, out_dir, minimize) for k in range(start, start + models)]
    if jobs <= 1:
        results = map(_job, tasks)
        pool = None
    else:
        import multiprocessing as mp

        pool = mp.get_context("forkserver" if os.name == "posix" else "spawn").Pool(jobs, maxtasksperchild=200)
        results = pool.imap(_job, tasks, chunksize=4)
    try:
        for o in results:
            report.add(o)
            if progress is not None:
                progress(report, o)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    report.elapsed = time.perf_counter() - t0
    return report
