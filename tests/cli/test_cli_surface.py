"""The command line as a user meets it: --version, help, show, run --profile, errors without tracebacks."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import onnxkit
from onnxkit import ir
from onnxkit.cli import build_parser

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DIGITS = EXAMPLES / "digits.onnx"
INPUT = EXAMPLES / "digits_input.npy"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "onnxkit", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_version():
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"onnxkit {onnxkit.__version__} (ONNX IR version 14)"


def _parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for p in action.choices.values():
                yield from _parsers(p)


def test_every_argument_of_every_command_has_help():
    missing = []
    for p in _parsers(build_parser()):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not action.help:
                missing.append(f"{p.prog} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_show_summarizes_a_model_as_json_and_as_tables():
    out = cli("show", DIGITS, "--format", "json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    model = onnxkit.load(DIGITS)
    assert s["ir_version"] == model.ir_version and s["producer"] == f"{model.producer_name} {model.producer_version}" == "onnxkit 0.2.0"
    assert s["opset_import"] == {"ai.onnx": 21}
    assert s["inputs"] == [{"name": "image", "type": "tensor(float)[N, 1, 8, 8]"}]
    assert s["nodes"]["by_op_type"] == {"Conv": 1, "Flatten": 1, "Gemm": 1, "MaxPool": 1, "Relu": 1, "Softmax": 1}
    assert s["initializers"]["count"] == len(model.graph.initializer)
    assert s["initializers"]["bytes"] == sum(t.numpy().nbytes for t in model.graph.initializer)
    assert s["metadata"] == {"model_license": "Apache-2.0"}
    text = cli("show", DIGITS)
    assert text.returncode == 0 and "Softmax" in text.stdout and "tensor(float)[N, 10]" in text.stdout


def test_run_profile_prints_the_top_operators(tmp_path):
    out = cli("run", DIGITS, "--input", f"image={INPUT}", "--profile", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "top operators" in out.stdout and "Conv" in out.stdout and "Gemm" in out.stdout
    traces = list(tmp_path.glob("onnxkit_profile_*.json"))
    assert len(traces) == 1 and json.loads(traces[0].read_text())


def test_output_names_with_path_characters_are_written_safely(tmp_path):
    g = ir.Graph(node=[ir.Node(["X"], ["a/b"], op_type="Relu"), ir.Node(["X"], ["../up"], op_type="Neg")], name="g",
                 input=[ir.ValueInfo("X", ir.tensor_type(1, [2]))],
                 output=[ir.ValueInfo("a/b", ir.tensor_type(1, [2])), ir.ValueInfo("../up", ir.tensor_type(1, [2]))])
    onnxkit.save(ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 14)], graph=g), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.array([1, -2], np.float32))
    out = cli("run", tmp_path / "m.onnx", "-i", f"X={tmp_path / 'x.npy'}", "-o", tmp_path / "out")
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["_up.npy", "a_b.npy"]
    assert np.load(tmp_path / "out" / "a_b.npy").tolist() == [1, 0]
    assert not (tmp_path / "up.npy").exists()


def test_a_pickled_npy_is_refused_and_says_so(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    out = cli("run", DIGITS, "--input", f"image={tmp_path / 'obj.npy'}")
    assert out.returncode == 2 and "pickled Python objects" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("command", ["run", "show", "print", "check", "hash", "infer", "unsupported"])
def test_undecodable_files_exit_2_saying_what_they_are(tmp_path, command):
    data = DIGITS.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.onnx").write_bytes(b"this is not a model at all\n" * 3)
    cut = cli(command, tmp_path / "cut.onnx")
    assert cut.returncode == 2 and "truncated" in cut.stderr and "Traceback" not in cut.stderr
    text = cli(command, tmp_path / "text.onnx")
    assert text.returncode == 2 and "not an ONNX model" in text.stderr and "Traceback" not in text.stderr


def test_a_missing_backend_names_the_pip_install(tmp_path):
    env_code = ("import os, sys; os.environ['ONNXKIT_PLUGINS'] = 'default_domain,ml_domain,cpu_backend'; "
                "from onnxkit.cli import main; sys.exit(main(sys.argv[1:]))")
    out = subprocess.run([sys.executable, "-c", env_code, "run", str(DIGITS), "--backend", "gpu", "-i", f"image={INPUT}"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "pip install onnxkit-gpu" in out.stderr and "Traceback" not in out.stderr


def test_verbose_shows_log_records_on_stderr():
    out = cli("-v", "run", DIGITS, "--input", f"image={INPUT}")
    assert out.returncode == 0 and "planned" in out.stderr
    quiet = cli("run", DIGITS, "--input", f"image={INPUT}")
    assert quiet.stderr == ""
