"""Every plan of one session, and the one place where a run's plan is chosen.

A session's runs are served by one of these plans, chosen per run by one key:

* the *tier*: the cold plan (numpy bodies where a kernel deferred a costly setup:
  :mod:`onnxkit.runtime.bodies`) until its record is due, then the warm plan, set up *off the run
  path* under ``tiered`` (the default; below) or made in the calling thread, between two runs,
  under ``second``, by :meth:`PlanSet.promote`, or where the deferrals estimated no cost;
* the *defaults fed*: under IR version < 4 the optimizer may have read an initializer that is
  also an input as a constant; a run that feeds one runs the model as given (the *plain* plan,
  made on first need);
* the *shape class* of the feeds (:class:`~onnxkit.runtime.optimizer.specialize.ShapeClasses`):
  the specializer's plan of that class, where the ``specialize`` pass is on; while a warm plan
  will replace the cold plan, the cold plan specializes only a class with a varying extent and a
  signature it has run :data:`COLD_SPECIALIZE_AFTER` times.

Inside a plan, :class:`~onnxkit.runtime.plan.GraphPlan` itself picks its folded-defaults variant
while no default is fed.  :class:`PlanSet` owns the plans, the specializer and the identities of
the values they keep (an output that is one is copied before it is handed out); the session asks
it for nothing but :meth:`PlanSet.run`.

The warm plan's setup off the run path: no compiled code is built or loaded inside a user's run.
The run that finds the record due starts a background thread and is served by the cold plan, as
are the runs after it, until the thread has ended; the first run to begin after that switches to
the warm plan (a run in progress keeps the plan it started with).  The thread

1. (``$ONNXKIT_WARM_SETUP=process``, the default, where a deferral's code is to be compiled:
   :attr:`~onnxkit.runtime.bodies.FirstRun.compiles`) runs the model warm in a child process
   (:data:`CHILD`, niced) on a copy of that run's feeds: numba compiles there, holding that
   process's interpreter lock, not this one's (Python threads share one lock, and numba's
   compiler is mostly Python: compiled in a thread of this process, a run waits for it up to a
   switch interval at a time, longer where the system preempts the thread holding the lock), and
   leaves its machine code in numba's on-disk cache.  Skipped where the child could not plan the
   same model (:meth:`PlanSet._fill_caches`); ``thread`` skips it always.  The runs after the
   setup began count towards the child's patience: once they have spent the estimate again on the
   cold plan, a child still running that has had less than :data:`CHILD_STARVED` of a core
   (niced, starved of CPU on a busy machine) is ended and started again at this process's own
   priority (once), so a long stream of runs is promoted without numba's compiler ever sharing
   this process's interpreter lock with the runs (compiled here, a loaded machine's stream waited
   tens of ms on many of its calls); a child that is computing is waited for;
2. plans warm (numba imported, its cache loaded or, what the child did not leave, compiled) with
   the garbage collector paused (a collection of the whole heap holds the lock for tens of ms),
   and runs the new plan on the copied feeds as the session's first runs would (recorded, then
   specialized: a *warm-up*; numba builds or loads a loop on its first call per argument types).
   No warm-up where a node is nondeterministic (Clause 8.5): it would advance the node's state.

A setup that fails is reported once, at the next run (a ``RuntimeWarning`` and the
``onnxkit.plan`` log), and the session keeps its cold plan for good.  :meth:`PlanSet.wait_warm`
(the session's ``wait_for_warm_plan``) waits for the thread and switches: tests and tools use it
where a switch must be deterministic.
"""

from __future__ import annotations

import atexit
import contextvars
import os
import sys
import threading
import time
import warnings
from typing import Callable, Optional

import numpy as np

from .bodies import _steps, planning_cold
from .gc_pause import collection_paused
from .optimizer.specialize import ROUNDS, signature
from .plan import Planner, kept_value_ids
from .threads import _blas_controllers


#: ``PlanSet._serve``'s ``specialize`` for a cold plan a warm one will replace: a shape class
#: with a varying extent is specialized, and a fixed signature once it has been run
#: :data:`COLD_SPECIALIZE_AFTER` times on that plan
VARYING_ONLY = "varying"
#: how many runs of one fixed signature the cold plan serves unspecialized (a tool running a
#: model a few times does not pay for specializing it; a stream of one chunk shape does, once)
COLD_SPECIALIZE_AFTER = 64
#: how many fixed signatures a cold tier counts before it forgets the counts (a bound on memory)
COLD_COUNTED = 64
#: ``$ONNXKIT_WARM_SETUP``'s values: ``process`` (the default: a child process compiles, the
#: background thread loads) or ``thread`` (the background thread compiles).
WARM_SETUPS = ("process", "thread")
#: the largest model (initializer elements) a child process plans again to fill the caches
CHILD_ELEMENTS = 1 << 25
#: how long a child process may take (seconds)
CHILD_TIMEOUT_S = 600.0
#: how often the setup thread looks at its child process and the runs' patience (seconds)
CHILD_POLL_S = 0.05
#: the share of one core below which a child process counts as starved (ended past its patience)
CHILD_STARVED = 0.5
#: the niceness the child process adds to its own first (a starved one is started again adding none)
CHILD_NICE = 19
_CHILDREN: set = set()
_CHILDREN_LOCK = threading.Lock()


def warm_setup() -> str:
    """``$ONNXKIT_WARM_SETUP`` as one of :data:`WARM_SETUPS` (unset: ``process``)."""
    from ..errors import OnnxkitError

    value = os.environ.get("ONNXKIT_WARM_SETUP", "").strip().lower() or "process"
    if value not in WARM_SETUPS:
        raise OnnxkitError(f"ONNXKIT_WARM_SETUP={value!r} is not one of {', '.join(WARM_SETUPS)}")
    return value


@atexit.register
def _end_children() -> None:
    """End the child processes still filling caches when this process exits."""
    with _CHILDREN_LOCK:
        for proc in list(_CHILDREN):
            proc.kill()


#: The child process of :meth:`PlanSet._fill_caches`, a program of its own using onnxkit's public
#: API (the engine imports nothing of the session's surface): niced, a warm session of the model
#: (argv: model path, feeds ``.npz`` with ``f<position>`` arrays, the input names by position, the
#: optimization level, the disabled passes, the runs to make, the niceness to add) run on the feeds as a
#: session's first runs are (recorded, then specialized), which leaves what its compiled loops need in
#: their on-disk cache.
CHILD = r"""
import os, sys, warnings
getattr(os, "nice", abs)(int(sys.argv[7]))
warnings.simplefilter("ignore")
import numpy as np
import onnxkit
model, feeds, names, level, disabled, runs = (sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]),
                                              sys.argv[5], int(sys.argv[6]))
so = onnxkit.SessionOptions()
so.graph_optimization_level = onnxkit.GraphOptimizationLevel(level)
so.intra_op_num_threads = 1
if disabled:
    so.add_session_config_entry("session.disable_passes", disabled)
session = onnxkit.InferenceSession(model, so)
with np.load(feeds) as stored:
    feed = {names[int(k[1:])]: stored[k] for k in stored.files}
for _ in range(runs):
    session.run(None, feed)
"""


class _Tier:
    """One tier's plans: ``plan``, its IR < 4 ``plain`` variant (made on first need), its
    ``specializer``, and ``cold``: the :class:`~onnxkit.runtime.bodies.FirstRun` record when it
    is the cold plan, else None.  A run reads the session's tier once (one attribute), so it
    never mixes the plans of two tiers."""

    __slots__ = ("plan", "plain", "specializer", "cold", "runs_of")

    def __init__(self, plan, specializer, cold):
        self.plan, self.plain, self.specializer, self.cold = plan, None, specializer, cold
        self.runs_of: dict = {}  # a cold tier's runs per fixed signature (:meth:`PlanSet._serve`)

    def often_run(self, sig: tuple) -> bool:
        """Count a run of the fixed signature ``sig`` on this tier; True from its
        :data:`COLD_SPECIALIZE_AFTER`-th run on (the counts are forgotten past
        :data:`COLD_COUNTED` signatures; a race between two threads may lose a count)."""
        runs = self.runs_of
        n = runs.get(sig, 0) + 1
        if n >= COLD_SPECIALIZE_AFTER:
            return True
        if n == 1 and len(runs) >= COLD_COUNTED:
            runs.clear()
        runs[sig] = n
        return False


class _Setup:
    """The background setup of a warm tier: ``done`` is set when the thread has ended, with
    ``tier`` (the warm :class:`_Tier`) or ``error`` (what it raised); ``reported``: a failure
    has been warned about; ``times``: ``time.perf_counter()`` when it began, when its child
    process ended (or was skipped) and when it ended, None until then (for benchmarks);
    ``waited``: the seconds the session's runs have spent on the cold plan since it began, and
    ``patience``: how many of them the child process is given (the cold plan's estimate: past
    it a child starved of CPU, on a busy machine, is ended and started again un-niced, so the
    session is still promoted; ``child_ended``: that happened)."""

    __slots__ = ("done", "tier", "error", "reported", "thread", "times", "waited", "patience", "child_ended")

    def __init__(self, patience: float = 0.0):
        self.done = threading.Event()
        self.tier = self.error = self.thread = None
        self.reported = False
        self.times = [time.perf_counter(), None, None]
        self.waited, self.patience = 0.0, patience
        self.child_ended = False  # the niced child was ended for outliving ``patience`` (and started again)

    def _fault(self, exc: BaseException) -> None:
        """Record what the setup raised: the next run warns about it once (the cold plan stays)."""
        self.error = exc


def _cpu_share(pid: int, began: float) -> Optional[float]:
    """The share of one core process ``pid`` has had since ``began`` (``time.perf_counter()``):
    its user and system time (``/proc/<pid>/stat``, fields 14 and 15 of proc(5)) over the time
    elapsed; None where ``/proc`` does not say (not Linux) or no time has elapsed."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    elapsed = time.perf_counter() - began
    return cpu / elapsed if elapsed > 0 else None


def _copy(value):
    """A copy of a feed the warm-up can run while the caller reuses its arrays (numpy arrays and
    lists of them copied; other values are immutable or the backend's own)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


class PlanSet:
    """The plans of one session on one backend (see the module docstring).

    ``model``: the optimized model the plans run; ``given``: the model as given (for the plain
    plan); ``plan``: the first plan, planned cold under ``cold`` (a
    :class:`~onnxkit.runtime.bodies.FirstRun`, None when the session plans warm); ``level`` /
    ``disabled``: the optimization level and the passes switched off (parsed once by the session); ``consumed``: positions of the inputs whose initializer the
    optimizer read as a constant; ``host_arrays``: whether the backend's values are numpy
    arrays (only those are specialized); ``log(part, level, msg, *args)``: the session's log."""

    def __init__(self, model, given, registry, backend_name: str, planner_args: dict, plan, cold,
                 level: int, disabled: frozenset, consumed: list, host_arrays: bool, log: Callable):
        self.model, self.given, self.registry, self.backend_name = model, given, registry, backend_name
        self.planner_args, self.level, self.disabled = planner_args, level, disabled
        self.consumed, self.host_arrays, self.log = consumed, host_arrays, log
        self._lock = threading.Lock()        # the tier's switch, the setup's start
        self._kept_lock = threading.Lock()   # kept_ids' updates
        self._setup: Optional[_Setup] = None
        self._child = cold is not None and warm_setup() == "process"  # read (and refused by name) once
        with planning_cold(cold):
            self._passes(plan)
            self.kept_ids = kept_value_ids(plan)
            self._tier = _Tier(plan, self._specializer_for(plan), cold)

    # the current tier's parts (a run reads ``_tier`` once instead)
    @property
    def plan(self):
        return self._tier.plan

    @property
    def plain(self):
        return self._tier.plain

    @property
    def specializer(self):
        return self._tier.specializer

    @property
    def cold(self):
        """The cold plan's :class:`~onnxkit.runtime.bodies.FirstRun` while the session runs it, else None."""
        return self._tier.cold

    # -- making plans ---------------------------------------------------------------------------
    def _passes(self, plan) -> None:
        """The plan passes of the optimizer's table (``onehot``, ``epilogue``) on ``plan``."""
        from .optimizer import run_plan_passes

        run_plan_passes(plan, self.level, self.disabled,
                        lambda name, counted: self.log("plan", 20, "%s: %s", name, counted))

    def _keep(self, plan) -> None:
        """Add the identities of the values ``plan`` keeps (an output that is one is copied)."""
        with self._kept_lock:
            self.kept_ids = self.kept_ids | kept_value_ids(plan)

    def _specializer_for(self, plan, before=None):
        """The :class:`~onnxkit.runtime.optimizer.specialize.Specializer` of ``plan``, or
        None when the ``specialize`` pass is off or cannot apply (values that are not numpy
        arrays, a graph that reads its own structure); ``before``: the specializer of the plan
        it replaces, whose shape classes it starts from (the axes seen to vary: the warm-up
        specializes the varying class of the copied feeds, not their exact signature)."""
        from .optimizer import plan_pass_on, reads_its_graph
        from .optimizer.specialize import Specializer

        if not plan_pass_on("specialize", self.level, self.disabled):
            return None
        if not self.host_arrays or reads_its_graph(self.model.graph):
            return None
        names = [vi.name for vi in self.model.graph.input]

        def varies(position: int, axis: int, extents) -> None:
            self.log("plan", 20, "specialize: input %r axis %d varies across runs (%s): its plans serve every "
                     "extent there", names[position] if position < len(names) else position, axis, extents)

        return Specializer(self.model, plan, self.registry, self.planner_args.get("limits"), log=varies,
                           classes=None if before is None else before.classes_seen())

    def _plain_for(self, tier: _Tier, values: list):
        """``tier``'s plan, or, when a run feeds an IR < 4 input whose initializer the optimizer
        read as a constant, the plan of the model as given (made on first need)."""
        if not any(values[i] is not None for i in self.consumed):
            return tier.plan
        if tier.plain is None:
            plain = Planner(self.given, self.registry, self.backend_name, **self.planner_args).compile_model()
            self._passes(plain)
            self._keep(plain)
            tier.plain = plain
        return tier.plain

    def _warm_tier(self, values: Optional[list] = None, sig: Optional[tuple] = None) -> _Tier:
        """A warm tier (planned in the calling thread, outside any cold plan); with ``values``
        (a copy of a run's feeds), warmed up: run on them, recorded and specialized as the
        session's runs will be, so each compiled loop they call is built for their types."""
        plan = Planner(self.model, self.registry, self.backend_name, **self.planner_args).compile_model()
        self._passes(plan)
        self._keep(plan)
        tier = _Tier(plan, self._specializer_for(plan, self._tier.specializer), None)
        if values is not None and not any(step.traits.nondeterministic for step in _steps(plan, set())):
            if sig is None and self.host_arrays:
                sig = signature(values)
            for _ in range(ROUNDS + 2):  # the recording run, its further rounds, then the specialized plan's
                recording = tier.specializer is not None and sig is not None and tier.specializer.plan_for(sig)[1]
                self._serve(tier, values, lambda p, v: p.run(v), sig, specialize=True)
                if not recording:
                    break
        return tier

    def _promote(self, cold) -> None:
        """Replace the cold tier by a warm one, planned in the calling thread, between runs."""
        with self._lock:
            tier = self._tier
            if tier.cold is not cold:
                return
            if cold.deferred:
                self.log("plan", 20, "planning again with the bodies the cold plan deferred (runs spent %.3f s on it, "
                         "setup estimated at %.3f s): %s", cold.spent, cold.cost, ", ".join(cold.deferred))
                with planning_cold(None):
                    self._tier = self._warm_tier()
            else:
                self._tier = _Tier(tier.plan, tier.specializer, None)
                self._tier.plain = tier.plain

    def promote(self) -> None:
        """Make the warm plan now, in the calling thread (a long-running program's state, for
        tests and tools); a background setup in progress is waited for and used."""
        cold = self.cold
        if cold is None:
            return
        if self._setup is not None and self.wait_warm():
            return
        self._promote(cold)

    # -- the background setup -------------------------------------------------------------------
    def _start(self, cold, values: list, sig) -> None:
        """Start setting up the warm tier in a background thread (once per cold record)."""
        with self._lock:
            if self._setup is not None or self._tier.cold is not cold:
                return
            setup = self._setup = _Setup(patience=cold.cost)
        self.log("plan", 20, "setting up the bodies the cold plan deferred in the background (runs spent %.3f s on "
                 "it, setup estimated at %.3f s): %s", cold.spent, cold.cost, ", ".join(cold.deferred))
        copies = [_copy(v) for v in values]
        context = contextvars.copy_context()  # the caller's settings (compiled loops disabled, ...)
        setup.thread = threading.Thread(target=context.run, args=(self._set_up, setup, copies, sig),
                                        name="onnxkit-warm-plan", daemon=True)
        try:
            setup.thread.start()
        except RuntimeError as exc:  # no thread to be had (an interpreter shutting down, a thread limit)
            setup.error = exc
            setup.done.set()

    def _set_up(self, setup: _Setup, values: list, sig) -> None:
        """The background thread: the warm tier, or the error that stopped it."""
        try:
            if self._child and getattr(self._tier.cold, "compiles", True):  # a load needs no child
                import subprocess

                try:
                    self._fill_caches(values, setup)
                except (OSError, subprocess.SubprocessError, ValueError, TypeError, RuntimeError) as exc:
                    # no child to be had (a sandbox, a full disk, a model it cannot be handed): compiled here
                    self.log("plan", 20, "no child process to set up the warm plan (%s: %s): compiling here instead",
                             type(exc).__name__, exc)
            setup.times[1] = time.perf_counter()
            with planning_cold(None), collection_paused():
                setup.tier = self._warm_tier(values, sig)
            _blas_controllers()  # found again here, not in the first warm run (the setup imported modules)
        except BaseException as exc:  # noqa: BLE001 - reported at the next run; the cold plan stays
            setup._fault(exc)
        finally:
            setup.times[2] = time.perf_counter()
            setup.done.set()

    def _fill_caches(self, values: list, setup: Optional[_Setup] = None) -> None:
        """Run the model warm once in a child process on ``values`` (:data:`CHILD`), so
        that what its compiled loops need is compiled there, out of this process's interpreter
        lock, and only loaded here from the compiler's on-disk cache (numba's).  Skipped where the
        child could not plan the same model: a registry other than the default one, a backend
        other than ``cpu``, a model over :data:`CHILD_ELEMENTS` initializer elements or with
        external data, feeds that are not all numpy arrays.  A child that fails or outlives
        :data:`CHILD_TIMEOUT_S` only costs the thread's compiling here.  One still running when the
        session's runs have spent ``setup.patience`` seconds on the cold plan since the setup
        began and that has had less than :data:`CHILD_STARVED` of a core (a niced child on a busy
        machine) is ended and started again without :data:`CHILD_NICE` (once; a long-running
        session would otherwise never be promoted): its compiling competes with the runs for the
        CPU only, not for this process's interpreter lock.  One still running when this process
        exits is ended."""
        import subprocess
        import tempfile

        from .. import to_bytes
        from ..registry import get_registry

        given = self.given
        inits = list(given.graph.initializer)
        if (self.registry is not get_registry() or self.backend_name != "cpu" or any(t.is_external for t in inits)
                or sum(t.size for t in inits) > CHILD_ELEMENTS
                or not all(v is None or isinstance(v, np.ndarray) for v in values)):
            return
        names = [vi.name for vi in given.graph.input]
        with tempfile.TemporaryDirectory(prefix="onnxkit-warm-") as tmp:
            model_path, feeds_path = os.path.join(tmp, "model.onnx"), os.path.join(tmp, "feeds.npz")
            with open(model_path, "wb") as f:
                f.write(to_bytes(given))
            np.savez(feeds_path, **{f"f{i}": v for i, v in enumerate(values) if v is not None})
            env = dict(os.environ, ONNXKIT_FIRST_RUN="warm", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                       MKL_NUM_THREADS="1")
            args = [sys.executable, "-c", CHILD, model_path, feeds_path, ",".join(names), str(self.level),
                    ",".join(sorted(self.disabled)), str(ROUNDS + 2)]

            def start(nice: int):
                with _CHILDREN_LOCK:
                    child = subprocess.Popen(args + [str(nice)], env=env, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                    _CHILDREN.add(child)
                return child, time.perf_counter()

            proc, began = start(CHILD_NICE)
            try:
                deadline = began + CHILD_TIMEOUT_S
                while proc.poll() is None:
                    if setup is not None and not setup.child_ended and setup.waited >= setup.patience > 0:
                        share = _cpu_share(proc.pid, began)
                        if share is None or share < CHILD_STARVED:
                            setup.child_ended = True
                            self.log("plan", 20, "the runs spent %.3f s on the cold plan while the child process set "
                                     "up the warm plan (%s of a core): started again at this process's priority",
                                     setup.waited, "unknown share" if share is None else f"{share:.0%}")
                            proc.kill()
                            proc.communicate()
                            with _CHILDREN_LOCK:
                                _CHILDREN.discard(proc)
                            proc, began = start(0)
                            deadline = began + CHILD_TIMEOUT_S
                            continue
                    if time.perf_counter() >= deadline:
                        break
                    try:
                        proc.wait(timeout=CHILD_POLL_S)
                    except subprocess.TimeoutExpired:
                        pass
                if proc.poll() is None:
                    proc.kill()
                _, err = proc.communicate()
            finally:
                with _CHILDREN_LOCK:
                    _CHILDREN.discard(proc)
        if proc.returncode != 0:
            self.log("plan", 20, "the child process setting up the warm plan ended with %s (compiling here "
                     "instead): %s", proc.returncode, (err or b"").decode(errors="replace").strip()[-500:])

    def _finish(self, cold, setup: _Setup) -> None:
        """At a run boundary, the setup having ended: switch to its tier, or report its failure once."""
        with self._lock:
            if self._tier.cold is not cold or setup.reported:
                return
            if setup.error is None:
                self._tier = setup.tier
                self.log("plan", 20, "switched to the warm plan set up in the background")
                return
            setup.reported = True
        exc = setup.error
        message = (f"onnxkit: setting up the warm plan in the background failed ({type(exc).__name__}: {exc}); "
                   f"the session keeps running its cold plan (deferred: {', '.join(cold.deferred)})")
        self.log("plan", 30, "%s", message)
        warnings.warn(message, RuntimeWarning, stacklevel=5)

    def wait_warm(self, timeout: Optional[float] = None) -> bool:
        """Wait for the background setup of the warm plan, if one was started, to end, and switch
        to it (or report its failure); True when the session's runs are served by the warm plan
        from now on, False when it is still cold (no setup started, it failed, or ``timeout``
        seconds passed)."""
        setup, cold = self._setup, self.cold
        if cold is None:
            return True
        if setup is None or not setup.done.wait(timeout):
            return False
        self._finish(cold, setup)
        return self.cold is None

    # -- running ----------------------------------------------------------------------------------
    def run(self, values: list, runner: Callable, sig: Optional[tuple] = None) -> list:
        """Run ``values`` (the feeds by input position) on the plan their key chooses, through
        ``runner(plan, values)`` (the session's: threads, profiling); ``sig``: the feeds'
        signature where the caller has it."""
        cold = self._tier.cold
        if cold is not None:
            setup = self._setup
            if setup is None:
                if cold.due():
                    if cold.tiered and cold.cost > 0:
                        self._start(cold, values, sig)
                    else:
                        self._promote(cold)
            elif setup.done.is_set() and not setup.reported:
                self._finish(cold, setup)
        tier = self._tier
        cold = tier.cold
        if cold is None:
            return self._serve(tier, values, runner, sig, specialize=True)
        setup = self._setup  # the record counts the runs until the setup starts, the setup's patience after
        start = time.perf_counter()
        try:
            with planning_cold(cold):
                return self._serve(tier, values, runner, sig, specialize=VARYING_ONLY if cold.deferred else True)
        finally:
            if setup is None:
                cold.ran_for(time.perf_counter() - start, values)
            else:
                setup.waited += time.perf_counter() - start

    def _serve(self, tier: _Tier, values: list, runner: Callable, sig, specialize) -> list:
        """Run ``values`` on ``tier``: on its specializer's plan of their shape class where
        ``specialize`` is True, or is :data:`VARYING_ONLY` and the class has a varying extent (a
        cold plan a warm one will replace: its first signatures run unspecialized, each would be
        planned for a few runs, but a stream whose extents keep changing, a decoder's past, is
        served by one plan of its class over the many runs before the warm plan takes over, and
        a fixed signature run :data:`COLD_SPECIALIZE_AFTER` times, a stream of one chunk shape,
        by its own)."""
        plan = self._plain_for(tier, values) if self.consumed else tier.plan
        spec = tier.specializer if specialize else None
        recording = False
        if spec is not None and plan is tier.plan:
            if sig is None:
                sig = signature(values)
            if sig is not None and (specialize is not VARYING_ONLY or spec.varies(sig) or tier.often_run(sig)):
                plan, recording = spec.plan_for(sig)
        outs = runner(plan, values)
        if recording:
            special = spec.complete(sig, plan)
            if special is not None:  # its folded values are kept: outputs that are one are copied
                self._keep(special)
        return outs
