"""The documentation: the site builds with no warning, and every code block of README.md and of
docs/*.md runs.

* ``mkdocs build --strict`` (mkdocs.yml: Material theme; a warning, a broken link or anchor, or a
  page left out of the navigation fails the build) into a temporary folder.
* Each page's blocks run in one fresh process, in the page's order, in a temporary folder holding
  a copy of ``examples/`` (the bundled model ``examples/digits.onnx`` and its input), so a block
  can use what an earlier one wrote.  ```` ```python ```` blocks are executed (with the page's line
  numbers: a traceback names ``PAGE.md`` and its line); each ``onnxkit ...`` or ``python ...``
  command of a ```` ```console ```` / ```` ```bash ```` block runs at its place and must exit with
  the status its ``# exit N`` comment states (0 without one); a block titled ``title="FILE"`` is
  written to ``FILE`` at its place and not run.
* A block marked illustrative (``<!-- docs-test: illustrative -->`` on the line before it) is
  compiled, not run; :data:`ILLUSTRATIVE_BLOCKS` is their exact number per page, and each says
  on the page why it is not run.
* ```` ```sh ```` blocks are the install steps (``pip install``, ``python3 -m build``): they are not
  run here, but by CI: ``.ci/run`` runs the set-up command (``tests/structure/test_packaging.py`` holds the
  page and ``.ci/run`` to the same command) and ``.ci/wheels`` builds the wheels, installs them in a
  fresh virtual environment (torch first) and builds, installs and runs the plugin guide's example
  extracted from ``docs/plugins.md`` alone.  Each must hold such a step, so no other command hides
  in one; :data:`INSTALL_BLOCKS` is their exact number per page.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
try:
    import cli_reference
    from docs_blocks import ILLUSTRATIVE, RUNNER, blocks, commands, page_script
finally:
    sys.path.remove(str(ROOT / "tools"))

PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))

#: Blocks shown but not run, per page (the marker ``<!-- docs-test: illustrative -->``): the two
#: scale-out examples start a Dask cluster and a Ray instance (tests/integrations/test_integrations_dask.py and
#: tests/integrations/test_integrations_ray.py run both engines).
ILLUSTRATIVE_BLOCKS = {"scaleout.md": 2}
#: ```sh blocks (install steps, run by .ci/run and .ci/wheels, not here), per page.
INSTALL_BLOCKS = {"README.md": 3, "install.md": 3, "plugins.md": 1, "scaleout.md": 1}

def test_the_site_builds_without_warnings(tmp_path):
    import importlib.util

    assert importlib.util.find_spec("mkdocs") and importlib.util.find_spec("material"), \
        "mkdocs and mkdocs-material are in the test extra: pip install -e '.[test]'"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                           "--site-dir", str(tmp_path / "site")], capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, cwd=ROOT)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "WARNING" not in log, log
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "plugins" / "index.html").is_file()


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in PAGES[1:]:
        assert f" {page.name}" in nav, f"docs/{page.name} is not in mkdocs.yml's nav"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_code_blocks_run(page, tmp_path):
    script = page_script(page, page.relative_to(ROOT).as_posix())
    if script is None:
        assert not any(b.lang in ("python", "console", "bash") for b in blocks(page))
        return
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("*.egg-info", "build"))
    (tmp_path / "_docs_runner.py").write_text(RUNNER)
    name = tmp_path / page.name
    name.write_text(script)
    done = subprocess.run([sys.executable, name.name], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(tmp_path)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])})
    assert done.returncode == 0, f"{page.name}'s code blocks failed:\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"


def test_a_failing_command_fails_its_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# p\n\n```console\n$ onnxkit check missing.onnx\n```\n")
    script = page_script(page, "page.md")
    (tmp_path / "_docs_runner.py").write_text(RUNNER)
    (tmp_path / "page.py").write_text(script)
    done = subprocess.run([sys.executable, "page.py"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode != 0 and "page.md:4: `onnxkit check missing.onnx` exited 2, the page says 0" in done.stderr


def test_a_non_onnxkit_command_in_a_console_block_is_refused(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("x\n\n```console\n$ pip install onnxkit\n```\n")
    [b] = blocks(page)
    with pytest.raises(ValueError, match="not an `onnxkit` or `python` command"):
        commands(b, "p.md")


def test_an_illustrative_block_is_compiled_not_run(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(f"x\n\n{ILLUSTRATIVE}\n```python\nraise SystemExit(7)\n```\n\n```python\nprint('ran')\n```\n")
    first, second = blocks(page)
    assert first.illustrative and not second.illustrative
    script = page_script(page, "p.md")
    assert "raise SystemExit(7)" in script and "compile(" in script
    (tmp_path / "_docs_runner.py").write_text(RUNNER)
    (tmp_path / "p.py").write_text(script)
    done = subprocess.run([sys.executable, "p.py"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "ran\n", done
    page.write_text(f"x\n\n{ILLUSTRATIVE}\n```python\nif:\n```\n")  # compiled: a syntax error still fails
    (tmp_path / "p.py").write_text(page_script(page, "p.md"))
    assert subprocess.run([sys.executable, "p.py"], cwd=tmp_path, capture_output=True).returncode != 0


def test_the_excluded_blocks_are_the_counted_ones():
    illustrative = {p.name: n for p in PAGES if (n := sum(b.illustrative for b in blocks(p)))}
    install = {p.name: n for p in PAGES if (n := sum(b.lang == "sh" for b in blocks(p)))}
    assert illustrative == ILLUSTRATIVE_BLOCKS
    assert install == INSTALL_BLOCKS


def test_the_cli_reference_is_current():
    assert (ROOT / "docs" / "cli.md").read_text() == cli_reference.render(), \
        "docs/cli.md is stale: run `python tools/cli_reference.py`"


def test_the_cli_reference_names_every_command_and_argument():
    from onnxkit.cli import build_parser

    text = cli_reference.render()
    for name, sub in cli_reference.subcommands(build_parser()):
        assert f"## `onnxkit {name}`" in text
        for action in sub._actions:
            if action.help != "==SUPPRESS==" and not isinstance(action, (argparse._HelpAction,
                                                                          argparse._SubParsersAction)):
                label = cli_reference.label(action)
                assert f"| {label} |" in text, (name, label)
                assert action.help, f"onnxkit {name}: {label} has no help text"


def test_the_docs_json_blocks_parse():
    for page in PAGES:
        for b in blocks(page):
            if b.lang == "json":
                json.loads(b.text)


def test_the_readme_starts_a_newcomer_in_200_lines():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for section in ("## Install", "## Set-up", "## Quickstart", "## Coming from onnxruntime", "## The command line",
                    "## A plugin in 30 lines", "## Conformance", "## Where to go next"):
        assert f"\n{section}\n" in readme, section
    assert "DESIGN.md" not in readme and "not on PyPI" in readme and "pip install torch==2.13.0" in readme
    # Every link into docs/ names a page that exists.
    for target in {m.split("#")[0] for m in re.findall(r"\]\((docs/[^)]+)\)", readme)}:
        assert (ROOT / target).is_file(), target


def test_the_dependency_table_is_the_distributions_own():
    """docs/install.md's table of distributions lists each one's requirements, as its pyproject.toml does."""
    folders = {"onnxkit": "packaging/onnxkit", "onnxkit-core": "."} | {
        tomllib.loads(p.read_text())["project"]["name"]: str(p.parent.relative_to(ROOT))
        for p in sorted((ROOT / "plugins").glob("*/pyproject.toml"))}
    rows = {}
    for line in (ROOT / "docs" / "install.md").read_text().splitlines():
        m = re.match(r"^\| `(onnxkit[a-z-]*)` \| .* \| (?P<deps>[^|]+) \|$", line)
        if m:
            rows[m[1]] = [d.strip() for d in m["deps"].split(",")]
    assert sorted(rows) == sorted(folders) and len(rows) == 7
    for name, folder in folders.items():
        deps = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]["dependencies"]
        names = [re.split(r"[<>=!\[; ]", d, maxsplit=1)[0] for d in deps]
        assert rows[name] == names, (f"docs/install.md's row of {name} says it depends on {rows[name]}, its "
                                     f"pyproject.toml on {names}: update the table")


def test_the_readme_builds_the_wheels_ci_builds():
    """The README's and docs/install.md's `for p in ...` wheel loops name the projects .ci/wheels
    builds (less examples/custom_domain, CI's own example), in its order; .ci/wheels runs the README's
    blocks and the plugin guide's example in the fresh environment."""
    ci = (ROOT / ".ci" / "wheels").read_text()
    built = re.search(r"for project in (.*?); do", ci, re.S)[1].replace("\\\n", " ").split()
    assert built[-1] == "examples/custom_domain" and len(built) == 8
    for page in (ROOT / "README.md", ROOT / "docs" / "install.md"):
        [loop] = re.findall(r"^for p in (.*); do$", page.read_text(), re.M)
        assert loop.split() == built[:-1], page.name
    assert 'docs_blocks.py" script "$repo/README.md"' in ci
    assert 'docs_blocks.py" extract "$repo/docs/plugins.md"' in ci and "onnxkit-swish" in ci
