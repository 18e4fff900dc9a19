"""packaged_schema_data reads a folder package's schema file directly (importlib.resources is
not asked) and any other package's (here a zip) through importlib.resources: the same
definitions either way; a missing file is importlib.resources' FileNotFoundError."""

from __future__ import annotations

import importlib
import importlib.resources
import sys
import zipfile
from pathlib import Path

import onnxkit_default_domain

from onnxkit.schema import load_schema_data, packaged_schema_data

DATA = Path(onnxkit_default_domain.__file__).parent / "schemas_data.json.gz"


def _package(tmp_path, name, zipped: bool):
    files = {f"{name}/__init__.py": "", f"{name}/schemas_data.json.gz": DATA.read_bytes()}
    tmp_path.mkdir(parents=True, exist_ok=True)
    if zipped:
        archive = tmp_path / "pkgs.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for rel, data in files.items():
                zf.writestr(rel, data)
        return str(archive)
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(tmp_path)


def test_folder_and_zip_packages_give_the_packaged_definitions(tmp_path, monkeypatch):
    want = load_schema_data(DATA.read_bytes())
    asked = []
    real_files = importlib.resources.files
    monkeypatch.setattr(importlib.resources, "files", lambda package: asked.append(package) or real_files(package))
    for name, zipped in (("w5_folder_schemas", False), ("w5_zipped_schemas", True)):
        monkeypatch.syspath_prepend(_package(tmp_path / name, name, zipped))
        importlib.invalidate_caches()
        got = packaged_schema_data(name)
        assert type(importlib.import_module(name).__spec__.loader).__name__ == (
            "zipimporter" if zipped else "SourceFileLoader")
        assert got.keys == want.keys and got.definition(want.keys[0]) == want.definition(want.keys[0])
        sys.modules.pop(name, None)
    assert asked == ["w5_zipped_schemas"]  # the folder package's file was read without importlib.resources


def test_a_missing_file_is_importlib_resources_error(tmp_path, monkeypatch):
    (tmp_path / "w5_no_schemas").mkdir()
    (tmp_path / "w5_no_schemas" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    try:
        packaged_schema_data("w5_no_schemas")
    except FileNotFoundError as exc:
        assert "schemas_data.json.gz" in str(exc)
    else:
        raise AssertionError("a package without its schema file must raise FileNotFoundError")
    finally:
        sys.modules.pop("w5_no_schemas", None)
