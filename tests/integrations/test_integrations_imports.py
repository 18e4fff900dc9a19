"""Without its engine, an integration module says which extra to install."""

import importlib
import sys

import pytest


@pytest.mark.parametrize("module, engine", [("dask", "dask"), ("ray", "ray")])
def test_a_missing_engine_names_the_pip_install(monkeypatch, module, engine):
    monkeypatch.setitem(sys.modules, engine, None)  # `import <engine>` now raises ImportError
    monkeypatch.delitem(sys.modules, f"onnxkit.integrations.{module}", raising=False)
    with pytest.raises(ImportError, match=rf'pip install "onnxkit\[{module}\]"'):
        importlib.import_module(f"onnxkit.integrations.{module}")


def test_the_integrations_package_imports_neither_engine(monkeypatch):
    for engine in ("dask", "ray"):
        monkeypatch.setitem(sys.modules, engine, None)
    monkeypatch.delitem(sys.modules, "onnxkit.integrations", raising=False)
    monkeypatch.delitem(sys.modules, "onnxkit.integrations._scoring", raising=False)
    pkg = importlib.import_module("onnxkit.integrations")
    assert callable(pkg.make_payload) and callable(pkg.session_for)
