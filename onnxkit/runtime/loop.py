"""The run loop of a :class:`~onnxkit.runtime.plan.GraphPlan`: values in numbered slots.

A :class:`Layout` is made once per ``(constants, steps)`` of a plan (on its first run): every
name the plan reads or writes gets a slot (slot 0 always holds None, the value of an absent
optional input ``""``), each step becomes a tuple of its kernel, its input slots, its output
slot(s) and the slots it frees (its inputs' last use) — a :class:`LaidStep` — and the
constants are laid out in a template list a run copies; a kernel that asked for it
(:func:`~onnxkit.runtime.kernel.binds_constants`) is specialized there on its constant inputs.
A run is then a list copy, the feeds stored by slot, and :func:`run_fast`: per node, the
kernel call with its arguments read by slot, one store, and the frees — no dictionary
look-up, no check.

What the fast loop does not check it proves beforehand.  A value a node reads is *guaranteed*
when it is a constant, a graph input, a free name of the enclosing scope present at the run's
start, or an output of an earlier node; the layout marks itself ``checked`` when some read is
not guaranteed (a graph not in topological order, planned with ``validate=False``), and a
kernel that returns fewer outputs than its node names switches the run to :func:`run_checked`
for its remaining nodes.  :func:`run_checked` also serves every watched run (termination, time
limit, profiling: :mod:`onnxkit.runtime.state`); it reads each input with a presence check and
reports a read of a value that was never computed by name (Clause 7.5).

Nodes with a size guard, a freed value whose bytes a guard charged, or a subgraph reading the
enclosing scope (:func:`~onnxkit.runtime.kernel.needs_scope`) are *special*: one code per
laid step routes them — :data:`GUARDED` (a size guard before a kernel of one named output, nothing
else: the fast loop calls the guard itself) or :data:`SPECIAL` (through :func:`_call_special`, the
one place scopes and guards that also check outputs are handled); a step that frees values a guard
charged gives their bytes back after it ran (its ``release``), special or not.
A scope is a :class:`SlotScope`, a read-only mapping over the run's slots.

Errors are those of the loop they replace: a kernel's exception, wrapped in
:class:`EvaluationError` naming the node and op_type (an :class:`OnnxkitError` passes as it
is; a :class:`MemoryError` becomes the out-of-memory error, unchained).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..errors import EvaluationError, OnnxkitError
from ..log import get_logger
from .kernel import REFUSALS, traits_of
from .state import RUN_STATE

#: the content of a slot whose value is not (or no longer) there
ABSENT = type("Absent", (), {"__repr__": lambda self: "<absent>", "__slots__": ()})()


class _Short(Exception):
    """Raised by the fast loop after storing a kernel's result that left a named output absent."""


class LaidStep(NamedTuple):
    """The fields of one step of a :class:`Layout`, in the order of the plain tuples in
    :attr:`Layout.fast` (the loops unpack those by these names, once per node: a tuple unpack
    costs less per node than attribute reads; :meth:`Layout.laid_steps` gives them named).

    ``call``: the function called (the step's kernel, or its specialization on constant inputs:
    :func:`_bound`); ``arity``: the number of inputs; ``in0``/``in1``: the slots of the first two
    inputs (0 where there is none); ``ins``: the slot of every input; ``out``: the slot of the
    only output when the node names exactly one (else 0); ``multi``: ``(position, slot)`` of
    each named output; ``kill``: the slots freed after it; ``special``: 0, :data:`GUARDED` or
    :data:`SPECIAL` (a guard or a scope: see the module docstring); ``step``: the plan's
    :class:`~onnxkit.runtime.plan.Step`; ``release``: the freed slots whose bytes a guard charged."""

    call: Callable
    arity: int
    in0: int
    in1: int
    ins: tuple
    out: int
    multi: tuple
    kill: tuple
    special: int
    step: Any
    release: tuple


#: ``LaidStep.special`` of a step whose only special part is a size guard before a kernel of one
#: named output (no scope, no check of the outputs after it, no release)
GUARDED = 1
#: ``LaidStep.special`` of every other special step (:func:`_call_special`)
SPECIAL = 2


def _laid(call, ins: tuple, out: int, multi: tuple, kill: tuple, special: int, step, release: tuple) -> tuple:
    """The plain tuple :attr:`Layout.fast` holds for one step: the fields of :class:`LaidStep`, in its order."""
    return (call, len(ins), ins[0] if ins else 0, ins[1] if len(ins) > 1 else 0, ins, out, multi, kill, special, step,
            release)


class Layout:
    """Slots and laid steps of one ``(constants, steps)`` of a plan (see the module docstring);
    ``version``: the plan's kernel version it was made at (:meth:`GraphPlan._layout
    <onnxkit.runtime.plan.GraphPlan._layout>` makes another once a kernel was replaced)."""

    __slots__ = ("slots", "template", "inputs", "free", "outputs", "fast", "checked", "steps", "version",
                 "outer")

    def __init__(self, plan, constants: dict, steps: list, version: int):
        slots = {"": 0}

        def slot(name: str) -> int:
            i = slots.get(name)
            if i is None:
                i = slots[name] = len(slots)
            return i

        for name in constants:
            slot(name)
        self.inputs = tuple(slot(n) for n in plan.input_names)
        self.free = tuple((n, slot(n)) for n in sorted(plan.free_vars))
        produced = {n for step in steps for n in step.outputs}
        # a free name produced here too is read before it is made (a graph out of order): not known
        known = set(constants) | set(plan.input_names) | (set(plan.free_vars) - produced) | {""}
        checked = False
        fast = []
        for step in steps:
            ins = tuple(slot(n) for n in step.inputs)
            if not checked and not all(n in known for n in (*step.inputs, *step._uses)):
                checked = True  # a read the loop cannot prove is there: check every read
            for n in step._uses:
                slot(n)
            outs = step.outputs
            o = slot(outs[0]) if len(outs) == 1 and outs[0] else 0
            multi = tuple((k, slot(n)) for k, n in enumerate(outs) if n)
            known.update(n for n in outs if n)
            kill = tuple(slot(n) for n in step.free)
            release = tuple(slot(n) for n in step.release)
            special = 0
            if step.scope or (step.guard is not None and (step.guard.after or not o)):
                special = SPECIAL
            elif step.guard is not None:
                special = GUARDED
            fast.append(_laid(_bound(step, constants), ins, o, multi, kill, special, step, release))
        self.outputs = tuple(slot(n) for n in plan.output_names)
        template = [None] + [ABSENT] * (len(slots) - 1)  # slot 0: the absent optional input
        for name, value in constants.items():
            template[slots[name]] = value
        self.template = template
        self.slots = slots
        self.fast = tuple(fast)
        self.checked = checked
        self.steps = steps
        self.version = version
        #: (slots of the enclosing run last read, pairs of slots, complete): see :meth:`free_slots`
        self.outer = None

    def free_slots(self, slots: dict) -> tuple:
        """``(pairs, complete)`` for a subgraph run in an enclosing run laid out by ``slots``: each
        free name's slot there paired with its slot here, and whether every free name has one
        there.  Kept for the last enclosing layout (a tuple replaced whole: safe across threads)."""
        outer = self.outer
        if outer is not None:
            last, pairs, complete = outer
            if last is slots:
                return pairs, complete
        pairs = tuple((slots[n], i) for n, i in self.free if n in slots)
        complete = len(pairs) == len(self.free)
        self.outer = (slots, pairs, complete)
        return pairs, complete

    def laid_steps(self) -> list:
        """The steps as the loop reads them, each a :class:`LaidStep` (for inspection: the loop
        itself unpacks the plain tuples of :attr:`fast`)."""
        return [LaidStep._make(t) for t in self.fast]


def _bound(step, constants: dict):
    """The function the loop calls for ``step``: its kernel's, specialized by the kernel on
    the inputs it can take as fixed where those are all ``constants`` of the plan or absent
    (:func:`~onnxkit.runtime.kernel.binds_constants`), else the kernel's own."""
    fn = step.fn
    spec = traits_of(fn).bind_constants
    if spec is None or step.scope:
        return fn
    bind, positions = spec
    values = []
    for k in positions:
        name = step.inputs[k] if k < len(step.inputs) else ""
        if not name:
            values.append(None)
        elif name in constants:
            values.append(constants[name])
        else:
            return fn
    try:
        bound = bind(*values)
    except REFUSALS:  # constants the kernel refuses: it keeps its function (which fails by name)
        return fn
    except Exception as exc:  # noqa: BLE001
        # Broad: ``bind`` is kernel (plugin) code, and ``fn`` computes the same without it: a
        # bug of ``bind`` must not stop a run that ``fn`` serves, so it is logged at WARNING
        # with the node and the traceback, and ``fn`` is kept.
        get_logger("run").warning("binding the constants of node %r (%s) raised %s: %s; its kernel runs unspecialized",
                                  step.node.name, step.op, type(exc).__name__, exc, exc_info=exc)
        return fn
    return fn if bound is None else bound


class SlotScope(Mapping):
    """The values of a run by name, as the subgraphs of a node read their enclosing scope
    (Clause 5.4.3); the run's :class:`~onnxkit.runtime.state.RunState` under :data:`RUN_STATE`."""

    __slots__ = ("env", "slots", "state")

    def __init__(self, env: list, slots: dict, state=None):
        self.env, self.slots, self.state = env, slots, state

    def __getitem__(self, name):
        if name is RUN_STATE:
            if self.state is None:
                raise KeyError(name)
            return self.state
        v = self.env[self.slots[name]]
        if v is ABSENT:
            raise KeyError(name)
        return v

    def get(self, name, default=None):
        """``self[name]``, or ``default`` where it has no value (no exception raised: a subgraph
        run reads its free names and the run state this way)."""
        if name is RUN_STATE:
            return default if self.state is None else self.state
        i = self.slots.get(name)
        if i is None:
            return default
        v = self.env[i]
        return default if v is ABSENT else v

    def __contains__(self, name) -> bool:
        return self.get(name, ABSENT) is not ABSENT

    def __iter__(self):
        env = self.env
        names = [n for n, i in self.slots.items() if i and env[i] is not ABSENT]
        return iter(names + ([RUN_STATE] if self.state is not None else []))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def out_of_memory(graph: str, step) -> EvaluationError:
    """The error of an allocation the limits allowed and the system refused (no MemoryError chained)."""
    return EvaluationError(f"{graph}: node {step.node.name!r} ({step.op}): out of memory: the system refused an "
                           "allocation within the configured limits; lower Limits.max_value_bytes / max_run_bytes "
                           "to have such requests refused by size", step.node.name, step.op)


def _failed(graph: str, step, exc: Exception) -> EvaluationError:
    return EvaluationError(f"{graph}: node {step.node.name!r} ({step.op}) failed: {type(exc).__name__}: {exc}",
                           step.node.name, step.op)


def _call_special(call, step, args: list, env: list, layout: Layout, budget, held: dict, state):
    """Call a special step's kernel (``call``, laid for ``step``): its guard first (and, for a
    guard with ``after``, its check of the outputs the kernel returned), its scope as a
    :class:`SlotScope`."""
    guard = step.guard
    if guard is not None:  # charged to the slot of the first output (0 when unnamed)
        outs = step.outputs
        key = layout.slots[outs[0]] if outs else 0
        held[key] = guard(budget, args)
    out = call(SlotScope(env, layout.slots, state), *args) if step.scope else call(*args)
    if guard is not None and guard.after:
        held[key] = guard.check_outputs(budget, out, held[key])
    return out


def _store(out, multi: tuple, env: list) -> bool:
    """Store a result by position; False if a named output was left absent."""
    if type(out) is not tuple:
        out = (out,)
    n = len(out)
    whole = True
    for k, i in multi:
        if k < n:
            env[i] = out[k]
        else:
            env[i] = ABSENT
            whole = False
    return whole


def _release(release: tuple, budget, held: dict) -> None:
    """Give back to ``budget`` the bytes a guard charged for the values of the slots ``release``."""
    for i in release:
        budget.live -= held.pop(i, 0)


def run_fast(graph: str, layout: Layout, env: list, budget, held: dict) -> None:
    """Run every step of ``layout`` on ``env``: the unwatched loop (see the module docstring)."""
    start = 0
    try:
        for call, arity, in0, in1, ins, out_slot, multi, kill, special, step, release in layout.fast:
            if special == GUARDED:  # the guard, then the kernel: what _call_special does for such a step
                args = [env[i] for i in ins]
                charged = step.guard(budget, args)
                if charged:
                    held[out_slot] = charged
                out = call(*args)
            elif special:
                out = _call_special(call, step, [env[i] for i in ins], env, layout, budget, held, None)
            elif arity == 2:
                out = call(env[in0], env[in1])
            elif arity == 1:
                out = call(env[in0])
            else:
                out = call(*[env[i] for i in ins])
            if out_slot and type(out) is not tuple:
                env[out_slot] = out
            elif not _store(out, multi, env):
                raise _Short
            for i in kill:
                env[i] = ABSENT
            if release:
                _release(release, budget, held)
        return
    except _Short:  # the rest of the run checks its reads
        start = layout.steps.index(step) + 1
        for i in kill:
            env[i] = ABSENT
        _release(release, budget, held)
    except OnnxkitError:
        raise
    except MemoryError:  # allowed by the limits, refused by the system: raised below, unchained
        start = -1
    except Exception as exc:  # broad: any kernel's fault is the run's error, naming the node (re-raised)
        raise _failed(graph, step, exc) from exc
    if start < 0:
        raise out_of_memory(graph, step)
    run_checked(graph, layout, env, budget, held, None, None, start)


def run_checked(graph: str, layout: Layout, env: list, budget, held: dict, state, profiler, start: int = 0) -> None:
    """Run the steps of ``layout`` from ``start``: each read checked for presence, ``state``
    (a :class:`~onnxkit.runtime.state.RunState`, or None) checked before each node, and one
    profiling event per node when ``profiler`` is given."""
    fast = layout.fast
    for call, _arity, _in0, _in1, ins, out_slot, multi, kill, special, step, release in fast[start:] if start else fast:
        if state is not None:
            state.check(f"node {step.node.name!r} ({step.op}) of graph {graph!r}")
        args = [env[i] for i in ins]
        for i, a in enumerate(args):
            if a is ABSENT:
                raise EvaluationError(f"{graph}: node {step.node.name!r} ({step.op}) reads {step.inputs[i]!r}, "
                                      "which has no value (Clause 7.5)", step.node.name, step.op)
        begin = profiler.now_us() if profiler is not None else 0.0
        failed = False
        try:
            out = _call_special(call, step, args, env, layout, budget, held, state) if special else call(*args)
        except OnnxkitError:
            raise
        except MemoryError:
            failed = True
        except Exception as exc:  # broad: any kernel's fault is the run's error, naming the node (re-raised)
            raise _failed(graph, step, exc) from exc
        if failed:
            raise out_of_memory(graph, step)
        if out_slot and type(out) is not tuple:
            env[out_slot] = out
        else:
            _store(out, multi, env)
        for i in kill:
            env[i] = ABSENT
        _release(release, budget, held)
        if profiler is not None:
            profiler.node_event(step, begin, args, out)
