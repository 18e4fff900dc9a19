"""The command line as a newcomer meets it: no dead end, every help text, exit codes as documented
(0 ok, 1 a negative verdict on the model, 2 usage / I/O / not a model, 3 internal error)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.helper as oh
import pytest

from onnxkit.cli import build_parser
from onnxkit.registry import build_registry


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "onnxkit", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def _relu(path, dims=("batch", 50, 64), duplicate_name=False):
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(dims))
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, list(dims))
    nodes = [oh.make_node("Relu", ["x"], ["y"], name="r")]
    if duplicate_name:
        nodes.append(oh.make_node("Relu", ["x"], ["z"], name="r"))  # a warning: duplicate-node-name
    onnx.save(oh.make_model(oh.make_graph(nodes, "g", [x], [y]), opset_imports=[oh.make_opsetid("", 17)]), path)
    return path


def test_show_prints_shapes_whose_first_dimension_is_a_lowercase_name(tmp_path):
    out = run("show", _relu(tmp_path / "m.onnx"))
    assert out.returncode == 0, out.stderr
    assert "tensor(float)[batch, 50, 64]" in out.stdout        # not read as rich markup


def test_unsupported_names_an_unknown_backend(tmp_path):
    out = run("unsupported", _relu(tmp_path / "m.onnx"), "--backend", "tpu")
    assert out.returncode == 2
    assert "no backend 'tpu'" in out.stderr and "'cpu'" in out.stderr and "internal error" not in out.stderr


@pytest.mark.parametrize("command", ["check", "show", "print", "run", "hash"])
def test_a_device_file_is_not_said_to_be_missing(command):
    out = run(command, "/dev/zero")
    assert out.returncode == 2
    assert "/dev/zero" in out.stderr and "does not exist" not in out.stderr and "internal error" not in out.stderr


def test_check_says_a_missing_file_does_not_exist(tmp_path):
    out = run("check", tmp_path / "nothing.onnx")
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_a_conformance_folder_without_cases_or_data_does_not_pass(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run("conformance", "run", empty)
    assert out.returncode == 1 and "no test case" in out.stderr
    case = tmp_path / "cases" / "test_relu"
    case.mkdir(parents=True)
    _relu(case / "model.onnx", dims=(2,))
    out = run("conformance", "run", tmp_path / "cases", "-v")       # a model with no test_data_set_*
    assert out.returncode == 1
    assert "0 passed" in out.stdout and "1 errors" in out.stdout and "no test data" in out.stdout
    (case / "test_data_set_0").mkdir()                               # a data set with no outputs
    out = run("conformance", "run", tmp_path / "cases")
    assert out.returncode == 1 and "0 passed" in out.stdout


def test_a_misspelt_plugin_selection_is_reported():
    reg = build_registry(include=["onnxkit-cpux", "onnxkit-default-domain"])
    faults = [f for f in reg.faults if f.hook == "select"]
    assert len(faults) == 1 and "onnxkit-cpux" in str(faults[0]) and "onnxkit-cpu" in str(faults[0])
    assert not [f for f in build_registry(include=["onnxkit-cpu"]).faults if f.hook == "select"]


def test_a_missing_backend_under_onnxkit_plugins_says_why(tmp_path):
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    out = run("run", _relu(tmp_path / "m.onnx", dims=(2,)), "-i", f"x={tmp_path / 'x.npy'}",
              env={"ONNXKIT_PLUGINS": "onnxkit-cpux"})
    assert out.returncode == 2 and "ONNXKIT_PLUGINS='onnxkit-cpux'" in out.stderr
    out = run("plugins", env={"ONNXKIT_PLUGINS": "onnxkit-cpux"})
    assert out.returncode == 1 and "onnxkit-cpux" in out.stdout + out.stderr


def test_run_strict_refusal_is_a_verdict(tmp_path):
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    model = _relu(tmp_path / "m.onnx", dims=(2,), duplicate_name=True)
    out = run("run", model, "-i", f"x={tmp_path / 'x.npy'}", "--strict")
    assert out.returncode == 1 and "does not conform" in out.stderr
    assert run("run", model, "-i", f"x={tmp_path / 'x.npy'}").returncode == 0   # warnings alone run


def _parsers(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield path + (name,), sub
                yield from _parsers(sub, path + (name,))


def test_every_command_and_argument_has_help_text():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) >= 12
    for path, sub in parsers:
        assert sub.description and sub.description[0].isalpha(), path       # no empty or markup-led text
        assert "``" not in sub.description, path
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                assert all(a.help for a in action._choices_actions), path
            else:
                assert action.help and action.help[0] not in "`[*_", (path, action.dest)
