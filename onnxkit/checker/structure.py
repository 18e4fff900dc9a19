"""Graph structure and scoping (Clauses 5.4, 7, 10.2), walking graphs and subgraphs.

:func:`check_graph` checks one graph (the top-level graph, a subgraph, a function body
seen as a graph, a training graph) and recurses into the subgraphs of its nodes.  It
detects:

* ``graph-name-missing`` (7.1): a graph without a name (function bodies are named by their function);
* ``empty-name`` (5.4.1): an empty input, output, initializer or value_info name (empty node
  inputs and outputs are unsupplied ones, checked against the operator in operators.py);
* ``duplicate-definition`` (5.4.2, 7.5): a name defined twice - input twice, node output
  twice (SSA), node output that is also an input or initializer - save the input/initializer
  pair 7.2 allows;
* ``duplicate-initializer``, ``duplicate-node-name`` (non-empty names only),
  ``duplicate-value-info`` (5.4.1, Table 3);
* ``initializer-not-input`` (7.2, IR <= 3): an initializer that is not a graph input, which
  IR version 3 and earlier require ("Each TensorProto entry must have a distinct name ...
  that also appears in the input list"); from IR 4 an initializer need not be an input;
* ``subgraph-input-initializer`` (7.2, IR >= 4): in a subgraph, a name that is an
  initializer and one of the inputs the operator supplies (If: none; Loop: 2 + N; Scan: its
  inputs, less sequence_lens at version 8; SequenceMap: its inputs).  Subgraphs of other
  operators are not checked for this (their operator states what it supplies);
* ``shadowed-name`` (5.4.3): a subgraph input, initializer or node output whose name is
  visible from an enclosing graph; ``shadowed-node-output`` (a warning) where that name is an
  output of the node carrying the subgraph, a value that does not exist while it runs;
* ``subgraph-cycle``: a graph that is its own subgraph, directly or not (only an IR built in
  Python can be so; the walk visits each graph object once);
* ``undefined-value`` (5.4.2, 7.5): a node input defined nowhere (this graph, enclosing graphs);
* ``undefined-output`` (7.1): a graph output naming no value of the graph (a subgraph's
  output may name a value of an enclosing graph);
* ``graph-cycle`` and ``not-topologically-sorted`` (7.5): uses of values produced by the
  same or a later node, including uses inside the node's subgraphs (implicit inputs); nodes
  on a cycle are reported once per strongly connected component;
* ``missing-type``, ``missing-shape`` (6.5.1, 7.1): top-level inputs and outputs without a
  type (or with an empty TypeProto), or tensor ones without a shape; ``mandatory-field-missing`` for a value_info
  without a type (B.2.3; a function body MAY omit types, 8.4);
* ``type-mismatch`` / ``shape-mismatch`` (7.1, 9.4): two statements of one value's type that
  contradict each other - a graph input, value_info or output against another, or against
  an initializer's data type and dims, a Constant node's value, or a type supplied by the
  ``known_types`` hook (inference);
* ``limit-exceeded`` (15.4): subgraphs nested deeper than ``Limits.max_subgraph_depth``.

Per node it calls :mod:`operators` (binding, attributes, arity), :mod:`typecheck` (type
constraints, broadcasting) and :mod:`metadata` (device configurations).
"""

from __future__ import annotations

from collections import ChainMap
from typing import Mapping, Optional

from .. import ir
from ..domains import is_default_domain
from ..functions import subgraph_attributes, subgraphs_of
from . import metadata, operators, typecheck
from .context import Context, graph_label, join, node_label, q
from .types import contradiction, type_of_tensor


class Env:
    """What a graph sees from outside: names of enclosing graphs (-> known type), the enclosing
    function (for ``ref_attr_name``), the operator set imports in force, the nesting depth,
    the outputs of the nodes carrying the graph, directly or through enclosing subgraphs
    (``carrier``: values that do not exist while it runs) and the ids of the enclosing graph
    objects (``path``, to detect a graph that is its own subgraph)."""

    def __init__(self, visible: Mapping, function=None, opsets: Optional[dict] = None, depth: int = 0,
                 carrier: frozenset = frozenset(), path: frozenset = frozenset()):
        self.visible = visible
        self.function = function
        self.opsets = opsets if opsets is not None else {}
        self.depth = depth
        self.carrier = carrier
        self.path = path


# -- free variables (implicit inputs of a node with subgraphs) --------------------------------

def free_vars(g: ir.Graph, memo: dict) -> frozenset:
    """Names a graph (with its subgraphs) uses but does not define."""
    key = id(g)
    got = memo.get(key)
    if got is not None:
        return got
    memo[key] = frozenset()  # a cycle of graph objects cannot recurse forever
    defined = {vi.name for vi in g.input} | {t.name for t in g.initializer}
    defined |= {s.values.name for s in g.sparse_initializer if s.values is not None}
    used = set()
    for n in g.node:
        defined.update(n.output)
        used.update(n.input)
        for sub in subgraphs_of(n):
            used |= free_vars(sub, memo)
    used.update(vi.name for vi in g.output)
    out = frozenset(used - defined - {""})
    memo[key] = out
    return out


def implicit_inputs(ctx: Context, node: ir.Node) -> frozenset:
    memo = ctx.__dict__.setdefault("_free_vars", {})
    out = frozenset()
    for sub in subgraphs_of(node):
        out |= free_vars(sub, memo)
    return out


def supplied_inputs(node: ir.Node, attr: str, schema) -> Optional[int]:
    """How many inputs the operator supplies to subgraph ``attr`` (7.2), or None where unknown."""
    if not is_default_domain(node.domain) or schema is None:
        return None
    op = node.op_type
    if op == "If":
        return 0
    if op == "Loop" and attr == "body":
        return len(node.input)
    if op == "Scan" and attr == "body":
        return len(node.input) - (1 if schema.since_version < 9 else 0)
    if op == "SequenceMap" and attr == "body":
        return len(node.input)
    return None


# -- the graph check ---------------------------------------------------------------------------

def check_graph(ctx: Context, g: ir.Graph, loc: str, env: Env, kind: str = "top",
                supplied: Optional[int] = None) -> None:
    """Check graph ``g`` at ``loc``; ``kind`` is 'top', 'sub', 'function' or 'training'."""
    if id(g) in env.path:
        ctx.emit("subgraph-cycle", f"graph {q(g.name)} is a subgraph of itself; it is not checked again", loc)
        return
    if env.depth > ctx.limits.max_subgraph_depth:
        ctx.emit("limit-exceeded", f"subgraphs nest deeper than max_subgraph_depth={ctx.limits.max_subgraph_depth}",
                 loc)
        return
    if kind != "function" and not g.name:
        ctx.emit("graph-name-missing", "the graph has no name", loc)
    outer = env.visible
    shadow = kind == "sub"
    defined: dict = {}
    statements: dict = {}  # name -> [(type, what, location)]

    def define(name, what, where):
        if name in defined:
            ctx.emit("duplicate-definition", f"{q(name)} is defined as {what} but already as {defined[name]}", where)
            return False
        defined[name] = what
        if shadow and name in env.carrier:
            ctx.emit("shadowed-node-output", f"{q(name)} is also an output of the node carrying this subgraph, a "
                     "value that does not exist while the subgraph is evaluated", where)
        elif shadow and name in outer:
            ctx.emit("shadowed-name", f"{q(name)} is already visible from an enclosing graph; a subgraph SHALL NOT "
                     "redefine it", where)
        return True

    def state(name, t, what, where):
        if t is not None:
            statements.setdefault(name, []).append((t, what, where))

    # -- definitions: inputs, initializers, node outputs
    input_pos: dict = {}
    for i, vi in enumerate(g.input):
        where = join(loc, f"input {i} {q(vi.name)}")
        if not vi.name:
            ctx.emit("empty-name", "a graph input has an empty name", where)
            continue
        if define(vi.name, f"input {i}", where):
            input_pos[vi.name] = i
        _declared(ctx, vi, where, kind, "input")
        state(vi.name, vi.type, f"input {i}", where)
    inits = [(t.name, type_of_tensor(t), "initializer") for t in g.initializer]
    # Whether a sparse initializer's value is a tensor or a sparse tensor is left open (onnx's
    # inference says sparse, runtimes densify): it states no type here.
    inits += [(s.values.name, None, "sparse_initializer") for s in g.sparse_initializer if s.values is not None]
    init_names: set = set()
    for name, t, field in inits:
        where = join(loc, f"{field} {q(name)}")
        if not name:
            ctx.emit("empty-name", f"an {field.replace('_', ' ')} has an empty name", where)
            continue
        if name in init_names:
            ctx.emit("duplicate-initializer", f"initializer {q(name)} is given more than once", where)
            continue
        init_names.add(name)
        state(name, t, field, where)
        if ctx.ir <= 3 and name not in input_pos:
            ctx.emit("initializer-not-input", f"initializer {q(name)} is not a graph input; IR version "
                     f"{ctx.ir} requires every initializer to appear in the input list", where)
        if name in input_pos:
            if kind == "sub" and ctx.ir >= 4 and supplied is not None and input_pos[name] < supplied:
                ctx.emit("subgraph-input-initializer", f"{q(name)} is both initializer and input {input_pos[name]}, "
                         f"one of the {supplied} inputs the operator supplies to this subgraph", where)
            continue
        define(name, field.replace("_", " "), where)
    producer: dict = {}
    node_names: dict = {}
    nlocs = [join(loc, node_label(i, n)) for i, n in enumerate(g.node)]  # each node's location, made once
    for i, n in enumerate(g.node):
        nloc = nlocs[i]
        if n.name:
            if n.name in node_names:
                ctx.emit("duplicate-node-name", f"node name {q(n.name)} is also that of node {node_names[n.name]}",
                         nloc)
            else:
                node_names[n.name] = i
        for j, o in enumerate(n.output):
            if o and define(o, f"output {j} of node {i}", join(nloc, f"output {j} {q(o)}")):
                producer[o] = i
    # -- value_info and outputs
    seen_vi: set = set()
    for vi in g.value_info:
        where = join(loc, f"value_info {q(vi.name)}")
        if not vi.name:
            ctx.emit("empty-name", "a value_info entry has an empty name", where)
            continue
        if vi.name in seen_vi:
            ctx.emit("duplicate-value-info", f"value_info {q(vi.name)} is given more than once", where)
        seen_vi.add(vi.name)
        if vi.type is None and kind != "function":
            ctx.emit("mandatory-field-missing", "ValueInfoProto.type is mandatory (Annex B) but absent", where)
        state(vi.name, vi.type, "value_info", where)
    for i, vi in enumerate(g.output):
        where = join(loc, f"output {i} {q(vi.name)}")
        if not vi.name:
            ctx.emit("empty-name", "a graph output has an empty name", where)
            continue
        if vi.name not in defined and vi.name not in outer:
            ctx.emit("undefined-output", f"output {q(vi.name)} is not defined by the graph"
                     + ("" if kind == "top" else " or an enclosing graph"), where)
        _declared(ctx, vi, where, kind, "output")
        state(vi.name, vi.type, f"output {i}", where)
    # -- uses, order, cycles
    _check_uses(ctx, g, loc, defined, producer, outer, nlocs)
    # -- types: Constant values, the hook, contradictions
    for i, n in enumerate(g.node):
        if n.op_type == "Constant" and is_default_domain(n.domain) and n.output and n.output[0]:
            if not any(typecheck.reads_as_sparse_initializer(n, t) for t, _, _ in statements.get(n.output[0], ())):
                # declared sparse: read as a sparse initializer, which states no type (typecheck reports it)
                state(n.output[0], typecheck.constant_type(n), f"the value of Constant node {i}", nlocs[i])
    own_types = _settle(ctx, loc, defined, statements)
    types = ChainMap(own_types, outer)
    # -- per node: operator, types, devices, subgraphs
    visible = None
    for i, n in enumerate(g.node):
        nloc = nlocs[i]
        schema = operators.check_node(ctx, n, nloc, env)
        if schema is not None:
            typecheck.check_node(ctx, n, nloc, schema, types)
        metadata.check_node_devices(ctx, n, nloc)
        for a, idx, sub in subgraph_attributes(n):
            if visible is None:
                visible = ChainMap({name: own_types.get(name) for name in defined}, outer)
            sloc = join(nloc, f"attribute {q(a.name)}", f"graph {idx} {q(sub.name)}" if idx is not None
                        else graph_label(sub))
            check_graph(ctx, sub, sloc, Env(visible, env.function, env.opsets, env.depth + 1,
                                            env.carrier | {o for o in n.output if o}, env.path | {id(g)}), "sub",
                        supplied_inputs(n, a.name, schema))
    if g.quantization_annotation:
        metadata.check_annotations(ctx, g, defined.keys() | outer.keys(), loc)


def _declared(ctx: Context, vi: ir.ValueInfo, where: str, kind: str, role: str) -> None:
    """6.5.1 / 7.1: a top-level input or output has a type, and a tensor one a shape."""
    if kind != "top":
        return
    t = vi.type
    if t is None or isinstance(t, ir.UndefinedType):
        ctx.emit("missing-type", f"a top-level graph {role} has no type", where)
    elif isinstance(t, (ir.TensorType, ir.SparseTensorType)) and t.shape is None:
        ctx.emit("missing-shape", f"a top-level graph {role} of type {t} has no shape, so its rank is not stated",
                 where)


def _settle(ctx: Context, loc: str, defined: dict, statements: dict) -> dict:
    """One known type per value; reports statements that contradict the first one."""
    out = {}
    for name in defined:
        st = statements.get(name, [])
        inferred = ctx.known_type(loc, name)
        if inferred is not None:
            st = st + [(inferred, "the type inference supplies", loc)]
        if not st:
            continue
        first_t, first_what, _ = st[0]
        for t, what, where in st[1:]:
            c = contradiction(first_t, t)
            if c is not None:
                ctx.emit(c[0], f"{q(name)}: {what} contradicts {first_what}: {c[1]}", where)
        # the most static statement serves the type checks: an initializer or Constant, else the first
        best = next((t for t, what, _ in st if what == "initializer" or what.startswith("the value of Constant")),
                    first_t)
        out[name] = best
    return out


def _check_uses(ctx: Context, g: ir.Graph, loc: str, defined: dict, producer: dict, outer: Mapping,
                nlocs: list) -> None:
    """Every use of ``g``'s nodes defined before it (or in an enclosing graph); ``nlocs``: the
    nodes' locations."""
    available = {name for name, what in defined.items() if not what.startswith("output ")}
    back: list = []
    for i, n in enumerate(g.node):
        nloc = nlocs[i]
        for j, name in enumerate(n.input):
            if not name or name in available or name in outer:
                continue
            p = producer.get(name)
            if p is not None:
                back.append((p, i, name, join(nloc, f"input {j} {q(name)}")))
            else:
                ctx.emit("undefined-value", f"input {j} {q(name)} is not defined in this graph or an enclosing one",
                         join(nloc, f"input {j} {q(name)}"))
        for name in sorted(implicit_inputs(ctx, n)):
            if name in available or name in outer:
                continue
            p = producer.get(name)
            if p is not None:
                back.append((p, i, name, join(nloc, f"subgraph use {q(name)}")))
        available.update(o for o in n.output if o)
    if back:
        _report_order(ctx, g, loc, producer, back)


def _report_order(ctx: Context, g: ir.Graph, loc: str, producer: dict, back: list) -> None:
    edges: dict = {i: set() for i in range(len(g.node))}
    for i, n in enumerate(g.node):
        for name in (*n.input, *implicit_inputs(ctx, n)):
            p = producer.get(name)
            if p is not None:
                edges[p].add(i)
    comp = _scc(len(g.node), edges)
    cyclic: dict = {}
    for i, c in enumerate(comp):
        cyclic.setdefault(c, []).append(i)
    reported = set()
    for p, i, name, where in back:
        c = comp[i]
        members = cyclic[c]
        if comp[p] == c and (len(members) > 1 or p == i):
            if c not in reported:
                reported.add(c)
                labels = ", ".join(node_label(k, g.node[k]) for k in members)
                ctx.emit("graph-cycle", f"nodes form a cycle: {labels}", loc)
        else:
            ctx.emit("not-topologically-sorted", f"{q(name)} is produced by a later node, "
                     f"{node_label(p, g.node[p])}", where)


def _scc(n: int, edges: dict) -> list:
    """Tarjan's strongly connected components, iteratively: component id per vertex."""
    index, low, comp = [None] * n, [0] * n, [None] * n
    on_stack, stack, counter, cid = [False] * n, [], 0, 0
    for root in range(n):
        if index[root] is not None:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if index[w] is None:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if on_stack[w]:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = cid
                    if w == v:
                        break
                cid += 1
    return comp
