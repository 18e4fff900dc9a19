"""A plan of a graph and its steps: what the planner (:mod:`onnxkit.runtime.plan`) makes and the
run loop (:mod:`onnxkit.runtime.loop`) runs.

A :class:`GraphPlan` is a list of :class:`Step` (a node's kernel, its input and output names, the
names freed after it) over constants and defaults, with the slot layouts the loop runs, made on
first need and owned by the plan (a step whose kernel is replaced tells the plans laid out over
it).  :func:`assign_lifetimes` sets when each value is freed; :func:`kept_value_ids` names the
values a plan keeps between runs; :func:`frozen` makes a folded value read-only.
"""

from __future__ import annotations

import threading
import weakref
from typing import Optional

import numpy as np

from ..errors import EvaluationError
from ..kernel_traits import NO_TRAITS
from ..log import get_logger
from .bodies import describe
from .budget import enter_run, leave_run
from .kernel import REFUSALS
from .loop import ABSENT, Layout, SlotScope, run_checked, run_fast
from .state import RUN_STATE
from .usedef import step_index

def is_deterministic(step) -> bool:
    """Whether equal inputs give ``step`` equal outputs (Clause 8.5): False for a node whose
    operator's domain package declares it ``nondeterministic`` (the random generators, Dropout:
    :func:`onnxkit.plugin.nondeterministic`), which is never evaluated at planning (constant
    folding, the shape specializer, computed constants)."""
    return not step.traits.nondeterministic


class Step:
    """One node of a plan: its kernel ``fn``, input and output names, the names freed after it.

    A copy (:meth:`copy`: a plan's folded-defaults variant, a specialized plan, an inlined
    branch) runs the kernel of the step it copies until it is given one of its own.  Assigning
    ``fn`` (a test spying on a kernel) is seen by the next run of every plan that runs the step
    or such a copy of it: the step tells those plans (:meth:`GraphPlan._kernel_replaced`), which
    lay out their run loop again (:mod:`onnxkit.runtime.loop`)."""

    __slots__ = ("_fn", "inputs", "outputs", "free", "scope", "node", "op", "_uses", "guard", "release", "subgraphs",
                 "_source", "_plans", "traits")

    def __init__(self, fn, inputs, outputs, node, scope):
        self._fn = fn
        self.inputs = inputs
        self.outputs = outputs
        self.node = node
        self.scope = scope
        self.free = ()
        self._uses = ()
        self.op = f"{node.domain + '::' if node.domain else ''}{node.op_type}"
        self.guard = None    # the size check run before fn (onnxkit.runtime.budget), if it needs one
        #: the operator traits of the node's definition (:func:`~onnxkit.kernel_traits.operator_traits`)
        self.traits = NO_TRAITS
        self.release = ()    # names freed after this step whose bytes a guard charged
        #: attribute name -> the plan (or list of plans) of each subgraph the node's kernel runs
        self.subgraphs = None
        #: of a copy, (the step copied, its kernel then): while ``_fn`` is that kernel, ``fn`` is the copied step's
        self._source = None
        #: weak references to the plans whose run loop was laid out calling this step's kernel
        self._plans = ()

    @property
    def fn(self):
        """The kernel: the step's own, or, for a copy not given one, that of the step it copies."""
        source = self._source
        if source is not None:
            step, kernel = source
            if self._fn is kernel:
                return step.fn
        return self._fn

    @fn.setter
    def fn(self, fn) -> None:
        self._fn = fn
        self._source = None  # its own kernel from now on
        self._replaced()

    def _replaced(self) -> None:
        """Tell the plans that laid out this step's kernel (theirs, or a copy's) that it changed."""
        for ref in self._plans:
            plan = ref()
            if plan is not None:
                plan._kernel_replaced()

    def copy(self) -> "Step":
        """A step like this one that runs this step's kernel (whatever it is then) until given its own."""
        fn = self.fn
        step = Step(fn, self.inputs, self.outputs, self.node, self.scope)
        step._uses, step.guard, step.subgraphs, step.traits = self._uses, self.guard, self.subgraphs, self.traits
        step._source = (self, fn)
        return step


#: serializes the registration of plans with their steps (:meth:`GraphPlan._layout`)
_ATTACH = threading.Lock()


class GraphPlan:
    """A compiled graph (or function body).  ``run(inputs, scope)`` -> list of output values.

    ``inputs``: values for ``input_names`` by position (None = not supplied: an initializer
    default is used where there is one).  ``scope``: the enclosing graph's values by name
    (subgraphs see them, Clause 5.4.3).  Nodes with a size guard are checked against the
    run's budget (``limits``) before their kernel runs (:mod:`onnxkit.runtime.budget`).
    """

    limits = None

    def __init__(self, name, input_names, output_names, constants, steps, free_vars, defaults):
        self.name = name
        self.input_names = input_names
        self.output_names = output_names
        self.constants = constants      # name -> value: initializers that are not inputs
        self.defaults = defaults        # name -> value: initializers that are also inputs (7.2)
        self.steps = steps
        self.free_vars = free_vars      # names this graph reads from the enclosing scope
        #: (constants, steps) of a plan that also folded the defaults, used while none is overridden
        self.folded = None
        self.default_positions = [i for i, n in enumerate(input_names) if n in defaults]
        self._layouts = [None, None]    # slot layouts of (constants, steps) and of ``folded``
        #: bumped when a kernel the layouts call is replaced (a layout made at another version is stale)
        self._version = 0
        self._ref = None                # a weak reference to this plan, its steps' (:meth:`_layout`)

    def __repr__(self) -> str:
        """The plan's name and size, then one line per node whose kernel reports the body it runs."""
        return f"GraphPlan({self.name!r}, {len(self.steps)} steps)" + "".join("\n  " + line for line in describe(self))

    def run(self, inputs, scope: Optional[dict] = None, state=None) -> list:
        """Evaluate the steps in order.  ``state`` (a :class:`~onnxkit.runtime.state.RunState`,
        or found in ``scope`` under :data:`RUN_STATE` for a subgraph) selects the watched loop,
        which checks termination and the time limit before each node and profiles the top
        level; without one the loop only calls the kernels (and the size guards, which are
        decided at planning: :mod:`onnxkit.runtime.budget`)."""
        budget, token = enter_run(self.limits)
        held: dict = {}  # output name -> bytes its guard charged, until the loop frees it
        try:
            return self._run(inputs, scope, state, budget, held)
        finally:
            if held:
                budget.live -= sum(held.values())
            if token is not None:
                leave_run(token)

    def _run(self, inputs, scope, state, budget, held) -> list:
        if self.folded is not None and not any(
                i < len(inputs) and inputs[i] is not None for i in self.default_positions):
            layout = self._layout(1, *self.folded)  # no default overridden: the plan that folded them
        else:
            layout = self._layout(0, self.constants, self.steps)
        env = layout.template.copy()
        checked = layout.checked or (scope is None and bool(layout.free))
        if type(scope) is SlotScope:  # a node's subgraph: its free names read by slot
            if state is None:
                state = scope.state
            pairs, complete = layout.free_slots(scope.slots)
            checked = checked or not complete
            outer = scope.env
            for p, i in pairs:
                v = outer[p]
                if v is ABSENT:
                    checked = True  # not there (yet, or any more): reads of it are checked (and reported)
                else:
                    env[i] = v
        elif scope is not None:
            if state is None:
                state = scope.get(RUN_STATE)
            get = scope.get
            for name, i in layout.free:
                v = get(name, ABSENT)
                if v is ABSENT:
                    checked = True  # absent from the scope: reads of it are checked (and reported)
                else:
                    env[i] = v
        defaults = self.defaults
        n = len(inputs)
        for k, i in enumerate(layout.inputs):
            v = inputs[k] if k < n else None
            if v is None and defaults:
                v = defaults.get(self.input_names[k])
            env[i] = v
        if state is not None:
            state.check(f"graph {self.name!r}")
            run_checked(self.name, layout, env, budget, held, state, state.profiler if scope is None else None)
        elif checked:
            run_checked(self.name, layout, env, budget, held, None, None)
        else:
            run_fast(self.name, layout, env, budget, held)
        outs = [env[i] for i in layout.outputs]
        for k, v in enumerate(outs):
            if v is ABSENT:
                raise EvaluationError(f"{self.name}: graph output {self.output_names[k]!r} was not computed")
        return outs

    def _layout(self, which: int, constants: dict, steps: list) -> Layout:
        """The slot layout of ``(constants, steps)`` (0: the plan, 1: its folded variant), made
        on first need and again when the steps changed or a kernel of one of them was replaced
        (:meth:`_kernel_replaced`).  Making one registers the plan with each step it lays out
        and with each step whose kernel that step runs (:meth:`Step.copy`), so that assigning
        a kernel to any of them tells this plan."""
        layout = self._layouts[which]
        if layout is None or layout.steps is not steps or layout.version != self._version:
            self._attach(steps)
            version = self._version  # read after attaching: a kernel replaced from now on is seen
            layout = Layout(self, constants, steps, version)
            self._layouts[which] = layout
        return layout

    def _attach(self, steps: list) -> None:
        ref = self._ref
        if ref is None:
            ref = self._ref = weakref.ref(self)
        with _ATTACH:
            for s in steps:
                while s is not None:  # the step, then each step whose kernel it runs (Step.fn)
                    plans = s._plans
                    if ref not in plans:  # the plans still alive, and this one
                        s._plans = (*[r for r in plans if r() is not None], ref) if plans else (ref,)
                    source = s._source
                    s = source[0] if source is not None and s._fn is source[1] else None

    def _kernel_replaced(self) -> None:
        """A kernel a layout of this plan calls was replaced (:attr:`Step.fn`): lay out again at the next run."""
        self._version += 1


def kept_value_ids(plan) -> frozenset:
    """Identities of every value ``plan`` keeps between runs — its constants, defaults and folded
    values, and those of the plans it runs inside (subgraphs, function bodies: ``body`` of a
    function call's kernel), at any depth.  An output that is one of them must be copied before
    it is handed out (the session's fetch): a caller writing into it would change later runs."""
    ids: set = set()
    seen: set = set()
    todo = [plan]
    while todo:
        p = todo.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        ids.update(id(v) for v in p.constants.values())
        ids.update(id(v) for v in p.defaults.values())
        steps = list(p.steps)
        if p.folded is not None:
            ids.update(id(v) for v in p.folded[0].values())
            steps += p.folded[1]
        for step in steps:
            for sub in (step.subgraphs or {}).values():
                todo.extend(sub if isinstance(sub, list) else [sub])
            body = getattr(step.fn, "body", None)
            if isinstance(body, GraphPlan):
                todo.append(body)
    return frozenset(ids)


def frozen(value):
    """``value`` made read-only where it is a writeable numpy array: a folded constant is the
    plan's and never written again (kernels do not write their inputs; a caller handed one as
    an output gets a copy, :func:`kept_value_ids`).  A kernel's fresh result, which owns its
    memory, is itself made read-only; a writeable *view* (of memory some other array may write)
    is replaced by a read-only copy.  The flag protects the value; it tells kernels nothing:
    which inputs are constants they learn from the planner (:meth:`NodeContext.is_constant`)."""
    if isinstance(value, np.ndarray) and value.flags.writeable:
        if value.base is not None:
            value = value.copy()
        value.flags.writeable = False
    return value


def assign_lifetimes(steps, keep: set, index=None) -> None:
    """Set each step's ``free`` (the names no later step reads: dropped once it has run) and
    ``release`` (those of them a size guard charged), from the shared use-def index
    (:func:`~onnxkit.runtime.usedef.step_index`: inputs and the names subgraphs read; ``index``,
    one a caller holds for exactly ``steps``, else made here).  A name is freed after its last
    reader, a name nothing reads right after the step that makes it; the names in ``keep`` (the
    graph's outputs) are never freed."""
    index = step_index(steps) if index is None else index
    at = {id(s): i for i, s in enumerate(steps)}
    frees: dict = {}
    for name in index.names():
        if not name or name in keep:
            continue
        uses, producer = index.uses(name), index.producer(name)
        if uses:
            last = max(at[id(u.item)] for u in uses)
        elif producer is not None:
            last = at[id(producer)]   # produced and never read: drop at once
        else:
            continue
        frees.setdefault(last, []).append(name)
    guarded = {s.outputs[0] for s in steps if s.guard is not None and s.outputs}
    for i, s in enumerate(steps):
        s.free = tuple(frees.get(i, ()))
        s.release = tuple(n for n in s.free if n in guarded)


def evaluate_constant(step, args: list, budget, purpose: str) -> Optional[tuple]:
    """The outputs of ``step`` on constant ``args`` ahead of the run (constant folding at
    planning, shape specialization, the optimizer's computed constants: ``purpose`` names it),
    its size guard checked against ``budget`` first: a tuple with one value per output the node
    names, or None where the kernel or its guard refuses them (:data:`~.kernel.REFUSALS`: the
    step is left to the run, which fails by name) or leaves a named output out.  Any other fault
    is a bug of the kernel: logged with the node and the traceback, and None.  ``budget`` is
    left with nothing charged."""
    try:
        if step.guard is not None:  # a constant too big to compute is refused at run time, by name
            step.guard(budget, args)
        out = step.fn(*args)
    except REFUSALS:
        return None
    except Exception as exc:  # noqa: BLE001
        # Broad: a kernel is plugin code, and a step left to the run computes there what it would
        # have given here; a fault that is not a refusal of its inputs is a bug, shown.
        get_logger("plan").warning("%s: node %r (%s) raised %s: %s; it is left to run", purpose, step.node.name,
                                   step.op, type(exc).__name__, exc, exc_info=exc)
        return None
    finally:
        budget.live = 0
    outs = out if type(out) is tuple else (out,)
    if len(outs) < sum(1 for n in step.outputs if n):
        return None
    return outs
