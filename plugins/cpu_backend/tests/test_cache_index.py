"""onnxkit_cpu.compiled.cache_index against numba itself: the index file numba writes for a
function is the one read, a loop numba compiled is held and one it did not is not, a changed
source or another numba version is not held (numba compiles again), and a crafted index imports
nothing.  The deferral's estimate follows it (a load or a compile)."""

from __future__ import annotations

import importlib.util
import os
import pickle
import sys

import pytest

numba = pytest.importorskip("numba")

from onnxkit_cpu.compiled import cache_index  # noqa: E402

SOURCE = "def twice(x):\n    return 2.0 * x\n\n\ndef thrice(x):\n    return 3.0 * x\n"


def _module(folder, name="loops_for_the_cache_test"):
    path = folder / f"{name}.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """``$NUMBA_CACHE_DIR`` a new folder, for numba (its config, read at import) and for the reader."""
    folder = tmp_path / "numba-cache"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(folder))
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", str(folder))
    cache_index._fresh.cache_clear()
    return folder


def _index_files(folder):
    return sorted(str(p) for p in folder.rglob("*.nbi"))


def test_what_numba_compiled_is_held_and_the_index_is_the_one_numba_wrote(tmp_path, cache_dir):
    module = _module(tmp_path)
    assert cache_index.holds(module.twice) is False and cache_index.holds(module.thrice) is False
    assert numba.njit(cache=True)(module.twice)(2.0) == 4.0
    assert _index_files(cache_dir) == [cache_index.index_path(module.twice)]
    assert cache_index.holds(module.twice) is True
    assert cache_index.holds(module.thrice) is False  # another function of the same module: not compiled
    assert "numba" in sys.modules  # (the test's numba; the reader itself imports none: below)


def test_a_changed_source_or_another_numba_is_not_held(tmp_path, cache_dir, monkeypatch):
    (tmp_path / "src").mkdir()
    module = _module(tmp_path / "src")
    numba.njit(cache=True)(module.twice)(1.0)
    assert cache_index.holds(module.twice) is True
    monkeypatch.setattr(cache_index, "_installed_version", lambda: "0.0.0")
    assert cache_index.holds(module.twice) is False
    monkeypatch.undo()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(cache_dir))
    path = tmp_path / "src" / "loops_for_the_cache_test.py"
    path.write_text(SOURCE + "# changed\n")  # same lines: the index path is the same, its stamp stale
    assert cache_index.holds(module.twice) is False
    path.write_text(SOURCE)
    assert cache_index.holds(module.twice) is True


def test_in_tree_cache_without_numba_cache_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", "")
    module = _module(tmp_path)
    want = str(tmp_path / "__pycache__" / f"loops_for_the_cache_test.twice-1.py{sys.version_info[0]}"
                                          f"{sys.version_info[1]}{sys.abiflags}.nbi")
    assert cache_index.index_path(module.twice) == want
    numba.njit(cache=True)(module.twice)(1.0)
    assert os.path.isfile(want) and cache_index.holds(module.twice) is True


def test_what_the_rule_cannot_tell(tmp_path, cache_dir, monkeypatch):
    scope: dict = {}
    exec("def made_here(x):\n    return x\n", scope)  # no file: numba cannot cache it either
    assert cache_index.holds(scope["made_here"]) is None
    module = _module(tmp_path)
    monkeypatch.setenv("NUMBA_CACHE_LOCATOR_CLASSES", "UserWideCacheLocator")
    assert cache_index.holds(module.twice) is None


def test_a_crafted_index_imports_nothing(tmp_path, cache_dir, monkeypatch):
    module = _module(tmp_path)
    path = cache_index.index_path(module.twice)
    os.makedirs(os.path.dirname(path))
    marker = tmp_path / "ran"
    with open(path, "wb") as f:  # a global to resolve: os.system, touching the marker
        f.write(pickle.dumps(_Crafted(str(marker))))
    with open(path[:-4] + ".1.nbc", "wb") as f:
        f.write(b"x")
    assert cache_index.holds(module.twice) is False and not marker.exists()


class _Crafted:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_the_reader_does_not_import_numba(tmp_path):
    import subprocess

    code = ("import sys\nfrom onnxkit_cpu.compiled import cache_index, norm\n"
            "held = cache_index.holds(norm._ROWS.fn)\nprint(held in (True, False, None), 'numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "False"]


@pytest.mark.parametrize("held", [True, False, None])
def test_a_deferral_costs_a_load_or_a_compile(monkeypatch, held):
    from onnxkit.runtime.bodies import FirstRun, planning_cold
    from onnxkit_cpu import compiled
    from onnxkit_cpu.compiled import norm

    monkeypatch.setattr(compiled, "_numba", None)
    monkeypatch.setattr(compiled, "sys", type("Sys", (), {"modules": {}}))  # as a fresh process: numba not loaded
    monkeypatch.setattr(compiled.cache_index, "holds", lambda fn: held)
    record = FirstRun()
    with planning_cold(record):
        assert norm._ROWS.get() is None
    assert record.deferred == [f"compiled {norm._ROWS.name}"]
    assert record.cost == pytest.approx(compiled.SETUP_S + (compiled.LOAD_S if held else compiled.COMPILE_S))
    assert record.compiles is (held is not True)
    with planning_cold(record):  # a second loop of the same plan, held: the plan's loops are loaded
        monkeypatch.setattr(compiled.cache_index, "holds", lambda fn: True)
        assert norm._LEAF.get() is None
    assert len(record.deferred) == 2 and not record.compiles
    assert record.cost == pytest.approx(compiled.SETUP_S + 2 * compiled.LOAD_S)


def test_the_digests_come_from_the_built_in_hash_modules_with_hashlibs_values():
    """cache_index hashes with CPython's built-in ``_sha1`` / ``_sha256`` (``_sha2``) modules,
    not hashlib's OpenSSL constructors (whose import a first result would pay), and the digests
    are the standard ones numba's rule names (FIPS 180-4 test vectors for "abc")."""
    sha1, sha256 = cache_index._hash("sha1"), cache_index._hash("sha256")
    assert sha1.__module__ == "_sha1" and sha256.__module__ in ("_sha256", "_sha2")
    assert sha1(b"abc").hexdigest() == "a9993e364706816aba3e25717850c26c9cd0d89d"
    assert sha256(b"abc").hexdigest() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
