"""BLAS threads under the session's control (``SessionOptions.intra_op_num_threads``).

numpy's matrix products run in its BLAS (OpenBLAS, MKL, BLIS), whose thread pool is sized at
import and shared by the whole process.  A session limits it around each of its runs with
threadpoolctl: ``intra_op_num_threads = n > 0`` gives ``n`` threads; ``0`` (the default)
gives the physical cores this process may run on (:func:`default_threads`) *that other
processes leave free* (:func:`free_threads`): BLAS threads that share a core with a busy
process wait for each other at every barrier (and OpenBLAS's spin-wait), which makes a
convolution network on a loaded machine many times slower than with one thread.

The limit is process-wide (threadpoolctl sets the library's global setting), so sessions with
different thread counts that run at the same time, from several Python threads, share one
setting: whichever entered last, until the runs end (each restores the setting it found).
Without threadpoolctl (it is a dependency of onnxkit) runs go unlimited.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Optional
import os
import sys
import threading
import time
import weakref

_lock = threading.Lock()
_controller = None


def controller():
    """The process's one ``threadpoolctl.ThreadpoolController`` (created on first use), or None."""
    global _controller
    with _lock:
        if _controller is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:  # pragma: no cover - a declared dependency
                _controller = False
            else:
                _controller = ThreadpoolController()
        return _controller or None


@functools.lru_cache(maxsize=1)
def default_threads() -> int:
    """Physical cores available to this process: the CPUs of its affinity mask, divided by the
    hardware threads per core where ``/sys`` states them (1 per core otherwise).  Read once per
    process (a run does not re-read ``/sys``)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        with open("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list") as f:
            siblings = _count(f.read())
    except OSError:
        siblings = 1
    return max(1, cpus // max(1, siblings))


#: how long a reading of the load average is reused (seconds)
LOAD_REFRESH_S = 1.0
_load_cache = [0.0, 0.0]   # [time read, threads]


def running_elsewhere() -> Optional[int]:
    """Threads of other processes runnable right now: the kernel's count of runnable threads
    (``/proc/loadavg``, fourth field) less this process's own runnable threads
    (``/proc/self/task/*/stat``); None where ``/proc`` does not say (not Linux)."""
    try:
        with open("/proc/loadavg") as f:
            runnable = int(f.read().split()[3].split("/")[0])
        own = 0
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/stat") as f:
                    stat = f.read()
            except OSError:  # the thread ended meanwhile
                continue
            own += stat[stat.rindex(")") + 2] == "R"
        return max(0, runnable - own)
    except (OSError, ValueError, IndexError):
        return None


def free_threads(now: float = None, loadavg=None, running=None) -> int:
    """:func:`default_threads` less the cores other processes keep busy, at least 1.

    Other processes' demand is the greater of the one-minute load average less this process's
    own runnable thread (``os.getloadavg``) and the threads of other processes runnable now
    (:func:`running_elsewhere`: the load average lags a process that just became busy by up
    to a minute, and BLAS threads sharing its cores meanwhile slow a run several times); re-read
    at most every :data:`LOAD_REFRESH_S` seconds.  Where neither is available,
    :func:`default_threads`.  ``loadavg`` / ``running``: given values (tests)."""
    now = time.monotonic() if now is None else now
    if loadavg is None and now - _load_cache[0] < LOAD_REFRESH_S and _load_cache[1]:
        return int(_load_cache[1])
    try:
        load = (loadavg or os.getloadavg())[0]
    except (OSError, AttributeError):
        load = None
    if running is None and loadavg is None:
        running = running_elsewhere()
    if load is None and running is None:
        return default_threads()
    physical = default_threads()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    others = max(0.0, (load or 0.0) - 1.0, float(running or 0))
    free = max(1, min(physical, int(cpus - others + 0.5)))
    if loadavg is None:
        _load_cache[:] = [now, free]
    return free


def _count(cpu_list: str) -> int:
    """The number of CPUs in a Linux CPU list such as ``0-3,8``."""
    n = 0
    for part in cpu_list.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            n += int(b) - int(a) + 1
        elif part:
            n += 1
    return n


#: ``{registry: frozenset of (domain, op_type)}``: the operators of each registry one of whose
#: kernels declares ``calls_blas`` (:func:`blas_operators`)
_BLAS_OPERATORS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def blas_operators(registry) -> frozenset:
    """``(domain, op_type)`` of every operator of ``registry`` some kernel of which (portable, or
    any backend's) declares that it calls BLAS (:func:`onnxkit.plugin.calls_blas`: matrix
    products); worked out once per registry."""
    found = _BLAS_OPERATORS.get(registry)
    if found is None:
        from ..kernel_traits import traits_of

        tables = [getattr(registry, "portable", {}), *getattr(registry, "kernels", {}).values()]
        found = frozenset((domain, op) for table in tables for (domain, op, _since), kernel in table.items()
                          if traits_of(kernel).calls_blas)
        _BLAS_OPERATORS[registry] = found
    return found


def uses_blas(model, registry=None) -> bool:
    """True if a node of ``model`` (its graphs, their subgraphs, its functions) is of an operator
    whose kernels call BLAS (:func:`blas_operators` of ``registry``, default the process's): a
    model with none of them has nothing to limit, so its runs skip threadpoolctl (a few µs per run)."""
    from ..functions import subgraphs_of
    from ..registry import get_registry, normalize_domain

    blas = blas_operators(registry if registry is not None else get_registry())

    def graph_nodes(nodes):
        for n in nodes:
            yield n
            for g in subgraphs_of(n):
                yield from graph_nodes(g.node)

    roots = [model.graph.node] + [f.node for f in model.functions]
    return any((normalize_domain(n.domain), n.op_type) in blas for nodes in roots for n in graph_nodes(nodes))


class _Limit:
    """BLAS limited to ``n`` threads between enter and exit: each library whose count differs is
    set to ``n`` on entering and set back to the count it had on exit (one whose count already
    is ``n`` is left alone).  What threadpoolctl's ``limit(limits=n, user_api="blas")`` does, in
    a few library calls instead of its per-call bookkeeping, which is paid on every run."""

    __slots__ = ("libs", "n", "found")

    def __init__(self, libs: tuple, n: int):
        self.libs, self.n, self.found = libs, n, ()

    def __enter__(self):
        n, found = self.n, []
        for lib in self.libs:
            had = lib.get_num_threads()
            if had != n:
                lib.set_num_threads(n)
                if had is not None:
                    found.append((lib, had))
        self.found = found
        return self

    def __exit__(self, *exc) -> bool:
        for lib, had in reversed(self.found):
            lib.set_num_threads(had)
        return False


_blas_libs = None
_modules_seen = -1


def _blas_controllers() -> tuple:
    """The BLAS library controllers of the libraries loaded now (empty without threadpoolctl).

    Found again whenever a module was imported since the last look (``len(sys.modules)``
    changed): a BLAS loaded after the first run (scipy's, torch's) is limited too, and a run in
    steady state pays one ``len``."""
    global _blas_libs, _controller, _modules_seen
    loaded = len(sys.modules)
    if _blas_libs is None or loaded != _modules_seen:
        with _lock:
            _controller = None
        c = controller()
        _blas_libs = tuple(lib for lib in (c.lib_controllers if c is not None else ()) if lib.user_api == "blas")
        _modules_seen = loaded
    return _blas_libs


def blas_limit(num_threads: int):
    """A context manager limiting BLAS to ``num_threads`` (0: :func:`free_threads`) for its block;
    a fresh one per call (several threads may each hold one)."""
    libs = _blas_controllers()
    if not libs:
        return contextlib.nullcontext()
    return _Limit(libs, num_threads or free_threads())


def blas_threads() -> list:
    """``num_threads`` of each BLAS library loaded, as threadpoolctl reports it now."""
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
