"""``onnxkit infer MODEL [-o OUT] [--strict] [--all]``: shape and type inference (Clause 9).

Prints one row per value of every graph (graph path, value, where it comes from, type) and
then the diagnostics.  ``-o OUT`` writes the model with every inferred intermediate in
``value_info`` (declarations inference contradicts are kept as written).  Exit status 1 when
inference found an error (a type contradiction, an inference error), and then OUT is not
written; with ``--strict`` a contradicted declared shape (a warning) counts as well.
"""

from __future__ import annotations

import sys


def add_parser(sub):
    p = sub.add_parser("infer", help="infer the type and shape of every value of a model (Clause 9)")
    p.add_argument("model", metavar="MODEL", help="the model file (.onnx)")
    p.add_argument("-o", "--output", metavar="OUT", help="write the model with inferred value_info to OUT")
    p.add_argument("--strict", action="store_true",
                   help="count warnings that break a SHALL (a contradicted declared shape) as failures")
    p.add_argument("--quiet", "-q", action="store_true", help="print the diagnostics only")
    return p


def _kind(graph_inputs, graph_outputs, inits, name):
    if name in graph_inputs:
        return "input"
    if name in graph_outputs:
        return "output"
    if name in inits:
        return "initializer"
    return "value"


def _graphs(graph, path=""):
    """(path, graph) of a graph and every subgraph, with the engine's path convention."""
    from ..functions import subgraph_attributes, subgraph_label
    from ..inference.engine import Engine

    yield path, graph
    for idx, node in enumerate(graph.node):
        for a, k, g in subgraph_attributes(node):
            seg = f"{Engine.node_label(node, idx)}.{subgraph_label(a, k)}"
            yield from _graphs(g, f"{path}/{seg}" if path else seg)


def run(args) -> int:
    from ..api import load, save
    from ..checker.codes import refuses
    from ..inference import infer_model, infer_shapes

    model = load(args.model)
    result = infer_model(model)
    if not args.quiet and model.graph is not None:
        rows = []
        for path, g in _graphs(model.graph):
            types = result.graph(path)
            ins = {vi.name for vi in g.input}
            outs = {vi.name for vi in g.output}
            inits = {t.name for t in g.initializer}
            for name, t in types.items():
                rows.append((path or "main", name, _kind(ins, outs, inits, name), "?" if t is None else str(t)))
        widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(("GRAPH", "VALUE", "KIND", "TYPE"))]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        print(fmt.format("GRAPH", "VALUE", "KIND", "TYPE").rstrip())
        for r in rows:
            print(fmt.format(*r).rstrip())
        known = sum(1 for r in rows if r[3] != "?")
        print(f"\n{len(rows)} values, {known} with a known type")
    for d in result.diagnostics:
        print(d, file=sys.stderr if d.severity == "error" else sys.stdout)
    failures = [d for d in result.diagnostics if refuses(d, args.strict)]
    if failures:
        if args.output:
            print(f"onnxkit infer: {len(failures)} failure(s); {args.output} not written", file=sys.stderr)
        return 1
    if args.output:
        save(infer_shapes(model), args.output)
    return 0
