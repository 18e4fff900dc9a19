"""``onnxkit show MODEL [--format text|json]``: what a model is, at a glance.

IR version, producer, operator set imports, inputs and outputs with their types,
initializers (count and octets; external data files), node count per operator (subgraphs
included), model-local functions and metadata.  ``text`` is a set of rich tables; ``json``
one object with the same content.  External data is not opened.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter

from .. import ir
from ..domains import display_domain
from ..dtypes import ELEMENT_TYPES
from ..functions import subgraphs_of
from .paths import require_model_file


def add_parser(sub):
    p = sub.add_parser("show", help="summarize a model: versions, inputs, outputs, weights, operators",
                       description="summarize a model: versions, inputs and outputs, weights, operators.")
    p.add_argument("model", metavar="MODEL", help="the model file (.onnx)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output form (default: text)")
    return p


def _graphs(graph: ir.Graph):
    yield graph
    for node in graph.node:
        for g in subgraphs_of(node):
            yield from _graphs(g)


def _octets(t: ir.Tensor) -> int:
    et = ELEMENT_TYPES.get(t.data_type)
    if et is None:
        return 0
    if et.tag == 8:
        return sum(len(s) for s in t.string_data)
    return (t.size * et.bits + 7) // 8


def _value(vi: ir.ValueInfo) -> dict:
    return {"name": vi.name, "type": "?" if vi.type is None else str(vi.type)}


def model_summary(model: ir.Model) -> dict:
    """The summary ``onnxkit show`` prints, as a JSON-ready dict."""
    g = model.graph or ir.Graph()
    init_names = {t.name for t in g.initializer}
    graphs = list(_graphs(g))
    ops = Counter()
    for sub in graphs:
        for n in sub.node:
            ops[(f"{n.domain}::" if n.domain else "") + n.op_type] += 1
    for f in model.functions:
        for n in f.node:
            ops[(f"{n.domain}::" if n.domain else "") + n.op_type] += 0  # listed, counted at their call sites
    tensors = [t for sub in graphs for t in sub.initializer]
    external = sorted({e.value for t in tensors if t.is_external for e in t.external_data if e.key == "location"})
    return {
        "ir_version": model.ir_version,
        "producer": " ".join(p for p in (model.producer_name, model.producer_version) if p),
        "domain": model.domain,
        "model_version": model.model_version,
        "graph": g.name,
        "doc_string": model.doc_string,
        "opset_import": {display_domain(o.domain): o.version for o in model.opset_import},
        "inputs": [_value(vi) for vi in g.input if vi.name not in init_names],
        "overridable_initializers": [_value(vi) for vi in g.input if vi.name in init_names],
        "outputs": [_value(vi) for vi in g.output],
        "initializers": {"count": len(tensors), "bytes": sum(_octets(t) for t in tensors),
                         "sparse": sum(len(sub.sparse_initializer) for sub in graphs),
                         "external": sum(1 for t in tensors if t.is_external), "external_files": external},
        "nodes": {"count": sum(len(sub.node) for sub in graphs), "top_level": len(g.node),
                  "subgraphs": len(graphs) - 1, "by_op_type": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))},
        "functions": [f"{f.domain}::{f.name}" + (f":{f.overload}" if f.overload else "") for f in model.functions],
        "metadata": {p.key: p.value for p in model.metadata_props},
    }


def _bytes(n: int) -> str:
    """``'4.6 MiB (4,830,000 B)'``."""
    if n < 1024:
        return f"{n:,} B"
    scaled, unit = float(n), "B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        scaled /= 1024
        if scaled < 1024:
            break
    return f"{scaled:,.1f} {unit} ({n:,} B)"


def _print(s: dict, path: str) -> None:
    from rich.table import Table

    from . import console as make_console

    console = make_console(markup=False)  # names, shapes and doc strings are the model's text
    head = Table(title=os.path.basename(path), show_header=False)
    head.add_column("field", style="bold")
    head.add_column("value")
    head.add_row("IR version", str(s["ir_version"]))
    head.add_row("producer", s["producer"] or "-")
    for key, label in (("domain", "domain"), ("model_version", "model version"), ("doc_string", "doc string")):
        if s[key]:
            head.add_row(label, str(s[key]))
    head.add_row("graph", s["graph"] or "-")
    head.add_row("operator sets", ", ".join(f"{d} {v}" for d, v in s["opset_import"].items()))
    init = s["initializers"]
    head.add_row("initializers", f"{init['count']:,}, {_bytes(init['bytes'])}" +
                 (f", {init['sparse']} sparse" if init["sparse"] else ""))
    if init["external"]:
        head.add_row("external data", f"{init['external']} tensors in {', '.join(init['external_files'])}")
    nodes = s["nodes"]
    head.add_row("nodes", f"{nodes['count']:,}" + (f" ({nodes['top_level']:,} at the top level, "
                                                    f"{nodes['subgraphs']} subgraphs)" if nodes["subgraphs"] else ""))
    if s["functions"]:
        head.add_row("functions", ", ".join(s["functions"]))
    for k, v in s["metadata"].items():
        head.add_row(f"metadata {k}", v)
    console.print(head)
    io = Table(title="inputs and outputs")
    for col in ("", "name", "type"):
        io.add_column(col)
    shown = 8  # overridable initializers of an IR-3 model are many: the JSON form lists them all
    for kind, key in (("input", "inputs"), ("output", "outputs"), ("overridable", "overridable_initializers")):
        for v in s[key][:shown] if key == "overridable_initializers" else s[key]:
            io.add_row(kind, v["name"], v["type"])
    if len(s["overridable_initializers"]) > shown:
        io.add_row("overridable", f"... +{len(s['overridable_initializers']) - shown} more", "(--format json lists all)")
    console.print(io)
    ops = Table(title="operators")
    ops.add_column("op_type")
    ops.add_column("nodes", justify="right")
    for op, n in s["nodes"]["by_op_type"].items():
        ops.add_row(op, str(n))
    console.print(ops)


def run(args) -> int:
    from ..api import load

    require_model_file(args.model)
    summary = model_summary(load(args.model, external_data="never"))
    if args.format == "json":
        json.dump(summary, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print(summary, args.model)
    return 0
