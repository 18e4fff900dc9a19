"""Freed memory kept for the next run, as onnxruntime's cpu memory arena keeps it.

onnxkit's kernels make their results with numpy, whose large buffers come from the C library's
``malloc``.  glibc serves an allocation above its mmap threshold by a fresh mapping, unmapped
again when freed, and returns free memory at the top of its heap to the system beyond its trim
threshold (both thresholds adjusted as it goes); a model whose intermediates are megabytes then
takes page faults on them in every run, which the thresholds below avoid (a run of such a model
is markedly faster with them).  onnxruntime allocates from its own arena, which keeps what it
allocated (``SessionOptions.enable_cpu_mem_arena``, on by default).

:func:`keep_freed_memory` is onnxkit's counterpart, for the whole process, since numpy's buffers
come from the process's ``malloc``: once, when a session is made with ``enable_cpu_mem_arena``
True (the default), it sets glibc's ``M_MMAP_THRESHOLD`` to :data:`MMAP_THRESHOLD` (allocations
below it come from the heap and are reused) and ``M_TRIM_THRESHOLD`` to :data:`TRIM_THRESHOLD`
(up to that much free memory stays with the process), with ``mallopt``.  It does nothing

* where the C library is not glibc (musl, macOS, Windows);
* where the environment sets glibc's malloc tunables itself (:data:`TUNABLES`, e.g. Dask's
  workers' ``MALLOC_TRIM_THRESHOLD_``): the program's choice stands;
* for a session made with ``enable_cpu_mem_arena = False`` (a process that made one with it
  True keeps the setting: ``mallopt`` is process-wide and is not undone).

The cost is memory: a process keeps up to :data:`TRIM_THRESHOLD` of freed heap it would
otherwise return, as onnxruntime's arena keeps its chunks.  Results are unchanged.
"""

from __future__ import annotations

import os
import threading

#: allocations below this many bytes come from the heap (glibc's M_MMAP_THRESHOLD; its maximum)
MMAP_THRESHOLD = 32 << 20
#: free memory at the heap's top kept up to this many bytes (glibc's M_TRIM_THRESHOLD)
TRIM_THRESHOLD = 128 << 20
#: environment variables through which a program sets glibc's malloc itself
TUNABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
            "MALLOC_ARENA_MAX", "GLIBC_TUNABLES")
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3

_lock = threading.Lock()
_state: dict = {}  # "applied": bool, once decided


def keep_freed_memory() -> bool:
    """Set glibc's thresholds as the module says, once per process; returns whether they are set
    (False where the C library is not glibc, the environment chose, or ``mallopt`` refused)."""
    with _lock:
        if "applied" not in _state:
            _state["applied"] = _apply()
        return _state["applied"]


def _apply() -> bool:
    if any(name in os.environ for name in TUNABLES):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (AttributeError, ValueError, OSError):  # no confstr, or no such name: not glibc
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
