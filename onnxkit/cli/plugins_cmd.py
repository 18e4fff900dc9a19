"""``onnxkit plugins``: every plugin, its distribution and version, what it provides, and faults."""

from __future__ import annotations

import json

from ..registry import display_domain, get_registry


def add_parser(sub):
    p = sub.add_parser("plugins", help="list installed plugins and what each provides")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def _ranges(versions) -> str:
    """[1, 2, 3, 5] -> '1-3, 5'."""
    out, start, prev = [], None, None
    for v in sorted(versions):
        if start is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            out.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = v
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(out)


def describe(reg) -> list[dict]:
    rows = []
    for info in reg.plugins:
        what = reg.provided_by(info.name)
        domains: dict = {}
        for d, v in what["operator_sets"]:
            domains.setdefault(display_domain(d), []).append(v)
        rows.append({
            "plugin": info.name,
            "distribution": info.distribution or "(registered in process)",
            "version": info.version or "-",
            "domains": {d: sorted(vs) for d, vs in domains.items()},
            "backends": what["backends"],
            "kernels": what["kernels"],
            "inference_functions": what["inference"],
            "storages": what["storages"],
            "opaque_types": [f"{display_domain(d)}::{n}" for d, n in what["opaque_types"]],
            "extensions": [f"{display_domain(d)}::{op}-{v}" for d, op, v in what["extensions"]],
        })
    return rows


def run(args) -> int:
    reg = get_registry()
    rows = describe(reg)
    if args.json:
        print(json.dumps({"plugins": rows, "faults": [str(f) for f in reg.faults]}, indent=2))
        return 1 if reg.faults else 0
    for r in rows:
        print(f"{r['distribution']} {r['version']}  (entry point {r['plugin']})")
        for d, vs in r["domains"].items():
            print(f"    domain {d}: operator sets {_ranges(vs)}")
        for b in r["backends"]:
            backend = reg.backends[b]
            print(f"    backend {b}: {backend.description or backend.device}")
        for b, n in sorted(r["kernels"].items()):
            print(f"    kernels for {b}: {n}")
        if r["inference_functions"]:
            print(f"    inference functions: {r['inference_functions']}")
        for s in r["storages"]:
            print(f"    storage: {s}")
        for t in r["opaque_types"]:
            print(f"    opaque type: {t}")
        for e in r["extensions"]:
            print(f"    extension operator: {e} (not part of that domain's standard)")
    for b in sorted(reg.backends):
        print(f"backend {b}: {len(reg.kernels.get(b, {}))} kernels in all")
    for f in reg.faults:
        print(f"FAULT {f}")
    return 1 if reg.faults else 0
