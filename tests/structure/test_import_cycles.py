"""No import cycle in onnxkit/ (issue 33 item 4).

The graph is built from the source (ast): every ``import`` / ``from ... import`` of an onnxkit
module, at module level *and* inside functions (a function-level import that closes a cycle
is a cycle hidden, not removed), except those under ``if TYPE_CHECKING:`` (never executed).
An edge goes to the module imported (``from .x import name`` -> ``x``, or ``x.name`` where that
is a module) and to each package above it that is not above the importer: importing
``onnxkit.ir.tensor`` from ``onnxkit.external`` runs ``onnxkit/ir/__init__.py`` first.

The cycles this test found, and how each went (not by moving an import into a function):
``Model.__reduce__`` -> ``api``: the API registers the pickling with ``copyreg``;
``Tensor.numpy`` -> ``tensor_data`` -> ``ir.tensor`` and -> ``external`` -> ``ir.*``: the codec
reads tensors through their fields and external contents through ``external_read`` (the
model-free half of ``external``), the constructors moved to ``ir.tensor``; ``wire.adapters`` ->
``writer`` -> ``reader`` -> ``adapters``: the writer registers its field encoder;
``runtime.feeds`` <-> ``runtime.ortvalue``: the torch conversions are ``runtime.torch_values``;
``runtime.devices`` / ``providers`` -> ``runtime/__init__``: ``get_available_providers`` and
``get_device`` live in ``runtime.providers``.
"""

from __future__ import annotations

import ast
import copyreg
import pickle
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _modules(root: Path, package: str) -> dict:
    """``{dotted name: (path, is_package)}`` for every .py file under ``root/package``."""
    out = {}
    for f in sorted((root / package).rglob("*.py")):
        parts = list(f.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (f, is_package)
    return out


def _type_checking_nodes(tree) -> set:
    """The ids of the nodes under ``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:``."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else (t.attr if isinstance(t, ast.Attribute) else None)
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    skip.update(id(n) for n in ast.walk(stmt))
    return skip


def import_graph(root: Path, package: str) -> dict:
    """``{module: {imported module: line}}`` over the modules of ``package`` (see the module docstring)."""
    mods = _modules(root, package)
    edges = {m: {} for m in mods}
    for m, (path, is_package) in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        here = m if is_package else m.rpartition(".")[0]
        above_me = set()
        p = m
        while p:
            above_me.add(p)
            p = p.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names]
            for t in targets:
                if t.split(".")[0] != package:
                    continue
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m:
                    edges[m].setdefault(t, node.lineno)
                q = t.rpartition(".")[0]
                while q:
                    if q not in above_me and q in mods:
                        edges[m].setdefault(q, node.lineno)
                    q = q.rpartition(".")[0]
    return edges


def cycles(edges: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _describe(edges, comp) -> str:
    return "\n".join(f"  {a}:{line} -> {b}" for a in comp for b, line in sorted(edges[a].items()) if b in comp)


def test_onnxkit_has_no_import_cycle():
    edges = import_graph(ROOT, "onnxkit")
    assert len(edges) > 120 and sum(len(e) for e in edges.values()) > 400   # the whole package was read
    found = cycles(edges)
    assert found == [], "import cycles:\n" + "\n\n".join(_describe(edges, c) for c in found)


def _package(tmp_path, files: dict) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from .b import g\n",
        "b.py": "def g():\n    from .a import f\n    return f\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n",
    })
    edges = import_graph(root, "pkg")
    assert edges["pkg.b"] == {"pkg.a": 2} and edges["pkg.c"] == {}
    assert cycles(edges) == [["pkg.a", "pkg.b"]]


def test_importing_a_submodule_runs_its_package_first(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "low.py": "from .sub.leaf import x\n",
        "sub/__init__.py": "from .leaf import x\nfrom ..low import y\n",
        "sub/leaf.py": "x = 1\n",
    })
    edges = import_graph(root, "pkg")
    assert set(edges["pkg.low"]) == {"pkg.sub.leaf", "pkg.sub"}
    assert "pkg.sub" not in edges["pkg.sub.leaf"]     # a module's own package is already running
    assert cycles(edges) == [["pkg.low", "pkg.sub"]]


# -- the inversions that replaced the cycles keep their contracts -----------------------------------

def _model():
    from onnxkit import ir

    w = ir.Tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    graph = ir.Graph(node=[ir.Node(["x", "w"], ["y"], op_type="Add", name="add")], name="g", initializer=[w],
                     input=[ir.ValueInfo("x", ir.tensor_type(1, [2, 3]))],
                     output=[ir.ValueInfo("y", ir.tensor_type(1, [2, 3]))])
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=graph)


def test_a_model_pickles_as_its_bytes_through_the_api_registration():
    from onnxkit import api, ir

    assert copyreg.dispatch_table[ir.Model] is api._reduce_model
    model = _model()
    data = pickle.dumps(model)
    assert b"_model_from_bytes" in data and api.to_bytes(model) in data
    back = pickle.loads(data)
    assert api.to_bytes(back) == api.to_bytes(model)
    np.testing.assert_array_equal(back.graph.initializer[0].numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_without_the_registration_a_model_still_pickles_field_by_field(monkeypatch):
    from onnxkit import api, ir

    monkeypatch.delitem(copyreg.dispatch_table, ir.Model)
    model = _model()
    data = pickle.dumps(model)
    assert b"_model_from_bytes" not in data
    assert api.to_bytes(pickle.loads(data)) == api.to_bytes(model)


def test_the_decoder_retains_stray_attribute_fields_with_the_writer_encoder():
    from onnxkit.wire import adapters, writer

    assert adapters._field_encoder is writer.encode_field
