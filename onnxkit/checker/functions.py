"""Model-local functions (Clause 8.4).

:func:`index_functions` records every function by identity (domain, name, overload) and
detects ``duplicate-function`` (8.4: a function is identified by that triple) and
``empty-name`` for a function without a name.

:func:`check_functions` checks each function:

* ``function-domain-not-imported`` (8.4, 5.3.2): the function's version is that of its
  domain as imported by the model, so the model SHALL import the domain;
* ``duplicate-opset-import`` / ``invalid-opset-version`` in the function's own imports, and
  ``function-opset-mismatch`` (warning) where the function imports a domain at a version
  other than the model's: which of the two a body node binds to is left open by 8.4;
* ``duplicate-attribute`` / ``empty-name`` among its attribute parameters;
* the body as a graph (:func:`onnxkit.checker.structure.check_graph`, kind 'function'):
  names, SSA, definitions before use, topological order, outputs defined, every node's
  operator checks - with references (``ref_attr_name``) resolved against the function's
  attribute parameters (``unresolved-attribute-reference``) - and no types required (a
  function MAY be polymorphic);
* ``function-recursion`` (8.4): a function that calls itself, directly or through other
  model-local functions (including calls from subgraphs inside a body), once per cycle.
"""

from __future__ import annotations

from .. import ir
from ..functions import subgraphs_of
from ..registry import display_domain, normalize_domain
from .context import Context, function_key, function_label, join, q
from .structure import Env, check_graph


def index_functions(ctx: Context, model: ir.Model) -> None:
    for i, fn in enumerate(model.functions):
        loc = function_label(fn)
        if not fn.name:
            ctx.emit("empty-name", f"model-local function {i} has no name", loc)
            continue
        key = function_key(fn.domain, fn.name, fn.overload)
        if key in ctx.functions:
            ctx.emit("duplicate-function", f"another model-local function has the identity (domain "
                     f"{display_domain(key[0])!r}, name {fn.name!r}, overload {fn.overload!r})", loc)
            continue
        ctx.functions[key] = fn


def _function_opsets(ctx: Context, fn: ir.Function, loc: str) -> dict:
    opsets = dict(ctx.opsets)
    seen: dict = {}
    for i, o in enumerate(fn.opset_import):
        d = normalize_domain(o.domain)
        where = join(loc, f"opset_import {i} {q(o.domain)}")
        if d in seen:
            if seen[d] == o.version:
                ctx.emit("repeated-opset-import", f"the function imports {display_domain(d)!r} twice at version "
                         f"{o.version}", where)
            else:
                ctx.emit("duplicate-opset-import", f"the function imports {display_domain(d)!r} at two versions "
                         f"({seen[d]} and {o.version})", where)
            continue
        seen[d] = o.version
        if o.version < 1:
            ctx.emit("invalid-opset-version", f"version {o.version} of {display_domain(d)!r} is not a positive integer",
                     where)
            continue
        if d in ctx.opsets and ctx.opsets[d] != o.version:
            ctx.emit("function-opset-mismatch", f"the function imports {display_domain(d)} version {o.version}, the "
                     f"model version {ctx.opsets[d]}", where)
        opsets[d] = o.version
    return opsets


def check_functions(ctx: Context, model: ir.Model) -> None:
    for fn in model.functions:
        if not fn.name:
            continue
        loc = function_label(fn)
        if normalize_domain(fn.domain) not in ctx.opsets:
            ctx.emit("function-domain-not-imported", f"the function's domain {display_domain(normalize_domain(fn.domain))!r} "
                     "is not imported by the model, so the function has no version", loc)
        params: set = set()
        for name in [*fn.attribute, *(a.name for a in fn.attribute_proto)]:
            if not name:
                ctx.emit("empty-name", "an attribute parameter has an empty name", loc)
            elif name in params:
                ctx.emit("duplicate-attribute", f"attribute parameter {q(name)} is declared more than once", loc)
            params.add(name)
        body = ir.Graph(node=fn.node, name=fn.name, input=[ir.ValueInfo(name=n) for n in fn.input],
                        output=[ir.ValueInfo(name=n) for n in fn.output], value_info=fn.value_info)
        check_graph(ctx, body, loc, Env({}, fn, _function_opsets(ctx, fn, loc)), "function")
    _check_recursion(ctx, model)


def _call_sites(ctx: Context, nodes, seen: set):
    """The function keys called among ``nodes`` and their subgraphs, once per call site; a
    subgraph reached twice (a cyclic IR built in Python, reported as ``subgraph-cycle``) once."""
    for n in nodes:
        key = function_key(n.domain, n.op_type, n.overload)
        if key in ctx.functions:
            yield key
        for sub in subgraphs_of(n):
            if id(sub) not in seen:
                seen.add(id(sub))
                yield from _call_sites(ctx, sub.node, seen)


def _calls(ctx: Context, nodes, out: set) -> set:
    out.update(_call_sites(ctx, nodes, set()))
    return out


def _call_counts(ctx: Context, nodes, out: dict) -> dict:
    """``{function key: number of call sites}`` among ``nodes`` and their subgraphs."""
    for key in _call_sites(ctx, nodes, set()):
        out[key] = out.get(key, 0) + 1
    return out


def _check_call_depth(ctx: Context, graph: dict, model: ir.Model) -> None:
    """``limit-exceeded`` where a chain of calls between model-local functions is longer than
    ``max_function_depth``, or where evaluating the model would expand more than
    ``max_function_calls`` calls (15.4; a function calling the next twice doubles per level).
    Found on the call graph, in time linear in its size, without expanding a single call (a
    cycle, reported as ``function-recursion``, is not followed twice)."""
    limit = ctx.limits.max_function_depth
    calls = {key: _call_counts(ctx, fn.node, {}) for key, fn in ctx.functions.items()}
    depth: dict = {}   # key -> longest chain of calls starting with a call of key
    expanded: dict = {}  # key -> calls one call of key expands, itself included
    for root in graph:
        if root in depth:
            continue
        stack = [(root, iter(graph[root]))]
        depth[root] = 0  # provisional: on the path (a cycle back to it counts no further)
        while stack:
            key, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                depth[key] = 1 + max((depth.get(c, 0) for c in graph[key]), default=0)
                expanded[key] = 1 + sum(k * expanded.get(c, 0) for c, k in calls[key].items())
                continue
            if nxt not in depth:
                depth[nxt] = 0
                stack.append((nxt, iter(graph[nxt])))
    worst = max(depth, key=depth.get, default=None)
    if worst is not None and depth[worst] > limit:
        ctx.emit("limit-exceeded", f"a chain of {depth[worst]} nested calls of model-local functions starts at "
                 f"{function_label(ctx.functions[worst])}, more than max_function_depth={limit} (Clause 8.4, 15.4)",
                 function_label(ctx.functions[worst]))
        return
    roots: dict = {}
    for g in (model.graph, *(getattr(t, f) for t in model.training_info for f in ("initialization", "algorithm"))):
        if g is not None:
            _call_counts(ctx, g.node, roots)
    total = sum(k * expanded.get(key, 0) for key, k in roots.items())
    most = ctx.limits.max_function_calls
    if total > most:
        ctx.emit("limit-exceeded", f"evaluating the model expands {total} calls of model-local functions, more than "
                 f"max_function_calls={most} (Clause 8.4, 15.4)", "model")


def _check_recursion(ctx: Context, model: ir.Model) -> None:
    graph = {key: sorted(_calls(ctx, fn.node, set())) for key, fn in ctx.functions.items()}
    _check_call_depth(ctx, graph, model)
    state: dict = {}  # key -> 1 on the path, 2 done
    reported = set()
    for root in graph:
        if state.get(root):
            continue
        path, work = [root], [iter(graph[root])]
        state[root] = 1
        while work:
            nxt = next(work[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                work.pop()
                continue
            if state.get(nxt) == 1:
                cycle = tuple(path[path.index(nxt):])
                canon = frozenset(cycle)
                if canon not in reported:
                    reported.add(canon)
                    names = " -> ".join(function_label(ctx.functions[k]) for k in (*cycle, nxt))
                    ctx.emit("function-recursion", f"model-local functions call themselves: {names}",
                             function_label(ctx.functions[nxt]))
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                work.append(iter(graph[nxt]))
