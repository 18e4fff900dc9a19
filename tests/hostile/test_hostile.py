"""Hostile models at evaluation (issue: untrusted models).

Every case runs in its own subprocess under a 4 GiB address-space cap and a wall limit and
must end — within seconds, under 1 GiB of peak RSS — with an onnxkit error naming the limit
(refused before allocation), or with the right result; never with a MemoryError anywhere in
the error's cause chain.  The suite's limits (``SUITE_LIMITS``) are small so that every
refusal is cheap; ``test_default_limits_refuse`` shows the defaults refusing the same
models.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from models import CASES, F, I64, i64, one_op  # noqa: E402

SUITE_LIMITS = {"max_value_bytes": 512 << 20, "max_run_bytes": 768 << 20}
WALL_S = 60          # the subprocess is killed past this (a hang is a failure)
FAST_S = 5.0         # what "within seconds" means for the session's own time
RSS_MIB = 1024


@pytest.fixture(scope="module")
def server():
    """A process that has imported onnxkit once and forks one capped child per case."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(HERE / "run_case.py"), "--serve", str(WALL_S)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    yield proc
    proc.stdin.close()
    proc.wait(timeout=30)


def run_isolated(tmp_path, blob, feeds, limits=None, threads=0, hide_re2=False, suite_limits=True,
                 server=None, backend="cpu") -> dict:
    """Run one session in its own capped process (see run_case.py); its JSON report.

    With ``server`` the process is forked from one that already imported onnxkit; without, a
    fresh interpreter runs it (needed when the case changes what can be imported)."""
    path = tmp_path / "case.pkl"
    kwargs = {**(SUITE_LIMITS if suite_limits else {}), **(limits or {})}
    path.write_bytes(pickle.dumps((blob, feeds, kwargs, threads, hide_re2, backend)))
    if server is not None:
        server.stdin.write(f"{path}\n")
        server.stdin.flush()
        assert server.stdout.readline().strip() == "done"
        got = json.loads(Path(f"{path}.json").read_text())
        assert got["error"] != "timeout", f"no answer within {WALL_S} s"
        return got
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(HERE / "run_case.py"), str(path)], capture_output=True, text=True,
                          timeout=WALL_S, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_bounded(got: dict) -> None:
    assert got["seconds"] < FAST_S, got
    assert got["peak_rss_mib"] < RSS_MIB, got
    assert not got.get("memory_error"), got


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_case(name, tmp_path, server):
    case = CASES[name]()
    got = run_isolated(tmp_path, case.model, case.feeds, case.limits, server=server)
    assert_bounded(got)
    if case.expect == "ok":
        assert got["error"] is None, got
        assert case.check([np.array(r) for r in got["result"]]), got
        return
    kind, _, limit = case.expect.partition(":")
    assert got["error"] == kind and got["onnxkit"], got
    if limit:
        assert got["limit"] == limit, got
        if limit not in ("max_nesting_depth",):
            # names the limit, the node and its op_type, and the requested size
            assert limit in got["message"] and "requests" in got["message"] and "(" in got["message"], got


@pytest.mark.parametrize("name", ["constant_of_shape", "tile", "range", "matmul", "random_normal"])
def test_default_limits_refuse(name, tmp_path, server):
    """The default limits (derived from physical memory) refuse the astronomically large requests too."""
    case = CASES[name]()
    got = run_isolated(tmp_path, case.model, case.feeds, suite_limits=False, server=server)
    assert_bounded(got)
    assert got["error"] == "LimitExceeded" and got["limit"] == "max_value_bytes", got


GPU_CASES = ["constant_of_shape", "expand", "tile", "range", "resize", "pad", "matmul", "einsum", "gather", "where",
             "affine_grid", "conv_transpose", "max_unpool"]


@pytest.mark.parametrize("name", GPU_CASES)
def test_gpu_backend_refuses_the_same(name, tmp_path, server):
    """The check is the run loop's, not a kernel's: the torch backend refuses before allocating too."""
    pytest.importorskip("torch")
    case = CASES[name]()
    got = run_isolated(tmp_path, case.model, case.feeds, case.limits, server=server, backend="gpu")
    assert_bounded(got)
    assert got["error"] == "LimitExceeded" and got["limit"] == case.expect.partition(":")[2], got


def test_regex_without_re2_is_unsupported_at_session_creation(tmp_path):
    case = CASES["regex"]()
    got = run_isolated(tmp_path, case.model, case.feeds, hide_re2=True)
    assert got["error"] == "UnsupportedOperatorError", got
    assert "RegexFullMatch" in got["message"] and "google-re2" in got["message"], got


def test_session_from_8_threads_at_once(tmp_path, server):
    """Good and hostile runs interleaved on one session: each thread gets its own answer."""
    case = one_op("Tile", [("x", F, [2, 2]), ("r", I64, [2])], {})
    good = {"x": np.ones((2, 2), np.float32), "r": i64(2, 1)}
    bad = {"x": np.ones((2, 2), np.float32), "r": i64(1 << 19, 1 << 19)}
    got = run_isolated(tmp_path, case.model, (good, bad), threads=8, server=server)
    assert_bounded(got)
    assert got["error"] is None, got
    for k, r in enumerate(got["result"]):
        if k % 2 == 0:
            assert r == ["ok", np.ones((4, 2)).tolist()], (k, r)
        else:
            assert r == ["LimitExceeded", "max_value_bytes"], (k, r)
