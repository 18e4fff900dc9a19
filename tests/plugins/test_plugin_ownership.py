"""`onnxkit plugins` credits each kernel to the distribution that provided it, backend by backend."""

import json
import types

from onnxkit import hookimpl
from onnxkit.cli import main as cli_main
from onnxkit.registry import Backend, build_registry, reset_registry

TRIPLE = ("", "Relu", 14)


def _plugin(**hooks):
    mod = types.SimpleNamespace()
    for name, fn in hooks.items():
        fn.__name__ = name
        setattr(mod, name, hookimpl(fn))
    return mod


def _kernel(ctx):  # a kernel factory; never called here
    return lambda x: x


def _backend_plugin(name):
    """A plugin with its own backend ``name`` and one kernel, for TRIPLE, on that backend only."""
    return _plugin(onnxkit_backends=lambda: [Backend(name)],
                   onnxkit_kernels=lambda backend: {TRIPLE: _kernel} if backend == name else None)


def test_one_definition_on_two_backends_is_credited_to_each_backends_own_plugin():
    reg = build_registry(entry_points=False, extra=[("p-alpha", _backend_plugin("alpha")),
                                                    ("p-beta", _backend_plugin("beta"))])
    assert not reg.faults, reg.faults
    assert reg.owner[("onnxkit_kernels", ("alpha", TRIPLE))] == "p-alpha"
    assert reg.owner[("onnxkit_kernels", ("beta", TRIPLE))] == "p-beta"
    assert reg.provided_by("p-alpha")["kernels"] == {"alpha": 1}
    assert reg.provided_by("p-beta")["kernels"] == {"beta": 1}


def test_a_duplicate_kernel_names_the_owner_on_that_backend():
    dup = _plugin(onnxkit_kernels=lambda backend: {TRIPLE: _kernel} if backend == "beta" else None)
    reg = build_registry(entry_points=False, extra=[("p-alpha", _backend_plugin("alpha")),
                                                    ("p-beta", _backend_plugin("beta")), ("p-dup", dup)])
    [fault] = reg.faults
    assert fault.plugin == "p-dup" and "beta kernel" in fault.message and "'p-beta'" in fault.message
    assert reg.provided_by("p-dup")["kernels"] == {}


def test_installed_plugins_kernel_counts_add_up_per_backend():
    reg = build_registry()
    by_dist = {p.distribution: reg.provided_by(p.name)["kernels"] for p in reg.plugins}
    # A backend's own plugin is credited with its overrides on that backend only; the domain
    # package's portable kernels are credited to it on every backend that runs them.
    assert set(by_dist["onnxkit-gpu"]) <= {"gpu"}
    assert set(by_dist["onnxkit-cpu"]) <= {"cpu"}
    assert set(by_dist["onnxkit-default-domain"]) == {"cpu", "gpu"}
    for backend, table in reg.kernels.items():
        assert sum(k.get(backend, 0) for k in by_dist.values()) == len(table), backend
    # every portable kernel runs on cpu (a host backend): as itself, or replaced by an override
    assert set(reg.portable) <= set(reg.kernels["cpu"])
    for backend in ("cpu", "gpu"):
        assert reg.owner[("onnxkit_kernels", (backend, ("", "Range", 11)))] == "default_domain"


def test_onnxkit_plugins_json_never_credits_gpu_with_cpu_kernels(capsys):
    reset_registry()
    assert cli_main(["plugins", "--json"]) == 0
    rows = {r["distribution"]: r for r in json.loads(capsys.readouterr().out)["plugins"]}
    assert list(rows["onnxkit-gpu"]["kernels"]) == ["gpu"]
    assert "gpu" not in rows["onnxkit-cpu"]["kernels"]


def test_the_gpu_backend_imports_nothing_of_the_cpu_backend():
    """The gpu backend is a namespace plus overrides: it reuses the domain's kernels, never onnxkit-cpu's code
    (it depends on onnxkit-cpu only as the backend its per-node fallback runs on)."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "plugins" / "gpu_backend" / "onnxkit_gpu"
    files = list(package.rglob("*.py"))
    assert len(files) >= 5
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "onnxkit_cpu" for n in names), f"{path.name} imports {names}"


def test_every_kernel_of_the_builtin_domains_is_written_once_in_its_domain_package():
    """No backend carries a kernel of its own for ai.onnx or ai.onnx.ml that the domain lacks: each backend
    kernel is an override of a portable kernel."""
    reg = build_registry()
    for backend, table in reg.kernels.items():
        own = [k for k, fn in table.items() if fn is not reg.portable.get(k) and k not in reg.portable]
        assert own == [], (backend, own[:5])
