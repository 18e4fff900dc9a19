"""The one timing helper the benchmark scripts share."""

from __future__ import annotations

import gc
import time


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


def interleaved_medians(fns: dict, repeat: int = 5, inner: int = 1) -> dict:
    """``{name: median seconds per call}`` of the callables in ``fns``, timed interleaved: after
    one untimed warm-up call of each, ``repeat`` rounds each time every one once (the order
    rotating per round), so a change in machine load affects all of them alike.  A timing is one
    call (``inner=1``: caches as the other callables and a garbage collection left them) or
    ``inner`` back-to-back calls (a warm loop, as a serving loop runs), divided by ``inner``."""
    import statistics

    names = list(fns)
    for n in names:
        for _ in range(min(inner, 3)):
            fns[n]()
    times: dict = {n: [] for n in names}
    for r in range(repeat):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            fn = fns[n]
            gc.collect()
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            times[n].append((time.perf_counter() - t0) / inner)
    return {n: statistics.median(t) for n, t in times.items()}
