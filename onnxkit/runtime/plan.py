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

The planner makes a :class:`~onnxkit.runtime.graph_plan.GraphPlan` (:mod:`.graph_plan`): a list
of steps with precomputed input/output names and the values to free after each step (their last
use; a subgraph's free variables count as uses by the node that carries it).  The run loop
(:mod:`onnxkit.runtime.loop`) runs them over values in numbered slots, laid out once per plan:
no registry look-up, no attribute parsing, no dictionary look-up per node.  What a node sees of
its graph's names while it is planned is :mod:`.visible`'s.
"""

from __future__ import annotations

import sys
from typing import Optional

from onnxkit import records
import numpy as np

from .. import ir
from ..errors import EvaluationError, OnnxkitError
from ..functions import call_attributes, node_attributes, subgraph_attributes, substitute
from ..kernel_traits import operator_traits
from ..limits import DEFAULT_LIMITS
from ..domains import opset_map
from ..registry import is_default_domain, normalize_domain
from .budget import RunBudget, guard_for
from .fallback import Placement
from .kernel import NodeContext, Unsupported, traits_of
from .options import missing_backend_message
from .graph_plan import (GraphPlan, Step, assign_lifetimes, evaluate_constant, frozen,  # noqa: F401
                         is_deterministic, kept_value_ids)
from .visible import _NOT_CONSTANT, Visible, declared_constant, outer_constant
def _mapped(a: np.ndarray) -> bool:
    """True if the octets of ``a`` belong to a memory map (a model file or an external data file)."""
    mmap = sys.modules.get("mmap")  # no map exists before the module is imported
    if mmap is None:
        return False
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
    mmap = sys.modules.get("mmap")  # no map exists before the module is imported
    return mmap is not None and isinstance(view.obj, mmap.mmap)

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
        if step.scope or not is_deterministic(step) or not is_default_domain(node.domain) \
                or not all((not n) or n in constants or n in outer for n in step.inputs):
            return False
        args = [(constants[n] if n in constants else outer[n]) if n else None for n in step.inputs]
        planner = self.planner
        outs = evaluate_constant(step, args, RunBudget(planner.limits), "constant folding")
        if outs is None:  # refused (or a bug, logged): the run computes it, and fails by name
            return False
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
        self.opsets = opset_map(model.opset_import)
        self.functions = {(f.domain, f.name, f.overload): f for f in model.functions}
        self.unsupported: list = []
        self._seen_unsupported: set = set()
        self.depth = 0
        #: Nodes planned on the backend's fallback (:class:`~onnxkit.runtime.fallback.Fallback`).
        self.fallbacks: list = []
        self._placement = Placement(self) if self.backend.fallback else None
        self._types = None   # a Placement used for inferred types only (inferred_type), made on first need
        #: ``{id: value}`` of the values the plans' folded-defaults variants hold (NodeContext.holds)
        self.held: dict = {}
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
                self.held.update((id(v), v) for v in folded_constants.values() if v is not None)
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
        if ir.is_a(t, "SparseTensor"):
            return to_backend(self._owned(t.to_dense()))
        return to_backend(self._owned(t.numpy()))

    def _owned(self, value):
        """``value``, copied when the plan owns its data and ``value`` is a view of a memory map
        or is not aligned to its element size (raw data sits at any offset of the model's
        octets, and numpy hands unaligned operands to none of its fast loops nor to BLAS: a
        product with an unaligned initializer takes many times as long)."""
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
            fn, free = self._function_call(node, local, opset_map(local.opset_import, opsets), None, visible, graph)
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
            fn, free = self._function_call(node, body, opset_map(body.opset_import, opsets), schema, visible, graph)
            step = Step(fn, list(node.input), list(node.output), node, False)
            step.traits = operator_traits(self.registry, schema)
            return step, free
        ctx = self._context(node, domain, version, schema, visible)
        ctx._graph, ctx._planner, ctx._opsets = graph, self, opsets
        free = set()
        self.depth += 1
        try:
            for a, k, g in subgraph_attributes(node):  # a GRAPH attribute's plan, a GRAPHS one's list
                p = self.compile_graph(g, opsets, visible, name=f"{node.op_type}.{a.name}")
                free |= p.free_vars
                if k is None:
                    ctx._subgraphs[a.name] = p
                else:
                    ctx._subgraphs.setdefault(a.name, []).append(p)
        finally:
            self.depth -= 1
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
                           seed=self.seed, limits=self.limits, _constants=constants, _defaults=defaults, _held=self.held,
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
        for _a, _k, g in subgraph_attributes(node):
            self.depth += 1
            try:
                free |= self.compile_graph(g, opsets, visible).free_vars
            finally:
                self.depth -= 1
        return free

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
