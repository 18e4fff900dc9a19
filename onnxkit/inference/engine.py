"""The inference engine (Clause 9): walks a model's graphs in order and infers every value.

* Graph inputs take their declared types; an initializer that is not an input gives its own
  type and, when small, its value (a constant propagated through the graph).
* Each node is bound as at run time (Clause 5.3.2, 14.3): a model-local function first (8.4),
  else the definition of its domain's imported version.  The definition's inference function
  (hook ``onnxkit_inference_functions``) is called with an :class:`InferenceContext`; a
  definition without one but with a function body is inferred by inferring the body with the
  call's input types (functions are polymorphic, 8.4); one with neither leaves its outputs
  unknown and is reported as a warning (``no-inference-function``, 9.2).
* Subgraphs (If/Loop/Scan, ...) are inferred with the enclosing scope's types visible (5.4.3);
  dimension variables are model-scoped (6.5.2), so an ``N`` inside is the ``N`` outside.
* A declared type (value_info, graph outputs, subgraph inputs) contradicting the inferred one
  is reported (9.4, Clause 10): ``inferred-type-mismatch`` (an error) /
  ``inferred-shape-mismatch`` (a warning: a stale declared shape cannot change the result;
  :data:`CONTRADICTION_SEVERITY`, the severities of :mod:`onnxkit.checker.codes`).  Declarations are constraints on the
  value (7.1), so they also refine what is inferred; a contradicted name is recorded in
  :attr:`Engine.contradicted` so that ``infer_shapes`` keeps the declaration as written.
* Unknown is never a failure (9.4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from .. import ir
from ..diagnostics import ERROR, WARNING, diagnostic, error, warning
from ..domains import display_domain, is_default_domain
from ..dtypes import ELEMENT_TYPES
from ..errors import OnnxkitError
from ..ir.attribute import AttributeType
from ..functions import call_attributes, subgraph_attributes, subgraph_label, subgraphs_of, substitute
from ..locations import Location
from ..log import get_logger
from ..domains import opset_map
from ..registry import normalize_domain
from .context import MAX_CONSTANT_ELEMENTS, InferenceContext, InferenceError, is_symbolic

if TYPE_CHECKING:
    from ..diagnostics import Diagnostic

#: Where a fault of an inference function that is not onnxkit's typed refusal (a bug) is logged.
_LOG = "check"

#: The severity of each contradiction code, as the checker's table gives it (a test keeps them
#: equal; the table is not imported here, the checker being the package that imports inference).
CONTRADICTION_SEVERITY = {"inferred-type-mismatch": ERROR, "inferred-shape-mismatch": WARNING}

#: Deepest nesting of function bodies and subgraphs inferred.
MAX_DEPTH = 48
#: Function bodies inferred per model, every call and nesting level counted: this many, plus
#: ``EXPANSIONS_PER_NODE`` per node of the model's graph and functions - linear in the model's
#: size (calls past it leave their outputs unknown).  A chain of functions each calling the next
#: twice would otherwise double the work per level.
MAX_EXPANSIONS = 10_000
EXPANSIONS_PER_NODE = 16


class Scope:
    """Types and known values of the names visible in one graph (and, through ``parent``, outside it)."""

    __slots__ = ("parent", "types", "values", "declared", "contradicted")

    def __init__(self, parent: Optional["Scope"] = None, declared: Optional[dict] = None):
        self.parent = parent
        self.types: dict = {}
        self.values: dict = {}
        self.declared: dict = declared or {}
        self.contradicted: set = set()  # names whose declaration contradicts what is inferred

    def type(self, name: str):
        s = self
        while s is not None:
            if name in s.types:
                return s.types[name]
            s = s.parent
        return None

    def value(self, name: str):
        s = self
        while s is not None:
            if name in s.types:
                return s.values.get(name)
            s = s.parent
        return None


# -- types: merging an inferred type with a declared one ------------------------------------------

def _is_unknown(t) -> bool:
    return t is None or isinstance(t, ir.UndefinedType)


def merge_types(inferred, declared, problems: list, fresh=frozenset()):
    """The most specific type both entail; contradictions are appended to ``problems`` as (code, text).

    Where the two contradict, the inferred part is kept (what the operator produces from its
    inputs), so that one contradiction is reported once rather than again downstream."""
    if _is_unknown(inferred):
        return None if _is_unknown(declared) else declared
    if _is_unknown(declared):
        return inferred
    if type(inferred) is not type(declared):
        problems.append(("inferred-type-mismatch", f"inferred type {inferred} but the model declares {declared}"))
        return inferred
    if isinstance(inferred, (ir.TensorType, ir.SparseTensorType)):
        ea, eb = inferred.elem_type, declared.elem_type
        if ea and eb and ea != eb:
            problems.append(("inferred-type-mismatch", f"inferred type {inferred} but the model declares {declared}"))
            return inferred
        shape = _merge_shapes(inferred, declared, problems, fresh)
        return type(inferred)(ea or eb, shape, denotation=declared.denotation or inferred.denotation)
    if isinstance(inferred, (ir.SequenceType, ir.OptionalType)):
        elem = merge_types(inferred.elem_type, declared.elem_type, problems, fresh)
        return type(inferred)(elem, denotation=declared.denotation or inferred.denotation)
    if isinstance(inferred, ir.MapType):
        if inferred.key_type and declared.key_type and inferred.key_type != declared.key_type:
            problems.append(("inferred-type-mismatch", f"inferred type {inferred} but the model declares {declared}"))
            return inferred
        value = merge_types(inferred.value_type, declared.value_type, problems, fresh)
        return ir.MapType(inferred.key_type or declared.key_type, value, denotation=declared.denotation)
    if isinstance(inferred, ir.OpaqueType):
        if (inferred.domain, inferred.name) != (declared.domain, declared.name):
            problems.append(("inferred-type-mismatch", f"inferred type {inferred} but the model declares {declared}"))
        return declared
    return declared


def sparse_constant_type(node: ir.Node, declared) -> Optional[ir.SparseTensorType]:
    """The type of a Constant of ai.onnx that holds a sparse value (under ``sparse_value``, or
    under ``value`` as a SPARSE_TENSOR) where one of the ``declared`` types of its output is a
    sparse tensor of that element type: onnxruntime reads such a Constant as a sparse
    initializer, whose type is ``sparse_tensor`` (the checker's ``sparse-constant-output``).
    None otherwise: the Constant's output is the dense tensor its definition gives."""
    if node.op_type != "Constant" or not is_default_domain(node.domain):
        return None
    sp = next((a.value for a in node.attribute if a.name in ("value", "sparse_value")
               and ir.is_a(a.value, "SparseTensor") and a.value.values is not None), None)
    if sp is None:
        return None
    elem = sp.values.data_type
    if not any(isinstance(d, ir.SparseTensorType) and d.elem_type == elem for d in declared):
        return None
    return ir.SparseTensorType(elem, [int(d) for d in sp.dims])


def _merge_shapes(a, b, problems, fresh):
    sa, sb = a.shape, b.shape
    if sa is None:
        return sb
    if sb is None:
        return sa
    if len(sa) != len(sb):
        problems.append(("inferred-shape-mismatch", f"inferred shape {sa} (rank {len(sa)}) but the model declares "
                                                    f"{sb} (rank {len(sb)})"))
        return sa
    out, bad = [], []
    for k, (da, db) in enumerate(zip(sa.dim, sb.dim)):
        va, vb = da.value, db.value
        if isinstance(va, int) and isinstance(vb, int):
            if va != vb:
                bad.append(k)
            out.append(da)
        elif isinstance(va, int):
            out.append(da if not db.denotation else ir.Dim(dim_value=va, denotation=db.denotation))
        elif isinstance(vb, int) or va is None:
            out.append(db)
        elif vb is None:
            out.append(da if not db.denotation else ir.Dim(dim_param=va, denotation=db.denotation))
        else:
            out.append(db if (va in fresh and vb not in fresh) else da)
    if bad:
        problems.append(("inferred-shape-mismatch", f"inferred shape {sa} but the model declares {sb} "
                                                    f"(axis {', '.join(map(str, bad))})"))
    return ir.Shape(out)


def tensor_type_of(t) -> Optional[ir.TensorType]:
    """The type of an initializer (dense or sparse)."""
    if ir.is_a(t, "SparseTensor"):
        vt = t.values
        return ir.SparseTensorType(vt.data_type if vt is not None else 0, [int(d) for d in t.dims])
    return ir.TensorType(int(t.data_type), [int(d) for d in t.dims])


def _initializer_value(t) -> Optional[np.ndarray]:
    if not isinstance(t, ir.Tensor) or t.size > MAX_CONSTANT_ELEMENTS or t.data_type == 8:
        return None
    try:
        return np.asarray(t.numpy())
    except (OnnxkitError, OSError, ValueError, TypeError, OverflowError):
        # unreadable: external data refused (ExternalDataError), malformed contents (OnnxkitTypeError),
        # a file the storage cannot read (OSError): simply not known; the checker reports the tensor
        return None


def _dim_params(model: ir.Model) -> set:
    names = set()

    def walk_type(t):
        if isinstance(t, (ir.TensorType, ir.SparseTensorType)):
            if t.shape is not None:
                for d in t.shape.dim:
                    if d.dim_param:
                        names.add(d.dim_param)
        elif isinstance(t, (ir.SequenceType, ir.OptionalType)):
            walk_type(t.elem_type)
        elif isinstance(t, ir.MapType):
            walk_type(t.value_type)

    def walk_graph(g):
        for vi in [*g.input, *g.output, *g.value_info]:
            walk_type(vi.type)
        for n in g.node:
            walk_nodes(n)

    def walk_nodes(n):
        for sg in subgraphs_of(n):
            walk_graph(sg)
        for a in n.attribute:
            if a.type == AttributeType.TYPE_PROTO:
                walk_type(a.value)

    if model.graph is not None:
        walk_graph(model.graph)
    for f in model.functions:
        for vi in f.value_info:
            walk_type(vi.type)
        for n in f.node:
            walk_nodes(n)
    return names


class Engine:
    """One inference run over one model."""

    def __init__(self, model: ir.Model, registry, reuse=None):
        """``reuse``: an :class:`~onnxkit.inference.InferenceResult` of the same model (its
        declarations may differ) whose nodes' results are taken where their inputs are the same
        (:mod:`.reuse`)."""
        self.model = model
        self.registry = registry
        self.opsets = opset_map(model.opset_import)
        self.functions = {(f.domain, f.name, f.overload): f for f in model.functions}
        self.types: dict = {}          # (graph path, name) -> Type
        self.graph_types: dict = {}    # id(graph) -> {name: Type}
        self.contradicted: dict = {}   # id(graph) -> names whose declared type contradicts the inferred one
        self.diagnostics: list = []
        self._seen: set = set()
        self._logged_faults: set = set()  # (operator, exception type) whose fault was logged: _log_fault
        self._used = _dim_params(model)
        self._counter = 0
        self.fresh: set = set()
        self.depth = 0
        self.expansions = 0  # function bodies inferred, at most max_expansions
        #: True once a declaration (value_info, a declared output, subgraph input or function
        #: value_info type, an untyped input's initializer) gave a type something inference did
        #: not derive: while False, every type equals what inference derives from the top-level
        #: inputs and the constants alone (``undeclared`` of the optimizer's view)
        self.declarations_used = False
        #: ``{name: the type inferred without the declaration}`` of the top-level graph's names whose
        #: type a declaration (value_info, a declared output) refined or contradicted; None once a
        #: declaration counted anywhere else (an input's, a subgraph's, a function's)
        self.declared_names: Optional[dict] = {}
        self._top: Optional[Scope] = None
        size = (len(model.graph.node) if model.graph is not None else 0) + sum(len(f.node) for f in model.functions)
        self.max_expansions = MAX_EXPANSIONS + EXPANSIONS_PER_NODE * size
        self.last_subgraph_values: list = []
        #: ``{(graph path, node index): (definition, input types, input values, output types,
        #: output values)}`` of the graphs' nodes without subgraphs an inference function inferred
        self.node_results: dict = {}
        self._reuse: dict = {}
        if reuse is not None:  # the first inference's fresh names are taken: a reused type keeps them
            from .reuse import reused  # imported by an inference that reuses another only

            self._reused = reused
            self._reuse = reuse.node_results
            self._used |= reuse.fresh
            self.fresh |= reuse.fresh

    def exact_values(self) -> dict:
        """``{name: value}`` of the top-level graph's values known exactly (not symbolic)."""
        top = self._top
        if top is None:
            return {}
        return {n: v for n, v in top.values.items() if not is_symbolic(v)}

    # -- services for the context ------------------------------------------------------------
    def fresh_dim(self) -> str:
        while True:
            self._counter += 1
            name = f"unk__{self._counter}"
            if name not in self._used:
                self._used.add(name)
                self.fresh.add(name)
                return name

    def _report(self, d: Diagnostic) -> None:
        key = (d.severity, d.code, d.message, d.location)
        if key not in self._seen:
            self._seen.add(key)
            self.diagnostics.append(d)

    def note_warning(self, code, clause, message, location=""):
        self._report(warning(code, clause, message, location))

    def _log_fault(self, node: ir.Node, where, exc: BaseException) -> None:
        """Log a bug-like fault of the inference of ``node`` on ``onnxkit.check``: a warning with the
        traceback for the first fault of each (operator, exception type) in this inference, the
        others at DEBUG (a model with a thousand such nodes logs one warning, not a thousand)."""
        op = f"{node.domain + '::' if node.domain else ''}{node.op_type}"
        key = (op, type(exc).__name__)
        first = key not in self._logged_faults
        self._logged_faults.add(key)
        import logging  # get_logger imported it

        get_logger(_LOG).log(logging.WARNING if first else logging.DEBUG,
                             "type inference: the inference of %s at %s raised %s: %s; its outputs are unknown, so "
                             "the passes that need their types leave them alone", op, where, type(exc).__name__, exc,
                             exc_info=exc if first else None)

    @staticmethod
    def node_label(node: ir.Node, idx: int) -> str:
        return node.name or f"{node.op_type}#{idx}"

    def graph_location(self, path) -> str:
        """``graph 'main'`` for the top graph, else the subgraph's path: the checker's style (Clause 10).

        Inside a function body ``path`` is a lazy :class:`~onnxkit.locations.Location`; it is
        extended, never rendered into the next level (that made locations double per level)."""
        if isinstance(path, Location):
            return path
        if path:
            return f"graph {path!r}"
        return f"graph {self.model.graph.name!r}" if self.model.graph is not None else "graph"

    def node_location(self, path, node: ir.Node, idx: Optional[int] = None):
        n = f"node {idx}" if idx is not None else "node"
        name = f" {node.name!r}" if node.name else ""
        segment = f"{n}{name} ({node.domain + '::' if node.domain else ''}{node.op_type})"
        if isinstance(path, Location):
            return Location(path, segment)
        return f"{self.graph_location(path)} / {segment}"

    def subgraph_path(self, path, node: ir.Node, idx: int, label: str):
        seg = f"{self.node_label(node, idx)}.{label}"
        if isinstance(path, Location):
            return Location(path, f"graph {seg!r}")
        return f"{path}/{seg}" if path else seg

    # -- model ----------------------------------------------------------------------------------
    def run(self) -> None:
        if self.model.graph is not None:
            self.infer_graph(self.model.graph, self.opsets, None, "", None, None, True)

    # -- graphs ---------------------------------------------------------------------------------
    def infer_graph(self, graph: ir.Graph, opsets: dict, parent: Optional[Scope], path: str,
                    input_types: Optional[list], input_values: Optional[list], record: bool) -> list:
        declared: dict = {}
        for vi in [*graph.value_info, *graph.output]:
            if not _is_unknown(vi.type):
                declared.setdefault(vi.name, []).append(vi.type)
        scope = Scope(parent, declared)
        if parent is None and path == "" and self._top is None:
            self._top = scope
        inits = {t.name: t for t in graph.initializer}
        for sp in graph.sparse_initializer:
            if sp.values is not None:
                inits[sp.values.name] = sp
        input_names = set()
        for k, vi in enumerate(graph.input):
            input_names.add(vi.name)
            t = None if _is_unknown(vi.type) else vi.type
            v = None
            if input_types is not None and k < len(input_types):
                problems: list = []
                merged = merge_types(input_types[k], t, problems, self.fresh)
                self._problems(problems, f"{self.graph_location(path)} / input {k} {vi.name!r}")
                if problems:
                    scope.contradicted.add(vi.name)
                if problems or merged != input_types[k]:
                    self.declarations_used, self.declared_names = True, None
                t = merged
                if input_values is not None and k < len(input_values):
                    v = input_values[k]
            elif t is None and vi.name in inits:
                t = tensor_type_of(inits[vi.name])
                self.declarations_used, self.declared_names = True, None
            elif t is not None and parent is not None:  # a subgraph input's declared type, no caller's
                self.declarations_used, self.declared_names = True, None
            self.define(scope, vi.name, t, v, f"{self.graph_location(path)} / input {vi.name!r}")
        for name, init in inits.items():
            if name in input_names:
                continue
            self.define(scope, name, tensor_type_of(init), _initializer_value(init),
                        f"{self.graph_location(path)} / initializer {name!r}")
        for idx, node in enumerate(graph.node):
            self.infer_node(node, idx, opsets, scope, path, record)
        if record:
            for name, t in scope.types.items():
                self.types[(path, name)] = t
            self.graph_types[id(graph)] = dict(scope.types)
            self.contradicted[id(graph)] = set(scope.contradicted)
        self.last_subgraph_values = [scope.value(vi.name) for vi in graph.output]
        return [scope.type(vi.name) for vi in graph.output]

    def infer_subgraph(self, graph, opsets, scope, path, input_types, input_values, record) -> list:
        if self.depth >= MAX_DEPTH:
            self.last_subgraph_values = [None] * len(graph.output)
            return [None] * len(graph.output)
        self.depth += 1
        try:
            return self.infer_graph(graph, opsets, scope, path, input_types, input_values, record)
        finally:
            self.depth -= 1

    def _problems(self, problems, where):
        for code, text in problems:
            self._report(diagnostic(CONTRADICTION_SEVERITY[code], code, "9.4", text, where))

    def define(self, scope: Scope, name: str, t, value, where: str) -> None:
        for d in scope.declared.get(name, ()):
            problems: list = []
            merged = merge_types(t, d, problems, self.fresh)
            self._problems(problems, f"{where} / value {name!r}")
            if problems:
                scope.contradicted.add(name)
            if problems or merged != t:
                self.declarations_used = True
                if scope is not self._top:
                    self.declared_names = None
                elif self.declared_names is not None:
                    self.declared_names.setdefault(name, t)
            t = merged
        scope.types[name] = t
        value = self._normalize_value(t, value)
        if value is not None:
            scope.values[name] = value
        elif name in scope.values:
            del scope.values[name]

    @staticmethod
    def _normalize_value(t, value):
        if value is None:
            return None
        if not isinstance(t, ir.TensorType) and t is not None:
            return None
        value = np.asarray(value)
        if value.size > MAX_CONSTANT_ELEMENTS:
            return None
        elem = t.elem_type if t is not None else 0
        row = ELEMENT_TYPES.get(elem)
        if t is not None and t.shape is not None:
            vs = t.shape.values
            if len(vs) != value.ndim or any(isinstance(e, int) and e != s for e, s in zip(vs, value.shape)):
                return None  # disagrees with the type: do not trust it
        if is_symbolic(value):
            if row is not None and not (row.dtype.kind in "iu"):
                return None
            flat = value.reshape(-1)
            if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in flat):
                dt = row.dtype if row is not None else np.dtype(np.int64)
                return np.array([int(x) for x in flat], dtype=dt).reshape(value.shape)
            return value
        if value.dtype == object or value.dtype.kind in "USO":
            return None
        if row is not None and value.dtype != row.dtype:
            try:
                value = value.astype(row.dtype)
            except (TypeError, ValueError):
                return None
        return value

    # -- nodes ----------------------------------------------------------------------------------
    def infer_node(self, node: ir.Node, idx: int, opsets: dict, scope: Scope, path: str, record: bool) -> None:
        domain = normalize_domain(node.domain)
        in_types = [scope.type(n) if n else None for n in node.input]
        in_values = [scope.value(n) if n else None for n in node.input]
        where = self.node_location(path, node, idx)
        n_out = len(node.output)
        out_types: list = [None] * n_out
        out_values: list = [None] * n_out
        visited: set = set()
        subgraphs = subgraph_attributes(node)
        local = self.functions.get((node.domain, node.op_type, node.overload))
        try:
            if local is not None:
                out_types, out_values = self.infer_function(node, local, opset_map(local.opset_import, opsets), None,
                                                            in_types, in_values, where)
            else:
                version = opsets.get(domain)
                schema = self.registry.bind(domain, node.op_type, version) if version is not None else None
                if schema is None:
                    self.note_warning("unknown-operator", "9.2",
                                      f"no definition of {display_domain(domain)}::{node.op_type} is known at the imported "
                                      "version; its outputs are unknown", where)
                else:
                    fn = self.registry.inference.get(schema.key)
                    key = (path, idx) if isinstance(path, str) and not subgraphs else None
                    hit = self._reused(self._reuse, key, schema, in_types, in_values) if key and self._reuse else None
                    if hit is not None:
                        out_types, out_values = hit
                    elif fn is not None:
                        ctx = InferenceContext(self, node, schema, domain, version, in_types, in_values, opsets, scope,
                                               path, record)
                        ctx.node_index = idx
                        ret = fn(ctx)
                        if isinstance(ret, (list, tuple)):
                            for i, t in enumerate(ret[:n_out]):
                                ctx.output_types[i] = t
                        out_types, out_values, visited = ctx.output_types, ctx.output_values, ctx.visited_subgraphs
                        if key is not None:  # lists of this node alone, never changed after
                            self.node_results[key] = (schema, in_types, in_values, out_types, out_values)
                    else:
                        body = schema.function_body_for(version) if schema.has_function else None
                        if body is not None:
                            out_types, out_values = self.infer_function(node, body, opset_map(body.opset_import, opsets),
                                                                        schema, in_types, in_values, where)
                        else:
                            self.note_warning("no-inference-function", "9.2",
                                              f"{schema} has no inference function; its outputs are unknown", where)
        except InferenceError as exc:
            self._report(error("inference-error", "9.4", str(exc), where))
            out_types, out_values = [None] * n_out, [None] * n_out
        except RecursionError:
            raise
        except OnnxkitError as exc:  # a typed refusal (a malformed attribute or constant): unknown, reported
            self._report(warning("inference-function-failed", "9.4",
                                 f"inference of {node.op_type} raised {type(exc).__name__}: {exc}; its outputs are unknown",
                                 where))
            out_types, out_values = [None] * n_out, [None] * n_out
        except Exception as exc:  # noqa: BLE001
            # Broad: an inference function is plugin code and may raise anything, and Clause 9.4
            # makes unknown never a failure.  A fault that is not a typed refusal is a bug: it is
            # reported as a diagnostic (the checker shows it) and logged on onnxkit.check with the
            # node and the traceback, since the planner and the optimizer drop the diagnostics.
            self._report(warning("inference-function-failed", "9.4",
                                 f"inference of {node.op_type} raised {type(exc).__name__}: {exc}; its outputs are unknown",
                                 where))
            self._log_fault(node, where, exc)
            out_types, out_values = [None] * n_out, [None] * n_out
        # subgraphs the inference function did not look at are still inferred (their inputs unknown)
        for a, k, g in subgraphs:
            if a.name not in visited:
                self.infer_subgraph(g, opsets, scope, self.subgraph_path(path, node, idx, subgraph_label(a, k)), [], [],
                                    record)
        for i, name in enumerate(node.output):
            if name:
                t = out_types[i] if i < len(out_types) else None
                v = out_values[i] if i < len(out_values) else None
                if t is None and v is not None and not is_symbolic(v):
                    try:
                        from ..dtypes import from_numpy_dtype
                        t = ir.TensorType(int(from_numpy_dtype(v.dtype).tag), list(np.shape(v)))
                    except (OnnxkitError, TypeError):  # a dtype with no ONNX element type: its type stays unknown
                        t = None
                if i == 0 and node.op_type == "Constant" and name in scope.declared:
                    sparse = sparse_constant_type(node, scope.declared[name])
                    if sparse is not None:  # read as a sparse initializer, as onnxruntime does
                        t, v = sparse, None
                self.define(scope, name, t, v, where)

    # -- functions (Clause 8.4) ------------------------------------------------------------------
    def infer_function(self, node, fn: ir.Function, opsets, schema, in_types, in_values, where):
        """Infer a call of ``fn`` by inferring its body with the call's input types."""
        n_out = len(node.output)
        if self.depth >= MAX_DEPTH or self.expansions >= self.max_expansions:
            return [None] * n_out, [None] * n_out
        self.expansions += 1
        values = call_attributes(schema, fn, node)
        missing = {formal for k, formal in enumerate(fn.input) if k >= len(node.input) or not node.input[k]}
        body = [substitute(n, values, missing) for n in fn.node]
        declared = {}
        for vi in fn.value_info:
            if not _is_unknown(vi.type):
                declared.setdefault(vi.name, []).append(vi.type)
        scope = Scope(None, declared)
        for k, formal in enumerate(fn.input):
            if formal not in missing:
                scope.types[formal] = in_types[k] if k < len(in_types) else None
                v = in_values[k] if k < len(in_values) else None
                if v is not None:
                    scope.values[formal] = v
        label = Location(where, f"body of {fn.domain + '::' if fn.domain else ''}{fn.name}")
        self.depth += 1
        try:
            for idx, n in enumerate(body):
                self.infer_node(n, idx, opsets, scope, label, False)
        finally:
            self.depth -= 1
        types, vals = [], []
        for k in range(n_out):
            if k < len(fn.output) and node.output[k]:
                types.append(scope.type(fn.output[k]))
                vals.append(scope.value(fn.output[k]))
            else:
                types.append(None)
                vals.append(None)
        return types, vals


