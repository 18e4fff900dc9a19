"""The distributions' metadata meets PyPI's conventions and their dependency graph has no cycle.

Read from the pyproject.toml files (no build), except one test that builds a wheel with package
data and looks inside it.  The full install from wheels into a fresh environment is `.ci/run`'s.
"""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

import onnxkit

try:
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
#: Every distribution onnxkit publishes, by project folder (the example is a user's package).
PROJECTS = {
    "onnxkit-core": ROOT,
    "onnxkit": ROOT / "packaging" / "onnxkit",
    "onnxkit-default-domain": ROOT / "plugins" / "default_domain",
    "onnxkit-ml": ROOT / "plugins" / "ml_domain",
    "onnxkit-microsoft": ROOT / "plugins" / "microsoft_domain",
    "onnxkit-cpu": ROOT / "plugins" / "cpu_backend",
    "onnxkit-gpu": ROOT / "plugins" / "gpu_backend",
}
EXAMPLE = ROOT / "examples" / "custom_domain"


def _project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def _requirements(project: dict, extras: bool = True) -> list:
    reqs = [Requirement(r) for r in project.get("dependencies", [])]
    if extras:
        for group in project.get("optional-dependencies", {}).values():
            reqs += [Requirement(r) for r in group]
    return reqs


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_each_distribution_has_its_name_version_spdx_license_and_license_file(name):
    folder = PROJECTS[name]
    project = _project(folder)
    assert project["name"] == name
    assert project["version"] == onnxkit.__version__
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert (folder / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_each_distribution_has_a_long_description_classifiers_and_urls(name):
    import trove_classifiers

    folder = PROJECTS[name]
    project = _project(folder)
    readme = folder / project["readme"]
    text = readme.read_text()
    assert text.startswith(f"# {name}\n")
    # A long description is read on an index, outside this repository: no links into it.
    assert "](docs/" not in text and "DESIGN.md" not in text
    assert project["classifiers"] and set(project["classifiers"]) <= trove_classifiers.classifiers
    # With an SPDX license expression a License :: classifier is refused by the build backends.
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    # the specification it implements; no repository address is published yet, and none is invented
    assert project["urls"] == {"Specification": "https://onnx.ai/onnx/repo-docs/IR.html"}
    assert project["requires-python"] == ">=3.10"


def test_the_example_domain_package_depends_on_the_host_only():
    project = _project(EXAMPLE)
    names = {canonicalize_name(r.name) for r in _requirements(project)}
    assert "onnxkit-core" in names and "onnxkit" not in names
    assert (EXAMPLE / project["readme"]).is_file() and (EXAMPLE / "LICENSE").is_file()


def test_the_dependency_graph_has_no_cycle_and_every_internal_dependency_is_versioned():
    graph = {}
    for name, folder in PROJECTS.items():
        graph[name] = set()
        for req in _requirements(_project(folder)):
            dep = canonicalize_name(req.name)
            if dep in PROJECTS:
                assert str(req.specifier) in ("<0.3,>=0.2", ">=0.2,<0.3"), (name, str(req))
                assert Version(onnxkit.__version__) in req.specifier
                graph[name].add(dep)
    # Every plugin depends on the host, never on the meta-distribution.
    for name in PROJECTS:
        if name not in ("onnxkit", "onnxkit-core"):
            assert "onnxkit-core" in graph[name] and "onnxkit" not in graph[name], name
    assert graph["onnxkit-core"] == set()
    done, visiting = set(), []

    def visit(node):
        assert node not in visiting, f"dependency cycle: {' -> '.join(visiting + [node])}"
        if node not in done:
            visiting.append(node)
            for dep in graph[node]:
                visit(dep)
            visiting.pop()
            done.add(node)

    for name in graph:
        visit(name)


def test_the_meta_distribution_installs_the_usual_set_and_offers_the_extras():
    project = _project(PROJECTS["onnxkit"])
    assert {canonicalize_name(r.name) for r in _requirements(project, extras=False)} == {
        "onnxkit-core", "onnxkit-default-domain", "onnxkit-ml", "onnxkit-microsoft", "onnxkit-cpu"}
    extras = project["optional-dependencies"]
    assert [Requirement(r).name for r in extras["gpu"]] == ["onnxkit-gpu"]
    assert [Requirement(r).name for r in extras["microsoft"]] == ["onnxkit-microsoft"]
    assert Requirement(extras["dask"][0]).extras == {"dask"}
    assert Requirement(extras["ray"][0]).extras == {"ray"}
    core = _project(ROOT)["optional-dependencies"]
    assert any(Requirement(r).name == "dask" for r in core["dask"])
    assert any(Requirement(r).name == "ray" for r in core["ray"])


def test_the_test_extra_brings_the_scale_out_engines():
    names = {canonicalize_name(Requirement(r).name) for r in _project(ROOT)["optional-dependencies"]["test"]}
    assert {"pytest", "onnx", "onnxruntime", "skl2onnx", "dask", "ray"} <= names


@pytest.mark.parametrize("name", ["onnxkit-core", "onnxkit-default-domain", "onnxkit-ml", "onnxkit-microsoft",
                                  "onnxkit-cpu", "onnxkit-gpu"])
def test_every_data_file_of_a_package_is_declared_package_data(name):
    folder = PROJECTS[name]
    setuptools = tomllib.loads((folder / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = setuptools.get("package-data", {})
    [prefix] = [p.rstrip("*") for p in setuptools["packages"]["find"]["include"]]
    for package in folder.glob(f"{prefix}*/__init__.py"):
        for data in package.parent.rglob("*"):
            if data.is_dir() or data.suffix in (".py", ".pyc") or "__pycache__" in data.parts:
                continue
            dotted = ".".join(data.parent.relative_to(folder).parts)
            patterns = declared.get("*", []) + declared.get(dotted, [])
            assert any(data.match(p) for p in patterns), f"{data} is not declared package data"


def test_the_ml_wheel_carries_its_schemas_license_and_readme(tmp_path):
    # A copy: a build writes build/ and *.egg-info/ beside the sources it builds.
    folder = tmp_path / "ml_domain"
    shutil.copytree(PROJECTS["onnxkit-ml"], folder, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"),
                    str(folder)], check=True, capture_output=True)
    [wheel] = (tmp_path / "dist").glob("onnxkit_ml-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(f"onnxkit_ml-{onnxkit.__version__}.dist-info/METADATA").decode()
    assert "onnxkit_ml/schemas_data.json.gz" in names
    assert f"onnxkit_ml-{onnxkit.__version__}.dist-info/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in meta
    assert "Requires-Dist: onnxkit-core<0.3,>=0.2" in meta
    assert "# onnxkit-ml" in meta  # the README is the long description


def test_onnxkit_version_flag(capsys):
    from onnxkit.cli import main

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"onnxkit {onnxkit.__version__}")


def test_the_readme_set_up_commands_are_the_ones_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    setup = readme[readme.index("## Set-up"):readme.index("## Quickstart")]
    install = next(line for line in setup.splitlines() if line.startswith("python3 -m pip install -e "))
    # The install page repeats the command; .ci/run's comments name the README's real section.
    assert install in (ROOT / "docs" / "install.md").read_text()
    assert '(README, "Set-up")' in ci and "## Set-up" in readme
    pip_part, _, example = install.partition(" && ")
    assert pip_part.replace("python3 -m pip install -e", "python3 -m pip install -q -e", 1) in ci
    assert example in ci and "python3 -m pytest -q" in ci and "bash .ci/wheels" in ci
    # Every distribution is installed by the set-up, the meta-distribution included.
    for folder in PROJECTS.values():
        rel = folder.relative_to(ROOT).as_posix()
        assert ('-e ".[test]"' if rel == "." else f"-e {rel} ") in pip_part, rel
