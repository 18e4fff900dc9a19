"""The working copy a pass rewrites, and what every pass asks of it.

:class:`GraphView` holds a *copy* of a top-level graph: a new node list whose nodes are shallow
copies (their ``input``/``output`` lists are new), new initializer and value_info lists.  The
user's :class:`~onnxkit.ir.Model` is never changed: passes edit the copy's lists and replace
nodes, they never write into an object they did not create.

A name is *protected* when a rewrite must not make it vanish or change its producer: a graph
output, or a name read inside a subgraph (an outer-scope reference, Clause 5.4.3).  Subgraphs
(If/Loop/Scan bodies) are left alone; every name they read counts as protected.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records
import numpy as np

from ... import ir
from ...domains import is_default_domain, normalize_domain, opset_map
from ...functions import with_subgraphs
from ..usedef import node_index


#: the most elements :meth:`GraphView.constant` materializes for a ConstantOfShape
MAX_FILLED = 1 << 24
#: :class:`~onnxkit.ir.Node`'s ``__init__`` parameters in order, as :func:`copy_node` passes them
_NODE_PARAMETERS = ("input", "output", "name", "op_type", "domain", "overload", "attribute", "doc_string",
                    "metadata_props", "device_configurations", "_wire")
_NODE_AS_WRITTEN = tuple(a.alias for a in records.fields(ir.Node) if a.init) == _NODE_PARAMETERS


def copy_node(n: ir.Node) -> ir.Node:
    """The copy of ``n`` a view works on: what ``records.evolve(n, input=list(n.input),
    output=list(n.output))`` gives (every field the same object but ``input`` and ``output``,
    new lists of the same names), by one positional call of ``ir.Node`` where ``n`` is exactly an
    ``ir.Node`` whose parameters are :data:`_NODE_PARAMETERS` (attrs' generic ``evolve`` reads
    the fields one by one), by ``evolve`` otherwise."""
    if type(n) is not ir.Node or not _NODE_AS_WRITTEN:
        return records.evolve(n, input=list(n.input), output=list(n.output))
    return ir.Node(list(n.input), list(n.output), n.name, n.op_type, n.domain, n.overload, n.attribute, n.doc_string,
                   n.metadata_props, n.device_configurations, n._wire)


def is_default(node, *op_types: str) -> bool:
    """True if ``node`` (a graph's or a step's) is of the default domain ('' or 'ai.onnx') and,
    where ``op_types`` are given, of one of them."""
    return node is not None and is_default_domain(node.domain) and (not op_types or node.op_type in op_types)


def _filled(shape: np.ndarray, value) -> Optional[np.ndarray]:
    """What ``ConstantOfShape(shape, value)`` computes (Part 2: float32 zeros without ``value``)."""
    if shape.ndim != 1 or shape.dtype != np.int64 or (shape < 0).any() or int(np.prod(shape)) > MAX_FILLED:
        return None
    fill = value.numpy().reshape(-1) if isinstance(value, ir.Tensor) else np.zeros(1, np.float32)
    if fill.size != 1:
        return None
    return np.full(tuple(int(d) for d in shape), fill[0], dtype=fill.dtype)


def _undeclared_graph(g: ir.Graph, top: bool) -> ir.Graph:
    """``g`` with no ``value_info``, its outputs' types unknown, and (a subgraph) its inputs'
    types unknown too; subgraphs likewise.  A top-level input keeps its type (the session checks
    every feed's element type and rank against it); one with an initializer (a default a feed
    may override: IR < 4, or listed as an input) whose type is not declared loses that
    initializer, since a feed overriding it is checked against nothing."""
    nodes = []
    for n in g.node:
        nodes.append(with_subgraphs(n, lambda s: _undeclared_graph(s, False)))
    untyped = {vi.name for vi in g.input if vi.type is None}
    inputs = list(g.input) if top else [records.evolve(vi, type=None) for vi in g.input]
    return records.evolve(g, node=nodes, value_info=[], input=inputs,
                        output=[records.evolve(vi, type=None) for vi in g.output],
                        initializer=[t for t in g.initializer if t.name not in untyped])


def undeclared(model: ir.Model) -> ir.Model:
    """A copy of ``model`` holding only what a run checks: no ``value_info`` declarations
    (graph or function), no declared output or subgraph input types (:func:`_undeclared_graph`).
    Inference on it gives facts derived from the checked input types and the constants alone:
    a declaration inference did not confirm is never taken for one (a Reshape output declared
    rank 2 that is rank 3 at run time)."""
    functions = [records.evolve(f, value_info=[]) for f in model.functions]
    return records.evolve(model, graph=_undeclared_graph(model.graph, True), functions=functions)


class GraphView:
    """A rewritable copy of ``model.graph`` with use counts, producers and constants."""

    def __init__(self, model: ir.Model, registry=None, types=None):
        """``types``: ``{name: Type}`` of the top-level graph as inference gives ``undeclared(model)``
        (a caller that inferred the model already, with ``declarations_used`` False); else the view
        infers them on first need (:meth:`tensor_type`), reusing node by node the results of
        ``types`` where it is an :class:`~onnxkit.inference.InferenceResult` of ``model``
        (:mod:`onnxkit.inference.reuse`)."""
        from ...inference import InferenceResult

        g = model.graph
        self.model = model
        self.registry = registry
        self._reuse = types if isinstance(types, InferenceResult) else None
        self._types: Optional[dict] = None if self._reuse is not None else types
        self.opsets = opset_map(model.opset_import)
        self.node = [copy_node(n) for n in g.node]
        self.initializer = list(g.initializer)
        self.value_info = list(g.value_info)
        self.graph = g
        inputs = {vi.name for vi in g.input}
        self.input_names = inputs
        # IR < 4 lists every initializer as an input, and onnxruntime reads them as constants;
        # onnxkit still accepts a fed value for one, so the session runs the unoptimized plan then
        self.legacy_inputs = model.ir_version < 4
        self.inits = {t.name: t for t in g.initializer
                      if t.name not in inputs or self.legacy_inputs}
        #: input names whose initializer a pass read as a constant (IR < 4 only)
        self.consumed_defaults: set = set()
        self.extra_inputs: list = []  # IR < 4: the new constants, listed as inputs too
        self.names = inputs | {t.name for t in g.initializer} | {o for n in g.node for o in n.output if o}
        self.new_opsets: dict = {}  # domain -> version a rewrite's node needs imported
        self._fresh = 0
        self._arrays: dict = {}  # id(tensor) -> (tensor, its array): :meth:`_array`
        #: :func:`.computed.computed_constant`'s cache (name -> (value, initializers) or None) and planner
        self.computed: dict = {}
        self.folder = None
        #: the use-def links of :attr:`node` (:mod:`onnxkit.runtime.usedef`), kept current by every edit below
        self.index = node_index(self.node, [vi.name for vi in g.output])
        #: the names read by name: graph outputs and names read inside a subgraph (never removed or renamed)
        self.protected = {n for n in self.index.names() if any(u.slot < 0 for u in self.index.uses(n))}

    # -- bookkeeping ----------------------------------------------------------------------
    def producer_of(self, name: str) -> Optional[ir.Node]:
        """The node of this graph writing ``name``, or None (an input, an initializer, unknown)."""
        return self.index.producer(name)

    def use_count(self, name: str) -> int:
        """Reads of ``name``: by nodes of this graph, inside subgraphs, as a graph output."""
        return self.index.use_count(name)

    def sole_consumer(self, name: str) -> Optional[ir.Node]:
        """The one node reading ``name`` once, if ``name`` is unprotected and read by it alone."""
        return self.index.sole_reader(name)

    def holds(self, node: ir.Node) -> bool:
        """True while ``node`` is a node of the working copy (not yet removed or replaced)."""
        return node in self.index

    def fresh_name(self, base: str) -> str:
        while True:
            self._fresh += 1
            name = f"{base}__opt{self._fresh}"
            if name not in self.names:
                self.names.add(name)
                return name

    def version(self, domain: str = "") -> int:
        return self.opsets.get(normalize_domain(domain), 0)

    def require_opset(self, domain: str, version: int) -> None:
        """Import ``domain`` at ``version`` in the optimized model (a fused node's domain)."""
        if normalize_domain(domain) not in self.opsets:
            self.new_opsets[domain] = version

    def tensor_type(self, name: str):
        """``(elem_type, dims or None)`` of a tensor-typed ``name``, or None (unknown, or not a
        tensor): the type inference (Clause 9) derives from what a run checks, the model inferred
        without its declarations (:func:`undeclared`), so a stale ``value_info`` or output shape
        never reaches a pass.  Passes keep every surviving value's type, so the answer holds for
        the copy too."""
        if self._types is None:
            from ...inference import infer_model

            try:
                self._types = infer_model(undeclared(self.model), self.registry, reuse=self._reuse).graph("")
            except Exception as exc:  # noqa: BLE001
                # Broad: the engine reports every node's fault as a diagnostic (Clause 9.4: unknown
                # is never a failure), so a raise here is a bug of the engine, and the optimizer is
                # an optimization: the passes needing types do nothing, which is logged on
                # onnxkit.plan with the value first asked about and the traceback.
                from ...log import get_logger

                get_logger("plan").warning("optimizer: type inference of the model raised %s: %s (asked for the type of "
                                           "%r); the passes that need types leave the model alone",
                                           type(exc).__name__, exc, name, exc_info=exc)
                self._types = {}
        t = self._types.get(name)
        if not isinstance(t, ir.TensorType) or not t.elem_type:
            return None
        return t.elem_type, (None if t.shape is None else list(t.shape.values))

    # -- constants ------------------------------------------------------------------------
    def constant(self, name: str) -> Optional[np.ndarray]:
        """The value of ``name`` if it is a constant of this graph (a non-overridable initializer,
        or a Constant node's ``value``), else None."""
        t = self.inits.get(name)
        if t is not None:
            return self._array(t)
        node = self.index.producer(name)
        if not is_default(node):
            return None
        if node.op_type == "Constant":
            value = node.attr("value")
            return self._array(value) if isinstance(value, ir.Tensor) else None
        if node.op_type == "ConstantOfShape" and len(node.input) == 1 and node.input[0] in self.inits:
            return _filled(self._array(self.inits[node.input[0]]), node.attr("value"))
        return None

    def _array(self, t: ir.Tensor) -> np.ndarray:
        """``t.numpy()``, converted once per tensor object (rules ask for the same constants many
        times while matching); read-only, since every caller shares it."""
        hit = self._arrays.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        a = t.numpy()
        if a.flags.writeable:
            a = a.view()
            a.flags.writeable = False
        self._arrays[id(t)] = (t, a)
        return a

    def read_constant(self, name: str) -> Optional[np.ndarray]:
        """:meth:`constant`, noting each IR < 4 input whose initializer is thereby consumed
        (``name`` itself, or a ConstantOfShape's shape): a run feeding one of them runs the
        model as given.  A pass calls it for every constant its rewrite depends on; one read
        with :meth:`constant` alone must not decide a rewrite."""
        value = self.constant(name)
        if value is None:
            return None
        node = None if name in self.inits else self.index.producer(name)
        for used in [name] + (list(node.input[:1]) if node is not None and node.op_type == "ConstantOfShape" else []):
            if used in self.input_names:
                self.consumed_defaults.add(used)
        return value

    def add_constant(self, base: str, value: np.ndarray, data_type: int) -> str:
        """A new initializer holding ``value`` (an input too under IR < 4, where every one is)."""
        name = self.fresh_name(base)
        t = ir.Tensor.from_numpy(np.ascontiguousarray(value), name=name, data_type=data_type)
        self.initializer.append(t)
        self.inits[name] = t
        if self.legacy_inputs:
            self.extra_inputs.append(ir.ValueInfo(name=name, type=ir.TensorType(
                elem_type=data_type, shape=ir.Shape.of(int(d) for d in value.shape))))
        return name

    # -- edits (each keeps :attr:`index` current) ---------------------------------------
    def remove(self, node: ir.Node) -> None:
        self.node = [n for n in self.node if n is not node]
        self.index.remove(node)

    def drop_unread(self, names) -> None:
        """Remove the default-domain nodes that computed ``names`` where nothing reads their outputs
        any more (a fusion's constants it took into its node), and so on up their inputs."""
        pending = list(names)
        while pending:
            node = self.producer_of(pending.pop())
            if node is None or not self.holds(node) or not is_default(node) \
                    or any(self.use_count(o) for o in node.output if o):
                continue
            self.remove(node)
            pending.extend(i for i in node.input if i)

    def replace(self, old: ir.Node, new: ir.Node) -> None:
        """``new`` takes ``old``'s place in the node order."""
        self.node[self._position(old)] = new
        self.index.replace(old, new)

    def insert_before(self, anchor: ir.Node, new: ir.Node) -> None:
        """``new`` placed just before ``anchor``."""
        self.node.insert(self._position(anchor), new)
        self.index.add(new)

    def replace_pattern(self, nodes: list, new: ir.Node) -> None:
        """``new`` in place of ``nodes`` (a pattern): at the last one's position, where every
        input of the pattern is defined; the others removed."""
        ids = {id(n) for n in nodes}
        last = max(k for k, n in enumerate(self.node) if id(n) in ids)
        self.node[last] = new
        self.node = [n for n in self.node if id(n) not in ids]
        for n in nodes:
            self.index.remove(n)
        self.index.add(new)

    def bypass(self, node: ir.Node, value: str) -> None:
        """Remove ``node``, its (unprotected) first output read as ``value`` wherever it was read."""
        self.index.replace_all_uses_with(node.output[0], value)
        self.remove(node)

    def _position(self, node: ir.Node) -> int:
        return next(k for k, n in enumerate(self.node) if n is node)

    # -- result ---------------------------------------------------------------------------
    def finish(self) -> ir.Model:
        """The optimized model: unused Constant nodes and initializers dropped, stale value_info
        removed, the operator sets fused nodes need imported.  Graph inputs are kept as they
        were (IR < 4: new constants appended)."""
        live = {n for n in self.index.names() if self.index.use_count(n)} | self.protected
        self.node = [n for n in self.node if not (is_default(n, "Constant") and not any(o in live for o in n.output))]
        defined = self.input_names | {o for n in self.node for o in n.output if o}
        inits = [t for t in self.initializer if t.name in live or t.name in self.input_names]
        defined |= {t.name for t in inits}
        value_info = [vi for vi in self.value_info if vi.name in defined]
        graph = records.evolve(self.graph, node=self.node, initializer=inits, value_info=value_info,
                             input=list(self.graph.input) + list(self.extra_inputs))
        opsets = list(self.model.opset_import) + [ir.OperatorSetId(domain=d, version=v)
                                                  for d, v in sorted(self.new_opsets.items())]
        return records.evolve(self.model, graph=graph, opset_import=opsets)
