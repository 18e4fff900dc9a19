"""Kernel families and inference functions load when a model needs them (issue 32 item 1,
:mod:`onnxkit.plugin.lazy`).

The registry's kernel tables of the lazily loaded kernel packages come from each package's
generated ``_kernel_index.py``, its inference functions from each inference package's
``_function_index.py``; these tests fail when an index and its modules' ``KERNELS`` /
``FUNCTIONS`` disagree (a new family module, entry, since_version, module or ``host_only`` not in
the index, or an entry the modules lack), when a lazy entry answers the host differently from the
real one (traits, ``__module__``, what a call returns or raises, what inference derives over the
corpus and hand-made near misses), and when building the registry or planning a model imports
families (or numpy.f2py) it does not need.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnxkit.errors import OnnxkitError
from onnxkit.kernel_traits import FACTORY_TRAITS
from onnxkit.plugin.lazy import (INDEX_MODULES, LazyFunction, LazyKernel, index_of, index_of_entries,
                                 lazy_family_tables, render_index, table_of, write_index)
from onnxkit.registry import build_registry, get_registry, traits_of

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from kernel_index import FUNCTION_PACKAGES, KERNEL_PACKAGES, PACKAGES  # noqa: E402

#: the plugin (entry point name) that owns each function package's inference functions
FUNCTION_OWNERS = {"onnxkit_default_domain.inference": "default_domain", "onnxkit_microsoft.inference": "microsoft_domain",
                   "onnxkit_ml.inference": "ml_domain"}


def _entries(package):
    return importlib.import_module(f"{package}.{INDEX_MODULES[PACKAGES[package]]}").ENTRIES


def test_the_lazily_loaded_packages_are_the_domain_and_backend_kernel_and_inference_packages():
    assert set(KERNEL_PACKAGES) == {"onnxkit_cpu.overrides", "onnxkit_default_domain.kernels", "onnxkit_gpu.overrides",
                                    "onnxkit_microsoft.kernels", "onnxkit_ml.kernels"}
    assert set(FUNCTION_PACKAGES) == set(FUNCTION_OWNERS)
    assert len(PACKAGES) == 8
    assert {p: table_of(p) for p in PACKAGES} == PACKAGES       # each package keeps the index of its kind


@pytest.mark.parametrize("package", PACKAGES)
def test_each_index_equals_what_its_family_modules_register(package):
    real = index_of(package, PACKAGES[package])
    indexed = index_of_entries(_entries(package))
    missing = sorted(set(real) - set(indexed))
    stale = sorted(set(indexed) - set(real))
    assert not missing, f"entries of {package} not in its index (run python tools/kernel_index.py): {missing[:5]}"
    assert not stale, f"index entries of {package} its modules lack (run python tools/kernel_index.py): {stale[:5]}"
    wrong = {k: (indexed[k], real[k]) for k in real if indexed[k] != real[k]}
    assert not wrong, f"index entries of {package} that disagree with the modules: {dict(list(wrong.items())[:5])}"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_index_file_is_exactly_what_the_generator_writes(package):
    table = PACKAGES[package]
    path = Path(importlib.import_module(package).__path__[0]) / f"{INDEX_MODULES[table]}.py"
    assert path.read_text(encoding="utf-8") == render_index(package, index_of(package, table), table)


@pytest.mark.parametrize("package", KERNEL_PACKAGES)
def test_a_lazy_kernel_answers_the_host_as_its_real_factory(package):
    for key, lazy in lazy_family_tables(package, _entries(package)).items():
        family, _module, _host, _traits = index_of_entries(_entries(package))[key]
        real = importlib.import_module(f"{package}.{family}").KERNELS[key]
        assert isinstance(lazy, LazyKernel)
        for trait in FACTORY_TRAITS:  # host_only and the operator traits (size_guard, nondeterministic, ...)
            assert getattr(traits_of(lazy), trait) == getattr(traits_of(real), trait), (key, trait)
        assert lazy.__module__ == real.__module__, key
        assert lazy.resolve() is real, key


@pytest.mark.parametrize("package", FUNCTION_PACKAGES)
def test_a_lazy_function_answers_the_host_as_its_real_function(package):
    table = lazy_family_tables(package, _entries(package), table="FUNCTIONS")
    assert table                                                             # the index is not empty
    for key, lazy in table.items():
        family, _module = index_of_entries(_entries(package))[key]
        real = importlib.import_module(f"{package}.{family}").FUNCTIONS[key]
        assert isinstance(lazy, LazyFunction) and callable(lazy)
        assert lazy.__module__ == real.__module__, key                     # the operator index reads it
        assert lazy.resolve() is real, key


def test_the_registry_holds_the_same_entries_and_owners_as_the_eager_tables():
    reg = build_registry()
    for package in KERNEL_PACKAGES:
        for key in index_of(package):
            backend = {"onnxkit_cpu.overrides": "cpu", "onnxkit_gpu.overrides": "gpu"}.get(package)
            if backend is not None and backend not in reg.backends:
                continue  # the gpu backend needs torch
            table = reg.portable if backend is None else reg.kernels[backend]
            assert key in table, (package, key)
            assert isinstance(table[key], LazyKernel) and table[key].package == package
    for package, owner in FUNCTION_OWNERS.items():
        for key in index_of(package, "FUNCTIONS"):
            assert isinstance(reg.inference.get(key), LazyFunction) and reg.inference[key].package == package, key
            assert reg.owner[("onnxkit_inference_functions", key)] == owner, key
    # ai.onnx.ml's kernels are host_only, each registered so (KernelTable.register(..., host_only=True)) and
    # the index carrying it: the cpu backend runs them, a backend without host arrays falls back per node
    ml = index_of("onnxkit_ml.kernels")
    assert ml and all(traits_of(reg.portable[k]).host_only for k in ml)
    assert all(traits_of(reg.portable[k].resolve()).host_only for k in ml)
    assert all(k in reg.kernels["cpu"] for k in ml)
    if "gpu" in reg.kernels:
        assert not any(k in reg.kernels["gpu"] for k in ml)


def test_a_stale_entry_is_a_clear_error_naming_the_package_and_the_fix():
    ghost = LazyKernel("onnxkit_cpu.overrides", "conv", ("", "NoSuchOp", 1), "onnxkit_cpu.overrides.conv", False)
    with pytest.raises(OnnxkitError, match=r"onnxkit_cpu\.overrides.*NoSuchOp.*stale.*tools/kernel_index\.py"):
        ghost(None)
    ghost = LazyFunction("onnxkit_ml.inference", "trees", ("ai.onnx.ml", "NoSuchOp", 1), "onnxkit_ml.inference.trees")
    with pytest.raises(OnnxkitError, match=r"onnxkit_ml\.inference: its function index.*NoSuchOp.*FUNCTIONS.*stale"
                                           r".*tools/kernel_index\.py onnxkit_ml\.inference"):
        ghost(None)


_FAKE_FAMILY = '''
CALLS = []
def probe(*args, **kwargs):
    CALLS.append((args, kwargs))
    if kwargs.get("fail"):
        raise KeyError("as the real one")
    return ("returned", args, kwargs)
FUNCTIONS = {("com.example", "Probe", 1): probe, ("com.example", "Probe", 3): probe}
'''


def test_a_lazy_function_imports_its_family_once_and_forwards_arguments_results_and_errors(tmp_path, monkeypatch):
    pkg = tmp_path / "lazyinf_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "family.py").write_text(_FAKE_FAMILY)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        _probe_a_lazy_function()
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "lazyinf_probe_pkg"]:
            del sys.modules[name]


def _probe_a_lazy_function():
    assert table_of("lazyinf_probe_pkg") == "FUNCTIONS"
    path = write_index("lazyinf_probe_pkg")
    assert path.name == "_function_index.py"
    del sys.modules["lazyinf_probe_pkg.family"]                           # the generator imported it
    from lazyinf_probe_pkg._function_index import ENTRIES

    assert ENTRIES == (("com.example", "Probe", (1, 3), "family", "lazyinf_probe_pkg.family"),)
    table = lazy_family_tables("lazyinf_probe_pkg", ENTRIES, table="FUNCTIONS")
    assert "lazyinf_probe_pkg.family" not in sys.modules                  # nothing imported yet
    assert table[("com.example", "Probe", 1)].__module__ == "lazyinf_probe_pkg.family"
    ctx = object()
    assert table[("com.example", "Probe", 1)](ctx, 2, k="v") == ("returned", (ctx, 2), {"k": "v"})
    family = sys.modules["lazyinf_probe_pkg.family"]
    with pytest.raises(KeyError, match="as the real one"):
        table[("com.example", "Probe", 3)](ctx, fail=True)
    assert family.CALLS == [((ctx, 2), {"k": "v"}), ((ctx,), {"fail": True})]
    assert importlib.import_module("lazyinf_probe_pkg.family") is family
    assert table[("com.example", "Probe", 3)].resolve() is family.probe
    with pytest.raises(ValueError, match="table"):
        lazy_family_tables("lazyinf_probe_pkg", ENTRIES, table="KERNEL")


class _Eager:
    """The registry with every lazy inference function replaced by the real one."""

    def __init__(self, registry):
        self._r = registry
        self.inference = {k: v.resolve() if isinstance(v, LazyFunction) else v for k, v in registry.inference.items()}

    def __getattr__(self, name):
        return getattr(self._r, name)


def _inferred(m, registry):
    from onnxkit.inference import infer_model

    r = infer_model(m, registry)
    return r.types, [(d.code, d.message, str(d.location)) for d in r.diagnostics]


def _near_misses():
    """Small models whose inference succeeds, fails (an error) or is left unknown (a warning)."""
    import numpy as np

    from onnxkit import ir

    F = 1

    def vi(name, shape=None, elem=F):
        return ir.ValueInfo(name, None if elem is None else ir.tensor_type(elem, shape))

    def mk(nodes, inputs, outputs, inits=(), opsets=(("", 18),)):
        g = ir.Graph(node=nodes, name="g", input=inputs, output=outputs, initializer=list(inits))
        return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId(d, v) for d, v in opsets], graph=g)

    shape = ir.Tensor.from_numpy(np.array([3, -1], np.int64), "shape")
    return {
        "conv-relu-reshape": mk([ir.Node(["x", "w"], ["c"], op_type="Conv"), ir.Node(["c"], ["r"], op_type="Relu"),
                                 ir.Node(["r", "shape"], ["y"], op_type="Reshape")],
                                [vi("x", [1, 3, "H", 5]), vi("w", [3, 3, 3, 3])], [vi("y")], [shape]),
        "add-mismatch": mk([ir.Node(["a", "b"], ["y"], op_type="Add")], [vi("a", [2, 3]), vi("b", [4])], [vi("y")]),
        "matmul-mismatch": mk([ir.Node(["a", "b"], ["y"], op_type="MatMul")], [vi("a", [2, 3]), vi("b", [4, 5])],
                              [vi("y")]),
        "unknown-rank": mk([ir.Node(["a"], ["y"], op_type="Transpose")], [vi("a")], [vi("y")]),
        "ml-scaler": mk([ir.Node(["x"], ["y"], op_type="Scaler", domain="ai.onnx.ml")], [vi("x", ["N", 4])],
                        [vi("y")], opsets=(("", 18), ("ai.onnx.ml", 3))),
        "ms-fastgelu": mk([ir.Node(["x"], ["y"], op_type="FastGelu", domain="com.microsoft")], [vi("x", [2, "S"])],
                          [vi("y")], opsets=(("", 18), ("com.microsoft", 1))),
    }


def test_lazy_and_eager_inference_functions_derive_the_same_types_and_diagnostics():
    reg = get_registry()
    eager = _Eager(reg)
    results = {name: (_inferred(m, reg), _inferred(m, eager)) for name, m in _near_misses().items()}
    for name, (lazy, real) in results.items():
        assert lazy == real, name
    assert any(c == "inference-error" for c, _m, _l in results["add-mismatch"][0][1])  # the near misses miss
    assert ("", "y") in results["ms-fastgelu"][0][0] and results["ms-fastgelu"][0][0][("", "y")] is not None


CORPUS = ROOT / ".cache" / "corpus"


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the real-world corpus is not built (.cache/corpus)")
def test_lazy_and_eager_inference_agree_over_the_corpus():
    import onnxkit

    reg = get_registry()
    eager = _Eager(reg)
    models = sorted(p for p in CORPUS.glob("*.onnx") if p.stat().st_size < 2_000_000)
    assert models
    for path in models:
        m = onnxkit.load(str(path))
        lazy = _inferred(m, reg)
        assert lazy[0], path.name
        assert lazy == _inferred(m, eager), path.name


_CHILD = r'''
import json, sys
import numpy as np
import onnxkit
from onnxkit import ir
from onnxkit.registry import get_registry
get_registry()
KERNELS = ("onnxkit_cpu.overrides.", "onnxkit_default_domain.kernels.", "onnxkit_ml.kernels.", "onnxkit_microsoft.kernels.")
INFERENCE = ("onnxkit_default_domain.inference.", "onnxkit_ml.inference.", "onnxkit_microsoft.inference.")
fams = lambda prefixes: sorted(m for m in sys.modules if m.startswith(prefixes))
out = {"after_registry": fams(KERNELS), "inference_after_registry": fams(INFERENCE)}
w = ir.Tensor.from_numpy(np.ones((2, 3, 3, 3), np.float32), "w")
g = ir.Graph(node=[ir.Node(["x", "w"], ["y"], op_type="Conv", name="conv")], name="g", initializer=[w],
             input=[ir.ValueInfo("x", ir.tensor_type(1, [1, 3, 5, 5]))], output=[ir.ValueInfo("y", ir.tensor_type(1, [1, 2, 3, 3]))])
s = onnxkit.InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g))
s.run(None, {"x": np.ones((1, 3, 5, 5), np.float32)})
out["after_run"] = fams(KERNELS)
out["inference_after_run"] = fams(INFERENCE)
out["f2py"] = "numpy.f2py" in sys.modules
out["strings"] = "numpy.strings" in sys.modules
out["xp_strings"] = __import__("onnxkit_cpu.plugin").plugin._namespace().strings is np.strings
print("RESULT " + json.dumps(out))
'''


def test_a_fresh_process_imports_only_the_families_its_model_needs():
    env = {k: v for k, v in os.environ.items() if k not in ("ONNXKIT_PLUGINS", "ONNXKIT_FIRST_RUN")}  # a cold start
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    out = json.loads(line[7:])
    family = lambda m: not m.rsplit(".", 1)[1].startswith("_")              # noqa: E731 (index, helpers aside)
    assert [m for m in out["after_registry"] if family(m)] == []
    assert [m for m in out["inference_after_registry"] if family(m)] == []
    cpu = {m.rsplit(".", 1)[1] for m in out["after_run"] if m.startswith("onnxkit_cpu.")}
    portable = {m.rsplit(".", 1)[1] for m in out["after_run"] if m.startswith("onnxkit_default_domain.")}
    assert "conv" in cpu                                                    # the family the model needs
    assert not cpu & {"rnn", "attention", "quantization", "quantized_conv", "norm", "pool", "activation", "elementwise"}
    # onnxkit_default_domain.api (what the cpu Conv builds on) imports the families it publishes, not these
    assert not portable & {"signal", "generators", "sequence", "image", "string", "training"}
    assert not [m for m in out["after_run"] if m.startswith(("onnxkit_ml.", "onnxkit_microsoft.")) and family(m)]
    inference = {m.rsplit(".", 1)[1] for m in out["inference_after_run"] if m.startswith("onnxkit_default_domain.")}
    assert "nn" in inference                                                # Conv's inference function
    assert not inference & {"signal", "sequence", "strings", "training", "control_flow", "quantization", "attention"}
    assert not [m for m in out["inference_after_run"] if m.startswith(("onnxkit_ml.", "onnxkit_microsoft.")) and family(m)]
    assert out["f2py"] is False                                             # numpy.f2py is not array API
    assert out["strings"] is False                                          # nor numpy.strings, made on demand:
    assert out["xp_strings"] is True                                        # the namespace still reaches it
