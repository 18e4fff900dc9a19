"""``onnxkit unsupported MODEL [--backend cpu]``: every operator the installed plugins cannot evaluate.

On a backend that declares a fallback (``gpu`` falls back to ``cpu``), the nodes planned on
the fallback are listed separately, one line per operator: ``runs on cpu: <why>``.  They are
not unsupported: the model runs.

Exit status 0 when every operator runs somewhere, 1 otherwise (Clause 4.4: report unambiguously).
"""

from __future__ import annotations

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
        print(f"  {domain or 'ai.onnx':24s} {op:28s} opset {v:4s} {why}")
    return 1
