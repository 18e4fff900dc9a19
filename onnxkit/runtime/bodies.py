"""Which body each node of a plan runs, per input-shape key (issue 33 item 4).

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

__all__ = ["FirstRun", "NodeBodies", "cold_record", "describe", "first_run", "note_planned_body", "plan_bodies",
           "planned_bodies", "planning_cold", "prepare_noting", "session_bodies"]


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


# -- first-run bodies (issue 32 item 1) ------------------------------------------------------
#
# A fresh process's first result should not wait for a compiler: a session plans its first run
# *cold* (:func:`first_run`), and a kernel that would take a body needing a slow one-time setup
# (onnxkit-cpu's numba loops: import, target setup, cache loading, ~1 s) takes its quick-to-start
# body instead and says so with :meth:`FirstRun.defer`.  After that first run, a session whose
# plan deferred something plans again, once, before its second run starts (a plan boundary: a
# run in progress keeps the plan it started with), and then runs the bodies it would have taken
# warm.  Both bodies compute the same results within the tolerance the kernel's module states;
# :func:`onnxkit.runtime.bodies.plan_bodies` reports which one each node ran.

import contextvars as _contextvars


class FirstRun:
    """The record of one cold plan: what its kernels deferred (``deferred``: descriptions)."""

    __slots__ = ("deferred", "ran")

    def __init__(self):
        self.deferred: list = []
        self.ran = False  # the first run has been made (the next one plans warm first)

    def defer(self, what: str) -> None:
        """Note that a kernel took its quick-to-start body in place of ``what``."""
        if what not in self.deferred:
            self.deferred.append(what)


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


def cold_record():
    """A fresh :class:`FirstRun` for a new session, or None where ``$ONNXKIT_FIRST_RUN`` is
    ``warm`` (every plan takes its warm bodies at once, as before issue 32)."""
    import os

    return None if os.environ.get("ONNXKIT_FIRST_RUN", "").strip().lower() == "warm" else FirstRun()


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
