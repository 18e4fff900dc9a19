"""The one timing helper the benchmark scripts share.

Importing it sets ``ONNXKIT_FIRST_RUN=warm`` unless the environment chose a policy: the scripts
that import it time steady-state runs, so their sessions take their warm bodies (onnxkit-cpu's
compiled loops) from the first run instead of running the cold plan until its runs have spent
numba's setup (:mod:`onnxkit.runtime.bodies`).  The first results of a fresh process are what
``cold_start.py`` times.
"""

from __future__ import annotations

import gc
import os
import time

os.environ.setdefault("ONNXKIT_FIRST_RUN", "warm")

#: a timing starts once the process's other threads used less than this share of a CPU ...
SETTLE_SHARE = 0.1
#: ... over one interval of this many seconds (checked for at most SETTLE_MAX_S)
SETTLE_STEP_S = 0.005
SETTLE_MAX_S = 1.0


def settle() -> float:
    """Wait until this process's other threads are idle; return the seconds waited.

    A runtime's thread pool keeps spinning after a call returns (onnxruntime's intra-op pool
    with its default spinning: about one CPU for 60-100 ms after each run, measured; OpenBLAS's
    threads too), so in an interleaved timing the next callable would otherwise run while the
    previous one's threads still hold a CPU: on a 2-CPU machine that is a third party on the
    cores, and it falls on whichever runtime is timed next.  Waiting for them makes every
    timing start from the same state: the machine as the ``--busy`` processes (if any) leave it."""
    start = time.perf_counter()
    while time.perf_counter() - start < SETTLE_MAX_S:
        p0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        time.sleep(SETTLE_STEP_S)
        others = (time.process_time() - p0) - (time.thread_time() - t0)
        if others < SETTLE_SHARE * (time.perf_counter() - w0):
            break
    return time.perf_counter() - start


def best_of(fn, repeat: int, budget_s: float = 30.0) -> float:
    """The fastest of up to ``repeat`` calls of ``fn`` (seconds), stopping once ``budget_s`` is spent."""
    times = []
    start = time.perf_counter()
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s:
            break
    return min(times)


def median_of(fn, repeat: int = 5, inner: int = 1) -> float:
    """The median over ``repeat`` timings of ``inner`` back-to-back calls of ``fn``, per call
    (seconds), after one untimed warm-up call."""
    import statistics

    fn()
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def interleaved_samples(fns: dict, repeat: int = 5, inner: int = 1, quiesce: bool = True) -> dict:
    """``{name: [(seconds per call, CPU share), ...]}``: the callables in ``fns`` timed
    interleaved, ``repeat`` timings each.  After two untimed warm-up calls of each (an onnxkit
    session plans its first run cold and plans again, with its compiled loops, before the second:
    ``onnxkit.runtime.bodies``), ``repeat``
    rounds time every one once (the order rotating per round), so a change in machine load
    affects all of them alike.  A timing is one call (``inner=1``: caches as the other callables
    and a garbage collection left them) or ``inner`` back-to-back calls (a warm loop, as a
    serving loop runs), divided by ``inner``.  The CPU share is this process's CPU time over
    the timing's wall time (all its threads: a runtime's own pool included, other processes
    not): 1.0 is one CPU's worth, 2.0 two.  ``quiesce``: each timing starts after
    :func:`settle` (no thread of the previous callable still spinning)."""
    names = list(fns)
    for n in names:
        for _ in range(max(2, min(inner, 3))):
            fns[n]()
    samples: dict = {n: [] for n in names}
    for r in range(repeat):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            fn = fns[n]
            gc.collect()
            if quiesce:
                settle()
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(inner):
                fn()
            wall = time.perf_counter() - t0
            samples[n].append((wall / inner, (time.process_time() - c0) / wall if wall > 0 else 0.0))
    return samples


def medians(samples: dict) -> dict:
    """``{name: median seconds per call}`` of :func:`interleaved_samples`' result."""
    import statistics

    return {n: statistics.median(w for w, _ in s) for n, s in samples.items()}

