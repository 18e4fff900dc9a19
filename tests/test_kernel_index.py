"""Kernel families load when a model needs them (issue 32 item 1, :mod:`onnxkit.plugin.lazy`).

The registry's kernel tables of the lazily loaded packages come from each package's generated
``_kernel_index.py``; these tests fail when an index and its modules' ``KERNELS`` disagree (a new
family module, kernel, since_version or ``host_only`` not in the index, or an entry the modules
lack), when a lazy entry answers the host differently from its real factory, and when building
the registry or planning a model imports families (or numpy.f2py) it does not need.
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
from onnxkit.plugin.lazy import LazyKernel, index_of, index_of_entries, lazy_family_tables, render_index
from onnxkit.registry import build_registry, traits_of

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from kernel_index import PACKAGES  # noqa: E402


def _entries(package):
    return importlib.import_module(f"{package}._kernel_index").ENTRIES


def test_the_lazily_loaded_packages_are_the_four_domain_and_backend_kernel_packages():
    assert len(PACKAGES) == 4
    assert set(PACKAGES) == {"onnxkit_cpu.overrides", "onnxkit_default_domain.kernels", "onnxkit_gpu.overrides",
                             "onnxkit_microsoft.kernels"}


@pytest.mark.parametrize("package", PACKAGES)
def test_each_index_equals_what_its_family_modules_register(package):
    real = index_of(package)
    indexed = index_of_entries(_entries(package))
    missing = sorted(set(real) - set(indexed))
    stale = sorted(set(indexed) - set(real))
    assert not missing, f"kernels of {package} not in its index (run python tools/kernel_index.py): {missing[:5]}"
    assert not stale, f"index entries of {package} its modules lack (run python tools/kernel_index.py): {stale[:5]}"
    wrong = {k: (indexed[k], real[k]) for k in real if indexed[k] != real[k]}
    assert not wrong, f"index entries of {package} that disagree with the modules: {dict(list(wrong.items())[:5])}"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_index_file_is_exactly_what_the_generator_writes(package):
    path = Path(importlib.import_module(package).__path__[0]) / "_kernel_index.py"
    assert path.read_text(encoding="utf-8") == render_index(package, index_of(package))


@pytest.mark.parametrize("package", PACKAGES)
def test_a_lazy_entry_answers_the_host_as_its_real_factory(package):
    for key, lazy in lazy_family_tables(package, _entries(package)).items():
        family, _module, _host = index_of_entries(_entries(package))[key]
        real = importlib.import_module(f"{package}.{family}").KERNELS[key]
        assert traits_of(lazy).host_only == traits_of(real).host_only, key
        assert lazy.__module__ == real.__module__, key
        assert lazy.resolve() is real, key


def test_the_registry_holds_the_same_kernels_and_owners_as_the_eager_tables():
    reg = build_registry()
    for package in PACKAGES:
        for key in index_of(package):
            backend = {"onnxkit_cpu.overrides": "cpu", "onnxkit_gpu.overrides": "gpu"}.get(package)
            if backend is not None and backend not in reg.backends:
                continue  # the gpu backend needs torch
            table = reg.portable if backend is None else reg.kernels[backend]
            assert key in table, (package, key)
            assert isinstance(table[key], LazyKernel) and table[key].package == package


def test_a_stale_entry_is_a_clear_error_naming_the_package_and_the_fix():
    ghost = LazyKernel("onnxkit_cpu.overrides", "conv", ("", "NoSuchOp", 1), "onnxkit_cpu.overrides.conv", False)
    with pytest.raises(OnnxkitError, match=r"onnxkit_cpu\.overrides.*NoSuchOp.*stale.*tools/kernel_index\.py"):
        ghost(None)


_CHILD = r'''
import json, sys
import numpy as np
import onnxkit
from onnxkit import ir
from onnxkit.registry import get_registry
get_registry()
fams = lambda: sorted(m for m in sys.modules if m.startswith(("onnxkit_cpu.overrides.", "onnxkit_default_domain.kernels.")))
out = {"after_registry": fams()}
w = ir.Tensor.from_numpy(np.ones((2, 3, 3, 3), np.float32), "w")
g = ir.Graph(node=[ir.Node(["x", "w"], ["y"], op_type="Conv", name="conv")], name="g", initializer=[w],
             input=[ir.ValueInfo("x", ir.tensor_type(1, [1, 3, 5, 5]))], output=[ir.ValueInfo("y", ir.tensor_type(1, [1, 2, 3, 3]))])
s = onnxkit.InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g))
s.run(None, {"x": np.ones((1, 3, 5, 5), np.float32)})
out["after_run"] = fams()
out["f2py"] = "numpy.f2py" in sys.modules
print("RESULT " + json.dumps(out))
'''


def test_a_fresh_process_imports_only_the_families_its_model_needs():
    env = {k: v for k, v in os.environ.items() if k not in ("ONNXKIT_PLUGINS", "ONNXKIT_FIRST_RUN")}  # a cold start
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    out = json.loads(line[7:])
    assert [m for m in out["after_registry"] if not m.rsplit(".", 1)[1].startswith("_")] == []
    cpu = {m.rsplit(".", 1)[1] for m in out["after_run"] if m.startswith("onnxkit_cpu.")}
    portable = {m.rsplit(".", 1)[1] for m in out["after_run"] if m.startswith("onnxkit_default_domain.")}
    assert "conv" in cpu                                                    # the family the model needs
    assert not cpu & {"rnn", "attention", "quantization", "quantized_conv", "norm", "pool", "activation", "elementwise"}
    # onnxkit_default_domain.api (what the cpu Conv builds on) imports the families it publishes, not these
    assert not portable & {"signal", "generators", "sequence", "image", "string", "training"}
    assert out["f2py"] is False                                             # numpy.f2py is not array API
