"""Six libraries that import onnxruntime, unchanged, give equal results with onnxkit standing in.

Each test runs one client's job (``tools/ort_clients.py``: the library's public API on inputs
made there, nothing downloaded) twice, each in a fresh process: with the real onnxruntime, and
under ``python -m onnxkit.ort``; the results must be equal (floats within the tool's RTOL /
ATOL), and the stand-in run must have used onnxkit's module.  A library that is not importable
is skipped: they are the ``clients`` extra of pyproject.toml, installed apart from ``test``
(optimum needs a transformers older than the one the corpus tests pin).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import ort_clients  # noqa: E402

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("name", sorted(ort_clients.JOBS))
def test_client_gives_onnxruntime_s_results_under_the_runner(name):
    module = ort_clients.NEEDS[name]
    if importlib.util.find_spec(module.split(".")[0]) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[clients]')")
    result = ort_clients.compare(name)
    assert result["status"] == "equal", result["detail"]


def test_differences_are_found_where_they_are():
    same = {"a": [1.0, "x", {"b": 2}], "c": True}
    assert ort_clients.differences(same, same) == []
    assert ort_clients.differences({"a": 1.0}, {"a": 1.0 + 1e-7}) == []
    assert ort_clients.differences({"a": 1.0}, {"a": 1.01}) == [".a: 1.0 vs 1.01"]
    assert ort_clients.differences({"a": "x7kq"}, {"a": "x7kg"}) == [".a: 'x7kq' vs 'x7kg'"]
    assert ort_clients.differences([1, 2], [1, 2, 3]) == [": 2 items vs 3"]
    assert ort_clients.differences({"a": 1}, {"b": 1}) == [": keys ['a'] vs ['b']"]
