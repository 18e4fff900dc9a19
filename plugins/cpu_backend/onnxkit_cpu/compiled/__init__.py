"""Compiled loops for the cpu backend's hot kernels, by numba — imported and compiled lazily.

numpy's per-call cost (each ufunc call or reduction) dominates the small tensors of real models:
a LayerNormalization of a small activation is about a dozen numpy calls, where one compiled loop
over the same rows is one call.  The modules of this package hold such loops as
plain Python functions decorated with :func:`kernel`; an override asks for the compiled
function *at planning* with :meth:`Lazy.get` and keeps its numpy body where that is None.

Contract:

* **Lazy.** Nothing here imports numba until an override first asks for a compiled function
  (numba's import is costly: :data:`SETUP_S`); each function is compiled on its first call per argument
  types, ``cache=True`` (numba's on-disk cache beside the module, or its user-wide cache
  where that is not writable), ``nogil=True`` (a session shared by Python threads runs these
  loops in parallel), ``error_model="numpy"`` (a division by zero gives inf/NaN, as numpy,
  never an exception).  No ``parallel=``: a compiled loop is one thread (the overrides run
  several calls at once on disjoint blocks across a run's intra-op threads,
  :func:`onnxkit.runtime.threads.parallel_for`, which ``nogil`` allows); no ``fastmath``
  unless a module says why its result stays within Clause 11's tolerances.
* **Optional.** :func:`enabled` is False when numba cannot be imported, or when the
  environment sets ``ONNXKIT_CPU_COMPILED=0``, or inside :func:`disabled` (the tests' way to
  compare both bodies); overrides then use their numpy bodies, with the same results within
  the tolerances the module states.  The choice is made per kernel at planning: a session
  planned while enabled keeps its compiled loops.
* **Not on a cold first run.** Where numba is not imported yet and the plan is a session's cold
  plan (:func:`onnxkit.plugin.first_run`), :meth:`Lazy.get` returns None without importing
  numba and records the deferral with its estimated setup (:data:`SETUP_S`, and :data:`LOAD_S`,
  or :data:`COMPILE_S` where numba's on-disk cache does not hold the loop, read without numba):
  the first results of a fresh process come from the numpy bodies, and once its runs have spent
  that estimate the session sets up its warm plan off the run path (a child process compiles
  into numba's on-disk cache, a background thread imports numba and loads it:
  :mod:`onnxkit.runtime.plans`) and switches to it between two runs: no loop is compiled or
  loaded inside a user's run.
  A cold plan that has deferred something keeps deferring (numba imported meanwhile by the
  session's background setup, or another session, changes nothing for it: no loop is compiled
  inside one of its runs).  A plan made once numba is imported in the process, that has not
  deferred, takes the compiled loops at once.  ``ONNXKIT_FIRST_RUN=warm`` plans compiled loops
  from the first run.
* **Same contract as the numpy body.** A compiled loop takes arrays the override has already
  checked (dtype, shape, contiguity) and writes into an output the override allocated; it
  never allocates an unbounded size and never raises for data values.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading

from onnxkit.plugin import first_run, note_planned_body

from . import cache_index

__all__ = ["Lazy", "kernel", "enabled", "disabled", "available"]

_DISABLED = contextvars.ContextVar("onnxkit_cpu_compiled_disabled", default=False)
_lock = threading.Lock()
_numba = None          # the numba module once imported; False when it cannot be
_OPTIONS = {"cache": True, "nogil": True, "error_model": "numpy"}
#: What a deferral tells the session the warm plan's setup will cost (seconds; the session keeps
#: its cold plan until its runs have spent as much, :class:`onnxkit.plugin.FirstRun`): numba's
#: import with its LLVM target set up, once (SETUP_S), and per loop loading its cached machine
#: code (LOAD_S), or compiling it (COMPILE_S, a loop's share of compiling a model's deferred
#: loops from an empty cache) where numba's on-disk cache holds none of the plan's deferred loops
#: (:func:`cache_index.holds`, :attr:`onnxkit.plugin.FirstRun.cost`): estimates, set from what
#: ``benchmarks/promotion.py`` measures (the promoting run's setup in fresh processes,
#: ``--empty-cache`` for a compile; its results are in docs/benchmarks.md).
SETUP_S = 0.43
LOAD_S = 0.01
COMPILE_S = 0.5


def _import_numba():
    global _numba
    if _numba is None:
        with _lock:
            if _numba is None:
                try:
                    import numba
                except Exception:  # absent or broken (a platform without wheels): numpy bodies
                    _numba = False
                else:
                    _numba = numba
    return _numba or None


def available() -> bool:
    """Whether numba can be imported (imports it)."""
    return _import_numba() is not None


def _switched_off() -> bool:
    return os.environ.get("ONNXKIT_CPU_COMPILED", "1").strip() == "0"


def enabled() -> bool:
    """Whether compiled loops are on in this process and context (imports numba; see the module
    docstring: :meth:`Lazy.get` may still defer them on a cold first run)."""
    if _DISABLED.get() or _switched_off():
        return False
    return available()


class disabled:
    """``with disabled():`` kernels planned inside take their numpy bodies (for tests and A/B runs)."""

    def __enter__(self):
        self._token = _DISABLED.set(True)
        return self

    def __exit__(self, *exc):
        _DISABLED.reset(self._token)
        return False


class Lazy:
    """A Python function to be compiled by numba on first demand (see :func:`kernel`)."""

    __slots__ = ("fn", "options", "_compiled")

    def __init__(self, fn, options: dict):
        self.fn, self.options, self._compiled = fn, options, None

    def get(self):
        """The compiled function (a numba dispatcher), or None when :func:`enabled` is False or
        the plan is a cold first run made before numba was imported or that has deferred already
        (the deferral is recorded)."""
        record = first_run()
        if record is not None and not (_DISABLED.get() or _switched_off()) and (
                record.deferred or (_numba is None and "numba" not in sys.modules)):
            cached = cache_index.holds(self.fn) is True  # cannot tell: counted as a compile
            record.defer(f"compiled {self.name}", cost=LOAD_S, setup=("numba", SETUP_S),
                         compile_cost=None if cached else COMPILE_S)
            note_planned_body("numpy (cold plan; compiled later)")
            return None
        if not enabled():
            note_planned_body("numpy (compiled loops off)")
            return None
        note_planned_body(f"compiled ({self.fn.__module__.rsplit('.', 1)[-1]})")
        c = self._compiled
        if c is None:
            numba = _import_numba()
            with _lock:
                if self._compiled is None:
                    options = {**_OPTIONS, **self.options}
                    try:
                        self._compiled = numba.njit(**options)(self.fn)
                    except RuntimeError:   # no cache locator (a function not from a file)
                        self._compiled = numba.njit(**{**options, "cache": False})(self.fn)
                c = self._compiled
        return c

    @property
    def name(self) -> str:
        """``family.function``, e.g. ``norm.rows``."""
        return f"{self.fn.__module__.rsplit('.', 1)[-1]}.{self.fn.__name__}"

    def __repr__(self) -> str:
        return f"<compiled kernel {self.fn.__module__}.{self.fn.__qualname__}>"


def kernel(fn=None, **options):
    """Decorator: ``@kernel`` or ``@kernel(fastmath=...)`` makes ``fn`` a :class:`Lazy`; the
    options extend the module docstring's (``cache``, ``nogil``, ``error_model``)."""
    if fn is None:
        return lambda f: Lazy(f, options)
    return Lazy(fn, options)
