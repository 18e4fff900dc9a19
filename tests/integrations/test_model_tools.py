"""onnxsim and onnxslim with onnxkit standing in for onnxruntime write the files they write with
onnxruntime (tools/model_tools_check.py runs them over the corpus; this runs three small models).

Both tools fold constants by running the foldable part of the graph on onnxruntime (onnxsim
hands it Constant nodes carrying its own attribute ``onnxsim_transient_constant``), and onnxsim
checks its result on random inputs; each side runs in its own process, the stand-in installed
before the tools are imported there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxsim", reason="pip install onnxsim (0.4.36 has Python 3.11 wheels)")
pytest.importorskip("onnxslim", reason="pip install onnxslim")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

TOOLS_DIR = Path(__file__).resolve().parents[2] / "tools"
TOOLS = ("onnxsim", "onnxslim")
CHILD = """
import json, sys
sys.path.insert(0, {tools!r})
from model_tools_check import one
side, out = sys.argv[1], {{}}
for src in sys.argv[2:]:
    for tool in {names!r}:
        out[src + ":" + tool] = one(tool, side, src, src[:-5] + "." + tool + "." + side + ".onnx", check=1)
print("RESULT " + json.dumps(out))
"""


def _const(name: str, values, dtype=np.float32):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(values, dtype), name + "_v"))


def _folding(first: str = "Sigmoid", last: str = "Tanh") -> onnx.ModelProto:
    """Float folds on constants (``first`` and ``last`` elementwise operators around exactly rounded
    ones), and a reshape target built from the dynamic batch."""
    nodes = [
        _const("a", [0.1, 0.7, -1.3, 2.9]), _const("b", [0.5, 0.25, 3.0, -0.75]),
        helper.make_node(first, ["a"], ["ea"]), helper.make_node("Tanh", ["b"], ["tb"]),
        helper.make_node("Div", ["ea", "tb"], ["q"]), helper.make_node("Abs", ["q"], ["aq"]),
        helper.make_node("Sqrt", ["aq"], ["s"]), helper.make_node(last, ["s"], ["e"]),
        helper.make_node("Mul", ["X", "e"], ["y"]),
        helper.make_node("Shape", ["X"], ["shape"]), _const("zero", [0], np.int64),
        helper.make_node("Gather", ["shape", "zero"], ["n"]), _const("tail", [2, 2], np.int64),
        helper.make_node("Concat", ["n", "tail"], ["target"], axis=0),
        helper.make_node("Reshape", ["y", "target"], ["Z"]),
    ]
    g = helper.make_graph(nodes, f"folding_{first}_{last}", [helper.make_tensor_value_info("X", TP.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("Z", TP.FLOAT, ["N", 2, 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _conv_bn() -> onnx.ModelProto:
    """A weight computed from initializers (folded by running it), a Conv and a BatchNormalization."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(v, n) for n, v in (
        ("w0", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)), ("k", np.float32([0.37])),
        ("scale", rng.uniform(0.5, 2, 4).astype(np.float32)), ("bias", rng.standard_normal(4).astype(np.float32)),
        ("mean", rng.standard_normal(4).astype(np.float32)), ("var", rng.uniform(0.1, 3, 4).astype(np.float32)))]
    nodes = [helper.make_node("Mul", ["w0", "k"], ["w1"]), helper.make_node("Sigmoid", ["w1"], ["w"]),
             helper.make_node("Conv", ["X", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"]),
             helper.make_node("Relu", ["b"], ["Y"])]
    g = helper.make_graph(nodes, "conv_bn", [helper.make_tensor_value_info("X", TP.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("Y", TP.FLOAT, [1, 4, 8, 8])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


def _integers() -> onnx.ModelProto:
    """Integer and shape folds: Range, ConstantOfShape, CumSum, Cast, ReduceSum over constants."""
    nodes = [_const("start", 1, np.int64), _const("limit", 13, np.int64), _const("delta", 3, np.int64),
             helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
             _const("axis", 0, np.int64), helper.make_node("CumSum", ["r", "axis"], ["cs"]),
             helper.make_node("Cast", ["cs"], ["cf"], to=TP.FLOAT),
             _const("dims", [2, 4], np.int64),
             helper.make_node("ConstantOfShape", ["dims"], ["ones"], value=numpy_helper.from_array(np.float32([1.5]))),
             helper.make_node("Mul", ["ones", "cf"], ["m"]),
             helper.make_node("ReduceSum", ["m"], ["rs"], keepdims=1),
             helper.make_node("Add", ["X", "rs"], ["Y"])]
    g = helper.make_graph(nodes, "integers", [helper.make_tensor_value_info("X", TP.FLOAT, [2, 1])],
                          [helper.make_tensor_value_info("Y", TP.FLOAT, [2, 1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _side(side: str, paths: list) -> dict:
    code = CHILD.format(tools=str(TOOLS_DIR), names=TOOLS)
    # one hash seed for both sides: onnxslim orders some of what it writes by set iteration
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run([sys.executable, "-c", code, side, *map(str, paths)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def _write(tmp_path, models) -> list:
    paths = []
    for model in models:
        onnx.checker.check_model(model)
        path = tmp_path / f"{model.graph.name}.onnx"
        onnx.save(model, str(path))
        paths.append(path)
    return paths


def _written(tmp_path, path, tool) -> dict:
    return {side: tmp_path / f"{path.stem}.{tool}.{side}.onnx" for side in ("onnxruntime", "onnxkit")}


def test_onnxsim_and_onnxslim_write_the_same_files_on_onnxkit(tmp_path):
    """Folds onnxkit computes as onnxruntime does, bit for bit (Sigmoid and Tanh are MLAS's
    approximations on cpu; division and square root are exactly rounded; integers exact)."""
    paths = _write(tmp_path, [_folding(), _conv_bn(), _integers()])
    theirs, mine = _side("onnxruntime", paths), _side("onnxkit", paths)
    for path in paths:
        for tool in TOOLS:
            key = f"{path}:{tool}"
            assert theirs[key]["runtime"] == "onnxruntime" and mine[key]["runtime"] == "onnxkit.ort"
            # the same path through each tool: the same sessions made and run, on the runtime standing in
            assert (mine[key]["sessions"], mine[key]["runs"]) == (theirs[key]["sessions"], theirs[key]["runs"]), key
            files = _written(tmp_path, path, tool)
            assert files["onnxkit"].read_bytes() == files["onnxruntime"].read_bytes(), key
    for tool in TOOLS:  # the runtime was asked to fold: each tool made sessions on onnxkit
        assert mine[f"{paths[0]}:{tool}"]["sessions"] > 0, tool
    folded = onnx.load(str(_written(tmp_path, paths[0], "onnxsim")["onnxkit"]))
    assert not {n.op_type for n in folded.graph.node} & {"Sigmoid", "Tanh", "Sqrt", "Div"}  # folded away


def test_folds_of_exp_and_erf_differ_in_the_last_bits_only(tmp_path):
    """Near miss (docs/onnxruntime.md): onnxkit's Exp and Erf are not MLAS's approximations, so a
    folded Exp / Erf constant may differ from onnxruntime's by a few units in the last place; the
    files are otherwise the same (nodes, names, every other initializer)."""
    paths = _write(tmp_path, [_folding("Exp", "Erf")])
    _side("onnxruntime", paths), _side("onnxkit", paths)
    for tool in TOOLS:
        a, b = (onnx.load(str(p)) for p in _written(tmp_path, paths[0], tool).values())
        assert a.graph.node == b.graph.node and [t.name for t in a.graph.initializer] == [t.name for t in b.graph.initializer]
        for ta, tb in zip(a.graph.initializer, b.graph.initializer):
            xa, xb = numpy_helper.to_array(ta), numpy_helper.to_array(tb)
            assert xa.dtype == xb.dtype and xa.shape == xb.shape, ta.name
            if xa.dtype == np.float32:
                ulps = np.abs(xa.view(np.int32).astype(np.int64) - xb.view(np.int32).astype(np.int64))
                assert ulps.max(initial=0) <= 8, (tool, ta.name, xa, xb)
            else:
                np.testing.assert_array_equal(xa, xb)
