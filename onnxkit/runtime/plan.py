"""Planning: bind every node to a definition and a kernel once, and lay out the run loop.

Binding (Clause 5.3.2, 14.3, 14.4, 8.4, 4.4) of a node, in order:

1. a model-local function with the node's (domain, op_type, overload) is evaluated as a
   nested plan of its body (attribute references replaced by the call site's values);
2. otherwise the node binds to the definition with the greatest since_version not above
   the imported version of its domain (:meth:`Registry.bind`);
3. the backend's kernel for exactly that (domain, op_type, since_version) computes it;
4. without one, a Part 2 function body for that version is evaluated as a nested plan;
5. without either, the operator is *unsupported*: every such operator of the model,
   subgraphs and function bodies included, is collected and reported together
   (:class:`UnsupportedOperatorError`) before anything runs.  No other version's kernel
   is ever substituted.

On a backend that declares a ``fallback`` (the gpu backend: cpu), a node whose definition has
neither a kernel nor a function body there, or whose types that backend does not compute, is
planned on the fallback instead, with explicit transfers, and listed in
:attr:`Planner.fallbacks` (:mod:`onnxkit.runtime.fallback`).

A :class:`GraphPlan` is a list of steps with precomputed input/output names and the values
to free after each step (their last use; a subgraph's free variables count as uses by the
node that carries it).  The run loop (:mod:`onnxkit.runtime.loop`) runs them over values in
numbered slots, laid out once per plan: no registry look-up, no attribute parsing, no
dictionary look-up per node.
"""

from __future__ import annotations

import mmap
import threading
import weakref
from typing import Optional

from onnxkit import records
import numpy as np

from .. import ir
from ..errors import EvaluationError, OnnxkitError
from ..functions import GRAPH_TYPES, call_attributes, node_attributes, substitute
from ..kernel_traits import NO_TRAITS, operator_traits
from ..limits import DEFAULT_LIMITS
from ..log import get_logger
from ..registry import normalize_domain
from .bodies import describe
from .budget import RunBudget, enter_run, guard_for, leave_run
from .fallback import Placement
from .kernel import REFUSALS, NodeContext, Unsupported, traits_of
from .loop import ABSENT, Layout, SlotScope, run_checked, run_fast
from .options import missing_backend_message
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


def _mapped(a: np.ndarray) -> bool:
    """True if the octets of ``a`` belong to a memory map (a model file or an external data file)."""
    base = a
    for _ in range(64):  # a chain of views is short; bounded anyway
        if isinstance(base, mmap.mmap):
            return True
        if isinstance(base, memoryview):
            base = base.obj
        elif isinstance(base, np.ndarray):
            base = base.base
        else:
            return False
        if base is None:
            return False
    return True


def _mapped_view(view: memoryview) -> bool:
    """True if ``view`` shows octets of a memory map."""
    return isinstance(view.obj, mmap.mmap)


class Visible:
    """The names visible at a point of a graph: its own ``names`` and those of ``outer`` (5.4.3).

    A view, made in constant time: ``names`` is the graph's live set of defined names, so a
    planner builds no per-node copy (the copy made planning quadratic in the node count).
    Supports ``in`` only; ``outer`` is another :class:`Visible` or any container.
    """

    __slots__ = ("names", "outer", "constants", "backend", "graph", "inits", "defaults", "_declared")

    def __init__(self, names, outer=(), constants=None, backend=None, graph=None, inits=None, defaults=None):
        self.names = names
        self.outer = outer
        #: name -> value: the graph's constants (initializers not inputs, and the values folded
        #: so far: the planner folds each step as it plans it)
        self.constants = constants
        self.backend = backend      # the backend those constants are values of
        self.graph = graph          # the ir.Graph (None where unknown)
        self.inits = inits or {}    # name -> the graph's Tensor / SparseTensor initializer
        self.defaults = defaults    # name -> value: the graph's defaults (initializers that are inputs)
        self._declared = None       # name -> declared ir.Type of the graph, made on first need

    def declared(self) -> dict:
        """``{name: Type}`` declared in the graph: its inputs', outputs' and ``value_info``'s
        types (initializers: :func:`declared_type`)."""
        types = self._declared
        if types is None:
            types = {}
            g = self.graph
            if g is not None:
                for vi in (*g.value_info, *g.output, *g.input):  # an input's declaration wins
                    if vi.name and vi.type is not None:
                        types[vi.name] = vi.type
            self._declared = types
        return types

    def initializer_type(self, name: str):
        """The tensor type (element type and extents) of the graph's initializer ``name`` as
        nodes read it (a sparse one dense), or None."""
        t = self.inits.get(name)
        if t is None:
            return None
        if isinstance(t, ir.SparseTensor):
            return ir.tensor_type(int(t.values.data_type), [int(d) for d in t.dims])
        return ir.tensor_type(int(t.data_type), [int(d) for d in t.dims])

    def __contains__(self, name) -> bool:
        return name in self.names or name in self.outer


_NOT_CONSTANT = object()


def declared_constant(visible, name: str):
    """``(constant, value, backend)`` where ``name``, read at a point of a graph whose visible
    names are ``visible`` (a chain of :class:`Visible`), is a value the plan holds: a constant of
    that graph or of an enclosing one (``constant`` True: initializers not inputs, values folded
    so far) or a default (False: an initializer that is also an input, which a caller may
    feed), else None.  The innermost graph defining ``name`` decides, as :func:`outer_constant`;
    unlike it, a value held on another backend counts (its values do not change either)."""
    v = visible
    while isinstance(v, Visible):
        if v.constants is not None and name in v.constants:
            return True, v.constants[name], v.backend
        if v.defaults and name in v.defaults:
            return False, v.defaults[name], v.backend
        if name in v.names:
            return None
        v = v.outer
    return None


def declared_type(visible, name: str):
    """The declared type of ``name`` read at a point of a graph (a :class:`Visible` chain): the
    declaration (input, output, ``value_info``) of the innermost graph defining it, else that
    graph's initializer's tensor type (element type and extents); None where none is declared."""
    v = visible
    while isinstance(v, Visible):
        t = v.declared().get(name)
        if t is not None:
            return t
        if name in v.names:
            return v.initializer_type(name)
        v = v.outer
    return None


def outer_constant(visible, name: str, backend: str):
    """The value of ``name`` where an enclosing graph (a chain of :class:`Visible`) holds it as
    a constant of ``backend``, else :data:`_NOT_CONSTANT`.  The innermost graph defining
    ``name`` decides: a name an inner graph defines otherwise (an input, a node output)
    shadows an outer constant."""
    v = visible
    while isinstance(v, Visible):
        if v.constants is not None and name in v.constants:
            return v.constants[name] if v.backend == backend else _NOT_CONSTANT
        if name in v.names:
            return _NOT_CONSTANT
        v = v.outer
    return _NOT_CONSTANT


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


class _Folding:
    """Folding of one plan's steps at planning (:meth:`Planner._fold_constants`): ``constants``
    (the plan's, which the folded outputs join) and ``outer`` (constants of enclosing graphs a
    subgraph reads, by name)."""

    __slots__ = ("planner", "constants", "outer", "folded")

    def __init__(self, planner, constants: dict, outer: dict):
        self.planner, self.constants, self.outer, self.folded = planner, constants, outer, False

    def fold(self, step) -> bool:
        """Evaluate ``step`` now if it is a deterministic node of the default domain whose inputs
        are all constants; True when its outputs joined ``constants`` (a node that fails here is
        left to fail at run time, by name)."""
        node, constants, outer = step.node, self.constants, self.outer
        if step.scope or not is_deterministic(step) or node.domain not in ("", "ai.onnx") \
                or not all((not n) or n in constants or n in outer for n in step.inputs):
            return False
        args = [(constants[n] if n in constants else outer[n]) if n else None for n in step.inputs]
        planner = self.planner
        try:
            if step.guard is not None:  # a constant too big to compute is refused at run time, by name
                step.guard(RunBudget(planner.limits), args)
            out = step.fn(*args)
        except REFUSALS:  # constants the kernel (or its guard) refuses: the run fails by name
            return False
        except Exception as exc:  # noqa: BLE001
            # Broad: a kernel is plugin code, and a node left unfolded still runs (and fails, by
            # name, if it fails then); but a fault that is not a refusal of its inputs is a bug,
            # logged with the node and the traceback rather than silently left to the run.
            get_logger("plan").warning("constant folding: node %r (%s) raised %s: %s; it is left to run", node.name,
                                       step.op, type(exc).__name__, exc, exc_info=exc)
            return False
        outs = out if type(out) is tuple else (out,)
        for name, value in zip(step.outputs, outs):
            if name:
                constants[name] = frozen(planner._owned(value))  # e.g. a Constant's view of the file
        self.folded = True
        return True

    def drop_unread(self, remaining: list, keep: set) -> None:
        """Drop the constants nothing reads any more, once something was folded: neither the
        ``remaining`` steps (inputs, names their subgraphs read) nor ``keep``."""
        if self.folded:
            used = {n for s in remaining for n in (*s.inputs, *s._uses)} | keep
            constants = self.constants
            for name in [n for n in constants if n not in used]:
                del constants[name]


class Planner:
    """Binds and compiles a model for one backend.  Collects every unsupported operator.

    Planning is linear in the size of the model: one pass over each graph's nodes, no
    per-node set copies; nesting (subgraphs, function calls) is refused at
    ``max_subgraph_depth`` / ``max_function_depth``, and expansion at ``max_function_calls``,
    before a deeper level or a further call is built.
    """

    def __init__(self, model: ir.Model, registry, backend: str, seed=None, limits=None, own_data: bool = True):
        self.model = model
        #: copy every constant that is a view of a mapped file (model or external data), so the
        #: plan never reads a file after planning (a rewrite or truncation cannot reach it)
        self.own_data = own_data
        self.registry = registry
        self.backend_name = backend
        if backend not in registry.backends:
            raise OnnxkitError(missing_backend_message(backend, registry.backends))
        self.backend = registry.backends[backend]
        self.seed = seed
        self.limits = limits
        self.opsets = {normalize_domain(o.domain): int(o.version) for o in model.opset_import}
        self.functions = {(f.domain, f.name, f.overload): f for f in model.functions}
        self.unsupported: list = []
        self._seen_unsupported: set = set()
        self.depth = 0
        #: Nodes planned on the backend's fallback (:class:`~onnxkit.runtime.fallback.Fallback`).
        self.fallbacks: list = []
        self._placement = Placement(self) if self.backend.fallback else None
        self._types = None   # a Placement used for inferred types only (inferred_type), made on first need
        self.function_depth = 0
        self.function_calls = 0  # function bodies expanded so far (max_function_calls)

    # -- public -------------------------------------------------------------------------------
    def compile_model(self) -> GraphPlan:
        """The plan of the model's graph.  A model whose ``ir_version`` is newer than the newest
        this implementation knows is refused (14.2: a newer IR version may change the meaning
        of a model; the checker only warns, ``ir-version-newer``), as onnxruntime refuses it."""
        from ..checker.context import CURRENT_IR

        if self.model.ir_version > CURRENT_IR:
            raise OnnxkitError(f"the model's ir_version {self.model.ir_version} is newer than IR version {CURRENT_IR}, "
                               "the newest this implementation evaluates (Clause 14.1.2, 14.2); it is not evaluated")
        plan = self.compile_graph(self.model.graph, self.opsets, outer=frozenset(), top=True)
        if self.unsupported:
            from ..errors import UnsupportedOperatorError

            raise UnsupportedOperatorError(self.unsupported)
        return plan

    # -- graphs -------------------------------------------------------------------------------
    def compile_graph(self, graph: ir.Graph, opsets: dict, outer=frozenset(), top: bool = False,
                      name: Optional[str] = None) -> GraphPlan:
        if self.limits is not None:
            self.limits.check("max_subgraph_depth", self.depth, where=f"graph {graph.name!r}")
        input_names = [vi.name for vi in graph.input]
        inits = {t.name: t for t in graph.initializer}
        for sp in graph.sparse_initializer:
            if sp.values is not None:
                inits[sp.values.name] = sp
        defaults, constants = {}, {}
        for n, t in inits.items():
            value = self._initializer_value(t)
            (defaults if n in input_names else constants)[n] = value
        defined = set(input_names) | set(inits)
        initial = dict(constants) if defaults else None   # what the plan folding the defaults starts from
        visible = Visible(defined, outer, constants, self.backend_name, graph, inits, defaults)
        compiled = []   # every step, folded or not
        steps = []
        free = set()
        outer_values: dict = {}  # free names an enclosing graph holds as constants -> their values
        folding = _Folding(self, constants, outer_values)
        for node in graph.node:
            step, node_free = self.compile_node(node, opsets, visible, graph)
            if node_free:
                free.update(n for n in node_free if n not in defined)
            for n in node.input:
                if n and n not in defined:
                    free.add(n)
                    if n not in outer_values:  # a subgraph's reads of enclosing constants fold like its own (5.4.3)
                        v = outer_constant(outer, n, self.backend_name)
                        if v is not _NOT_CONSTANT:
                            outer_values[n] = v
            defined.update(n for n in node.output if n)
            if step is not None:
                compiled.append(step)
                # folded at once, so that the nodes after it are planned knowing its outputs are
                # constants (NodeContext.is_constant) and subgraphs read them as such
                if not folding.fold(step):
                    steps.append(step)
        output_names = [vi.name for vi in graph.output]
        free |= {n for n in output_names if n not in defined}
        keep = set(output_names)
        plan_with_defaults = None
        if defaults:
            # Initializers that are also inputs are defaults a caller may override (7.2): they are
            # not constants.  A second plan folds them too; it serves every run that feeds none.
            folded_constants = {**initial, **defaults}
            folded = self._fold_constants([s.copy() for s in compiled], folded_constants, keep | set(defaults),
                                          self._outer_constants(free, outer) if free else {})
            if len(folded) < len(compiled):
                assign_lifetimes(folded, keep)
                plan_with_defaults = (folded_constants, folded)
        n_steps = len(compiled)
        folding.drop_unread(steps, keep)
        if outer_values and len(steps) < n_steps:  # free names only folded nodes read are not read
            read = {n for s in steps for n in (*s.inputs, *s._uses)} | keep
            free = {n for n in free if n in read}
        assign_lifetimes(steps, keep)
        plan = GraphPlan(name or graph.name or "graph", input_names, output_names, constants, steps,
                         frozenset(free), defaults)
        plan.folded = plan_with_defaults
        plan.limits = self.limits
        return plan

    def _initializer_value(self, t):
        to_backend = self.backend.asarray or (lambda a: a)
        if isinstance(t, ir.SparseTensor):
            return to_backend(self._owned(t.to_dense()))
        return to_backend(self._owned(t.numpy()))

    def _owned(self, value):
        """``value``, copied when the plan owns its data and ``value`` is a view of a memory map
        or is not aligned to its element size (raw data sits at any offset of the model's
        octets, and numpy hands unaligned operands to none of its fast loops nor to BLAS: a
        (1, 128) x (128, 512) product with an unaligned initializer takes 10x as long)."""
        if self.own_data and isinstance(value, np.ndarray) and (not value.flags.aligned or _mapped(value)):
            copy = np.array(value, copy=True)
            copy.flags.writeable = value.flags.writeable
            return copy
        return value

    def _outer_constants(self, free, outer) -> dict:
        """``{name: value}`` of the free names of a subgraph that an enclosing graph planned on
        this backend holds as constants (:func:`outer_constant`)."""
        found = {}
        for n in free:
            v = outer_constant(outer, n, self.backend_name)
            if v is not _NOT_CONSTANT:
                found[n] = v
        return found

    def _fold_constants(self, steps, constants: dict, keep: set, outer: Optional[dict] = None) -> list:
        """Evaluate, once at planning, every deterministic node whose inputs are all constants
        (Clause 8.2 lets an implementation evaluate in any order; weights built by
        ConstantOfShape, Constant chains, shape arithmetic on initializers).  Their outputs
        join ``constants``; a node that fails here is left to fail at run time, by name.
        ``outer``: constants of the enclosing graphs a subgraph reads (its free names).
        Returns the steps left (:class:`_Folding`; ``compile_graph`` folds its own plan's steps
        one by one as it plans them)."""
        folding = _Folding(self, constants, outer or {})
        remaining = [step for step in steps if not folding.fold(step)]
        folding.drop_unread(remaining, keep)
        return remaining

    # -- nodes --------------------------------------------------------------------------------
    def compile_node(self, node: ir.Node, opsets: dict, visible=frozenset(), graph: Optional[ir.Graph] = None):
        """A :class:`Step` for ``node`` (None if unsupported) and the outer names its subgraphs read.

        On a backend that declares a fallback, the node is first placed
        (:mod:`onnxkit.runtime.fallback`): one its backend cannot compute is planned by the
        fallback's own planner (:meth:`Placement.place <onnxkit.runtime.fallback.Placement.place>`),
        with its transfers, and recorded in :attr:`fallbacks`."""
        if not self._placing():
            return self._bind_node(node, opsets, visible, graph)
        away = self._placement.place(node, opsets, visible, graph)
        if away is not None:
            return away
        step, free = self._bind_node(node, opsets, visible, graph)
        return self._placement.finish_home(step, node, graph, opsets), free

    def _placing(self) -> bool:
        """True when this planner places nodes: its backend declares a fallback (the fallback's
        own planner places nothing)."""
        return self._placement is not None

    def _bind_node(self, node: ir.Node, opsets: dict, visible: frozenset, graph: Optional[ir.Graph]):
        domain = normalize_domain(node.domain)
        version = opsets.get(domain)
        local = self.functions.get((node.domain, node.op_type, node.overload))
        if local is not None:
            fn, free = self._function_call(node, local, self._local_opsets(local, opsets), None, visible, graph)
            return Step(fn, list(node.input), list(node.output), node, False), free
        if version is None:
            self._unsupported(domain, node.op_type, None, "the model does not import this domain (Clause 5.3.2)")
            return None, self._subgraph_free(node, opsets, visible)
        schema = self.registry.bind(domain, node.op_type, version)
        if schema is None:
            if self.registry.operator_set(domain, version) is None:
                why = "no installed plugin provides this operator set"
            else:
                why = "no definition at this operator set version"
            self._unsupported(domain, node.op_type, version, why)
            return None, self._subgraph_free(node, opsets, visible)
        factory = self.registry.kernel(self.backend_name, domain, node.op_type, schema.since_version)
        if factory is None:
            body = schema.function_body_for(version) if schema.has_function else None
            if body is None:
                why = f"no kernel for {schema} on backend '{self.backend_name}'"
                if schema.has_context_dependent_function:
                    why += " (its context-dependent function body is not carried)"
                self._unsupported(domain, node.op_type, version, why)
                return None, self._subgraph_free(node, opsets, visible)
            fn, free = self._function_call(node, body, self._local_opsets(body, opsets), schema, visible, graph)
            step = Step(fn, list(node.input), list(node.output), node, False)
            step.traits = operator_traits(self.registry, schema)
            return step, free
        ctx = self._context(node, domain, version, schema, visible)
        ctx._graph, ctx._planner, ctx._opsets = graph, self, opsets
        free = set()
        for a in node.attribute:
            if a.type in GRAPH_TYPES and a.value is not None:
                graphs = a.value if isinstance(a.value, list) else [a.value]
                plans = []
                self.depth += 1
                try:
                    for g in graphs:
                        p = self.compile_graph(g, opsets, visible, name=f"{node.op_type}.{a.name}")
                        plans.append(p)
                        free |= p.free_vars
                finally:
                    self.depth -= 1
                ctx._subgraphs[a.name] = plans if isinstance(a.value, list) else plans[0]
        try:
            fn = factory(ctx)
        except Unsupported as exc:  # the kernel cannot serve this node here (a missing library, ...)
            self._unsupported(domain, node.op_type, version, str(exc))
            return None, free
        except OnnxkitError:
            raise
        except Exception as exc:  # broad: a factory is plugin code; any fault is an error naming the node (re-raised)
            raise EvaluationError(f"node {node.name!r} ({node.op_type}): cannot be prepared: {type(exc).__name__}: {exc}",
                                  node.name, node.op_type) from exc
        step = Step(fn, list(node.input), list(node.output), node, traits_of(fn).needs_scope)
        step.traits = operator_traits(self.registry, schema, factory)
        step.guard = guard_for(node, step.op, domain, schema, self.registry, version, fn, step.traits)
        if free:
            step._uses = tuple(free)  # outer values a subgraph reads stay alive until this node ran
        if ctx._subgraphs:
            step.subgraphs = dict(ctx._subgraphs)
        return step, free

    def _context(self, node, domain, version, schema, visible=None) -> NodeContext:
        """The node's :class:`NodeContext`; ``visible``: the names visible where it is planned (a
        :class:`Visible` chain), whose constants fill ``_constants`` now (the inputs that are
        plan constants, :meth:`NodeContext.is_constant`) and whose declarations give the
        declared ``input_types`` / ``output_types`` when a kernel reads them."""
        attributes = node_attributes(schema, node)
        if self.own_data:
            for name, v in attributes.items():
                if isinstance(v, ir.Tensor) and isinstance(v.raw_data, memoryview) and _mapped_view(v.raw_data):
                    attributes[name] = records.evolve(v, raw_data=bytes(v.raw_data))  # a kernel keeps no view
        constants, defaults = {}, {}
        if isinstance(visible, Visible):
            for i, n in enumerate(node.input):
                found = declared_constant(visible, n) if n else None
                if found is not None:
                    (constants if found[0] else defaults)[i] = found[1] if found[2] == self.backend_name else None
        else:
            visible = None
        return NodeContext(node=node, domain=domain, op_type=node.op_type, since_version=schema.since_version,
                           opset_version=version, schema=schema, attributes=attributes, backend=self.backend,
                           seed=self.seed, limits=self.limits, _constants=constants, _defaults=defaults,
                           _visible=visible)

    def inferred_type(self, name: str, graph):
        """The type inference gives ``name`` in ``graph`` (the model's graphs; enclosing graphs
        searched outward), or None: inference runs once over the model, on the first call (the
        placement's, where the backend declares a fallback, which runs it anyway).  A fault of
        inference reads as unknown (:meth:`Placement._infer <onnxkit.runtime.fallback.Placement._infer>`
        logs a bug of the engine)."""
        oracle = self._placement
        if oracle is None:
            oracle = self._types
            if oracle is None:
                oracle = self._types = Placement(self)  # used for its types only: places nothing
        return oracle.type_of(name, graph)

    def _unsupported(self, domain, op_type, version, why):
        key = (domain, op_type, version, why)
        if key not in self._seen_unsupported:
            self._seen_unsupported.add(key)
            self.unsupported.append(key)

    def _subgraph_free(self, node, opsets, visible):
        """Walk the subgraphs of an unsupported node anyway, so their operators are reported too."""
        free = set()
        for a in node.attribute:
            if a.type in GRAPH_TYPES and a.value is not None:
                for g in a.value if isinstance(a.value, list) else [a.value]:
                    self.depth += 1
                    try:
                        free |= self.compile_graph(g, opsets, visible).free_vars
                    finally:
                        self.depth -= 1
        return free

    def _local_opsets(self, fn: ir.Function, outer: dict) -> dict:
        opsets = dict(outer)
        for o in fn.opset_import:
            opsets[normalize_domain(o.domain)] = int(o.version)
        return opsets

    # -- functions (Clause 8.4) ----------------------------------------------------------------
    def _function_call(self, node, fn: ir.Function, opsets, schema, visible, caller: Optional[ir.Graph] = None):
        """A node function evaluating ``fn``'s body with the call site's attributes.

        ``caller``: the graph holding the call, whose types type the body where nodes are placed."""
        limits = self.limits if self.limits is not None else DEFAULT_LIMITS
        label = f"{fn.domain + '::' if fn.domain else ''}{fn.name}"
        # refused before the body is substituted and compiled: the deeper level is never built
        limits.check("max_function_depth", self.function_depth + 1, where=f"call of function {label!r} by node "
                     f"{node.name!r} ({node.op_type})")
        limits.check("max_subgraph_depth", self.depth + 1, where=f"function {label!r}")
        self.function_calls += 1
        limits.check("max_function_calls", self.function_calls, where=f"call of function {label!r}")
        values = call_attributes(schema, fn, node)
        body_nodes = [substitute(n, values) for n in fn.node]
        graph = ir.Graph(node=body_nodes, name=label,
                         input=[ir.ValueInfo(n) for n in fn.input], output=[ir.ValueInfo(n) for n in fn.output])
        if self._placing():
            self._placement.type_body(graph, node, caller, opsets)
        self.depth += 1
        self.function_depth += 1
        try:
            plan = self.compile_graph(graph, opsets, frozenset())
        finally:
            self.depth -= 1
            self.function_depth -= 1
        n_out = len(node.output)

        def call(*args):
            outs = plan.run(list(args))
            return tuple(outs[:n_out])

        call.body = plan  # the values its plan keeps are kept by the caller's (kept_value_ids)
        return call, frozenset()
