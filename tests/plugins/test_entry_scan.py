"""onnxkit.entry_scan finds the entry points importlib.metadata finds, without importing it."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import zipfile

import pytest

from onnxkit.entry_scan import ScannedEntryPoint, group_entry_points


def _rows(eps) -> list:
    return sorted((ep.name, ep.value, ep.group, ep.dist.metadata["Name"], ep.dist.version) for ep in eps)


@pytest.mark.parametrize("group", ["onnxkit", "console_scripts", "pytest11"])
def test_same_entry_points_as_importlib_metadata(group):
    ours = _rows(group_entry_points(group))
    assert ours == _rows(importlib.metadata.entry_points(group=group))
    if group == "onnxkit":
        assert {r[3] for r in ours} >= {"onnxkit-core", "onnxkit-cpu", "onnxkit-default-domain"}


def _dist(site, folder: str, name: str, version: str, entries: str) -> None:
    meta = site / folder
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not a header\n")
    (meta / "entry_points.txt").write_text(entries)


def test_first_distribution_of_a_name_on_sys_path_wins_and_groups_are_kept_apart(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    _dist(first, "demo_pkg-1.0.dist-info", "demo-pkg", "1.0",
          "# comment\n[demo.group]\nalpha = json:dumps\nbeta = os.path [extra]\n\n[other]\ngamma = os\n")
    _dist(second, "Demo.Pkg-2.0.dist-info", "Demo.Pkg", "2.0", "[demo.group]\nshadowed = os\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second), *sys.path])
    eps = [ep for ep in group_entry_points("demo.group")]
    assert _rows(eps) == [("alpha", "json:dumps", "demo.group", "demo-pkg", "1.0"),
                          ("beta", "os.path [extra]", "demo.group", "demo-pkg", "1.0")]
    assert _rows(eps) == _rows(importlib.metadata.entry_points(group="demo.group"))
    import json
    import os

    assert eps[0].load() is json.dumps and eps[1].load() is os.path


def test_a_zip_on_sys_path_hands_the_work_to_importlib_metadata(tmp_path, monkeypatch):
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
        z.writestr("zipped-1.0.dist-info/entry_points.txt", "[demo.zip]\nz = os\n")
    monkeypatch.setattr(sys, "path", [str(archive), *sys.path])
    eps = group_entry_points("demo.zip")
    assert [(ep.name, ep.value) for ep in eps] == [("z", "os")]
    assert not any(isinstance(ep, ScannedEntryPoint) for ep in eps)


def test_building_the_registry_does_not_import_importlib_metadata():
    code = ("import sys, onnxkit\nfrom onnxkit.registry import get_registry\nreg = get_registry()\n"
            "assert 'cpu' in reg.backends and not reg.faults, reg.faults\n"
            "print(sorted(m for m in ('importlib.metadata', 'email') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
