"""The suites run the default first-run policy (issue 42, item 9).

No conftest sets ``ONNXKIT_FIRST_RUN`` for every test (they did: ``warm``, so the ``tiered``
default users get ran in one test file).  The conftests of tests/ and plugins/cpu_backend/tests
offer two fixtures instead: ``first_run_policy`` runs a test under ``tiered`` (as a fresh
process's session: numba not imported yet, the cold plan with numpy bodies, kept for the whole
test) and ``warm`` (compiled loops and specialized plans from the first run), for the tests of
session behaviour that can differ between the two; ``warm_bodies`` is ``warm`` for a test of the
compiled loops themselves.  Here: that no conftest goes back to a global override, that the two
conftests offer the same fixtures, that the ``tiered`` case really plans cold (and that nothing of
it outlives its test), and how many test functions the matrix runs twice (the suite's time: keep
it a focused set).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.runtime import InferenceSession
from onnxkit.runtime.bodies import POLICIES, describe, first_run_policy as policy_in_force

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = "ONNXKIT_FIRST_RUN"
MATRIX = "first_run_policy"
#: the test functions that use the matrix (each runs twice); a new one changes this number
MATRIX_FUNCTIONS = 29


def _conftests() -> list[Path]:
    found = sorted((ROOT / "tests").rglob("conftest.py")) + sorted((ROOT / "plugins").rglob("conftest.py"))
    return found + [p for p in [ROOT / "conftest.py"] if p.exists()]


def _mentions(node: ast.AST, text: str) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == text for n in ast.walk(node))


def _is_autouse_fixture(fn: ast.AST) -> bool:
    return isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(d, ast.Call) and any(k.arg == "autouse" and isinstance(k.value, ast.Constant) and k.value.value
                                        for k in d.keywords)
        for d in fn.decorator_list)


def global_settings(source: str) -> list[int]:
    """The lines of ``source`` (a conftest) that set ``ONNXKIT_FIRST_RUN`` for every test: a
    statement run at import (outside any function or class) or an autouse fixture naming it."""
    found = []
    for stmt in ast.parse(source).body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not _is_autouse_fixture(stmt):
            continue
        if _mentions(stmt, VARIABLE):
            found.append(stmt.lineno)
    return found


def test_the_scan_finds_a_global_setting():
    assert global_settings('import os\nos.environ.setdefault("ONNXKIT_FIRST_RUN", "warm")\n') == [2]
    assert global_settings('import os\nif True:\n    os.environ["ONNXKIT_FIRST_RUN"] = "warm"\n') == [2]
    assert global_settings('import pytest\n@pytest.fixture(autouse=True)\ndef f(monkeypatch):\n'
                           '    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")\n') == [3]
    assert global_settings('import pytest\n@pytest.fixture\ndef f(monkeypatch):\n'
                           '    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")\n') == []


def test_no_conftest_sets_the_first_run_policy_for_every_test():
    conftests = _conftests()
    assert ROOT / "tests" / "conftest.py" in conftests
    assert ROOT / "plugins" / "cpu_backend" / "tests" / "conftest.py" in conftests
    offending = {str(p.relative_to(ROOT)): lines for p in conftests
                 if (lines := global_settings(p.read_text(encoding="utf-8")))}
    assert offending == {}, "a conftest sets ONNXKIT_FIRST_RUN for every test: use first_run_policy or warm_bodies"
    pytest_config = (ROOT / "pyproject.toml").read_text(encoding="utf-8").split("[tool.pytest.ini_options]", 1)[1]
    assert VARIABLE not in pytest_config.split("\n[", 1)[0]


def _top_level(path: Path) -> dict:
    """The functions and simple assignments of a module, by name."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node
    return found


def test_both_test_trees_offer_the_same_fixtures():
    trees = [ROOT / "tests" / "conftest.py", ROOT / "plugins" / "cpu_backend" / "tests" / "conftest.py"]
    for path in trees:
        names = _top_level(path)
        assert ast.literal_eval(names["FIRST_RUN_POLICIES"].value) == ("tiered", "warm"), path
        fixture = names[MATRIX]
        [decorator] = fixture.decorator_list
        assert [ast.unparse(k) for k in decorator.keywords] == ["params=FIRST_RUN_POLICIES"], path
        assert "warm_bodies" in names and "as_a_fresh_process" in names, path
    # the same code: the docstrings may say it in their own words
    def code(path, name):
        fn = _top_level(path)[name]
        body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else fn.body
        return [ast.dump(s) for s in body]
    for name in (MATRIX, "warm_bodies"):
        assert code(trees[0], name) == code(trees[1], name), name
    patched = [{ast.literal_eval(c.args[1]) for c in ast.walk(_top_level(p)["as_a_fresh_process"])
                if isinstance(c, ast.Call) and ast.unparse(c.func) == "monkeypatch.setattr"} for p in trees]
    assert patched[0] == patched[1] == {"sys", "_numba", "SETUP_S"}


def test_the_default_policy_is_one_the_matrix_runs(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    assert policy_in_force() == "tiered" and {"tiered", "warm"} <= set(POLICIES)


def _softmax_session() -> tuple:
    g = ir.Graph(node=[ir.Node(["x"], ["y"], op_type="Softmax", name="softmax")], name="g",
                 input=[ir.ValueInfo("x", ir.tensor_type(1, [2, 8]))], output=[ir.ValueInfo("y", ir.tensor_type(1, [2, 8]))])
    model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g)
    return InferenceSession(model), np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)


def test_the_tiered_case_plans_cold_for_the_whole_test_and_warm_plans_compiled_loops(first_run_policy):
    compiled = pytest.importorskip("onnxkit_cpu.compiled")
    sess, x = _softmax_session()
    for _ in range(3):
        y = sess.run(None, {"x": x})[0]
    np.testing.assert_allclose(y, np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-6)
    [line] = describe(sess.plan)
    body = line.rsplit(" -> ", 1)[1]
    if first_run_policy == "tiered":
        assert body == "numpy (cold plan; compiled later)"
        assert sess._cold is not None and sess._cold.deferred                 # kept: not promoted
        assert all(what.startswith("compiled activation.") for what in sess._cold.deferred)
    else:
        assert sess._cold is None
        assert body == ("compiled (activation)" if compiled.available() else "numpy (compiled loops off)")


def test_nothing_of_the_fresh_process_outlives_its_test():
    compiled = pytest.importorskip("onnxkit_cpu.compiled")
    # the suite's process has numba loaded (conftest), whatever test ran before this one
    assert compiled.sys is sys and compiled.SETUP_S < 10
    if compiled.available():
        assert "numba" in sys.modules and compiled._numba is sys.modules["numba"]


def _uses_matrix(path: Path) -> list[str]:
    """The test functions of ``path`` that run under :data:`MATRIX`: named in their arguments or
    ``usefixtures`` (theirs, their class's or the module's ``pytestmark``), or through a fixture
    of the module that takes it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def marked(decorators) -> bool:
        return any(isinstance(d, ast.Call) and ast.unparse(d.func).endswith("usefixtures") and _mentions(d, MATRIX)
                   for d in decorators)

    module_wide = any(isinstance(s, ast.Assign) and any(ast.unparse(t) == "pytestmark" for t in s.targets)
                      and _mentions(s.value, MATRIX) and "usefixtures" in ast.unparse(s.value) for s in tree.body)
    functions = [(n, []) for n in tree.body if isinstance(n, ast.FunctionDef)]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        functions += [(n, cls.decorator_list) for n in cls.body if isinstance(n, ast.FunctionDef)]
    via, grown = {MATRIX}, True
    while grown:  # the module's fixtures that take the matrix, directly or through each other
        more = {fn.name for fn, _ in functions if not fn.name.startswith("test") and {a.arg for a in fn.args.args} & via}
        grown, via = not more <= via, via | more
    return [fn.name for fn, outer in functions if fn.name.startswith("test")
            and (module_wide or marked(outer) or marked(fn.decorator_list) or {a.arg for a in fn.args.args} & via)]


def test_the_matrix_runs_a_focused_set_of_tests():
    files = sorted((ROOT / "tests").rglob("test_*.py")) + sorted((ROOT / "plugins").glob("*/tests/**/test_*.py"))
    using = {str(p.relative_to(ROOT)): names for p in files if (names := _uses_matrix(p))}
    count = sum(len(v) for v in using.values())
    assert count == MATRIX_FUNCTIONS, using
