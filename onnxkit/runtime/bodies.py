"""Which body each node of a plan runs, per input-shape key.

A backend kernel may choose among several computations for the same node: onnxkit-cpu's Conv
picks, per ``(X, W, B)`` shape and dtype, a compiled loop (``planes``), Winograd F(2x2, 3x3)
(``winograd``), numpy im2col + one BLAS product (``columns``), a 1x1 product (``pointwise``),
the patch copy of a ViT stem (``patches``), the depthwise body (``depthwise``) or the portable
kernel (``portable``).  A kernel that chooses says so with
:func:`onnxkit.runtime.kernel.reports_bodies`; this module collects what the kernels of a plan
report: :func:`plan_bodies` (one :class:`NodeBodies` per step that reports, subgraph plans
included), :func:`describe` (the lines the plan's description and ``onnxkit run --profile``
print) and :func:`session_bodies` (an :class:`~onnxkit.runtime.InferenceSession`'s plan).

A key appears once the node has run with inputs of that key (the choice is made on the first
call of a key, then kept); a node whose kernel does not report is left out.
"""

from __future__ import annotations

from typing import NamedTuple

from .kernel import bodies_of, traits_of

__all__ = ["DECODING_EVIDENCE", "DECODING_RUNS", "POLICIES", "FirstRun", "NodeBodies", "cold_record", "describe",
           "first_run", "first_run_policy", "note_planned_body", "plan_bodies", "planned_bodies", "planning_cold",
           "prepare_noting", "session_bodies"]


class NodeBodies(NamedTuple):
    """What one step's kernel reports: its node's name and operator, and ``{key: body}``."""

    node: str
    op: str
    bodies: dict


def _steps(plan, seen: set):
    if plan is None or id(plan) in seen:
        return
    seen.add(id(plan))
    steps = list(getattr(plan, "steps", ()) or ())
    folded = getattr(plan, "folded", None)
    if folded is not None:
        steps += list(folded[1])
    for step in steps:
        yield step
        for sub in (getattr(step, "subgraphs", None) or {}).values():
            for p in (sub if isinstance(sub, list) else [sub]):
                yield from _steps(p, seen)


def plan_bodies(plan) -> list:
    """A :class:`NodeBodies` for each step of ``plan`` (and of its subgraph plans and
    folded-defaults variant) whose kernel reports a body for at least one key, in step order;
    a step present in two variants of the plan is listed once."""
    out, listed = [], set()
    for step in _steps(plan, set()):
        if id(step.fn) in listed:
            continue
        bodies = bodies_of(step.fn) if traits_of(step.fn).bodies is not None else planned_bodies(step.fn)
        if bodies:
            listed.add(id(step.fn))
            out.append(NodeBodies(step.node.name, step.op, bodies))
    return out


def describe(plan) -> list:
    """One line per (node, key): ``node (op): key -> body``."""
    return [f"{nb.node} ({nb.op}): {key} -> {body}" for nb in plan_bodies(plan) for key, body in nb.bodies.items()]


def session_bodies(session) -> list:
    """:func:`plan_bodies` of ``session``'s plan (the one its runs use unless a shape-specialized
    plan was made for a feed)."""
    return plan_bodies(getattr(session, "plan", None))


# -- first-run bodies ------------------------------------------------------------------------
#
# A fresh process's first result should not wait for a compiler: a session plans its first run
# *cold* (:func:`first_run`), and a kernel that would take a body needing a slow one-time setup
# (onnxkit-cpu's numba loops: import, target setup, cache loading) takes its
# quick-to-start body instead and says so with :meth:`FirstRun.defer`, giving the setup's
# estimated cost (a compiler's cached code loads, code not in its cache is compiled: the
# estimate says which).  The session keeps running the cold plan until the time its runs have
# spent on it reaches that estimate (:meth:`FirstRun.due`: a tool that runs a model two or three
# times per process never pays a setup worth more than its runs; a long-running one pays it once,
# having spent at most as much again), the runs known to come counted as spent already (a
# generator that states its length, :meth:`FirstRun.expect`; a decoding loop, seen in its feeds'
# growing extents, :data:`DECODING_RUNS`: their forecast at the latest run's time); then the
# warm plan is set up, once, off the run path (a background thread, and a child process for a
# compiler where code is to be compiled: :mod:`onnxkit.runtime.plans`; the runs meanwhile stay
# on the cold plan and are no longer counted), and the first run to begin after it is ready
# switches (a plan boundary: a run in progress keeps the plan it started with) to the bodies it
# would have taken warm.  A deferral that states no cost is planned warm before the second run,
# in the run's thread, as is every deferral under ``second``.  Both bodies compute the same
# results within the tolerance the kernel's module states;
# :func:`onnxkit.runtime.bodies.plan_bodies` reports which one each node ran.
#
# ``$ONNXKIT_FIRST_RUN`` chooses the policy when a session is made: unset or ``tiered`` (the
# above), ``second`` (promote before the second run, whatever the cost, planning warm inside that
# run: for tests and tools), ``warm`` (no cold plan:
# the warm bodies from the first run; benchmarks of steady-state speed use it).

import contextvars as _contextvars

POLICIES = ("tiered", "second", "warm")


#: How many more runs a session evidently decoding is expected to make (a generation's tokens):
#: the forecast :meth:`FirstRun.due` adds to the runs' time spent.  A record is evidently decoding
#: once :data:`DECODING_EVIDENCE` consecutive runs have each grown their feeds' extents by the same
#: non-zero step over the run before (a decoder fed its presents back as pasts: the past, the
#: attention mask grow by one position a token), with every other extent equal.
DECODING_RUNS = 256
DECODING_EVIDENCE = 3


def _growth(before: tuple, after: tuple):
    """The per-axis growth from the feed shapes ``before`` to ``after`` (a flat tuple), or None
    where they do not compare (another count of feeds or ranks, a value without a shape, an
    extent that shrank, nothing that grew)."""
    if len(before) != len(after):
        return None
    step, grew = [], False
    for a, b in zip(before, after):
        if a is None or b is None:
            if a is not b:
                return None
            continue
        if len(a) != len(b):
            return None
        for x, y in zip(a, b):
            if type(x) is not int or type(y) is not int or y < x:
                return None
            step.append(y - x)
            grew = grew or y > x
    return tuple(step) if grew else None


class FirstRun:
    """The record of one cold plan: what its kernels deferred (``deferred``: descriptions), the
    setup they estimated (:attr:`cost`, seconds; :attr:`compiles`: whether that setup compiles
    code rather than loading it from a cache) and the time runs have spent on the plan
    (``spent``, seconds, summed over the runs of every thread until the warm plan's setup begins;
    ``last``, the latest run's counted), with what is known of the runs to come (:meth:`expect`,
    and a decoding loop seen in the runs' feeds: :data:`DECODING_RUNS`)."""

    __slots__ = ("deferred", "ran", "spent", "last", "tiered", "expected", "_costs", "_setups", "_compiles",
                 "_shapes", "_step", "_streak")

    def __init__(self, tiered: bool = True):
        self.deferred: list = []
        self.ran = False  # a run has been made on the cold plan
        self.spent = 0.0
        self.last = 0.0  # the seconds of the latest run counted
        self.tiered = tiered  # False: promoted before the second run whatever the cost
        self.expected = 0  # the runs a caller said will follow (:meth:`expect`)
        self._costs: dict = {}
        self._setups: dict = {}
        self._compiles: dict = {}  # the compile cost of each deferral whose code is not in a cache
        self._shapes = None  # the latest run's feed shapes, the growth over the run before, its streak
        self._step = None
        self._streak = 0

    def defer(self, what: str, cost: float = 0.0, setup: tuple | None = None,
              compile_cost: float | None = None) -> None:
        """Note that a kernel took its quick-to-start body in place of ``what``, whose own setup
        is expected to take ``cost`` seconds, or ``compile_cost`` where its code is not in the
        compiler's cache (see :attr:`cost`); ``setup=(key, seconds)`` is a one-time cost shared
        by every deferral naming ``key`` (a compiler's import), counted once per plan."""
        if what not in self.deferred:
            self.deferred.append(what)
            self._costs[what] = max(0.0, float(cost))
            if compile_cost is not None:
                self._compiles[what] = max(0.0, float(compile_cost))
        if setup is not None:
            key, seconds = setup
            self._setups[key] = max(self._setups.get(key, 0.0), float(seconds))

    @property
    def cost(self) -> float:
        """The estimated seconds the warm plan's setup takes: the deferrals' costs and each shared
        setup once; the deferrals' compile costs where none of their code is in the compiler's
        cache (:attr:`compiles`).  Where some is, the plan (or one sharing its loops) was set up
        warm before: what its kernels deferred then but did not use was not cached and is not
        needed either, so every deferral counts its load cost."""
        costs = self._compiles if self.compiles else self._costs
        return sum(costs.values()) + sum(self._setups.values())

    @property
    def compiles(self) -> bool:
        """Whether the warm plan's setup compiles: something was deferred and none of it is in the
        compiler's cache (every deferral stated a compile cost)."""
        return bool(self._compiles) and len(self._compiles) == len(self.deferred)

    def expect(self, runs: int) -> None:
        """Say that about ``runs`` more runs will follow (a generator that knows its length): the
        record is due once the runs' time spent plus the latest run's time that many times over
        reaches the cost (:meth:`due`)."""
        self.expected = max(0, int(runs))

    @property
    def decoding(self) -> bool:
        """Whether the runs are evidently a decoding loop (see :data:`DECODING_RUNS`)."""
        return self._streak >= DECODING_EVIDENCE

    def ran_for(self, seconds: float, values=None) -> None:
        """Count a run of ``seconds`` on the cold plan; ``values``: its feeds (by input position),
        whose shapes show a decoding loop."""
        self.ran, self.last = True, seconds
        self.spent += seconds
        if values is not None and self._streak < DECODING_EVIDENCE:
            try:
                shapes = tuple([v.shape for v in values])
            except AttributeError:  # a feed without a shape (a sequence, an optional left out)
                shapes = tuple([getattr(v, "shape", None) for v in values])
            before, self._shapes = self._shapes, shapes
            if before is None or shapes == before:
                self._step, self._streak = None, 0
                return
            step = _growth(before, shapes)
            self._streak = (self._streak + 1 if step is not None and step == self._step else
                            1 if step is not None else 0)
            self._step = step

    def due(self) -> bool:
        """Whether the session should plan warm before its next run: a run has been made, and
        nothing was deferred, or the policy is ``second``, or the runs have spent the cost, the
        runs to come forecast at the latest run's time each (:meth:`expect`, or
        :data:`DECODING_RUNS` for a decoding loop) counting towards it."""
        if not self.ran:
            return False
        if not self.deferred or not self.tiered:
            return True
        runs = max(self.expected, DECODING_RUNS if self._streak >= DECODING_EVIDENCE else 0)
        return self.spent + self.last * runs >= self.cost


_FIRST_RUN: _contextvars.ContextVar = _contextvars.ContextVar("onnxkit_first_run", default=None)


def first_run():
    """The :class:`FirstRun` of the plan being made or run now when it is a session's cold first
    plan, else None (a kernel then takes its warm body)."""
    return _FIRST_RUN.get()


class planning_cold:
    """``with planning_cold(record):`` plans and runs inside are the cold first run of ``record``
    (None: not cold; a session made after ``ONNXKIT_FIRST_RUN=warm`` plans warm from the start)."""

    def __init__(self, record):
        self.record = record

    def __enter__(self):
        self._token = _FIRST_RUN.set(self.record)
        return self.record

    def __exit__(self, *exc):
        _FIRST_RUN.reset(self._token)
        return False


def first_run_policy() -> str:
    """``$ONNXKIT_FIRST_RUN`` as one of :data:`POLICIES` (unset: ``tiered``)."""
    import os

    from ..errors import OnnxkitError

    value = os.environ.get("ONNXKIT_FIRST_RUN", "").strip().lower() or "tiered"
    if value not in POLICIES:
        raise OnnxkitError(f"ONNXKIT_FIRST_RUN={value!r} is not one of {', '.join(POLICIES)}")
    return value


def cold_record():
    """A fresh :class:`FirstRun` for a new session under :func:`first_run_policy`, or None
    where it is ``warm`` (every plan takes its warm bodies at once)."""
    policy = first_run_policy()
    return None if policy == "warm" else FirstRun(tiered=policy == "tiered")


# -- bodies chosen at planning --------------------------------------------------------------
#
# A kernel that picks its body when its node is planned (onnxkit-cpu's compiled loops: the
# compiled one, or numpy where compiled loops are off or deferred to the second run) says so with
# :func:`note_planned_body` while its factory runs; a factory called through
# :func:`prepare_noting` (the lazily loaded kernel tables, :mod:`onnxkit.plugin.lazy`) has what
# it noted reported under the key ``planned`` for the node function it returned, unless that
# function reports its own bodies per input-shape key (:func:`~onnxkit.plugin.reports_bodies`).

import weakref as _weakref

_NOTES: _contextvars.ContextVar = _contextvars.ContextVar("onnxkit_planned_bodies", default=None)
_PLANNED: "_weakref.WeakKeyDictionary" = _weakref.WeakKeyDictionary()


def note_planned_body(body: str) -> None:
    """Note the body the kernel being prepared chose (``"compiled norm.rows"``, ``"numpy"``...)."""
    notes = _NOTES.get()
    if notes is not None and body not in notes:
        notes.append(body)


def prepare_noting(factory, ctx):
    """``factory(ctx)``, remembering what it noted (:func:`note_planned_body`) for its function."""
    token = _NOTES.set([])
    try:
        fn = factory(ctx)
        notes = _NOTES.get()
    finally:
        _NOTES.reset(token)
    if notes and fn is not None and traits_of(fn).bodies is None:
        families = [n[len("compiled ("):-1] for n in notes if n.startswith("compiled (")]
        body = f"compiled ({', '.join(families)})" if families and len(families) == len(notes) else ", ".join(notes)
        try:
            _PLANNED[fn] = {"planned": body}
        except TypeError:  # a function that takes no weak reference (a builtin): not reported
            pass
    return fn


def planned_bodies(fn) -> dict:
    """``{"planned": body}`` noted for ``fn`` when it was prepared, or ``{}``."""
    try:
        return dict(_PLANNED.get(fn) or {})
    except TypeError:
        return {}
