"""The runtime's layout (docs/architecture.md, "The engine and the onnxruntime surface"): the host
imports no plugin, the engine imports nothing of the onnxruntime-shaped surface, and the session
is the one module that joins them.  Read from the source (ast), function-level imports included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "onnxkit" / "runtime"

#: evaluation: planning, the plans of a session, the run loop, kernels' context, budgets, passes
ENGINE = ("plan", "graph_plan", "visible", "plans", "loop", "kernel", "budget", "size_bounds", "bodies", "fallback", "usedef", "state", "threads",
          "arena", "gc_pause", "defaults", "strings", "policy", "optimizer")
#: onnxruntime's API: session options' spelling, OrtValue, IOBinding, devices, providers, sparse tensors,
#: raw addresses in bindings, LoRA adapters and their files
SURFACE = ("session_ort", "ortvalue", "devices", "providers", "sparse", "feeds", "checked", "feed_table", "torch_values",
           "pointers", "lora", "lora_files", "adapter_format")
#: joins the two
JOIN = ("session",)
#: records both read (SessionOptions and what a session is told; the descriptions a session returns)
SHARED = ("options", "surface_records")


def _imports(path: Path) -> set:
    """Module names ``path`` imports, absolute (``onnxkit.runtime.plan``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(ROOT).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
                found.add(mod)
                found.update(f"{mod}.{a.name}" for a in node.names)
            elif node.module:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _runtime_module(name: str):
    parts = name.split(".")
    if parts[:2] != ["onnxkit", "runtime"] or len(parts) < 3:
        return None
    return parts[2]


def _files(group) -> list:
    out = []
    for name in group:
        p = RUNTIME / name
        out.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p.with_suffix(".py")])
    return out


def test_every_runtime_module_has_its_side():
    named = set(ENGINE + SURFACE + JOIN + SHARED)
    present = {p.stem if p.parent == RUNTIME else p.relative_to(RUNTIME).parts[0]
               for p in RUNTIME.rglob("*.py") if p.name != "__init__.py" or p.parent != RUNTIME}
    assert present - named == set() and named - present == set()


def test_the_engine_imports_nothing_of_the_surface():
    bad = []
    for path in _files(ENGINE):
        for name in _imports(path):
            mod = _runtime_module(name)
            if mod in SURFACE or mod in JOIN:
                bad.append((path.relative_to(ROOT).as_posix(), name))
    assert bad == []


def test_the_surface_imports_the_engine_only_through_the_session_or_its_public_names():
    """The surface modules reach the engine through a session (its public methods), never its
    planner, loop or budgets."""
    bad = []
    for path in _files(SURFACE):
        for name in _imports(path):
            mod = _runtime_module(name)
            if mod in ("plan", "plans", "loop", "budget", "bodies", "fallback", "usedef"):
                bad.append((path.relative_to(ROOT).as_posix(), name))
    assert bad == []


def test_the_host_imports_no_plugin():
    bad = []
    for path in sorted((ROOT / "onnxkit").rglob("*.py")):
        for name in _imports(path):
            if name.split(".")[0].startswith("onnxkit_"):
                bad.append((path.relative_to(ROOT).as_posix(), name))
    assert bad == []
