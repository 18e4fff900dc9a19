"""Saving a model never replaces what is not a regular file and never leaves temporary files
(issue 29, item 8).

:func:`onnxkit.save` writes a temporary file beside the target and renames it over the target.
A FIFO (or a device node: as root, ``/dev/null``) at the target would become a regular file, a
directory gave a raw IsADirectoryError and left ``<dir>.tmp-PID`` behind, a missing directory a
raw FileNotFoundError.  Each is now a clear :class:`onnxkit.OnnxkitError` naming the path (and,
from a session, ``SessionOptions.optimized_model_filepath``; from ``onnxkit run``,
``--optimized-model``), the target as it was, and nothing else in its directory.  (Tests use a
FIFO for "not a regular file": making a device node needs root, and a test must not risk
``/dev/null``.)
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import warnings

import numpy as np
import pytest

import onnxkit
from onnxkit import InferenceSession, OnnxkitError, SessionOptions

from optimizer_cases import TP, helper, init, model

X = helper.make_tensor_value_info("x", TP.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])


def _proto(big: bool = False) -> bytes:
    inits = [init("w", np.arange(6, dtype=np.float32).reshape(2, 3))]
    nodes = [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Add", ["i", "w"], ["y"])]
    if big:  # an initializer large enough to go to an external data file
        inits.append(init("big", np.ones(4096, np.float32)))
        nodes.append(helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0))
        return model(nodes, [X], [Y, helper.make_tensor_value_info("s", TP.FLOAT, [])], inits).SerializeToString()
    return model(nodes, [X], [Y], inits).SerializeToString()


def _targets(tmp_path) -> dict:
    """name -> (path, a check that the thing at path is as it was)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "inside").write_text("kept")
    return {
        "fifo": (fifo, lambda: stat.S_ISFIFO(os.lstat(fifo).st_mode)),
        "directory": (folder, lambda: folder.is_dir() and os.listdir(folder) == ["inside"]),
        "missing directory": (tmp_path / "no" / "such" / "m.onnx", lambda: not (tmp_path / "no").exists()),
    }


def _left(tmp_path) -> list:
    return sorted(os.listdir(tmp_path))


@pytest.mark.parametrize("kind", ["fifo", "directory", "missing directory"])
def test_optimized_model_filepath_refuses_a_target_that_is_not_a_regular_file(tmp_path, kind):
    path, unchanged = _targets(tmp_path)[kind]
    before = _left(tmp_path)
    so = SessionOptions()
    so.optimized_model_filepath = str(path)
    with pytest.raises(OnnxkitError) as refused:
        InferenceSession(_proto(), so)
    message = str(refused.value)
    assert "optimized_model_filepath" in message and str(path) in message
    assert type(refused.value) is OnnxkitError  # not a raw OSError deep from the write
    assert unchanged() and _left(tmp_path) == before


@pytest.mark.parametrize("kind", ["fifo", "directory", "missing directory"])
def test_save_refuses_the_same_targets_with_or_without_external_data(tmp_path, kind):
    path, unchanged = _targets(tmp_path)[kind]
    before = _left(tmp_path)
    m = onnxkit.load(_proto(big=True))
    for external in (False, True):
        with pytest.raises(OnnxkitError, match="cannot save the model to") as refused:
            onnxkit.save(m, path, external_data=external)
        assert str(path) in str(refused.value)
        assert unchanged() and _left(tmp_path) == before  # no data file written first either


def test_an_external_data_location_that_is_a_fifo_is_not_replaced(tmp_path):
    data = tmp_path / "m.onnx.data"
    os.mkfifo(data)
    with pytest.raises(OnnxkitError, match="not a regular file"):
        onnxkit.save(onnxkit.load(_proto(big=True)), tmp_path / "m.onnx", external_data=True, size_threshold=1024)
    assert stat.S_ISFIFO(os.lstat(data).st_mode)
    assert [n for n in _left(tmp_path) if "tmp" in n] == []


def test_a_regular_file_and_a_link_to_one_are_written(tmp_path):
    target = tmp_path / "out.onnx"
    target.write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    m = onnxkit.load(_proto())
    for path in (target, link):
        so = SessionOptions()
        so.optimized_model_filepath = str(path)
        InferenceSession(m, so)
        written = onnxkit.load(str(path))
        assert [n.op_type for n in written.graph.node] == ["Add"]  # the Identity the optimizer removed
    assert _left(tmp_path) == ["link.onnx", "out.onnx"]


def test_a_write_that_fails_leaves_no_temporary_file_and_the_target_as_it_was(tmp_path, monkeypatch):
    import onnxkit.api as api

    target = tmp_path / "out.onnx"
    target.write_bytes(b"old")

    def failing(model, message):
        yield b"\x08\x07"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(api, "encode", failing)
    with pytest.raises(OnnxkitError, match="No space left"):
        onnxkit.save(onnxkit.load(_proto()), target)
    assert target.read_bytes() == b"old" and _left(tmp_path) == ["out.onnx"]


def test_cli_run_names_the_option(tmp_path):
    src = tmp_path / "m.onnx"
    src.write_bytes(_proto())
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    x = tmp_path / "x.npy"
    np.save(x, np.ones((2, 3), np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        done = subprocess.run([sys.executable, "-m", "onnxkit", "run", str(src), "--input", f"x={x}",
                               "--optimized-model", str(fifo)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--optimized-model" in done.stderr and str(fifo) in done.stderr and "Traceback" not in done.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["fifo", "m.onnx", "x.npy"]
