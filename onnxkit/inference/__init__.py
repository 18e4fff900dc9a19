"""Shape and type inference (Clause 9).

``infer_model(model)`` infers the type of every value of every graph of ``model`` and
returns an :class:`InferenceResult`: the types by ``(graph path, value name)`` and the
diagnostics (contradictions with declared types are reported, 9.4: a type contradiction is
an error, a shape one a warning; operators without an inference function are warnings, 9.2).
``infer_shapes(model)`` returns a copy of the model with every inferred intermediate value in
its graph's ``value_info`` (subgraphs too); a declaration that contradicts what is inferred is
kept as written, never overwritten (the contradiction is in the diagnostics).

Graph paths: ``''`` is the top-level graph; a subgraph is ``'<node>.<attribute>'`` under
its enclosing graph's path, joined with ``'/'`` (``'loop1.body/if3.then_branch'``), where
``<node>`` is the node's name or ``<op_type>#<index>`` for an unnamed node, and a GRAPHS
attribute's entries are ``'<attribute>[k]'``.

Inference functions come from plugins (hook ``onnxkit_inference_functions``); they receive
an :class:`InferenceContext`; reusable helpers for writing them are in
:mod:`onnxkit.inference.common`.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records
from onnxkit import record_methods

from .. import ir
from ..diagnostics import ERROR, Report
from ..functions import names_read_inside, with_subgraphs
from .context import MAX_CONSTANT_ELEMENTS, InferenceContext, InferenceError
from .engine import CONTRADICTION_SEVERITY, Engine, merge_types

__all__ = ["infer_shapes", "infer_model", "InferenceResult", "InferenceContext", "InferenceError",
           "MAX_CONSTANT_ELEMENTS", "merge_types"]


@records.define
class InferenceResult(Report):
    """``types[(graph_path, name)]`` -> Type (None = unknown); ``diagnostics`` in the order found
    (a :class:`~onnxkit.diagnostics.Report`: ``errors``, ``warnings``, ``ok``).
    ``declarations_used``: False when no declaration (value_info, declared outputs, subgraph inputs,
    function value_info, an untyped input's initializer) added to or contradicted what inference
    derived, so ``types`` are those the model's inputs and constants alone give (up to the names
    of the fresh symbolic dimensions)."""

    types: dict = records.field(factory=dict, kw_only=True)
    declarations_used: bool = records.field(default=True, kw_only=True)
    #: the top-level graph's names a declaration refined, each with the type inferred without it;
    #: None when declarations counted elsewhere too (inputs, subgraphs, functions)
    declared_names: Optional[dict] = records.field(default=None, kw_only=True)
    #: ``{name: numpy array}``: the top-level graph's values inference computed exactly (small
    #: integer constants and the shape arithmetic over static extents; never a symbolic one)
    values: dict = records.field(factory=dict, kw_only=True)
    #: the fresh dimension names inference made, and what each graph node an inference function
    #: inferred saw and gave: what ``infer_model(..., reuse=this)`` reads (:mod:`.reuse`)
    fresh: frozenset = records.field(factory=frozenset, kw_only=True, eq=False, repr=False)
    node_results: dict = records.field(factory=dict, kw_only=True, eq=False, repr=False)
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def undeclared_types(self, model: ir.Model) -> Optional[dict]:
        """``{name: Type}`` of the top-level graph as inference gives it from the inputs and constants
        alone (the optimizer's view, :func:`~onnxkit.runtime.optimizer.view.undeclared`), or None when
        these types cannot say.  They can when no declaration counted, or when the only ones that did
        are of names no node reads (a declared graph output): nothing was inferred from them, and each
        such name takes back its type inferred without the declaration."""
        if not self.declarations_used:
            return self.graph("")
        if self.declared_names is None or model.graph is None:
            return None
        if names_read_inside(model.graph, outputs=False) & self.declared_names.keys():
            return None
        return {**self.graph(""), **self.declared_names}

    def type_of(self, name: str, path: str = "") -> Optional[ir.Type]:
        """The inferred type of ``name`` in the graph at ``path`` ('' = the top-level graph)."""
        return self.types.get((path, name))

    def graph(self, path: str = "") -> dict:
        """``{name: Type}`` of one graph."""
        return {n: t for (p, n), t in self.types.items() if p == path}

    def paths(self) -> list:
        return sorted({p for p, _ in self.types})


def _engine(model: ir.Model, registry, reuse=None) -> Engine:
    if registry is None:
        from ..registry import get_registry

        registry = get_registry()
    engine = Engine(model, registry, reuse)
    engine.run()
    return engine


def infer_model(model: ir.Model, registry=None, reuse: Optional[InferenceResult] = None) -> InferenceResult:
    """Infer every value's type in ``model`` (the model is not changed).  ``reuse``: the result
    of inferring the same model, with its declarations or without them, whose nodes' results are
    taken where a node's inputs are the same (:mod:`onnxkit.inference.reuse`: the types are then
    those inferring afresh gives, up to the names of fresh dimensions; a reused node's
    diagnostics are not repeated)."""
    engine = _engine(model, registry, reuse)
    return InferenceResult(list(engine.diagnostics), types=dict(engine.types),
                           declarations_used=engine.declarations_used,
                           declared_names=None if engine.declared_names is None else dict(engine.declared_names),
                           values=engine.exact_values(), fresh=frozenset(engine.fresh),
                           node_results=engine.node_results)


def _worth_writing(t) -> bool:
    if t is None or isinstance(t, ir.UndefinedType):
        return False
    if isinstance(t, (ir.TensorType, ir.SparseTensorType)):
        return bool(t.elem_type)
    if isinstance(t, (ir.SequenceType, ir.OptionalType)):
        return _worth_writing(t.elem_type)
    if isinstance(t, ir.MapType):
        return bool(t.key_type) and _worth_writing(t.value_type)
    return True


def _annotate_graph(graph: ir.Graph, engine: Engine) -> ir.Graph:
    types = engine.graph_types.get(id(graph), {})
    contradicted = engine.contradicted.get(id(graph), set())
    nodes = [_annotate_node(n, engine) for n in graph.node]
    inputs = {vi.name for vi in graph.input}
    outputs = {vi.name for vi in graph.output}
    inits = {t.name for t in graph.initializer} | {sp.values.name for sp in graph.sparse_initializer if sp.values is not None}
    value_info, listed = [], set()
    for vi in graph.value_info:
        t = types.get(vi.name)
        listed.add(vi.name)
        refine = _worth_writing(t) and t != vi.type and vi.name not in contradicted
        value_info.append(records.evolve(vi, type=t) if refine else vi)
    for name, t in types.items():
        if name in listed or name in inputs or name in outputs or name in inits or not _worth_writing(t):
            continue
        listed.add(name)
        value_info.append(ir.ValueInfo(name=name, type=t))
    output = []
    for vi in graph.output:
        t = types.get(vi.name)
        refine = _worth_writing(t) and t != vi.type and vi.name not in contradicted
        output.append(records.evolve(vi, type=t) if refine else vi)
    return records.evolve(graph, node=nodes, value_info=value_info, output=output)


def _annotate_node(node: ir.Node, engine: Engine) -> ir.Node:
    return with_subgraphs(node, lambda g: _annotate_graph(g, engine))


def infer_shapes(model: ir.Model, registry=None, strict: bool = False) -> ir.Model:
    """A copy of ``model`` with every inferred intermediate in ``graph.value_info`` (subgraphs too).

    Declared types are refined where inference knows more, and kept as written where inference
    contradicts them (9.4: a contradiction is reported, never papered over).  The copy is
    shallow where nothing changes: tensors, nodes without subgraphs and functions are shared
    with ``model``, which is itself left unchanged.  ``strict``: raise
    :class:`onnxkit.errors.ValidationError` when inference finds a contradiction of either
    severity (the validation policy's strict reading); unknown types are never an error (9.4).
    """
    engine = _engine(model, registry)
    if strict:
        errors = [d for d in engine.diagnostics if d.severity == ERROR or d.code in CONTRADICTION_SEVERITY]
        if errors:
            from ..errors import ValidationError

            raise ValidationError(errors, "shape inference found contradictions")
    if model.graph is None:
        return records.evolve(model)
    out = records.evolve(model, graph=_annotate_graph(model.graph, engine))
    out.base_dir = model.base_dir
    return out
