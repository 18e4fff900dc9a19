"""Command-line surface: hash, infer, opsets exit codes (the other commands have their own tests)."""

import subprocess
import sys

import numpy as np

import onnxkit
from onnxkit import ir


def run(*args):
    return subprocess.run([sys.executable, "-m", "onnxkit", *map(str, args)], capture_output=True, text=True)


def test_hash_is_the_same_for_two_encodings_of_one_model(tmp_path):
    import onnx

    x = onnx.helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [2])
    node = onnx.helper.make_node("Relu", ["X"], ["Y"], name="r")
    y = onnx.helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, [2])
    model = onnx.helper.make_model(onnx.helper.make_graph([node], "g", [x], [y]))
    a = model.SerializeToString()
    # the same content with the graph's fields in reverse order: a different encoding
    g = onnx.ModelProto.FromString(a).graph
    fields = [(11, g.input[0].SerializeToString()), (2, b"g"), (1, g.node[0].SerializeToString()),
              (12, g.output[0].SerializeToString())]
    graph_bytes = b"".join(bytes([t << 3 | 2]) + bytes([len(v)]) + v for t, v in fields)
    rest = onnx.ModelProto.FromString(a)
    rest.ClearField("graph")
    b = rest.SerializeToString() + bytes([7 << 3 | 2, len(graph_bytes)]) + graph_bytes
    assert a != b and onnx.ModelProto.FromString(b) == model
    (tmp_path / "a.onnx").write_bytes(a)
    (tmp_path / "b.onnx").write_bytes(b)
    out = run("hash", tmp_path / "a.onnx", tmp_path / "b.onnx")
    assert out.returncode == 0
    digests = [line.split()[0] for line in out.stdout.splitlines()]
    assert len(digests) == 2 and digests[0] == digests[1] == onnxkit.model_hash(a)
    model.graph.node[0].name = "other"
    assert onnxkit.model_hash(model.SerializeToString()) != digests[0]


def test_infer_prints_every_value_and_writes_value_info(tmp_path):
    g = ir.Graph(node=[ir.Node(["X"], ["S"], op_type="Shape"), ir.Node(["X", "S"], ["Y"], op_type="Reshape")],
                 name="g", input=[ir.ValueInfo("X", ir.tensor_type(1, ["N", 3]))],
                 output=[ir.ValueInfo("Y", ir.tensor_type(1, ["N", 3]))])
    path = tmp_path / "m.onnx"
    onnxkit.save(ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 14)], graph=g), path)
    out = run("infer", path, "-o", tmp_path / "typed.onnx")
    assert out.returncode == 0, out.stderr
    assert "S" in out.stdout and "int64" in out.stdout
    typed = onnxkit.load(tmp_path / "typed.onnx")
    shapes = {vi.name: vi.type.shape.values for vi in typed.graph.value_info}
    assert shapes["S"] == (2,)


def test_usage_and_missing_files_exit_2(tmp_path):
    assert run("check", tmp_path / "missing.onnx").returncode == 2
    assert run("hash", tmp_path / "missing.onnx").returncode == 2
    assert run("no-such-command").returncode == 2


def test_run_refuses_a_wrong_input_clearly(tmp_path):
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    np.save(tmp_path / "bad.npy", np.zeros((2, 1, 9, 9), np.float32))
    out = run("run", examples / "digits.onnx", "--input", f"image={tmp_path / 'bad.npy'}")
    assert out.returncode == 2
    assert "axis 2 must be 8" in out.stderr and "Traceback" not in out.stderr
