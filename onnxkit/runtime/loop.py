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

*Compiled steps.*  The fast loop unpacks each laid step (a tuple of eleven fields), tests its
kind and arity and loops over the slots it frees: a fixed cost per node, whatever the kernel
does.  A layout the fast loop keeps running (a decoder's plan, a stream's) has its steps written
out instead (:meth:`Layout.compiled`, from its :data:`COMPILE_AFTER`-th run — a cold first plan
that a warm one replaces, from its :data:`COLD_COMPILE_AFTER`-th — one chunk of
:data:`CHUNK` consecutive steps a run, so the cost of compiling is spread), each chunk the body
of one Python function over the run's slot list (:func:`compile_chunk`), and once every step is
compiled a run calls the chunks in order.  Per step, in the loop's order and with its semantics:
the kernel called on its input slots (a ``GUARDED`` step's guard first, its charged bytes held
under the output slot — a guard with a cheap bound asked that bound first, as the guard asks it;
a ``SPECIAL`` step whose only special part is a guard without a check after the kernel, its
guard's charge held under its first output's slot then the kernel, as :func:`_call_special`
calls them; any other ``SPECIAL`` step through :func:`_call_special`), its result stored (a
tuple where the node names one output: its first element; several named outputs by position,
as :func:`_store` stores them; a result that leaves a named output
absent raises the short-result exception with the step's index, and the run goes on checked),
its inputs' last uses freed, its release given back (slot by slot, as :func:`_release`).  Any other exception propagates from the
line of the step that raised it, which :meth:`Chunk.step_of` maps back to that step: the run's
error names the same node.  The same functions are called with the same arguments in the same
order (the results are the loop's, bit for bit); a chunk's source holds only slot numbers and
names bound to the step's own objects (never a value's text), and is compiled once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Optional

from ..errors import EvaluationError, OnnxkitError
from ..log import get_logger
from .bodies import first_run
from .kernel import REFUSALS, traits_of
from .state import RUN_STATE

#: the content of a slot whose value is not (or no longer) there
ABSENT = type("Absent", (), {"__repr__": lambda self: "<absent>", "__slots__": ()})()


class _Short(Exception):
    """Raised by the fast loop after storing a kernel's result that left a named output absent
    (by a compiled chunk with the step's ``index``: :func:`compile_chunk`)."""

    def __init__(self, index: Optional[int] = None):
        super().__init__(index)
        self.index = index


#: runs of one layout by the fast loop before its steps are compiled (:func:`compile_chunk`),
#: one chunk per run from then on: a plan run a few times pays nothing for it
COMPILE_AFTER = 8
#: the same for a run of a session's cold first plan (:func:`~onnxkit.runtime.bodies.first_run`),
#: which the warm plan replaces once set up: its layouts live a few dozen runs, compiling them
#: would cost more than it saves unless they keep serving (a setup that takes long, or failed)
COLD_COMPILE_AFTER = 256
#: steps per compiled function (a run compiles at most one chunk: the cost of compiling is spread)
CHUNK = 64


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
                 "outer", "runs", "chunks")

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
        #: runs of the fast loop counted towards compiling (see :meth:`compiled`)
        self.runs = 0
        #: the compiled chunks (:class:`Chunk`), in step order, replaced
        #: whole as one is added (empty until the layout ran :data:`COMPILE_AFTER` times)
        self.chunks = ()

    def compiled(self) -> tuple:
        """The compiled chunks that run every step, for the next run of the fast loop; empty
        while some step is not compiled.  From the layout's :data:`COMPILE_AFTER`-th run on
        (:data:`COLD_COMPILE_AFTER`-th, counting runs of a session's cold first plan),
        each run compiles the next chunk (at most one a run: the cost is spread), and runs by
        the tuples until the last one is compiled (a kernel replaced lays the plan out anew)."""
        chunks = self.chunks
        if chunks and chunks[-1].end == len(self.fast):
            return chunks
        self.runs += 1
        if self.runs < (COMPILE_AFTER if first_run() is None else COLD_COMPILE_AFTER) or not self.fast:
            return ()
        begin = chunks[-1].end if chunks else 0
        chunk = compile_chunk(self.fast, begin, min(begin + CHUNK, len(self.fast)), {
            "ABSENT": ABSENT, "_store": _store, "_release": _release, "_call_special": _call_special,
            "_Short": _Short, "layout": self}, GUARDED)
        self.chunks = (*chunks, chunk)
        return ()

    def failing_step(self, tb, step):
        """The plan step that raised, from traceback ``tb``: the step of the compiled chunk's line
        on it, else ``step`` (the loop's own)."""
        for chunk in self.chunks:
            k = chunk.step_of(tb)
            if k is not None:
                return self.steps[k]
        return step

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
    """Run every step of ``layout`` on ``env``: the unwatched loop (see the module docstring),
    or, once :meth:`Layout.compiled` has them all, the layout's compiled chunks."""
    start = 0
    step = None
    chunks = layout.compiled()
    try:
        if chunks:
            for chunk in chunks:
                chunk.run(env, budget, held)
            return
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
    except _Short as short:  # the rest of the run checks its reads
        start = layout.steps.index(step) if short.index is None else short.index  # a compiled step's
        stored = layout.laid_steps()[start]  # its outputs stored as far as they came (the rest absent)
        for i in stored.kill:
            env[i] = ABSENT
        _release(stored.release, budget, held)
        start += 1
    except OnnxkitError:
        raise
    except MemoryError as exc:  # allowed by the limits, refused by the system: raised below, unchained
        step = layout.failing_step(exc.__traceback__, step)
        start = -1
    except Exception as exc:  # broad: any kernel's fault is the run's error, naming the node (re-raised)
        raise _failed(graph, layout.failing_step(exc.__traceback__, step), exc) from exc
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


# -- compiled steps --------------------------------------------------------------------------------
#: what a size guard's bound may raise on inputs it cannot read (the guard then decides by its own
#: rules, which re-raise what is a bug of the bound: :class:`~onnxkit.runtime.budget.Guard`)
_BOUND_FAULTS = (TypeError, ValueError, IndexError, ArithmeticError, AttributeError)


class Chunk:
    """The compiled steps ``begin`` to ``end`` (exclusive) of a layout: ``run(env, budget, held)``."""

    __slots__ = ("begin", "end", "run", "code", "lines")

    def __init__(self, begin: int, end: int, run, lines: list):
        self.begin, self.end, self.run, self.lines = begin, end, run, lines
        self.code = run.__code__

    def step_of(self, tb) -> Optional[int]:
        """The index (in the layout) of the step whose line raised, from a traceback ``tb``; None
        where no frame of this chunk's function is on it."""
        line = None
        while tb is not None:
            if tb.tb_frame.f_code is self.code:
                line = tb.tb_lineno
            tb = tb.tb_next
        if line is None or not 0 <= line < len(self.lines):
            return None
        return self.lines[line]


def compile_chunk(fast: tuple, begin: int, end: int, helpers: dict, guarded: int) -> Chunk:
    """The :class:`Chunk` of ``fast[begin:end]`` (plain tuples in :class:`~onnxkit.runtime.loop.LaidStep`'s
    order); ``helpers``: the loop's ``ABSENT``, ``_store``, ``_release``, ``_call_special``,
    ``_Short`` and ``layout``, by those names; ``guarded``: the loop's ``GUARDED`` code."""
    ns = dict(helpers)
    layout = helpers["layout"]
    ns["_first"] = _first_of(helpers["_Short"])
    ns["_BOUND_FAULTS"] = _BOUND_FAULTS
    src = ["def run(e, budget, held):"]
    lines = [begin, begin]  # line numbers start at 1: line 1 is the def
    k = begin
    for call, _arity, _in0, _in1, ins, out_slot, multi, kill, special, step, release in fast[begin:end]:
        ns[f"c{k}"] = call
        args = ", ".join(f"e[{i}]" for i in ins)
        body = []
        if special == guarded and getattr(step.guard, "bound", None) is not None:
            # the guard's cheap bound first, as the guard itself asks it: under the run's small
            # size it charges nothing; otherwise (or where the bound cannot read the inputs) the
            # guard decides, asking its bound again
            ns[f"g{k}"], ns[f"b{k}"] = step.guard, step.guard.bound
            body += [f"a = [{args}]", "try:", f"    s = b{k}(g{k}, a) <= budget.small", "except _BOUND_FAULTS:",
                     "    s = False", f"h = 0 if s else g{k}(budget, a)", f"if h: held[{out_slot}] = h",
                     f"r = c{k}(*a)"]
        elif special == guarded:
            ns[f"g{k}"] = step.guard
            body += [f"a = [{args}]", *_charge(step.guard, k, ns), f"if h: held[{out_slot}] = h", f"r = c{k}(*a)"]
        elif special and step.guard is not None and not step.guard.after and not step.scope:
            # what _call_special does for a guard without a check after it and no scope: the
            # guard's charge held under the first output's slot (0 when unnamed), then the kernel
            ns[f"g{k}"] = step.guard
            outs = step.outputs
            held_at = layout.slots[outs[0]] if outs else 0
            body += [f"a = [{args}]", *_charge(step.guard, k, ns), f"held[{held_at}] = h", f"r = c{k}(*a)"]
        elif special:
            ns[f"s{k}"] = step
            body.append(f"r = _call_special(c{k}, s{k}, [{args}], e, layout, budget, held, None)")
        else:
            body.append(f"r = c{k}({args})")
        if out_slot:
            body.append(f"e[{out_slot}] = r if type(r) is not tuple else _first(r, {k})")
        elif multi:
            # a tuple holding every named position is stored as _store stores it; any other
            # result goes through _store (a short one raises the short-result exception)
            ns[f"m{k}"] = multi
            body.append(f"if type(r) is tuple and len(r) > {max(pos for pos, _ in multi)}:")
            body += [f"    e[{i}] = r[{pos}]" for pos, i in multi]
            body.append(f"elif not _store(r, m{k}, e): raise _Short({k})")
        if kill:
            body.append(" = ".join(f"e[{i}]" for i in kill) + " = ABSENT")
        for i in release:  # _release, slot by slot
            body.append(f"budget.live -= held.pop({i}, 0)")
        for b in body:
            src.append("    " + b)
            lines.append(k)
        k += 1
    src.append("    return None")
    lines.append(end - 1)
    exec(compile("\n".join(src), f"<onnxkit plan steps {begin}-{end - 1}>", "exec"), ns)  # noqa: S102
    return Chunk(begin, end, ns["run"], lines)


def _charge(guard, k: int, ns: dict) -> list:
    """Lines setting ``h`` to what ``g{k}(budget, a)`` (the step's size guard) charges.  A guard
    of the kernel's declared output bytes (kind ``"declared"``) has its prediction asked here: a
    plain ``int`` that both limits admit (``max_value_bytes``, ``max_run_bytes`` with what the
    run holds) is charged here as :meth:`~onnxkit.runtime.budget.RunBudget.charge` charges it;
    anything else — 0, a length with the bytes, another type, a size over a limit, an input the
    prediction cannot read — is the guard's to decide (asking again: it charges, refuses by
    name or passes as before).  Other guards are called."""
    if getattr(guard, "kind", None) != "declared" or getattr(guard, "declared", None) is None:
        return [f"h = g{k}(budget, a)"]
    ns[f"d{k}"] = guard.declared
    return ["try:", f"    h = d{k}(*a)", "except _BOUND_FAULTS:", "    h = None",
            "if type(h) is int and 0 < h <= budget.limits.max_value_bytes "
            "and budget.live + h <= budget.limits.max_run_bytes:",
            "    budget.live += h", "else:", f"    h = g{k}(budget, a)"]


def _first_of(short):
    """``first(out, k)``: a single-output step's tuple result as the loop stores it, its first
    element; ``short(k)`` (the loop's short-result exception) raised where the tuple is empty."""
    def first(outs: tuple, k: int):
        if outs:
            return outs[0]
        raise short(k)
    return first
