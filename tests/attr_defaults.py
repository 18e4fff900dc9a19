"""Which ``ctx.attr("name", literal)`` calls of the kernels restate their schema's default
(issue 42 item 6.5; tests/structure/test_one_way.py asserts on it).

A kernel's ``ctx.attributes`` holds the node's attributes over the schema's defaults, so a literal
default in ``ctx.attr(name, literal)`` is read only where the definition gives the attribute no
default (an optional attribute without one, or a version without the attribute).  Per call site
the definitions it can serve are found statically and by importing the kernel tables:

* every kernel table (a module-level dict keyed ``(domain, op_type, since_version)``) of the
  plugins' ``kernels`` and ``overrides`` packages maps a definition to its factory, whose code
  object names the ``def`` it was made from;
* a call site serves the definitions of every ``def`` around it (a factory's closures serve the
  factory's), and of every ``def`` calling that one with ``ctx`` among its arguments, found by
  name (the same module's definition first, else every plugin definition of that name).

:func:`classify` sorts each site: ``restates`` (every definition has the attribute with that very
default: the literal is dead), ``differs`` (some definition's default is another value),
``needed`` (some definition has the attribute without a default, or has no such attribute: the
literal is read there), ``unbound`` (no definition found for the site).
"""

from __future__ import annotations

import ast
import functools
import importlib
import math
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("plugins/*/onnxkit_*/kernels", "plugins/*/onnxkit_*/overrides")
ATTR_METHODS = ("attr", "attr_str")


def source_files() -> list:
    out = []
    for pattern in PACKAGES:
        for pkg in sorted(ROOT.glob(pattern)):
            out.extend(sorted(pkg.rglob("*.py")))
    return out


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("").parts  # plugins/<dir>/<package>/...
    return ".".join(rel[2:])


def literal(node):
    """The Python value of a literal expression (numbers, strings, lists / tuples of them, a
    negative number), else raise ValueError."""
    return ast.literal_eval(node)


class Site:
    """One ``ctx.attr(name, literal)`` call."""

    def __init__(self, path: str, line: int, method: str, name: str, value, defs: list):
        self.path, self.line, self.method, self.name, self.value, self.defs = path, line, method, name, value, defs
        self.keys: set = set()
        self.kind = ""
        self.why = ""

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def __repr__(self) -> str:
        return f"{self.where} ctx.{self.method}({self.name!r}, {self.value!r}) {self.kind}: {self.why}"


def _scan(path: Path):
    """``(sites, defs, calls, lexical)`` of one file: the attr sites (each with the ids of the defs
    around it, innermost last), ``{def id: (name, node)}``, ``[(caller def id, callee name)]`` for
    the calls passing ``ctx`` (of a function defined or imported here, or an attribute of
    ``base``: ``(caller, name, base)``, base None for a bare name), ``[(outer def id, inner def id)]``."""
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    sites, defs, calls, lexical = [], {}, [], []

    def visit(node, stack):
        for child in ast.iter_child_nodes(node):
            inner = stack
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                key = (rel, child.lineno)
                name = getattr(child, "name", "<lambda>")
                if name == "__init__" and isinstance(node, ast.ClassDef):
                    name = node.name  # ``Setup(ctx, ...)`` calls it
                defs[key] = (name, child)
                if stack:
                    lexical.append((stack[-1], key))
                inner = stack + [key]
            if isinstance(child, ast.Call):
                f = child.func
                if isinstance(f, ast.Attribute) and f.attr in ATTR_METHODS and isinstance(f.value, ast.Name) \
                        and f.value.id == "ctx" and len(child.args) >= 2 and isinstance(child.args[0], ast.Constant):
                    try:
                        value = literal(child.args[1])
                    except ValueError:
                        value = NotImplemented
                    if value is not NotImplemented:
                        sites.append(Site(rel, child.lineno, f.attr, child.args[0].value, value, list(stack)))
                passes_ctx = any(isinstance(a, ast.Name) and a.id == "ctx" for a in child.args) or any(
                    isinstance(k.value, ast.Name) and k.value.id == "ctx" for k in child.keywords)
                if passes_ctx and stack:
                    if isinstance(f, ast.Name):
                        calls.append((stack[-1], f.id, None))
                    elif isinstance(f, ast.Attribute):
                        base = f.value.id if isinstance(f.value, ast.Name) else ""
                        calls.append((stack[-1], f.attr, base))
            visit(child, inner)

    visit(tree, [])
    imported = {(al.asname or al.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for al in n.names}
    # a bare name neither defined here nor imported is a parameter or a local: no edge
    local = {name for name, _ in defs.values()}
    calls = [(caller, name, base) for caller, name, base in calls
             if base is not None or name in local or name in imported]
    return sites, defs, calls, lexical


def _unwrap(fn):
    seen = 0
    while seen < 10:
        seen += 1
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        else:
            break
    return getattr(fn, "__code__", None)


def _tables(files) -> dict:
    """``{(file, def line): {(domain, op_type, since_version)}}`` from every kernel table."""
    out = defaultdict(set)
    for path in files:
        mod = importlib.import_module(module_name(path))
        for value in list(vars(mod).values()):
            if not isinstance(value, dict) or not value:
                continue
            k = next(iter(value))
            if not (isinstance(k, tuple) and len(k) == 3 and isinstance(k[1], str) and isinstance(k[2], int)):
                continue
            for key, factory in value.items():
                code = _unwrap(factory)
                if code is None:
                    continue
                try:
                    rel = Path(code.co_filename).resolve().relative_to(ROOT).as_posix()
                except ValueError:
                    continue
                out[(rel, code.co_firstlineno)].add(key)
    return out


@functools.lru_cache(maxsize=1)
def sites() -> tuple:
    """Every site, its ``keys`` (the definitions it serves) filled in."""
    files = source_files()
    all_sites, defs, calls, lexical = [], {}, [], []
    for f in files:
        s, d, c, lx = _scan(f)
        all_sites += s
        defs.update(d)
        calls += c
        lexical += lx
    registered = _tables(files)
    keys = defaultdict(set)
    by_name = defaultdict(list)
    for key, (name, node) in defs.items():
        by_name[name].append(key)
        keys[key] |= registered.get(key, set())
        # a decorated def's code object may start at its first decorator
        for dec in getattr(node, "decorator_list", ()):
            keys[key] |= registered.get((key[0], dec.lineno), set())
    edges = []  # (from, to): keys flow from -> to
    for outer, inner in lexical:
        edges.append((outer, inner))
    modules = {p.relative_to(ROOT).as_posix(): importlib.import_module(module_name(p)) for p in files}
    for caller, callee, base in calls:
        candidates = by_name.get(callee, ())
        if base:  # ``portable.normalizer(ctx)``: the definitions of the module ``portable`` names, if it is one
            target = getattr(modules[caller[0]], base, None)
            path = getattr(target, "__file__", None)
            if path is not None:
                try:
                    rel = Path(path).resolve().relative_to(ROOT).as_posix()
                except ValueError:
                    rel = None
                candidates = [k for k in candidates if k[0] == rel]
        else:
            candidates = [k for k in candidates if k[0] == caller[0]] or candidates
        for target in candidates:
            edges.append((caller, target))
    changed = True
    while changed:
        changed = False
        for a, b in edges:
            extra = keys[a] - keys[b]
            if extra:
                keys[b] |= extra
                changed = True
    for s in all_sites:
        for d in s.defs:
            s.keys |= keys[d]
    return tuple(all_sites)


def _same(value, default) -> bool:
    """True if the literal ``value`` is the schema's ``default`` (strings decoded, floats as the
    float32 the schema stores, bit for bit: -0.0 is not 0.0; any NaN is NaN)."""
    if isinstance(default, bytes):
        default = default.decode("utf-8", "surrogateescape")
    if isinstance(default, (tuple, list)) or isinstance(value, (tuple, list)):
        return isinstance(default, (tuple, list)) and isinstance(value, (tuple, list)) and len(default) == len(value) \
            and all(_same(v, d) for v, d in zip(value, default))
    if isinstance(value, str) or isinstance(default, str):
        return isinstance(value, str) and isinstance(default, str) and value == default
    if isinstance(default, float) or isinstance(value, float):
        import numpy as np

        return np.float32(value).tobytes() == np.float32(default).tobytes() or (math.isnan(value) and math.isnan(default))
    return value == default


def classify(registry=None, found=None) -> list:
    """Every site (of ``found``, default :func:`sites`) with ``kind`` and ``why`` set (see the
    module docstring)."""
    if registry is None:
        from onnxkit.registry import get_registry

        registry = get_registry()
    out = []
    for s in sites() if found is None else found:
        if not s.keys:
            s.kind, s.why = "unbound", "no kernel table entry reaches it"
            out.append(s)
            continue
        absent, nodefault, differs, same = [], [], [], []
        for key in sorted(s.keys):
            schema = registry.bind(key[0], key[1], key[2])
            label = f"{key[0] or 'ai.onnx'}::{key[1]}-{key[2]}"
            if schema is None:
                absent.append(label + " (no schema)")
                continue
            adef = (schema.attributes or {}).get(s.name)
            if adef is None:
                absent.append(label)
            elif adef.default_value is None:
                nodefault.append(label)
            elif _same(s.value, adef.default_value):
                same.append(label)
            else:
                differs.append(f"{label} default {adef.default_value!r}")
        if differs:
            s.kind, s.why = "differs", "; ".join(differs)
        elif absent or nodefault:
            s.kind = "needed"
            s.why = "; ".join(filter(None, [f"no attribute in {', '.join(absent)}" if absent else "",
                                            f"no default in {', '.join(nodefault)}" if nodefault else ""]))
        else:
            s.kind, s.why = "restates", f"every definition's default ({len(same)})"
        out.append(s)
    return out
