"""``onnxkit opsets [--domain D] [--version V]``: the operators of operator sets (Clause 5.3.2, 14.3).

One line per operator of each selected operator set, tab-separated::

    DOMAIN  OP_TYPE  SINCE_VERSION  deprecated|-

``SINCE_VERSION`` is the version of the definition the operator binds to in that set (the
greatest ``since_version <= V``).  Without ``--version`` the latest version of each
selected domain is shown; ``--all`` shows every version.  ``--domain`` accepts 'ai.onnx'
or '' for the default domain.  Exit status 2 when the domain or version is unknown.
"""

from __future__ import annotations

import sys

from ..registry import display_domain, get_registry, normalize_domain


def add_parser(subparsers):
    p = subparsers.add_parser("opsets", help="list the operators of the known operator sets")
    p.add_argument("--domain", "-d", default=None, help="domain ('ai.onnx' or '' for the default domain); default: all")
    p.add_argument("--version", "-v", type=int, default=None, help="operator set version; default: the latest of each domain")
    p.add_argument("--all", action="store_true", help="every version of the selected domain(s)")
    p.add_argument("--new", action="store_true", help="only definitions introduced at the selected version")
    return p


def run(args, registry=None, out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    reg = registry if registry is not None else get_registry()
    for f in reg.faults:
        if f.hook in ("onnxkit_operator_sets", "import", "register"):
            print(f"warning: {f}", file=err)
    domains = reg.domains()
    if args.domain is not None:
        d = normalize_domain(args.domain)
        if d not in domains:
            known = ", ".join(display_domain(k) for k in domains) or "none"
            print(f"error: no operator set of domain {display_domain(d)!r} is known (known: {known})", file=err)
            return 2
        domains = {d: domains[d]}
    selected = []
    for d, versions in domains.items():
        if args.version is not None:
            if args.version in versions:
                selected.append((d, args.version))
            elif args.domain is not None:
                print(f"error: {display_domain(d)} has no operator set version {args.version} "
                      f"(versions {versions[0]}..{versions[-1]})", file=err)
                return 2
        elif args.all:
            selected.extend((d, v) for v in versions)
        else:
            selected.append((d, versions[-1]))
    if not selected:
        print(f"error: no domain has operator set version {args.version}", file=err)
        return 2
    for d, v in selected:
        opset = reg.operator_set(d, v)
        for schema in opset:
            if args.new and schema.since_version != v:
                continue
            flag = "deprecated" if schema.deprecated else "-"
            print(f"{display_domain(d)}\t{schema.name}\t{schema.since_version}\t{flag}", file=out)
    return 0
