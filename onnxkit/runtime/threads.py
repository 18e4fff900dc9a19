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
Where every BLAS loaded is an OpenBLAS that ``/proc/self/maps`` lists (Linux), its thread count is
read and set through OpenBLAS's own entry points and threadpoolctl is not imported; otherwise
threadpoolctl finds and sets them.  Without threadpoolctl (it is a dependency of onnxkit) runs
go unlimited.

The same count sizes onnxkit's own intra-op parallelism (:func:`parallel_for`): kernels that are
not one BLAS call (the cpu backend's compiled loops, released from the GIL, and numpy bodies)
split their work into contiguous blocks of rows (batch, channels, heads, planes, never a
reduction) run on a process-wide pool of threads, so a run's results do not depend on the count.
The count is the run's (a context variable set by :func:`blas_limit`, which the session enters
around each run of a model :func:`uses_blas`); outside a session's run, and in the pool's own
threads (no nesting), it is 1: one block, the caller's thread, today's single-thread path.  In a
model with BLAS matrix products it is 1 too unless the session asks otherwise
(:func:`splits_kernels`): BLAS's threads are then the run's parallelism.
"""

from __future__ import annotations

import contextvars
import functools
import math
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


#: the load average's time constant (seconds): the one-minute average
LOAD_TAU_S = 60.0


def _own_demand(now: float) -> float:
    """This process's share of the one-minute load average: its CPU seconds per second of wall
    time (all its threads: ``time.process_time``) averaged as the kernel averages the load
    (exponentially, :data:`LOAD_TAU_S`), from the readings of the calls so far, at least 1.0;
    1.0 at the first call."""
    cpu = time.process_time()
    then, cpu_then, average = _own_cache
    if then is None or now <= then:
        _own_cache[:] = [now, cpu, average]
        return max(1.0, average)
    keep = math.exp(-(now - then) / LOAD_TAU_S)
    average = average * keep + (cpu - cpu_then) / (now - then) * (1.0 - keep)
    _own_cache[:] = [now, cpu, average]
    return max(1.0, average)


_own_cache: list = [None, 0.0, 1.0]   # [time read, process CPU then, the averaged demand]
#: the previous reading of :func:`running_elsewhere` (a thread runnable for one reading alone is
#: not a busy process: the smaller of two consecutive readings counts)
_running_before: list = [None]


def free_threads(now: float = None, loadavg=None, running=None, own: float = None) -> int:
    """:func:`default_threads` less the cores other processes keep busy, at least 1.

    Other processes' demand is the greater of the one-minute load average less this process's
    own demand (``os.getloadavg``; its own demand: the CPU seconds per second its threads used,
    averaged as the load is, at least one thread — a process that ran two BLAS threads is not the
    other process its own load average shows: :func:`_own_demand`) and the threads of other
    processes runnable now, in two consecutive readings
    (:func:`running_elsewhere`: the load average lags a process that just became busy by up
    to a minute, and BLAS threads sharing its cores meanwhile slow a run several times; counted
    only where the load average leaves more than one thread: it can only lower the count, and
    it reads every thread of this process); re-read at most every
    :data:`LOAD_REFRESH_S` seconds.  Where neither is available,
    :func:`default_threads`.  ``loadavg`` / ``running`` / ``own``: given values (tests; ``own``
    1.0 where ``loadavg`` is given without it)."""
    now = time.monotonic() if now is None else now
    if loadavg is None and now - _load_cache[0] < LOAD_REFRESH_S and _load_cache[1]:
        return int(_load_cache[1])
    try:
        load = (loadavg or os.getloadavg())[0]
    except (OSError, AttributeError):
        load = None
    if own is None:
        own = 1.0 if loadavg is not None else _own_demand(now)
    physical = default_threads()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if running is None and loadavg is None and not (
            load is not None and max(1, min(physical, int(cpus - max(0.0, load - own) + 0.5))) == 1):
        running = now_running = running_elsewhere()
        if running is not None and _running_before[0] is not None:
            running = min(running, _running_before[0])
        _running_before[0] = now_running
    if load is None and running is None:
        return default_threads()
    others = max(0.0, (load or 0.0) - own, float(running or 0))
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


def operators_of(model) -> frozenset:
    """``(domain, op_type)`` of every node of ``model``: its graph, their subgraphs, its functions."""
    from ..functions import subgraphs_of
    from ..registry import normalize_domain

    found = set()

    def visit(nodes):
        for n in nodes:
            found.add((normalize_domain(n.domain), n.op_type))
            for g in subgraphs_of(n):
                visit(g.node)

    visit(model.graph.node)
    for f in model.functions:
        visit(f.node)
    return frozenset(found)


def uses_blas(model, registry=None, operators: frozenset = None) -> bool:
    """True if a node of ``model`` (:func:`operators_of`, or the given ``operators``) is of an
    operator whose kernels call BLAS (:func:`calls_products`) or split across the run's intra-op
    threads (:func:`split_operators`): a model with none of them has nothing to limit, so its runs
    skip threadpoolctl (a few µs per run)."""
    ops = operators_of(model) if operators is None else operators
    return calls_products(model, registry, ops) or not ops.isdisjoint(split_operators())


def calls_products(model, registry=None, operators: frozenset = None) -> bool:
    """True if a node of ``model`` (:func:`operators_of`, or the given ``operators``) is of an
    operator whose kernels call BLAS (:func:`blas_operators` of ``registry``, default the
    process's)."""
    from ..registry import get_registry

    ops = operators_of(model) if operators is None else operators
    return not ops.isdisjoint(blas_operators(registry if registry is not None else get_registry()))


class _Limit:
    """BLAS limited to ``n`` threads between enter and exit: each library whose count differs is
    set to ``n`` on entering and set back to the count it had on exit (one whose count already
    is ``n`` is left alone).  What threadpoolctl's ``limit(limits=n, user_api="blas")`` does, in
    a few library calls instead of its per-call bookkeeping, which is paid on every run.  Also
    the block's intra-op thread count (:func:`intra_op_threads`) is ``blocks`` (default ``n``)."""

    __slots__ = ("libs", "n", "blocks", "found", "token")

    def __init__(self, libs: tuple, n: int, blocks: int = None):
        self.libs, self.n, self.found, self.token = libs, n, (), None
        self.blocks = n if blocks is None else blocks

    def __enter__(self):
        n, found = self.n, []
        for lib in self.libs:
            had = lib.get_num_threads()
            if had != n:
                lib.set_num_threads(n)
                if had is not None:
                    found.append((lib, had))
        self.found = found
        self.token = _intra.set(self.blocks)
        return self

    def __exit__(self, *exc) -> bool:
        _intra.reset(self.token)
        for lib, had in reversed(self.found):
            lib.set_num_threads(had)
        return False


_blas_libs = None
_modules_seen = -1

#: file-name beginnings of the BLAS libraries threadpoolctl recognises (OpenBLAS, BLIS, MKL, FlexiBLAS)
_BLAS_NAMES = ("libopenblas", "libscipy_openblas", "openblas", "libblas", "libblis", "libmkl_rt", "mkl_rt",
               "libflexiblas")
#: of those, the names that can only be OpenBLAS (``libblas`` may be any implementation)
_OPENBLAS_NAMES = ("libopenblas", "libscipy_openblas")


class _OpenBLAS:
    """One loaded OpenBLAS's thread count, read and set through its own entry points (what
    threadpoolctl's OpenBLAS controller calls: ``openblas_get_num_threads`` /
    ``openblas_set_num_threads`` with the build's prefix and suffix)."""

    __slots__ = ("filepath", "get_num_threads", "_set")
    user_api = "blas"

    def __init__(self, filepath: str, get, set_):
        self.filepath, self.get_num_threads, self._set = filepath, get, set_

    def set_num_threads(self, n: int) -> None:
        self._set(n)


def _openblas_only() -> Optional[tuple]:
    """The loaded BLAS libraries as :class:`_OpenBLAS` controllers, read from ``/proc/self/maps``
    without threadpoolctl; None where that cannot decide: no ``/proc`` (not Linux), a loaded
    library named like a BLAS other than OpenBLAS (or like ``libblas``), or an OpenBLAS whose
    thread-count entry points are not found (then threadpoolctl looks)."""
    try:
        with open("/proc/self/maps") as f:
            text = f.read()
    except OSError:
        return None
    paths = {line[line.index("/"):] for line in text.splitlines() if "/" in line
             and line.rpartition("/")[2].startswith(_BLAS_NAMES)}
    found = []
    for path in sorted(paths):
        if not path.rpartition("/")[2].startswith(_OPENBLAS_NAMES) or path.endswith(" (deleted)"):
            return None
        import ctypes

        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
        except OSError:
            return None
        for prefix in ("", "scipy_"):
            for suffix in ("", "64_"):
                get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                set_ = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if get is not None and set_ is not None:
                    found.append(_OpenBLAS(path, get, set_))
                    break
            else:
                continue
            break
        else:
            return None
    return tuple(found)


def _blas_controllers() -> tuple:
    """The BLAS library controllers of the libraries loaded now (empty without threadpoolctl).

    Where the loaded BLAS libraries are all OpenBLAS builds and ``/proc/self/maps`` lists them
    (:func:`_openblas_only`), their own entry points, without importing threadpoolctl; else
    threadpoolctl's controllers of user API ``blas``.  Found again whenever a module was
    imported since the last look (``len(sys.modules)`` changed): a BLAS loaded after the first
    run (scipy's, torch's) is limited too, and a run in steady state pays one ``len``."""
    global _blas_libs, _controller, _modules_seen
    loaded = len(sys.modules)
    if _blas_libs is None or loaded != _modules_seen:
        libs = _openblas_only()
        if libs is None:
            with _lock:
                _controller = None
            c = controller()
            libs = tuple(lib for lib in (c.lib_controllers if c is not None else ()) if lib.user_api == "blas")
        _blas_libs = libs
        _modules_seen = loaded
    return _blas_libs


def blas_limit(num_threads: int, split_kernels: bool = True):
    """A context manager limiting BLAS to ``num_threads`` (0: :func:`free_threads`) for its block,
    and setting the block's :func:`intra_op_threads` so (1 where ``split_kernels`` is false:
    :func:`splits_kernels`); a fresh one per call (several threads may each hold one)."""
    n = num_threads or free_threads()
    return _Limit(_blas_controllers(), n, n if split_kernels else 1)


#: the session configuration entry choosing whether kernels split their own loops across the
#: intra-op threads (:func:`splits_kernels`)
SPLIT_KERNELS_KEY = "session.intra_op.split_kernels"


def splits_kernels(setting, calls_products: bool) -> bool:
    """Whether a session's kernels split their own loops across its intra-op threads
    (:func:`parallel_for`), from its ``session.intra_op.split_kernels`` entry: ``"1"`` always,
    ``"0"`` never, ``"auto"`` or unset: only in a model without BLAS matrix products
    (``calls_products`` false).  In a model with them, BLAS's own threads are the run's
    parallelism: OpenBLAS's workers keep spinning on the other cores between products, and a
    block handed to onnxkit's pool meanwhile waits for a core they hold, so splitting both ways
    makes the run slower than BLAS's threads alone (docs/benchmarks.md, default threads).
    Raises :class:`~onnxkit.errors.OnnxkitError` for any other value."""
    value = "auto" if setting is None else str(setting).strip().lower()
    if value == "auto":
        return not calls_products
    if value in ("0", "1"):
        return value == "1"
    from ..errors import OnnxkitError

    raise OnnxkitError(f"session configuration entry {SPLIT_KERNELS_KEY!r} is {setting!r}: expected "
                       f"'auto', '0' or '1'")


def blas_threads() -> list:
    """``num_threads`` of each BLAS library loaded, as threadpoolctl reports it now."""
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]


# -- onnxkit's own intra-op threads ---------------------------------------------------------------

#: the intra-op thread count of the run this context is in (set by :class:`_Limit`)
_intra = contextvars.ContextVar("onnxkit_intra_op_threads", default=1)
#: ``(domain, op_type)`` of the operators some kernel of which splits across the intra-op threads
_SPLIT_OPERATORS: set = set()
_pool_lock = threading.Lock()
_pool = [None, 0, 0]        # [executor, workers, pid]
#: called with ``(name, blocks)`` by every :func:`parallel_for` when set (tests)
observer = None


def intra_op_threads() -> int:
    """The intra-op thread count of the current run (1 outside a session's run and in the pool's
    own threads)."""
    return _intra.get()


def splits_across_threads(*ops) -> None:
    """Declare ``(domain, op_type)`` pairs whose kernels call :func:`parallel_for` (so a model
    holding only them still enters :func:`blas_limit` around its runs)."""
    _SPLIT_OPERATORS.update(ops)


def split_operators() -> frozenset:
    """The operators declared by :func:`splits_across_threads`."""
    return frozenset(_SPLIT_OPERATORS)


def _executor(workers: int):
    """The process's pool with at least ``workers`` threads (made again, larger, when a run asks
    for more, and in a forked child, where the parent's threads do not exist).  A pool replaced
    is not shut down: a run on another thread may still be handing it blocks; its threads end
    once nothing refers to it."""
    from concurrent.futures import ThreadPoolExecutor

    ex, have, pid = _pool
    if ex is not None and have >= workers and pid == os.getpid():
        return ex
    with _pool_lock:
        ex, have, pid = _pool
        if ex is None or have < workers or pid != os.getpid():
            size = max(workers, have if pid == os.getpid() else 0)
            ex = ThreadPoolExecutor(max_workers=size, thread_name_prefix="onnxkit-intra-op")
            _pool[:] = [ex, size, os.getpid()]
        return ex


def blocks(n: int, grain: int = 1, threads: int = None) -> int:
    """How many blocks :func:`parallel_for` makes of ``n`` items at ``grain`` items at least per
    block: ``min(threads, n // grain)``, at least 1 (``threads``: :func:`intra_op_threads`)."""
    t = _intra.get() if threads is None else threads
    return max(1, min(t, n // max(1, grain)))


def _one_blas_thread() -> list:
    """Each loaded BLAS library whose thread count is above 1 set to 1: ``[(library, the count it
    had)]``, for :func:`_restore_blas`."""
    found = []
    for lib in _blas_controllers():
        had = lib.get_num_threads()
        if had is not None and had > 1:
            lib.set_num_threads(1)
            found.append((lib, had))
    return found


def _restore_blas(found: list) -> None:
    """The counts :func:`_one_blas_thread` found, set back (last set, first restored)."""
    for lib, had in reversed(found):
        lib.set_num_threads(had)


def parallel_for(fn, n: int, grain: int = 1, name: str = "", blas: bool = False) -> int:
    """Call ``fn(lo, hi)`` on contiguous blocks ``[lo, hi)`` covering ``range(n)``, one block per
    intra-op thread of the run (:func:`blocks`; ``grain``: the fewest items worth a block of
    their own), and return once all are done (the first exception raised, re-raised).  The
    blocks are fixed by ``n``, ``grain`` and the count alone; which thread runs one is not: the
    caller and ``k - 1`` tasks on the pool take the next block not taken until none is left, and
    tasks no pool thread has started by then are cancelled (on a machine whose cores are busy a
    pool thread may wait milliseconds for one: the caller then runs the blocks itself, as one
    thread would).  ``fn`` must write disjoint outputs per block and compute each item as the
    whole call would (then results do not depend on the thread count); it runs concurrently only
    where its body releases the GIL (numba ``nogil`` loops, numpy ufuncs and copies).  One
    block: ``fn(0, n)`` on the caller's thread, nothing else.  Returns the number of blocks.

    ``blas``: the blocks call BLAS (matrix products).  Where there are several, BLAS runs one
    thread for the call (every loaded library whose count is above 1 set to 1 before the first
    block, set back once all are done): the blocks are the call's parallelism, and a product in
    a block would otherwise start BLAS threads of its own on the cores the other blocks hold
    (a barrier per product, each waiting for a core).  The setting is process-wide, as :func:`blas_limit`'s: a run of another
    session in another Python thread meanwhile sees one BLAS thread."""
    k = blocks(n, grain)
    if observer is not None:
        observer(name, k)
    if k <= 1:
        fn(0, n)
        return 1
    bounds = [n * i // k for i in range(k + 1)]
    taken = iter(range(k))       # next() on it is atomic under the GIL: each block taken once
    faults = []

    def take():
        for i in taken:
            try:
                fn(bounds[i], bounds[i + 1])
            except BaseException as e:  # noqa: B902 - re-raised by the caller once all are done
                faults.append(e)

    held = _one_blas_thread() if blas else ()
    try:
        ex = _executor(k - 1)
        futures = [ex.submit(take) for _ in range(k - 1)]
        take()
        for f in futures:
            if not f.cancel():
                f.result()
    finally:
        if held:
            _restore_blas(held)
    if faults:
        raise faults[0]
    return k
