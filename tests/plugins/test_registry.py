"""The plugin manager: discovery, in-process plugins, selection, tracing and broken plugins."""

import importlib.metadata
import json
import os
import subprocess
import sys
import types

import pytest

from onnxkit import hookimpl
from onnxkit.cli import main as cli_main
from onnxkit.registry import Backend, OpaqueTypeDef, build_registry, get_registry, register_plugin, \
    reset_registry, unregister_plugin
from onnxkit.schema import OperatorSet

DISTRIBUTIONS = {"onnxkit-default-domain", "onnxkit-ml", "onnxkit-cpu", "onnxkit-gpu"}


def plugin(**hooks):
    """A throwaway in-process plugin with the given hook implementations."""
    mod = types.SimpleNamespace()
    for name, fn in hooks.items():
        fn.__name__ = name
        setattr(mod, name, hookimpl(fn))
    return mod


def test_entry_points_find_the_four_plugin_distributions_and_the_host_storage():
    reg = build_registry()
    assert DISTRIBUTIONS <= {p.distribution for p in reg.plugins}
    assert all(p.version for p in reg.plugins if p.distribution in DISTRIBUTIONS)
    assert not reg.faults, reg.faults
    assert {"", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training"} <= set(reg.domains())
    assert reg.domains()[""] == list(range(1, 29))
    assert {"cpu", "gpu"} <= set(reg.backends)
    assert "file" in reg.storages


def test_onnxkit_plugins_lists_the_four_distributions_with_versions(capsys):
    reset_registry()
    rc = cli_main(["plugins", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["faults"] == []
    rows = {r["distribution"]: r for r in out["plugins"]}
    assert DISTRIBUTIONS <= set(rows)
    assert rows["onnxkit-default-domain"]["domains"]["ai.onnx"] == list(range(1, 29))
    assert rows["onnxkit-ml"]["domains"]["ai.onnx.ml"] == [1, 2, 3, 4, 5]
    assert rows["onnxkit-cpu"]["backends"] == ["cpu"]
    assert rows["onnxkit-gpu"]["backends"] == ["gpu"]
    for dist in DISTRIBUTIONS:
        assert rows[dist]["version"] == importlib.metadata.version(dist)
    assert len({rows[dist]["version"] for dist in DISTRIBUTIONS}) == 1  # released together


def test_onnxkit_plugins_text_form(capsys):
    reset_registry()
    assert cli_main(["plugins"]) == 0
    text = capsys.readouterr().out
    for dist in DISTRIBUTIONS:
        assert f"{dist} {importlib.metadata.version(dist)}" in text
    assert "domain ai.onnx: operator sets 1-28" in text
    assert "domain ai.onnx.ml: operator sets 1-5" in text


def test_a_plugin_left_out_takes_its_domain_with_it_and_nothing_else():
    full = build_registry()
    without_ml = build_registry(exclude=["onnxkit-ml"])
    assert "ai.onnx.ml" in full.domains() and "ai.onnx.ml" not in without_ml.domains()
    assert without_ml.bind("ai.onnx.ml", "LinearRegressor", 1) is None
    assert without_ml.bind("", "Relu", 14).since_version == 14
    assert set(without_ml.backends) == set(full.backends)


def test_onnxkit_plugins_environment_variable_selects_plugins():
    env = dict(os.environ, ONNXKIT_PLUGINS="onnxkit-default-domain,onnxkit-cpu")
    out = subprocess.run([sys.executable, "-m", "onnxkit.cli", "plugins", "--json"], env=env,
                         capture_output=True, text=True, check=True)
    rows = {r["distribution"] for r in json.loads(out.stdout)["plugins"]}
    assert rows == {"onnxkit-default-domain", "onnxkit-cpu"}


def test_trace_prints_every_hook_call():
    env = dict(os.environ, ONNXKIT_TRACE="1", ONNXKIT_PLUGINS="onnxkit-ml")
    out = subprocess.run([sys.executable, "-m", "onnxkit.cli", "plugins"], env=env, capture_output=True, text=True)
    assert "[onnxkit trace] onnxkit_operator_sets() <- ml_domain: list of 5" in out.stderr


def test_in_process_plugin_is_registered_and_unregistered():
    mine = plugin(onnxkit_operator_sets=lambda: [OperatorSet("com.example", 1, {})],
                  onnxkit_opaque_types=lambda: [OpaqueTypeDef("com.example", "Handle", dict)])
    register_plugin(mine, "example")
    try:
        reg = get_registry()
        assert (("com.example", 1)) in reg.operator_sets
        assert reg.opaque_types[("com.example", "Handle")].python_type is dict
        assert reg.provided_by("example")["operator_sets"] == [("com.example", 1)]
    finally:
        unregister_plugin("example")
    assert ("com.example", 1) not in get_registry().operator_sets


def test_a_plugin_that_raises_is_reported_and_the_others_still_load():
    def boom():
        raise RuntimeError("kaput")

    reg = build_registry(extra=[("broken", plugin(onnxkit_operator_sets=boom))])
    assert any(f.plugin == "broken" and "kaput" in f.message and f.hook == "onnxkit_operator_sets" for f in reg.faults)
    assert reg.bind("", "Add", 14) is not None


@pytest.mark.parametrize("hook, result, fragment", [
    ("onnxkit_operator_sets", 42, "must return an iterable"),
    ("onnxkit_operator_sets", ["not an opset"], "not an OperatorSet"),
    ("onnxkit_kernels", ["x"], "must return a mapping"),
    ("onnxkit_kernels", {("", "Relu"): abs}, "not a (domain, op_type, since_version) triple"),
    ("onnxkit_kernels", {("", "Relu", 14): "not callable"}, "not callable"),
    ("onnxkit_backends", [object()], "not a Backend with a name"),
    ("onnxkit_storage", "file", "must return an iterable"),
])
def test_wrong_return_shapes_are_reported_against_the_plugin(hook, result, fragment):
    if hook == "onnxkit_kernels":
        impl = plugin(onnxkit_kernels=lambda backend: result)
    else:
        impl = plugin(**{hook: lambda: result})
    reg = build_registry(extra=[("misshapen", impl)])
    faults = [f for f in reg.faults if f.plugin == "misshapen"]
    assert faults and fragment in faults[0].message, reg.faults
    assert reg.bind("", "Relu", 14) is not None  # the others still work


def test_two_plugins_claiming_one_key_the_second_is_refused_by_name():
    first = plugin(onnxkit_backends=lambda: [Backend("cpu")])  # clashes with onnxkit-cpu's backend
    reg = build_registry(extra=[("zz-second-cpu", first)])
    clash = [f for f in reg.faults if f.plugin == "zz-second-cpu"]
    assert clash and "already provided by plugin 'cpu_backend'" in clash[0].message
    assert reg.backends["cpu"].description.startswith("numpy")

    k1 = plugin(onnxkit_kernels=lambda backend: {("", "NoSuchOp", 14): abs} if backend == "cpu" else None)
    k2 = plugin(onnxkit_kernels=lambda backend: {("ai.onnx", "NoSuchOp", 14): len} if backend == "cpu" else None)
    reg = build_registry(extra=[("k1", k1), ("k2", k2)])
    assert reg.kernel("cpu", "", "NoSuchOp", 14) is abs
    assert any(f.plugin == "k2" and "ai.onnx::NoSuchOp-14" in f.message for f in reg.faults)


def test_a_plugin_whose_entry_point_cannot_be_imported_is_reported(monkeypatch):
    import onnxkit.registry as registry

    class FakeDist:
        metadata = {"Name": "onnxkit-broken"}
        version = "9.9"

    class FakeEP:
        name = "broken"
        value = "no_such_module_anywhere.plugin"
        dist = FakeDist()

        def load(self):
            import no_such_module_anywhere  # noqa: F401

    real = registry._entry_points
    monkeypatch.setattr(registry, "_entry_points", lambda: [*real(), FakeEP()])
    reg = build_registry()
    assert any(f.plugin == "onnxkit-broken" and f.hook == "import" and "no_such_module_anywhere" in f.message
               for f in reg.faults)
    assert reg.bind("", "Relu", 14) is not None


def test_the_file_storage_name_is_reserved_for_the_host():
    class Hijack:
        name = "file"

    reg = build_registry(extra=[("aaa-hijack", plugin(onnxkit_storage=lambda: [Hijack()]))])
    assert type(reg.storages["file"]).__name__ == "LocalFileStorage"
    assert any(f.plugin == "aaa-hijack" and "reserved" in f.message for f in reg.faults)


def test_building_the_registry_does_not_import_torch():
    code = "import sys, onnxkit; onnxkit.get_registry(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_definition_has_a_cpu_kernel_and_an_inference_function():
    """Clause 4.4 / 9.2: nothing of the four installed domains is left unsupported on cpu or uninferable."""
    reg = build_registry()
    keys = {(s.domain, s.name, s.since_version) for opset in reg.operator_sets.values() for s in opset}
    assert len(keys) >= 629 + 25
    assert not sorted(k for k in keys if k not in reg.kernels["cpu"])
    assert not sorted(k for k in keys if k not in reg.inference)


# -- extension operators (onnxkit_extension_operators) ------------------------------------------

def _ext(domain, name, since=1):
    from onnxkit.schema import FormalParameter, OpSchema

    return OpSchema(domain, name, since, inputs=(FormalParameter("X", "T"),), outputs=(FormalParameter("Y", "T"),))


def test_an_extension_binds_only_where_the_owner_defines_no_operator_of_that_name():
    ext = plugin(onnxkit_extension_operators=lambda: [_ext("", "ZzExtended", 3), _ext("", "ZzExtended", 9),
                                                       _ext("ai.onnx", "Relu"), _ext("", "Dropout", 30)])
    reg = build_registry(extra=[("zz-ext", ext)])
    # the owner always wins: names ai.onnx defines at some version are refused, whatever the version
    refused = sorted(f.message for f in reg.faults if f.plugin == "zz-ext")
    assert len(refused) == 2 and all("the owner of a domain always wins" in m for m in refused), refused
    assert "ai.onnx::Relu-1" in refused[1] and "plugin 'default_domain'" in refused[1]
    assert "ai.onnx::Dropout-30" in refused[0]
    assert reg.bind("", "Relu", 14).since_version == 14 and not reg.is_extension(reg.bind("", "Relu", 14))
    # the greatest since_version <= the import; none below the first
    assert reg.bind("", "ZzExtended", 2) is None
    assert reg.bind("", "ZzExtended", 8).since_version == 3 and reg.bind("ai.onnx", "ZzExtended", 17).since_version == 9
    assert reg.is_extension(reg.bind("", "ZzExtended", 17))
    assert reg.extension_provider(reg.bind("", "ZzExtended", 17)) == "(registered in process)"
    assert reg.bind("", "ZzExtended", 99) is None  # no operator set ai.onnx 99: an extension makes none
    assert reg.provided_by("zz-ext")["extensions"] == [("", "ZzExtended", 3), ("", "ZzExtended", 9)]


def test_an_extension_of_a_name_the_owner_defines_only_later_binds_below_the_owners_first():
    """onnxruntime registers LayerNormalization-1 in ai.onnx, whose own LayerNormalization starts at
    17: the extension binds for imports 1-16, ai.onnx's from 17 (the owner still wins there)."""
    ext = plugin(onnxkit_extension_operators=lambda: [_ext("", "Gelu", 1), _ext("", "Gelu", 20)])
    reg = build_registry(extra=[("zz-late", ext)])
    refused = [f.message for f in reg.faults if f.plugin == "zz-late"]
    assert len(refused) == 1 and "ai.onnx::Gelu-20" in refused[0] and "from version 20" in refused[0], refused
    assert reg.is_extension(reg.bind("", "Gelu", 17)) and reg.bind("", "Gelu", 17).since_version == 1
    assert not reg.is_extension(reg.bind("", "Gelu", 20)) and reg.bind("", "Gelu", 20).since_version == 20


def test_an_extension_of_an_unknown_or_own_domain_or_claimed_twice_is_refused_by_name():
    own = plugin(onnxkit_operator_sets=lambda: [OperatorSet("com.example", 1, {})],
                 onnxkit_extension_operators=lambda: [_ext("com.example", "Mine")])
    nowhere = plugin(onnxkit_extension_operators=lambda: [_ext("com.nowhere", "Lost"), "not a schema"])
    first = plugin(onnxkit_extension_operators=lambda: [_ext("", "ZzTwice")])
    second = plugin(onnxkit_extension_operators=lambda: [_ext("", "ZzTwice")])
    reg = build_registry(extra=[("own", own), ("nowhere", nowhere), ("zz1", first), ("zz2", second)])
    by = {}
    for f in reg.faults:
        by.setdefault(f.plugin, []).append(f.message)
    assert len(by["own"]) == 1 and "provides 'com.example' itself" in by["own"][0]
    assert len(by["nowhere"]) == 2 and "no installed plugin provides domain 'com.nowhere'" in by["nowhere"][0]
    assert "not an OpSchema" in by["nowhere"][1]
    assert by["zz2"] == ["extension ai.onnx::ZzTwice-1 is already provided by plugin 'zz1'; ignored"]
    assert "zz1" not in by and reg.extension_provider(reg.bind("", "ZzTwice", 17)) == "(registered in process)"
    assert reg.bind("com.example", "Mine", 1) is None and reg.bind("com.nowhere", "Lost", 1) is None


def test_onnxkit_plugins_credits_an_installed_extension(capsys):
    reset_registry()
    rc = cli_main(["plugins", "--json"])
    rows = {r["distribution"]: r for r in json.loads(capsys.readouterr().out)["plugins"]}
    assert rc == 0
    assert rows["onnxkit-microsoft"]["extensions"] == ["ai.onnx::LayerNormalization-1",
                                                        "ai.onnx::SimplifiedLayerNormalization-1"]
    assert all(r["extensions"] == [] for d, r in rows.items() if d != "onnxkit-microsoft")
    assert cli_main(["plugins"]) == 0
    assert ("    extension operator: ai.onnx::SimplifiedLayerNormalization-1 (not part of that domain's standard)"
            in capsys.readouterr().out.splitlines())
