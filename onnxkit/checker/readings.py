"""What onnxruntime accepts although it breaks a SHALL, and how onnxkit reads it the same way.

The checker reports each of these conditions as a warning that ``strict=True`` refuses
(:mod:`onnxkit.checker.codes`, :data:`~onnxkit.checker.codes.RECLASSIFIED`); a session that
admits the model then evaluates :func:`read_as_onnxruntime`'s reading of it, never the
user's model object itself (a changed model is a copy; an unchanged one is returned as is):

* ``domain-implicitly-imported`` (Clause 5.3.2 requires every domain used to be imported):
  onnxruntime adds every domain its schema registry holds that the model does not import, at
  the newest version registered there (:data:`IMPLICIT_IMPORTS`, as onnxruntime 1.32 writes
  them into a model it saves).  onnxkit adds the domains a node uses, at that version, where an
  installed plugin provides that version; the default domain is never added (onnxruntime and
  onnxkit know different newest versions of it, and a model imports it in practice);
* ``attribute-form-accepted`` (7.3.1): onnxruntime reads Constant's attribute by its *type*,
  so a SPARSE_TENSOR under ``value`` is the ``sparse_value`` form; the reading replaces it by
  the dense tensor it denotes (Annex B.2.18), as onnxruntime makes a dense initializer of it;
* ``sparse-constant-output`` (10.3): a Constant holding a sparse value whose output is declared
  a sparse tensor of its element type is what onnxruntime makes of it, a sparse initializer; the
  reading keeps the value sparse (``sparse_value``), the session evaluates it dense and returns
  the graph output declared sparse as onnxruntime does (:func:`onnxkit.runtime.sparse.coo_of_dense`);
* ``not-topologically-sorted`` (7.5): onnxruntime sorts the nodes of an acyclic graph; the
  reading lists them in a topological order (stable: the given order wherever it is one), each
  subgraph too.  A node's dependencies include the names its subgraphs read from its scope.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import ir, records
from ..domains import is_default_domain, normalize_domain, opset_map
from ..dtypes import ELEMENT_TYPES
from ..errors import LimitExceeded
from ..functions import names_read_inside, subgraphs_of, with_subgraphs
from ..inference.engine import sparse_constant_type
from ..ir.attribute import AttributeType
from ..limits import DEFAULT_LIMITS, Limits

#: The domains onnxruntime 1.32 imports implicitly, at the version it assumes: the newest its
#: schema registry holds (what its saved optimized model lists for a model importing only
#: ai.onnx; tests/checker/test_onnxruntime_readings.py asserts the table against onnxruntime).
IMPLICIT_IMPORTS = {
    "ai.onnx.ml": 5,
    "ai.onnx.preview": 1,
    "ai.onnx.preview.training": 1,
    "ai.onnx.training": 1,
    "com.microsoft": 1,
    "com.microsoft.experimental": 1,
    "com.microsoft.nchwc": 1,
    "org.pytorch.aten": 1,
}


def implicit_version(registry, domain: str) -> Optional[int]:
    """The version ``domain`` is read at where a model uses it without importing it (None: the
    node stays ``domain-not-imported``): :data:`IMPLICIT_IMPORTS`'s, where a plugin provides it."""
    version = IMPLICIT_IMPORTS.get(normalize_domain(domain))
    if version is None or registry is None or registry.operator_set(normalize_domain(domain), version) is None:
        return None
    return version


def is_sparse_constant_value(node) -> bool:
    """True for a Constant of ai.onnx whose ``value`` attribute holds a sparse tensor (its type
    SPARSE_TENSOR): the form onnxruntime reads as ``sparse_value``."""
    if node.op_type != "Constant" or not is_default_domain(node.domain):
        return False
    return any(a.name == "value" and a.type == AttributeType.SPARSE_TENSOR for a in node.attribute)


def _densified(node, where: str, limits: Limits, declared=()):
    """``node`` with its sparse ``value`` densified; kept sparse (as ``sparse_value``) where its
    output is declared a sparse tensor of its element type (``sparse-constant-output``)."""
    if sparse_constant_type(node, declared) is not None:
        return records.evolve(node, attribute=[records.evolve(a, name="sparse_value") if a.name == "value" else a
                                               for a in node.attribute])
    attrs = []
    for a in node.attribute:
        if a.name == "value" and a.type == AttributeType.SPARSE_TENSOR and isinstance(a.value, ir.SparseTensor):
            sp = a.value
            data_type = sp.values.data_type if sp.values is not None else None
            et = ELEMENT_TYPES.get(data_type)
            itemsize = max(et.bits, 8) // 8 if et is not None else 8
            size = int(np.prod([int(d) for d in sp.dims], dtype=object)) * itemsize
            if size > limits.max_tensor_bytes:
                raise LimitExceeded(f"{where}: Constant's sparse value densifies to {size} bytes, over "
                                    f"max_tensor_bytes ({limits.max_tensor_bytes}) (Clause 15.4)",
                                    limit="max_tensor_bytes", value=size, maximum=limits.max_tensor_bytes, path=where)
            a = ir.Attribute(name="value", type=AttributeType.TENSOR,
                             value=ir.Tensor.from_numpy(sp.to_dense(), name=sp.values.name if sp.values else "",
                                                        data_type=data_type))
        attrs.append(a)
    return records.evolve(node, attribute=attrs)


def _late(nodes, producer: dict, reads) -> bool:
    """True where some node reads a value a later node of the same graph produces."""
    for i, node in enumerate(nodes):
        for n in node.input:
            if producer.get(n, -1) > i:
                return True
        inside = reads.get(i)
        if inside and any(producer.get(n, -1) > i for n in inside):
            return True
    return False


def topological_order(graph) -> Optional[list]:
    """The indices of ``graph``'s nodes in a topological order, the given order wherever it is
    one (None where the nodes are already sorted, or form a cycle: graph-cycle is an error).
    A node depends on the producers of its inputs and of the names its subgraphs read."""
    nodes = graph.node
    producer = _producers(nodes)
    reads = {i: names_read_inside_all(node) for i, node in enumerate(nodes) if node.attribute}
    return _order(nodes, producer, reads) if _late(nodes, producer, reads) else None


def names_read_inside_all(node) -> set:
    """The names ``node``'s subgraphs read (:func:`onnxkit.functions.names_read_inside`), empty for none."""
    out: set = set()
    for sub in subgraphs_of(node):
        out |= names_read_inside(sub)
    return out


def _producers(nodes) -> dict:
    producer: dict = {}
    for i, node in enumerate(nodes):
        for o in node.output:
            if o and o not in producer:
                producer[o] = i
    return producer


def _order(nodes, producer: dict, reads: dict) -> Optional[list]:
    users: list = [[] for _ in nodes]
    waiting = [0] * len(nodes)
    for i, node in enumerate(nodes):
        deps = {producer[n] for n in (*node.input, *reads.get(i, ())) if n in producer} - {i}
        waiting[i] = len(deps)
        for j in deps:
            users[j].append(i)
    import heapq  # a graph out of order only: a model in order never needs it

    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    return order if len(order) == len(nodes) else None


def _read_graph(graph, where: str, limits: Limits, domains: set):
    """``graph`` (or a function) as onnxruntime reads it (Constant's sparse value densified,
    nodes sorted), or ``graph`` itself where nothing changes; adds the domains its nodes (and
    their subgraphs') name, as written, to ``domains``.  One pass over the nodes."""
    nodes = graph.node
    changed = False
    out = []
    reads: dict = {}
    for i, node in enumerate(nodes):
        domains.add(node.domain)
        new = node
        if node.attribute:
            subs = subgraphs_of(node)
            if subs:
                read = {id(g): _read_graph(g, f"{where} / node {i} / graph {g.name!r}", limits, domains) for g in subs}
                if any(read[id(g)] is not g for g in subs):
                    new = with_subgraphs(node, lambda g: read.get(id(g), g))
                reads[i] = names_read_inside_all(node)
            elif node.op_type == "Constant" and is_sparse_constant_value(node):
                first = node.output[0] if node.output else ""
                declared = [vi.type for vi in (*graph.output, *graph.value_info) if vi.name == first]
                new = _densified(node, f"{where} / node {i} {node.name!r} (Constant)", limits, declared)
            changed = changed or new is not node
        out.append(new)
    producer = _producers(nodes)
    if _late(nodes, producer, reads):
        order = _order(nodes, producer, reads)
        if order is not None:
            out = [out[i] for i in order]
            changed = True
    return records.evolve(graph, node=out) if changed else graph


def implicit_imports(model, registry) -> dict:
    """``{domain: version}``: the domains ``model``'s nodes (its graphs and functions) use that
    neither the model nor the function imports, and the version each is read at."""
    return _read(model, registry, DEFAULT_LIMITS)[0]


def _read(model, registry, limits: Limits) -> tuple:
    """``(implicit imports, graph, functions)`` of :func:`read_as_onnxruntime`, in one walk."""
    top = opset_map(model.opset_import)
    local = {normalize_domain(fn.domain) for fn in model.functions or ()}
    used: set = set()
    graph = _read_graph(model.graph, f"graph {model.graph.name!r}", limits, used) if model.graph is not None else None
    missing = {normalize_domain(d) for d in used} - set(top) - local
    functions = model.functions
    if functions:
        read = []
        for fn in functions:
            inner: set = set()
            read.append(_read_graph(fn, f"function {fn.name!r}", limits, inner))
            missing |= {normalize_domain(d) for d in inner} - set(opset_map(fn.opset_import, top)) - local
        if any(a is not b for a, b in zip(read, functions)):
            functions = read
    extra = {}
    for d in sorted(missing):
        v = implicit_version(registry, d)
        if v is not None:
            extra[d] = v
    return extra, graph, functions


def read_as_onnxruntime(model, registry, limits: Limits = DEFAULT_LIMITS):
    """``model`` as onnxruntime reads it (the module docstring): the domains it uses without
    importing them imported at :data:`IMPLICIT_IMPORTS`' versions, Constant's sparse ``value``
    densified, every graph's nodes in a topological order.  ``model`` itself where nothing
    changes; otherwise a copy (``model`` is not modified).  Raises
    :class:`~onnxkit.errors.LimitExceeded` where a sparse value's dense form exceeds
    ``limits.max_tensor_bytes``."""
    if model.graph is None:
        return model
    extra, graph, functions = _read(model, registry, limits)
    if not extra and graph is model.graph and functions is model.functions:
        return model
    imports = list(model.opset_import) + [ir.OperatorSetId(domain=d, version=v) for d, v in extra.items()]
    return records.evolve(model, opset_import=imports, graph=graph, functions=functions)
