"""Functions (Clause 8.4): what evaluation and inference share about a function call.

A call of a function (a model-local one, or a Part 2 definition's body) evaluates the body
with the call site's attributes: where a body node refers to an attribute parameter
(``ref_attr_name``), the reference is replaced by the call site's value, else by the
parameter's default, else the attribute is omitted.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records

from . import ir
from .ir.attribute import AttributeType

GRAPH_TYPES = (AttributeType.GRAPH, AttributeType.GRAPHS)


def subgraph_attributes(node) -> list:
    """``[(attribute, index, graph)]``: every graph of ``node``'s attributes in order, a GRAPH
    attribute's (``index`` None) and each of a GRAPHS attribute's (``index`` its position).

    The one walker of a node's subgraphs: :func:`subgraphs_of`, :func:`names_read_inside`,
    :func:`with_subgraphs`, the checker, inference, the optimizer and the CLI read it
    (tests/structure/test_one_way.py keeps it so).  The graphs are taken from the values (an
    :class:`~onnxkit.ir.Graph`, or a list of them), which for a well-formed attribute are its
    GRAPH / GRAPHS value; the checker walks an attribute whose declared type says otherwise too,
    and an attribute referring to a function's parameter (no value) has none."""
    out = []
    for a in node.attribute:
        v = a.value
        if isinstance(v, ir.Graph):
            out.append((a, None, v))
        elif isinstance(v, list) and v and isinstance(v[0], ir.Graph):
            out.extend((a, k, g) for k, g in enumerate(v) if isinstance(g, ir.Graph))
    return out


def subgraphs_of(node) -> list:
    """The graphs of ``node``'s graph-valued attributes (an If's branches, a Loop's body, ...)."""
    return [g for _, _, g in subgraph_attributes(node)]


def subgraph_label(attribute, index) -> str:
    """A subgraph's name in paths and messages: the attribute's name, ``name[k]`` for a GRAPHS one's."""
    return attribute.name if index is None else f"{attribute.name}[{index}]"


def with_subgraphs(node, fn):
    """``node`` with each graph of its attributes (:func:`subgraph_attributes`) replaced by
    ``fn(graph)``; ``node`` itself where it has none."""
    if not subgraph_attributes(node):
        return node
    attrs = []
    for a in node.attribute:
        v = a.value
        if isinstance(v, ir.Graph):
            a = records.evolve(a, value=fn(v))
        elif isinstance(v, list) and v and isinstance(v[0], ir.Graph):
            a = records.evolve(a, value=[fn(g) if isinstance(g, ir.Graph) else g for g in v])
        attrs.append(a)
    return records.evolve(node, attribute=attrs)


def names_read_inside(graph, outputs: bool = True) -> set:
    """Every name read inside ``graph``: by its nodes, in nested subgraphs, and (``outputs``) as its
    outputs; the names a node holding ``graph`` may read from its scope, counted conservatively
    (a name the subgraph itself defines is included too)."""
    into = {vi.name for vi in graph.output} if outputs else set()
    for inner in graph.node:
        into.update(n for n in inner.input if n)
        for sub in subgraphs_of(inner):
            into |= names_read_inside(sub)
    return into


def schema_defaults(schema) -> dict:
    """``{name: value}`` of every attribute of ``schema`` that has a default (IR value convention)."""
    out = {}
    for name, adef in (getattr(schema, "attributes", None) or {}).items():
        if adef.default_value is not None:
            d = adef.default_value
            out[name] = list(d) if isinstance(d, tuple) else d
    return out


def node_attributes(schema, node: ir.Node) -> dict:
    """``{name: value}``: the schema's defaults overlaid with the node's own attributes."""
    out = schema_defaults(schema)
    for a in node.attribute:
        out[a.name] = a.value
    return out


def call_attributes(schema, fn: ir.Function, node: ir.Node) -> dict:
    """``{name: Attribute}`` a call of ``fn`` at ``node`` binds: the definition's defaults, then
    the function's own attribute defaults (``attribute_proto``), then the call site's."""
    values = {}
    if schema is not None:
        for name, adef in (schema.attributes or {}).items():
            if adef.default_value is not None:
                d = adef.default_value
                values[name] = ir.Attribute(name=name, type=int(adef.type), value=list(d) if isinstance(d, tuple) else d)
    for a in fn.attribute_proto:
        values[a.name] = a
    for a in node.attribute:
        values[a.name] = a
    return values


def substitute(node: ir.Node, values: dict, missing: Optional[set] = None) -> ir.Node:
    """A body node with attribute references replaced (8.4), subgraphs included; inputs named in
    ``missing`` (formal inputs the call leaves unsupplied) become empty names (7.3.3)."""
    needs = bool(missing) and any(n in missing for n in node.input)
    if not needs and not any(a.ref_attr_name or a.type in GRAPH_TYPES for a in node.attribute):
        return node
    attrs_out = []
    for a in node.attribute:
        if a.ref_attr_name:
            src = values.get(a.ref_attr_name)
            if src is None:
                continue
            attrs_out.append(ir.Attribute(name=a.name, type=src.type, value=src.value))
        elif a.type in GRAPH_TYPES and a.value is not None:
            graphs = a.value if isinstance(a.value, list) else [a.value]
            subs = [ir.Graph(node=[substitute(n, values, missing) for n in g.node], name=g.name,
                             initializer=g.initializer, sparse_initializer=g.sparse_initializer, input=g.input,
                             output=g.output, value_info=g.value_info) for g in graphs]
            attrs_out.append(ir.Attribute(name=a.name, type=a.type, value=subs if isinstance(a.value, list) else subs[0]))
        else:
            attrs_out.append(a)
    inputs = ["" if n in missing else n for n in node.input] if needs else node.input
    return ir.Node(input=inputs, output=node.output, name=node.name, op_type=node.op_type, domain=node.domain,
                   overload=node.overload, attribute=attrs_out)
