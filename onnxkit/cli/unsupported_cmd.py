"""``onnxkit unsupported MODEL [--backend cpu]``: every operator the installed plugins cannot evaluate.

Exit status 0 when there is none, 1 otherwise (Clause 4.4: report unambiguously).
"""

from __future__ import annotations

from ..errors import UnsupportedOperatorError


def add_parser(sub):
    p = sub.add_parser("unsupported", help="list the operators of a model this installation cannot evaluate")
    p.add_argument("model", metavar="MODEL", help="the model file (.onnx)")
    p.add_argument("--backend", default="cpu", help="the backend to plan for (default: cpu)")
    return p


def unsupported_operators(model, backend: str = "cpu", registry=None) -> list:
    """``[(domain, op_type, opset_version, reason)]`` for every operator that cannot be evaluated."""
    from ..api import load
    from ..registry import get_registry
    from ..runtime.plan import Planner

    if not hasattr(model, "graph"):
        model = load(model, external_data="never")
    planner = Planner(model, registry or get_registry(), backend)
    try:
        planner.compile_model()
    except UnsupportedOperatorError as exc:
        return exc.operators
    return []


def run(args) -> int:
    ops = unsupported_operators(args.model, args.backend)
    if not ops:
        print(f"every operator of {args.model} is supported on {args.backend}")
        return 0
    print(f"{len(ops)} unsupported operator(s) on {args.backend}:")
    for domain, op, version, why in ops:
        v = "-" if version is None else str(version)
        print(f"  {domain or 'ai.onnx':24s} {op:28s} opset {v:4s} {why}")
    return 1
