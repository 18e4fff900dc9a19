"""``onnxkit unsupported MODEL [--backend cpu]``: every operator the installed plugins cannot evaluate.

On a backend that declares a fallback (``gpu`` falls back to ``cpu``), the nodes planned on
the fallback are listed separately, one line per operator: ``runs on cpu: <why>``.  They are
not unsupported: the model runs.  Operators bound to an *extension* another plugin adds to a
domain it does not own (ai.onnx SimplifiedLayerNormalization from onnxkit-microsoft) are listed
too, with the distribution providing them: they run, but are not part of that domain's standard.

Exit status 0 when every operator runs somewhere, 1 otherwise (Clause 4.4: report unambiguously).
"""

from __future__ import annotations

from ..domains import display_domain
from ..errors import UnsupportedOperatorError


def add_parser(sub):
    p = sub.add_parser("unsupported", help="list the operators of a model this installation cannot evaluate "
                                           "(and, on gpu, those that run on the cpu fallback)")
    p.add_argument("model", metavar="MODEL", help="the model file (.onnx)")
    p.add_argument("--backend", default="cpu", help="the backend to plan for (default: cpu)")
    return p


def _plan(model, backend: str, registry):
    from ..api import load
    from ..registry import get_registry
    from ..runtime.plan import Planner

    if not hasattr(model, "graph"):
        model = load(model, external_data="never")
    planner = Planner(model, registry or get_registry(), backend)
    try:
        planner.compile_model()
    except UnsupportedOperatorError as exc:
        return exc.operators, planner.fallbacks
    return [], planner.fallbacks


def unsupported_operators(model, backend: str = "cpu", registry=None) -> list:
    """``[(domain, op_type, opset_version, reason)]`` for every operator that cannot be evaluated."""
    return _plan(model, backend, registry)[0]


def fallback_operators(model, backend: str = "cpu", registry=None) -> list:
    """``[(domain, op_type, since_version, runs_on, why, nodes)]``: one row per operator planned on
    ``backend``'s fallback (``nodes``: how many of its nodes), in the order first planned."""
    return _group(_plan(model, backend, registry)[1])


def extension_operators(model, registry=None) -> list:
    """``[(domain, op_type, since_version, distribution, nodes)]``: one row per operator of ``model``
    (its graphs, subgraphs and functions) bound to an extension definition, in the order first met."""
    from ..api import load
    from ..functions import subgraphs_of
    from ..domains import opset_map
    from ..registry import get_registry, normalize_domain

    reg = registry or get_registry()
    if not reg.extensions:
        return []
    if not hasattr(model, "graph"):
        model = load(model, external_data="never")
    rows: dict = {}

    def visit(nodes, opsets):
        for node in nodes:
            d = normalize_domain(node.domain)
            if (d, node.op_type) in reg.extensions and d in opsets:
                schema = reg.bind(d, node.op_type, opsets[d])
                if reg.is_extension(schema):
                    key = (d, node.op_type, schema.since_version, reg.extension_provider(schema))
                    rows[key] = rows.get(key, 0) + 1
            for g in subgraphs_of(node):
                visit(g.node, opsets)

    top = opset_map(model.opset_import)
    visit(model.graph.node, top)
    for fn in getattr(model, "functions", None) or ():
        visit(fn.node, opset_map(fn.opset_import, top))
    return [(*key, n) for key, n in rows.items()]


def _group(fallbacks) -> list:
    rows: dict = {}
    for f in fallbacks:
        key = (f.domain, f.op_type, f.version, f.runs_on)
        if key in rows:
            rows[key][1] += 1
        else:
            rows[key] = [f.why, 1]
    return [(*key, why, n) for key, (why, n) in rows.items()]


def run(args) -> int:
    ops, fallbacks = _plan(args.model, args.backend, None)
    rows = _group(fallbacks)
    extensions = extension_operators(args.model)
    if extensions:
        print(f"{len(extensions)} operator(s) bound to an extension (not part of their domain's standard):")
        for domain, op, version, dist, n in extensions:
            nodes = f" ({n} nodes)" if n > 1 else ""
            print(f"  {display_domain(domain):24s} {op + '-' + str(version):28s} provided by {dist}{nodes}")
    if rows:
        print(f"{len(rows)} operator(s) planned on a fallback of {args.backend}:")
        for domain, op, version, runs_on, why, n in rows:
            nodes = f" ({n} nodes)" if n > 1 else ""
            print(f"  {domain:24s} {op + '-' + str(version):28s} runs on {runs_on}: {why}{nodes}")
    if not ops:
        where = " (some on its fallback)" if rows else ""
        print(f"every operator of {args.model} is supported on {args.backend}{where}")
        return 0
    print(f"{len(ops)} unsupported operator(s) on {args.backend}:")
    for domain, op, version, why in ops:
        v = "-" if version is None else str(version)
        print(f"  {display_domain(domain):24s} {op:28s} opset {v:4s} {why}")
    return 1
