"""Per-node fallback: a node its backend cannot compute runs on the backend that backend names.

A :class:`~onnxkit.registry.Backend` may declare ``fallback`` (another backend's name) and
``element_types`` (the element types it computes exactly).  When a session is planned for
such a backend *B* with fallback *F*, each node is placed once, at planning (Clause 4.4: a
fallback is not an approximation, it is *F*'s own kernel, decided and reported before
anything runs):

* it runs on *B* when every one of its input and output types is one *B* computes and *B*
  has a kernel for its definition or the definition has a function body (the body is then
  planned node by node, each of its nodes placed by this same rule);
* otherwise it runs on *F* — *F*'s kernel, or *F*'s function body — provided *F* can compute
  it; its subgraphs (If/Loop/Scan bodies) and function body are then planned on *F* entirely.
  Each such decision is recorded as a :class:`Fallback` (``Planner.fallbacks``,
  ``InferenceSession.fallbacks``, ``onnxkit unsupported --backend B``);
* a node neither can compute stays *unsupported* on *B*, reported before anything runs.

**Planning on F.**  A node placed on *F* is planned by *F*'s own planner
(:meth:`Placement.away_planner`), an ordinary binding there: no planner ever changes its
backend.  That planner shares with *B*'s the registry, the seed, the limits, the inferred
types and the list of unsupported operators; the nesting depths and the count of function
calls cross to it and back with each node, so that limits count every graph once.

**Types at planning.**  A node's input and output types come from the inference engine
(:mod:`onnxkit.inference`, run once over the model when the session is planned; declared
types refine what it infers) and, for a function body, from inferring the body with the
call's input types.  A type that is still unknown is decided conservatively from the
definition: the node stays on *B* only if every type the definition admits in that position
is one *B* computes; otherwise it runs on *F*.  Tensors, and sequences and optionals of
tensors, count by element type; maps, sparse tensors and opaque values are computed only by
a backend that declares no ``element_types``.

**Transfers.**  Values live on the backend whose node produced them (graph inputs and
initializers on *B*, as the session and the planner convert them).  A value crosses with
the backends' own ``to_numpy``/``asarray`` conversions, once per crossing:

* a node on *F* converts its inputs to *F* when it runs; an initializer of the node's graph
  it reads is converted once, at planning;
* a node on *F* converts an output back to *B* only where some node on *B* reads it (a
  subgraph's or a function body's outputs count as read on *B*; the session's outputs are
  converted to numpy by the session, as for every backend);
* a node on *B* whose output only nodes on *F* read converts it to *F* itself, once, so
  that several readers on *F* do not each convert it.

A value read on both backends is kept on *B* when produced there (readers on *F* convert it)
and converted to *B* when produced on *F* (readers on *F* convert it back).
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

import numpy as np

from .. import ir
from ..dtypes import by_name
from ..ir.types import type_string
from ..errors import OnnxkitTypeError
from ..log import get_logger
from ..registry import display_domain, normalize_domain
from .kernel import needs_scope, traits_of
from .usedef import SCOPE, node_index, subgraphs_of

HOME, AWAY = "home", "fallback"


class Fallback(NamedTuple):
    """One node planned on the fallback backend: its name, operator, domain, the since_version of
    the definition it is bound to, why its backend cannot compute it, and where it runs."""

    node: str
    op_type: str
    domain: str
    version: int
    why: str
    runs_on: str


# -- which types a backend computes ---------------------------------------------------------------

def type_computable(t, element_types) -> Optional[bool]:
    """True/False whether a backend computing ``element_types`` (None: every one) holds values of
    IR type ``t``; None where ``t`` (or its element type) is unknown."""
    if element_types is None:
        return True
    if t is None or isinstance(t, ir.UndefinedType):
        return None
    if isinstance(t, ir.TensorType):
        return None if not t.elem_type else int(t.elem_type) in element_types
    if isinstance(t, (ir.SequenceType, ir.OptionalType)):
        return type_computable(t.elem_type, element_types)
    return False  # maps, sparse tensors, opaque values


_ELEMENT = re.compile(r"^(tensor|seq|optional|map|sparse_tensor)\((.*)\)$")


def type_string_computable(s: str, element_types) -> bool:
    """Whether every value of type string ``s`` (``'tensor(float)'``, ``'seq(tensor(uint32))'``) is computable."""
    if element_types is None:
        return True
    m = _ELEMENT.match(s.replace(" ", ""))
    if m is None:
        return False
    kind, inner = m.groups()
    if kind in ("seq", "optional"):
        return type_string_computable(inner, element_types)
    if kind != "tensor":
        return False
    try:
        return int(by_name(inner).tag) in element_types
    except OnnxkitTypeError:  # not the name of an element type: not one the backend computes
        return False


# -- moving values between backends ----------------------------------------------------------------

def converter(src, dst):
    """A function moving a value of backend ``src`` (or a host numpy value) to backend ``dst``.

    Sequences (lists) and maps (dicts) are converted element by element; None (an absent
    optional) and opaque values (what ``src.to_numpy`` leaves as it is, or can only wrap in an
    object array) are passed as they are."""
    to_host = src.to_numpy or (lambda a: a)
    to_dst = dst.asarray or (lambda a: a)

    def move(v):
        if v is None:
            return None
        if isinstance(v, list):
            return [move(x) for x in v]
        if isinstance(v, dict):
            return {k: move(x) for k, x in v.items()}
        if isinstance(v, (np.ndarray, np.generic)):
            return to_dst(v)
        host = to_host(v)
        if not isinstance(host, np.ndarray) or host.dtype == object:
            return v
        return to_dst(host)

    return move


def _wrap(fn, consts: dict, move, convert_out: dict, scope_names):
    """``fn`` with its inputs and outputs converted.

    ``move`` converts every input (None: inputs are passed as they are), except those whose
    position is in ``consts``, read instead from the value prepared at planning.
    ``convert_out``: {output position: converter}.  A scope-taking function
    (:func:`~onnxkit.runtime.needs_scope`) gets a scope holding only the free names its
    subgraphs read (``scope_names``), converted with ``move``; with ``move`` None (a home step
    converting only its outputs) it gets the enclosing scope as it is."""

    def finish(out):
        if not convert_out:
            return out
        if type(out) is not tuple:
            conv = convert_out.get(0)
            return out if conv is None else conv(out)
        return tuple(convert_out[i](v) if i in convert_out else v for i, v in enumerate(out))

    def args_of(args):
        if move is None:
            return args
        return [consts[i] if i in consts else move(a) for i, a in enumerate(args)]

    if traits_of(fn).needs_scope:
        def run(scope, *args):
            if move is None:  # a step of the home backend converting only its outputs: its scope as it is
                return finish(fn(scope, *args))
            inner = {n: move(scope[n]) for n in scope_names if n in scope}
            return finish(fn(inner, *args_of(args)))

        needs_scope(run)
    else:
        def run(*args):
            return finish(fn(*args_of(args)))
    return run


class Placement:
    """The placement decisions of one :class:`~onnxkit.runtime.plan.Planner` whose backend
    declares a fallback.  Types come from one inference run over the model (see the module
    docstring); decisions and reader indexes are computed once per node and per graph."""

    def __init__(self, planner):
        self.planner = planner
        self.registry = planner.registry
        self.top = planner.model.graph
        #: The session's backend, the only one whose nodes are placed (a fallback's fallback is not followed).
        self.home = planner.backend_name
        self._types: dict = {}      # id(graph) -> {name: Type}
        self._parents: dict = {}    # id(subgraph) -> enclosing graph
        self._decided: dict = {}    # (id(node), id(graph), backend) -> (node, graph, why); why None: runs there
        self._index: dict = {}      # id(graph) -> (graph, its use-def index, its output names)
        self._bodies: list = []     # function bodies typed here, kept alive so that ids stay theirs
        self._engine = None
        self._inferred = False
        self._away = None           # the planner of the fallback backend (:meth:`away_planner`)

    # -- types ------------------------------------------------------------------------------
    def _infer(self) -> None:
        if self._inferred:
            return
        self._inferred = True
        from ..inference.engine import Engine

        try:
            engine = Engine(self.planner.model, self.registry)
            engine.run()
            self._engine, self._types = engine, engine.graph_types
        except RecursionError:  # graphs too deep to infer: the planner refuses them by its limits
            self._engine = None
        except Exception as exc:  # noqa: BLE001
            # Broad: the engine reports every node's fault itself (Clause 9.4: unknown is never a
            # failure), so a raise here is a bug of the engine; types are a hint to placement, so
            # they stay unknown and are decided conservatively (never a planning failure), which
            # is logged on onnxkit.plan with the traceback.
            get_logger("plan").warning("placement: type inference of the model raised %s: %s; types are decided "
                                       "conservatively", type(exc).__name__, exc, exc_info=exc)
            self._engine = None
        if self.top is not None:
            self._walk_parents(self.top)

    def _walk_parents(self, graph) -> None:
        for node in graph.node:
            for sub in subgraphs_of(node):
                self._parents[id(sub)] = graph
                self._walk_parents(sub)

    def type_of(self, name: str, graph):
        """The type of ``name`` as seen in ``graph`` (enclosing graphs searched outward), or None."""
        self._infer()
        g = graph
        while g is not None:
            types = self._types.get(id(g))
            if types is not None and name in types:
                return types[name]
            g = self._parents.get(id(g))
        return None

    def type_body(self, body: ir.Graph, call: ir.Node, caller, opsets: dict) -> None:
        """Infer a function body about to be planned with the call's input types (Clause 8.4)."""
        self._infer()
        self._bodies.append(body)
        if self._engine is None:
            return
        in_types = [self.type_of(n, caller) if n else None for n in call.input]
        try:
            self._engine.infer_graph(body, opsets, None, body.name, in_types, None, True)
        except RecursionError:  # a body too deep to infer: the planner refuses it by its limits
            pass
        except Exception as exc:  # noqa: BLE001
            # Broad: as in :meth:`_infer`, a raise is a bug of the engine, and the body's types
            # are a hint: they stay unknown (decided conservatively), which is logged.
            get_logger("plan").warning("placement: type inference of the function body %r (called by node %r) raised "
                                       "%s: %s; its types are decided conservatively", body.name, call.name,
                                       type(exc).__name__, exc, exc_info=exc)

    def type_problem(self, node, schema, graph, backend) -> Optional[str]:
        """Why ``backend`` cannot compute ``node``'s values, or None when it can (module docstring)."""
        elems = backend.element_types
        if elems is None:
            return None
        for kind, names, param_at in (("input", node.input, schema.input_at), ("output", node.output, schema.output_at)):
            for i, name in enumerate(names):
                if not name:
                    continue
                t = self.type_of(name, graph)
                ok = type_computable(t, elems)
                if ok is True:
                    continue
                if ok is False:
                    return f"{kind} {i} {name!r} is {type_string(t)}, which backend {backend.name!r} does not compute"
                param = param_at(i)
                admitted = schema.allowed_types(param) if param is not None else ()
                bad = [s for s in admitted if not type_string_computable(s, elems)]
                if bad or not admitted:
                    return (f"the type of {kind} {i} {name!r} is unknown at planning and {schema} admits "
                            f"{bad[0] if bad else 'any type'} there, which backend {backend.name!r} does not compute")
        return None

    # -- decisions ----------------------------------------------------------------------------
    def decide(self, node, schema, version: int, graph, backend_name: str) -> Optional[str]:
        """None when ``node`` (bound to ``schema``) runs on ``backend_name``; else why it runs on
        that backend's fallback.  A node neither can compute gets None (and is then reported
        unsupported on ``backend_name``, as without a fallback)."""
        key = (id(node), id(graph), backend_name)  # a function body's nodes are shared by its calls
        if key not in self._decided:
            self._decided[key] = (node, graph, self._decide(node, schema, version, graph, backend_name))
        return self._decided[key][2]

    def _decide(self, node, schema, version, graph, backend_name):
        backend = self.registry.backends[backend_name]
        away = backend.fallback
        if away is None or away not in self.registry.backends:
            return None
        domain = normalize_domain(node.domain)
        has_body = schema.has_function and schema.function_body_for(version) is not None
        problem = self.type_problem(node, schema, graph, backend)
        if problem is None:
            if has_body or self.registry.kernel(backend_name, domain, node.op_type, schema.since_version):
                return None
            problem = f"no kernel for {schema} on backend {backend_name!r}"
        if has_body or self.registry.kernel(away, domain, node.op_type, schema.since_version):
            return problem
        return None

    def _away_reason(self, node, graph, opsets: dict, backend_name: str):
        """``(schema, why)`` when ``node`` (of ``graph``, under ``opsets``) runs on
        ``backend_name``'s fallback (``schema``: the definition it binds to), else None.  A call
        of a model-local function is planned where it is (its body's nodes are placed one by one)."""
        if (node.domain, node.op_type, node.overload) in self.planner.functions:
            return None
        domain = normalize_domain(node.domain)
        version = opsets.get(domain)
        schema = self.registry.bind(domain, node.op_type, version) if version is not None else None
        if schema is None:
            return None
        why = self.decide(node, schema, version, graph, backend_name)
        return None if why is None else (schema, why)

    def placed_away(self, node, graph, opsets: dict, backend_name: str) -> bool:
        """True when ``node`` (of ``graph``, under ``opsets``) runs on ``backend_name``'s fallback."""
        return self._away_reason(node, graph, opsets, backend_name) is not None

    def _readers_of(self, graph):
        """The use-def index of ``graph``'s nodes (:func:`~onnxkit.runtime.usedef.node_index`, a
        subgraph's uses being the names it reads from its scope, :func:`free_reads`) and its
        output names; made once per graph."""
        entry = self._index.get(id(graph))
        if entry is None or entry[0] is not graph:
            index = node_index(graph.node, scope_reads=lambda n: [(sub, free_reads(sub)) for sub in subgraphs_of(n)])
            entry = (graph, index, {vi.name for vi in graph.output})
            self._index[id(graph)] = entry
        return entry[1:]

    def readers(self, name: str, graph, opsets: dict, backend_name: str) -> set:
        """Where ``name``, a value of ``graph`` planned on ``backend_name``, is read: a subset of
        {HOME, AWAY}.  Nodes of ``graph`` that list it, the nodes of their subgraphs that read it
        from the enclosing scope, and ``graph``'s outputs (read on HOME, except those of the
        model's graph, which the session converts itself)."""
        index, outputs = self._readers_of(graph)
        where = {AWAY if self.placed_away(n, graph, opsets, backend_name) else HOME for n in index.readers(name)}
        for n, sub in [(u.item, u.subgraph) for u in index.uses(name) if u.slot == SCOPE]:
            if self.placed_away(n, graph, opsets, backend_name):
                where.add(AWAY)
            else:
                where |= self.readers(name, sub, opsets, backend_name)
        if name in outputs and graph is not self.top:
            where.add(HOME)
        return where

    # -- planning a node elsewhere, and its transfers ------------------------------------------
    def away_planner(self):
        """The planner of the fallback backend, made on first need: a
        :class:`~onnxkit.runtime.plan.Planner` of its own for the same model that shares what
        planning a node must share with the home planner — the registry, the seed (each kernel's
        random stream is drawn from it), the limits, ``own_data``, the inferred types (this
        placement's), and the list of unsupported operators (reported together, by the home
        planner).  It places nothing (a fallback's fallback is not followed), and the nesting
        depths and the function-call count cross with each node (:meth:`compile_away`)."""
        if self._away is None:
            p = self.planner
            # the home planner's own class (this module is planned by it, so does not import it)
            away = type(p)(p.model, p.registry, p.backend.fallback, seed=p.seed, limits=p.limits, own_data=p.own_data)
            away._placement = None
            away._types = self
            away.unsupported, away._seen_unsupported = p.unsupported, p._seen_unsupported
            self._away = away
        return self._away

    def place(self, node, opsets: dict, visible, graph):
        """``(step, free names)`` of ``node`` planned on the fallback (:meth:`compile_away`) where
        it runs there (module docstring), else None: the home planner plans it."""
        away = self._away_reason(node, graph, opsets, self.home)
        if away is None:
            return None
        schema, why = away
        return self.compile_away(node, schema, opsets, visible, graph, why)

    def compile_away(self, node, schema, opsets: dict, visible, graph, why: str):
        """Plan ``node`` with the fallback's planner (its subgraphs and function body too, there
        entirely), its transfers added; returns ``(step, free names)`` like
        ``Planner.compile_node``.  The home planner's nesting depths and function-call count
        are handed to that planner and the count handed back: limits count every graph and
        call once, whichever backend plans it.  Names visible from the node (``visible``: the
        enclosing graphs' names and constants, each set of constants tagged with its backend)
        are the home planner's: a subgraph planned there folds only the fallback's constants."""
        p = self.planner
        away = self.away_planner()
        away.depth, away.function_depth, away.function_calls = p.depth, p.function_depth, p.function_calls
        try:
            step, free = away.compile_node(node, opsets, visible, graph)
        finally:
            p.function_calls = away.function_calls
        if step is None:
            return None, free
        p.fallbacks.append(Fallback(node.name, node.op_type, display_domain(schema.domain), schema.since_version,
                                    why, away.backend_name))
        to_away = converter(p.backend, away.backend)
        to_home = converter(away.backend, p.backend)
        consts = {}
        if graph is not None:
            inits = {t.name: t for t in graph.initializer if isinstance(t, ir.Tensor)}
            inputs = {vi.name for vi in graph.input}
            consts = {i: to_away(inits[n].numpy()) for i, n in enumerate(node.input) if n in inits and n not in inputs}
        out_conv = {i: to_home for i, n in enumerate(node.output)
                    if n and graph is not None and HOME in self.readers(n, graph, opsets, p.backend_name)}
        step.fn = _wrap(step.fn, consts, to_away, out_conv, tuple(free))
        return step, free

    def finish_home(self, step, node, graph, opsets: dict):
        """Let a step planned on the planner's backend convert, once, each output that only
        nodes on the fallback read."""
        p = self.planner
        if graph is None or step is None:
            return step
        out_conv = {}
        for i, n in enumerate(node.output):
            if n and self.readers(n, graph, opsets, p.backend_name) == {AWAY}:
                out_conv[i] = converter(p.backend, self.registry.backends[p.backend.fallback])
        if out_conv:
            step.fn = _wrap(step.fn, {}, None, out_conv, ())
        return step


def free_reads(graph) -> set:
    """The names ``graph`` (and the subgraphs within it) read from its enclosing scope (5.4.3)."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    defined |= {sp.values.name for sp in graph.sparse_initializer if sp.values is not None}
    reads: set = set()
    for n in graph.node:
        reads |= {x for x in n.input if x and x not in defined}
        for sub in subgraphs_of(n):
            reads |= free_reads(sub) - defined
        defined |= {x for x in n.output if x}
    return reads | ({vi.name for vi in graph.output} - defined)
