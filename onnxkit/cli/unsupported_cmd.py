"""``onnxkit unsupported MODEL [--backend NAME ...] [--format text|json] [--strict]``: every
problem of a model, without running it (Clause 4.4: a consumer reports unambiguously which
operators it does not support).

What is listed, in this order:

* operators bound to an *extension* another plugin adds to a domain it does not own (ai.onnx
  SimplifiedLayerNormalization from onnxkit-microsoft), with the distribution providing them:
  they run, but are not part of that domain's standard;
* per backend (``--backend``, repeatable or comma-separated, ``all`` for every installed one;
  default ``cpu``): the nodes planned on the backend's fallback (``gpu`` falls back to ``cpu``),
  one line per operator, ``runs on cpu: <why>`` (they run); then every operator the backend
  cannot evaluate (no kernel for its definition, an unknown domain or version...), or that
  every operator is supported there;
* every finding of the checker (``onnxkit check``: unknown operators, domains and versions,
  types an operator does not admit, attribute forms, and the warnings of what onnxruntime
  accepts and onnxkit reads as it does: a domain imported implicitly, Constant's sparse value,
  a reduction beyond its definition, nodes out of order; docs/diagnostics.md), bar
  ``extension-operator`` (listed above);
* external data files (Clause 13) that are missing or shorter than a reference needs, one
  problem per file, naming the tensors that reference it.

No external data is read: the model is loaded without resolving it (Clause 15.5), the checker
checks the references, each file is only looked up (its size), and the backends are planned
with the top-level graph's external initializers taken as inputs of their declared type (what
a kernel may not know at planning it reads at run time).  An external tensor elsewhere (a
subgraph's initializer, a Constant) is read lazily if planning needs it; a failure to read it
is that backend's problem (``planning stopped``), not a crash.

``--format json`` prints one object: ``{"model", "ok", "extensions": [...], "backends":
{name: {"unsupported": [...], "fallbacks": [...], "stopped"}}, "checker": {"errors",
"warnings", "diagnostics": [...]} (as ``onnxkit check --format json``), "external_data":
[{"location", "tensors", "problem"}]}``.

Exit status: 0 the model runs on every backend listed (warnings, fallbacks and extensions
allowed; under ``--strict`` only advisory warnings, as ``InferenceSession(strict=True)``); 1 it
does not (an unsupported operator on a backend listed, planning stopped, a checker error or
under ``--strict`` a violation, a missing or short external data file); 2 a usage or I/O
problem (an unknown backend, no such file, octets that are not an ONNX model).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional, Sequence

from .. import ir, records
from ..domains import display_domain
from ..errors import OnnxkitError, UnsupportedOperatorError


def add_parser(sub):
    p = sub.add_parser("unsupported", help="list every problem of a model without running it: the operators this "
                                           "installation cannot evaluate per backend (and, on gpu, those that run "
                                           "on the cpu fallback), the checker's findings, missing external data",
                       description="List every problem of a model without running it: the operators this installation "
                                   "cannot evaluate per backend (and, on gpu, those that run on the cpu fallback), "
                                   "the checker's findings, missing external data; no external data is read.  Exit "
                                   "status: 0 the model runs on every backend listed (warnings, fallbacks and "
                                   "extensions allowed; under --strict only advisory warnings); 1 it does not (an "
                                   "unsupported operator, planning stopped, a checker error or under --strict a "
                                   "violation, a missing or short external data file); 2 a usage or I/O problem.")
    p.add_argument("model", metavar="MODEL", help="the model file (.onnx)")
    p.add_argument("--backend", action="append", default=None,
                   help="a backend to plan for (repeatable, comma-separated, or 'all'; default: cpu)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output form (default: text)")
    p.add_argument("--strict", action="store_true",
                   help="count warnings that break a SHALL as problems (exit 1), as InferenceSession(strict=True) "
                        "does")
    return p


# -- what the planner says ---------------------------------------------------------------------------

def planning_view(model):
    """``model`` with the top-level graph's external initializers (data_location EXTERNAL) taken as
    graph inputs of their declared type: planning it reads no external data.  ``model`` itself
    where it has none."""
    g = model.graph
    external = [t for t in g.initializer if t.data_location == 1]
    if not external:
        return model
    listed = {vi.name for vi in g.input}
    inputs = list(g.input) + [ir.ValueInfo(name=t.name, type=ir.tensor_type(t.data_type, [int(d) for d in t.dims]))
                              for t in external if t.name not in listed]
    kept = [t for t in g.initializer if t.data_location != 1]
    return records.evolve(model, graph=records.evolve(g, input=inputs, initializer=kept))


def _loaded(model):
    """``(model, owned)``: ``model`` loaded without resolving external data where it is a path or
    octets (``owned``: this module made it, so it may attach a reading policy to its tensors)."""
    from ..api import load

    if hasattr(model, "graph"):
        return model, False
    return load(model, external_data="never"), True


def _plan(model, backend: str, registry, owned: bool = False):
    """``(unsupported, fallbacks, stopped)`` of planning ``model`` (as a session reads it) on ``backend``."""
    from ..checker.readings import read_as_onnxruntime
    from ..external import ExternalDataOptions, attach
    from ..registry import get_registry
    from ..runtime.plan import Planner

    registry = registry or get_registry()
    if not hasattr(model, "graph"):
        model, owned = _loaded(model)
    if model.graph is None:
        return [], [], "the model has no graph (Clause 5.3.1)"
    planner = None
    try:
        view = planning_view(read_as_onnxruntime(model, registry))
        if owned and model.base_dir is not None:  # what planning still reads (a subgraph's tensor): lazily
            attach(view, model.base_dir, ExternalDataOptions(mode="lazy"))
        planner = Planner(view, registry, backend)
        planner.compile_model()
    except UnsupportedOperatorError as exc:
        return exc.operators, planner.fallbacks if planner is not None else [], None
    except OnnxkitError as exc:
        if backend not in registry.backends:
            raise
        return [], [], str(exc)
    return [], planner.fallbacks, None


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
    from ..functions import subgraphs_of
    from ..domains import opset_map
    from ..registry import get_registry, normalize_domain

    reg = registry or get_registry()
    if not reg.extensions:
        return []
    model = _loaded(model)[0]
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
    if model.graph is not None:
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


# -- external data ----------------------------------------------------------------------------------

def external_files(model) -> list:
    """``[(location, [tensor names], problem)]``: each external data file ``model`` references that
    is missing, not a regular file, or shorter than a reference needs, once per file (the file is
    looked up, never read).  References the checker refuses (Clause 13.2) are left to it."""
    from ..external import iter_tensors
    from ..external_read import declared_nbytes, parse_reference
    from ..storage import ExternalRefError

    base = model.base_dir
    files: dict = {}
    for t in iter_tensors(model):
        if t.data_location != 1:
            continue
        try:
            ref = parse_reference(t, allow_outside=bool(getattr(t.external_options, "allow_outside", False)))
            need = (ref.offset or 0) + (ref.length if ref.length is not None else declared_nbytes(t))
        except (ExternalRefError, OnnxkitError):
            continue  # the checker reports the reference itself
        entry = files.setdefault(ref.location, [[], 0])
        entry[0].append(t.name)
        entry[1] = max(entry[1], need)
    out = []
    for location, (names, need) in files.items():
        if base is None:
            out.append((location, names, "the model was not read from a file, so the location resolves nowhere "
                                         "(Clause 13.2)"))
            continue
        path = os.path.join(base, location)
        if not os.path.exists(path):
            problem = f"no such file in {base} (Clause 13.2)"
        elif not os.path.isfile(path):
            problem = "not a regular file (Clause 13.2)"
        elif os.path.getsize(path) < need:
            problem = f"{os.path.getsize(path)} octets, shorter than the {need} its references need (Clause 13.2)"
        else:
            continue
        out.append((location, names, problem))
    return out


# -- the report -------------------------------------------------------------------------------------

def backends_named(names: Optional[Sequence[str]], registry) -> list:
    """The backends ``--backend`` names (comma-separated, repeatable, ``all``), in order; an
    unknown one is an :class:`~onnxkit.errors.OnnxkitError` naming the installed ones."""
    from ..runtime.options import missing_backend_message

    wanted: list = []
    for item in names or ["cpu"]:
        for name in (n.strip() for n in item.split(",")):
            if not name:
                continue
            for b in (sorted(registry.backends) if name == "all" else [name]):
                if b not in registry.backends:
                    raise OnnxkitError(missing_backend_message(b, registry.backends))
                if b not in wanted:
                    wanted.append(b)
    return wanted


def problems(model, backends: Sequence[str] = ("cpu",), registry=None, strict: bool = False) -> dict:
    """Every problem of ``model`` (a path or an IR model), as ``--format json`` prints it (the
    module docstring), ``"ok"`` the exit-0 verdict."""
    from ..checker import check_model
    from ..checker.codes import refuses
    from ..registry import get_registry

    registry = registry or get_registry()
    model, owned = _loaded(model)
    report = check_model(model, registry=registry)
    out = {"extensions": [dict(zip(("domain", "op_type", "since_version", "distribution", "nodes"), row))
                          for row in extension_operators(model, registry)], "backends": {}}
    ok = not any(refuses(d, strict) for d in report.diagnostics)
    for b in backends:
        unsupported, fallbacks, stopped = _plan(model, b, registry, owned)
        out["backends"][b] = {
            "unsupported": [dict(zip(("domain", "op_type", "opset", "reason"), row)) for row in unsupported],
            "fallbacks": [dict(zip(("domain", "op_type", "since_version", "runs_on", "why", "nodes"), row))
                          for row in _group(fallbacks)],
            "stopped": stopped}
        ok = ok and not unsupported and stopped is None
    checker = report.to_json()
    checker["diagnostics"] = [d for d, kept in zip(checker["diagnostics"], report.diagnostics)
                              if kept.code != "extension-operator"]
    checker["warnings"] = sum(d["severity"] == "warning" for d in checker["diagnostics"])
    out["checker"] = checker
    out["external_data"] = [{"location": loc, "tensors": names, "problem": why}
                            for loc, names, why in external_files(model)]
    out["ok"] = ok and not out["external_data"]
    return out


def _print(found: dict, path: str, out) -> None:
    ext = found["extensions"]
    if ext:
        print(f"{len(ext)} operator(s) bound to an extension (not part of their domain's standard):", file=out)
        for r in ext:
            nodes = f" ({r['nodes']} nodes)" if r["nodes"] > 1 else ""
            print(f"  {display_domain(r['domain']):24s} {r['op_type'] + '-' + str(r['since_version']):28s} "
                  f"provided by {r['distribution']}{nodes}", file=out)
    for b, res in found["backends"].items():
        rows = res["fallbacks"]
        if rows:
            print(f"{len(rows)} operator(s) planned on a fallback of {b}:", file=out)
            for r in rows:
                nodes = f" ({r['nodes']} nodes)" if r["nodes"] > 1 else ""
                print(f"  {r['domain']:24s} {r['op_type'] + '-' + str(r['since_version']):28s} runs on "
                      f"{r['runs_on']}: {r['why']}{nodes}", file=out)
        if res["stopped"]:
            print(f"planning on {b} stopped: {res['stopped']}", file=out)
        elif not res["unsupported"]:
            where = " (some on its fallback)" if rows else ""
            print(f"every operator of {path} is supported on {b}{where}", file=out)
        else:
            print(f"{len(res['unsupported'])} unsupported operator(s) on {b}:", file=out)
            for r in res["unsupported"]:
                v = "-" if r["opset"] is None else str(r["opset"])
                print(f"  {display_domain(r['domain']):24s} {r['op_type']:28s} opset {v:4s} {r['reason']}", file=out)
    shown = found["checker"]["diagnostics"]
    if shown:
        print(f"{len(shown)} finding(s) of the checker (docs/diagnostics.md):", file=out)
        for d in shown:
            where = f"{d['location']}: " if d["location"] else ""
            print(f"  {d['severity']}: {where}{d['message']} [{d['code']}, Clause {d['clause']}]", file=out)
    for r in found["external_data"]:
        names = ", ".join(repr(n) for n in r["tensors"][:5]) + (" ..." if len(r["tensors"]) > 5 else "")
        print(f"external data file {r['location']!r} ({len(r['tensors'])} tensor(s): {names}): {r['problem']}",
              file=out)


def run(args, out=None) -> int:
    from ..registry import get_registry
    from .paths import why_not_a_model_file

    out = out or sys.stdout
    path = args.model
    why = why_not_a_model_file(path)
    if why is not None:
        print(f"onnxkit unsupported: error: {path} {why}", file=sys.stderr)
        return 2
    registry = get_registry()
    backends = backends_named(args.backend, registry)
    found = problems(path, backends, registry, strict=args.strict)
    if args.format == "json":
        doc = {"model": str(path), **found}
        json.dump(doc, out, indent=2, default=str)
        out.write("\n")
    else:
        _print(found, path, out)
    return 0 if found["ok"] else 1
