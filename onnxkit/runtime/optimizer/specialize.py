"""Shape specialization: a plan per input-shape signature, its shape arithmetic folded away.

A model exported with dynamic axes computes its reshape targets, masks and position ids at run
time (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``, ``ConstantOfShape`` / ``Range`` /
``Where`` over extents read from the feeds): constants once the feeds' extents are known.
:class:`Specializer` keeps, per *shape class* (:class:`ShapeClasses`: the *signature* — the
element type and shape of every fed tensor, in input order, None for an input not fed — with
each extent seen to vary across runs replaced by a dimension variable: :mod:`.shape_classes`), a specialized
:class:`~onnxkit.runtime.plan.GraphPlan` of the top-level graph, at most ``capacity`` of them
(least recently used dropped first).  A new extent of a varying axis costs no planning.

Making one (two phases, so that no shape is taken on trust):

1. *record*: the first run of a new class runs a copy of the plan in which each ``Shape``
   and ``Size`` node whose input inference (:mod:`onnxkit.inference`, the graph inputs typed by
   the class) gives a fully static shape also records the shape it saw and its value, and each
   node whose outputs inference computes exactly records them;
2. *fold* (:meth:`Specializer.complete`, after that run): a recorded node whose observed shape
   equals the inferred one, and a recorded node whose values equal the inferred ones, becomes
   a constant — inference proves them the same for every feed of the class, the run proves
   inference right — and every deterministic node
   of the default domain whose inputs are then all constants is evaluated once, by its own
   kernel, and removed (as planning folds constants); a value over :data:`MAX_FOLDED_BYTES` is
   left to the run.  A node nothing reads any more is dropped when it cannot fail
   (:func:`_live`).  Size guards whose bound reads only shapes inference knows and that pass
   the bound uncharged for those shapes are dropped (they would return 0 at every run).

Every folded value is read-only and the plan's own: a value from the recording run is copied
(:func:`_kept`: that run may have returned the very array to its caller as a graph output), and
the session copies an output that is a kept value (:func:`~onnxkit.runtime.feeds.fresh_outputs`).

The specialized plan computes exactly what the plan it came from computes: the same kernels on
the same values, some of them earlier.  Only numpy-array backends (``host_arrays``) and tensor
feeds are specialized.  Nested graphs are not specialized as such, but an ``If`` whose
condition folds to a constant is replaced by the steps of the branch it takes (:mod:`.inline`);
those fold in turn, and their Shape/Size steps are recorded at the next run of the signature (at
most :data:`ROUNDS` record phases: a plan is kept once nothing is left to record).  Identity
steps whose output only later steps read are dropped (:func:`~.inline.collapse_aliases`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Optional

from onnxkit import records
import numpy as np

from ... import ir
from ...domains import is_default_domain
from ...dtypes import from_numpy_dtype
from ...errors import OnnxkitError
from ...log import get_logger
from ..budget import RunBudget
from ..kernel import REFUSALS
from ..plan import GraphPlan, assign_lifetimes, evaluate_constant, frozen, is_deterministic
from ..usedef import step_index
from .shape_classes import ShapeClasses
from .inline import Collision, branch_path, collapse_aliases, inline, taken_branch

#: the most bytes one folded value may take (a larger one stays a node: memory per signature)
MAX_FOLDED_BYTES = 1 << 22
#: signatures whose plans a session keeps
CAPACITY = 8
#: constants of at most this many elements are given to inference by value when a plan is typed again
MAX_INFERRED_VALUES = 64
#: record phases of one signature at most (each later one records Shape/Size nodes of inlined branches)
ROUNDS = 4
#: operators whose output is read off the input's shape
SHAPE_OPS = frozenset({"Shape", "Size"})
#: size-guard kinds whose bound reads only the inputs' shapes
SHAPE_BOUNDS = frozenset({"broadcast", "concat", "matmul", "gemm", "gather", "product"})


def signature(values: list) -> Optional[tuple]:
    """The signature of a run's input values (by position), or None if one is not a numpy tensor."""
    sig = []
    for v in values:
        if v is None:
            sig.append(None)
        elif type(v) is np.ndarray and v.dtype.kind not in "OSU":
            sig.append((v.dtype, v.shape))
        else:
            return None
    return tuple(sig)


class _Recording:
    """A record phase of one signature: the instrumented plan and what its nodes saw.

    ``base``: the ``(constants, steps)`` recorded; ``where``: per base step, ``(path, graph)`` of
    the graph its node belongs to (the inference path, '' for the top level, and the
    :class:`~onnxkit.ir.Graph`); ``tried``: ids of the nodes recorded in this or an earlier
    round (none is recorded twice); ``before``: the step count of the plan specialized."""

    __slots__ = ("plan", "base", "types", "values", "seen", "where", "tried", "round", "before", "sig")

    def __init__(self, plan, base, types: dict, where: list, tried: set, round_: int, before: int,
                 sig: tuple, values: dict):
        self.plan, self.base, self.types, self.sig, self.values = plan, base, types, sig, values
        self.where, self.tried, self.round, self.before = where, tried, round_, before
        #: index of the step in base -> (observed shape, computed value) of a Shape/Size step, or
        #: (:data:`_VALUES`, computed value) of a step whose outputs inference computed exactly
        self.seen: dict = {}


class Specializer:
    """The specialized plans of one session (see the module docstring).  Thread-safe."""

    def __init__(self, model: ir.Model, plan, registry, limits=None, capacity: int = CAPACITY, log=None,
                 classes: Optional[ShapeClasses] = None):
        self.model, self.plan, self.registry, self.limits = model, plan, registry, limits
        self.capacity = capacity
        #: the feeds' varying extents (:class:`ShapeClasses`; ``classes``: what an earlier plan's
        #: specializer saw, copied); ``log(position, axis, extents)`` is told when an axis is first
        #: seen to vary
        self.classes = classes.copy() if classes is not None else ShapeClasses()
        self.classes._log = log
        self._plans: OrderedDict = OrderedDict()   # signature -> specialized plan
        self._recording: dict = {}                  # shape class -> _Recording
        self._lock = threading.Lock()
        self.stats: dict = {}                       # shape class -> (steps before, steps after)
        #: plans made (each one whole-graph inference and folding): a program that keeps running
        #: makes at most one per shape class, and the classes are bounded by the feeds' axes
        self.planned = 0

    def classes_seen(self) -> ShapeClasses:
        """A copy of :attr:`classes` (taken under the lock)."""
        with self._lock:
            return self.classes.copy()

    def varies(self, sig: tuple) -> bool:
        """Whether the shape class of ``sig`` has a varying extent (its extents are counted, as
        :meth:`plan_for` counts them)."""
        with self._lock:
            return self.classes.key(sig) != sig

    def plan_for(self, sig: tuple) -> tuple:
        """``(plan, recording)``: the specialized plan of the shape class of ``sig``
        (:class:`ShapeClasses`), or (``recording`` True) the recording plan of a new class, after
        whose successful run :meth:`complete` is called."""
        with self._lock:
            sig = self.classes.key(sig)
            plan = self._plans.get(sig)
            if plan is not None:
                self._plans.move_to_end(sig)
                return plan, False
            rec = self._recording.get(sig)
        if rec is None:
            rec = self._record(sig)
            with self._lock:
                self._recording[sig] = rec
                while len(self._recording) > self.capacity:  # runs that failed never complete
                    del self._recording[next(iter(self._recording))]
        return rec.plan, True

    def complete(self, sig: tuple, plan):
        """After a successful run of the recording ``plan`` of ``sig``: make, keep and return its
        specialized plan (None if another thread did).  Where folding inlined a branch whose
        Shape/Size nodes can be recorded in turn, the plan returned records them at the next run
        of ``sig`` (a further round, at most :data:`ROUNDS` in all) and is not kept yet."""
        with self._lock:
            sig = next((k for k, r in self._recording.items() if r.plan is plan), None)
            if sig is None:
                return None
            rec = self._recording.pop(sig)
            self.planned += 1
        special, again = self._fold(rec)
        with self._lock:
            if again is not None:
                self._recording[sig] = again
                return again.plan
            self._plans[sig] = special
            self.stats[sig] = (rec.before, len(special.steps))
            while len(self._plans) > self.capacity:
                old, _ = self._plans.popitem(last=False)
                self.stats.pop(old, None)
        return special

    # -- record -----------------------------------------------------------------------------
    def _base(self, sig: tuple):
        """``(constants, steps)`` the plan runs for ``sig`` (the folded-defaults variant when
        the signature feeds no default)."""
        plan = self.plan
        if plan.folded is not None and not any(i < len(sig) and sig[i] is not None for i in plan.default_positions):
            return plan.folded
        return plan.constants, plan.steps

    def _types(self, sig: tuple) -> tuple:
        """``(types, values)``: ``{name: Type}`` of the top-level graph, inferred with its inputs
        typed by ``sig``, the types of its subgraphs' values under ``(path, name)`` keys (the
        inference's paths); ``{name: value}`` of the values inference computed exactly."""
        return self._infer(self.model.graph, sig)

    def _infer(self, g: ir.Graph, sig: tuple, typed=()) -> tuple:
        """The ``(types, values)`` of :meth:`_types` for graph ``g`` of the session's model, with
        ``typed`` value infos added to its inputs; ({}, {}) where inference fails.  For a shape
        class with varying extents the graph's declarations (value_info, output types) are left
        out: a declared extent (an exporter's trace-time length) holds for one run of the class,
        not for all, and one recording run could not tell."""
        from ...inference import infer_model

        inputs = []
        for k, vi in enumerate(g.input):
            s = sig[k] if k < len(sig) else None
            if s is not None:
                vi = records.evolve(vi, type=ir.TensorType(elem_type=from_numpy_dtype(s[0]).tag, shape=ir.Shape.of(s[1])))
            inputs.append(vi)
        if self.classes.varying:
            g = records.evolve(g, value_info=[], output=[records.evolve(vi, type=None) for vi in g.output])
        model = records.evolve(self.model, graph=records.evolve(g, input=inputs + list(typed)))
        try:
            found = infer_model(model, self.registry)
        except (OnnxkitError, ValueError, TypeError, KeyError, IndexError):  # untypable: nothing is specialized
            return {}, {}
        return {(n if p == "" else (p, n)): t for (p, n), t in found.types.items()}, found.values

    def _reinfer(self, sig: tuple, constants: dict, steps: list):
        """``(types, graph)`` of the graph ``steps`` over ``constants`` form (a specialized plan
        whose If steps were inlined), inferred again so that the values after an inlined branch
        are typed from what it computes; each step's node is made to name its step's inputs and
        outputs.  Small constants are initializers (inference reads their values), larger ones
        typed inputs.  None where a constant is not a numeric numpy value or inference fails."""
        g = self.model.graph
        inits, typed = [], []
        fed = {vi.name for vi in g.input}
        for name, v in constants.items():
            if name in fed:  # a default: the graph input it is
                continue
            if not isinstance(v, (np.ndarray, np.generic)) or v.dtype.kind not in "biuf":
                return None
            v = np.asarray(v)
            if v.size <= MAX_INFERRED_VALUES:
                inits.append(ir.Tensor.from_numpy(v, name=name))
            else:
                typed.append(ir.ValueInfo(name, ir.TensorType(elem_type=from_numpy_dtype(v.dtype).tag,
                                                               shape=ir.Shape.of(v.shape))))
        nodes = []
        for s in steps:
            node = s.node
            if list(node.input) != list(s.inputs) or list(node.output) != list(s.outputs):
                s.node = node = records.evolve(node, input=list(s.inputs), output=list(s.outputs))
            nodes.append(node)
        graph = records.evolve(g, node=nodes, initializer=inits, sparse_initializer=[], value_info=[])
        types, values = self._infer(graph, sig, typed)
        return (types, values, graph) if types else None

    def _record(self, sig: tuple) -> _Recording:
        constants, steps = self._base(sig)
        types, values = self._types(sig)
        where = [("", self.model.graph)] * len(steps)
        return self._instrument(_Recording(None, (constants, steps), types, where, set(), 1, len(steps),
                                           sig, values))

    def _instrument(self, rec: _Recording) -> _Recording:
        """``rec`` with its plan: the base steps, those not recorded before that are Shape/Size steps
        whose input inference types statically, or whose outputs inference computes exactly (the
        shape arithmetic over a shape class's static extents), replaced by copies that record
        what they see."""
        constants, steps = rec.base
        copies = []
        for k, step in enumerate(steps):
            if id(step.node) not in rec.tried:
                if _static_shape(step, rec.types) is not None:
                    recorder = _recorder
                elif _exact(step, rec.values) is not None:
                    recorder = _value_recorder
                else:
                    recorder = None
                if recorder is not None:
                    rec.tried.add(id(step.node))
                    step = step.copy()
                    step.free, step.release = steps[k].free, steps[k].release
                    step._fn = recorder(step._fn, k, rec.seen)  # a new step: no layout to invalidate
            copies.append(step)
        rec.plan = self._plan_of(constants, copies)
        return rec

    def _plan_of(self, constants: dict, steps: list) -> GraphPlan:
        """A plan of the session's top-level graph running ``steps`` over ``constants``."""
        p = self.plan
        plan = GraphPlan(p.name, p.input_names, p.output_names, constants, steps, p.free_vars, p.defaults)
        plan.limits = p.limits
        return plan

    # -- fold -------------------------------------------------------------------------------
    def _fold(self, rec: _Recording) -> tuple:
        """``(plan, again)``: the specialized plan of ``rec``, and the recording of a further round
        (None when no inlined Shape/Size step is left to record, or after :data:`ROUNDS`)."""
        constants, steps = rec.base
        known = dict(constants)
        types = dict(rec.types)
        remaining = []
        where: dict = {}   # id of a copy -> (path, graph) of its node
        p = self.plan   # every name of the plan: inlined branches may not reuse one
        taken = set(constants) | set(p.input_names) | set(p.output_names) | set(p.free_vars) \
            | set(step_index(steps).names()) - {""}
        budget = RunBudget(self.limits)
        work = [(k, step, rec.where[k]) for k, step in enumerate(steps)]
        work.reverse()  # a stack: inlined branches are pushed back in their order
        inlined = False
        while work:
            k, step, at = work.pop()
            node = step.node
            seen = rec.seen.get(k) if k is not None else None
            if seen is not None and (seen[0] == _static_shape(step, types) if seen[0] is not _VALUES
                                     else _agrees(seen[1], _exact(step, rec.values))):
                _set(known, step, _kept(seen[1]) if type(seen[1]) is not tuple else tuple(_kept(v) for v in seen[1]))
                continue
            if not step.scope and is_deterministic(step) and is_default_domain(node.domain) \
                    and all((not n) or n in known for n in step.inputs):
                out = _evaluate(step, [known[n] if n else None for n in step.inputs], budget)
                if out is not None:
                    _set(known, step, out)
                    continue
            branch = taken_branch(step, known) if step.scope else None
            if branch is not None:
                pushed = self._inline(step, branch, at, known, types, taken)
                if pushed is not None:
                    work.extend(reversed(pushed))
                    inlined = True
                    continue
            copy = _unguarded(step, types, budget)  # a copy: the base plan's steps stay as they are
            where[id(copy)] = at
            remaining.append(copy)
        keep = set(self.plan.output_names)
        remaining, index = _live(remaining, keep, types)
        folded = {n: v for n, v in known.items() if index.use_count(n)}
        assign_lifetimes(remaining, keep, index)
        plan = self._plan_of(folded, remaining)
        if rec.round >= ROUNDS:
            return plan, None
        again = self._reinfer(rec.sig, folded, remaining) if inlined else None
        values = rec.values
        if again is not None:  # the plan typed as a graph: the top level's types and paths now
            new, values, graph = again
            types = {k: t for k, t in types.items() if type(k) is str}
            for k, t in new.items():
                if type(k) is tuple or k not in types or _static(t):
                    types[k] = t
            where = {id(s): ("", graph) for s in remaining}
        if not any(id(s.node) not in rec.tried and _static_shape(s, types) is not None for s in remaining):
            return plan, None
        again = _Recording(None, (folded, remaining), types, [where[id(s)] for s in remaining], rec.tried,
                           rec.round + 1, rec.before, rec.sig, values)
        return plan, self._instrument(again)

    @staticmethod
    def _inline(step, branch: str, at: tuple, known: dict, types: dict, taken: set):
        """The work items replacing the If ``step`` by its ``branch`` (:mod:`.inline`), its
        constant outputs added to ``known`` and its branch's types to ``types``; None where the
        branch's names collide with the plan's."""
        plan = step.subgraphs[branch]
        try:
            steps, constants, renamed = inline(step, plan, taken)
        except Collision:
            return None
        path, graph = branch_path(step, branch, *at)
        if path is not None:
            for key, t in list(types.items()):
                if type(key) is tuple and key[0] == path:
                    types[key[1]] = t
        for name, b in renamed.items():
            t = types.get(b)
            if t is not None:
                types[name] = t
            else:
                types.pop(name, None)  # the If's merged type no longer describes it
        known.update(constants)
        return [(None, s, (path, graph)) for s in steps]


def _static(t) -> bool:
    return isinstance(t, ir.TensorType) and t.shape is not None and all(type(d) is int and d >= 0
                                                                         for d in t.shape.values)


def _live(steps: list, keep: set, types: dict) -> tuple:
    """``(steps, index)``: ``steps`` less their aliases (:func:`~.inline.collapse_aliases`) and
    less those nothing reads any more (their readers were folded) — deterministic nodes of the
    default domain, no subgraph, every output given a static type by inference (its inputs agree,
    so it cannot fail on their shapes) and not an operator that can fail on values — and the
    use-def index of the steps kept (``keep``, the graph outputs, indexed as read)."""
    index = step_index(steps, keep)
    steps = collapse_aliases(steps, index)
    for step in reversed(steps):
        node = step.node
        if not (step.scope or not is_default_domain(node.domain) or not is_deterministic(step)
                or step.traits.fails_on_values or any(index.use_count(n) for n in step.outputs if n)
                or not all(_static(types.get(n)) for n in step.outputs if n)):
            index.remove(step)
    return [s for s in steps if s in index], index


def _static_shape(step, types: dict) -> Optional[tuple]:
    """The static shape inference gives the input of a Shape/Size step, else None."""
    node = step.node
    if node.op_type not in SHAPE_OPS or not is_default_domain(node.domain) or not step.inputs or step.scope:
        return None
    t = types.get(step.inputs[0])
    return tuple(t.shape.values) if _static(t) else None


#: the mark of a recorded step whose outputs inference computed (:func:`_value_recorder`)
_VALUES = object()


def _exact(step, values: dict) -> Optional[tuple]:
    """The values inference computed exactly for every named output of ``step`` (a deterministic
    node of the default domain without subgraphs, not a Shape/Size), else None."""
    node = step.node
    if step.scope or not is_default_domain(node.domain) or not is_deterministic(step) \
            or node.op_type in SHAPE_OPS or not values:
        return None
    named = [n for n in step.outputs if n]
    if not named or any(n not in values for n in named):
        return None
    return tuple(values[n] for n in named)


def _agrees(out, inferred: Optional[tuple]) -> bool:
    """True if the run's ``out`` (one value, or a tuple) is exactly what inference computed."""
    if inferred is None:
        return False
    outs = out if type(out) is tuple else (out,)
    if len(outs) < len(inferred):
        return False
    return all(type(o) in (np.ndarray, np.generic) and o.dtype == v.dtype and o.shape == v.shape
               and np.array_equal(o, v) for o, v in zip(outs, inferred))


def _value_recorder(fn, k: int, seen: dict):
    """``fn`` also noting the value(s) it computed."""
    def record(*args):
        out = fn(*args)
        seen[k] = (_VALUES, out)
        return out
    return record


def _recorder(fn, k: int, seen: dict):
    """``fn`` also noting the shape of its input and the value it computed."""
    def record(x, *rest):
        out = fn(x, *rest)
        if type(x) is np.ndarray:
            seen[k] = (tuple(x.shape), out)
        return out
    return record


def _kept(value):
    """A value the recording run computed, as the specialized plan keeps it: a read-only copy.
    That run returned the value itself to its caller where it is a graph output (directly, or
    through an Identity or Cast that returns its input): the caller owns that array and may write
    into it, so the plan must not keep it, nor a view of it, as a constant of later runs."""
    if isinstance(value, np.ndarray):
        return frozen(np.array(value, copy=True))
    return value


def _set(known: dict, step, out) -> None:
    outs = out if type(out) is tuple else (out,)
    for name, value in zip(step.outputs, outs):
        if name:
            known[name] = value


def _evaluate(step, args: list, budget: RunBudget):
    """The step's result on constant ``args`` (:func:`~onnxkit.runtime.graph_plan.evaluate_constant`;
    None where that gives none, or a value is too big to keep)."""
    outs = evaluate_constant(step, args, budget, "shape specialization")
    if outs is None:
        return None
    for v in outs:  # a numpy scalar (a kernel's 0-d result) is kept as the kernel gave it
        if not isinstance(v, (np.ndarray, np.generic)) or v.nbytes > MAX_FOLDED_BYTES:
            return None
    return tuple(frozen(v) for v in outs) if len(outs) > 1 else frozen(outs[0])


def _unguarded(step, types: dict, budget: RunBudget):
    """``step``, without its size guard when that guard's bound reads only shapes inference knows
    and passes them uncharged (the guard would return 0 at every run of the signature)."""
    copy = step.copy()  # its lifetimes are set for the specialized plan, its inputs by its index
    copy.inputs = list(step.inputs)
    guard = step.guard
    if guard is None or guard.kind not in SHAPE_BOUNDS:
        return copy
    stand_ins = []
    for n in step.inputs:
        t = types.get(n) if n else None
        if not _static(t):
            return copy
        stand_ins.append(np.broadcast_to(np.zeros((), np.uint8), tuple(t.shape.values)))
    try:
        small = guard.bound(guard, stand_ins) <= budget.small
    except REFUSALS:  # shapes the bound cannot read: the guard stays
        return copy
    except Exception as exc:  # noqa: BLE001
        # Broad: a bound reads only the shapes of the stand-ins (arrays), so any other fault is
        # a bug of the bound: the guard stays (the run checks sizes as before), and it is logged
        # with the node and the traceback, not passed over in silence.
        get_logger("plan").warning("shape specialization: the size bound of node %r (%s) raised %s: %s; its guard "
                                   "stays", step.node.name, step.op, type(exc).__name__, exc, exc_info=exc)
        return copy
    if small:
        copy.guard = None
    return copy
