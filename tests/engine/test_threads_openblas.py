"""The BLAS limit without threadpoolctl where every BLAS loaded is an OpenBLAS listed in
``/proc/self/maps`` (issue 44): the controllers found so are the libraries threadpoolctl finds,
read the same thread counts, and set them as threadpoolctl reads them back."""

from __future__ import annotations

import os

import numpy as np  # noqa: F401 - loads numpy's BLAS
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

import onnxkit.runtime.threads as threads  # noqa: E402


def _threadpoolctl_blas() -> dict:
    return {os.path.realpath(i["filepath"]): i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}


def _openblas_or_skip() -> tuple:
    found = threads._openblas_only()
    if found is None or not found:
        pytest.skip("no /proc/self/maps, or a BLAS other than OpenBLAS loaded")
    return found


def test_the_openblas_found_without_threadpoolctl_is_the_one_it_finds():
    found = _openblas_or_skip()
    theirs = _threadpoolctl_blas()
    assert {os.path.realpath(c.filepath) for c in found} == set(theirs)
    for c in found:
        assert c.get_num_threads() == theirs[os.path.realpath(c.filepath)]["num_threads"]
        assert c.user_api == "blas"


def test_the_limit_sets_and_restores_the_count_threadpoolctl_reads():
    found = _openblas_or_skip()
    before = {p: i["num_threads"] for p, i in _threadpoolctl_blas().items()}
    target = 1 if max(before.values()) > 1 else 2
    with threads._Limit(found, target):
        assert {i["num_threads"] for i in _threadpoolctl_blas().values()} == {target}
        assert threads.intra_op_threads() == target
    assert {p: i["num_threads"] for p, i in _threadpoolctl_blas().items()} == before


def test_a_library_not_known_as_openblas_leaves_it_to_threadpoolctl(monkeypatch):
    """A BLAS-like name that is not certainly OpenBLAS (``libblas``, MKL, BLIS): threadpoolctl
    decides, and the controllers are its own."""
    _openblas_or_skip()
    monkeypatch.setattr(threads, "_OPENBLAS_NAMES", ("no-such-library",))
    monkeypatch.setattr(threads, "_blas_libs", None)
    assert threads._openblas_only() is None
    libs = threads._blas_controllers()
    assert libs and all(isinstance(lib, threadpoolctl.LibController) for lib in libs)
    assert {os.path.realpath(lib.filepath) for lib in libs} == set(_threadpoolctl_blas())
    monkeypatch.setattr(threads, "_blas_libs", None)   # the next look finds the fast path again


def test_without_proc_maps_threadpoolctl_decides(monkeypatch):
    import builtins

    real_open = builtins.open

    def no_maps(path, *a, **k):
        if path == "/proc/self/maps":
            raise FileNotFoundError(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", no_maps)
    assert threads._openblas_only() is None
