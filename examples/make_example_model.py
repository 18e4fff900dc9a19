"""Build ``examples/digits.onnx``, the example model the README runs, with onnxkit's own writer.

A small CNN in the shape of a digit classifier: Conv -> Relu -> MaxPool -> Flatten -> Gemm ->
Softmax, with fixed pseudo-random weights (seeded), and one input ``image`` of shape
[N, 1, 8, 8].  Also writes ``examples/digits_input.npy`` (two images).  Run:
``python examples/make_example_model.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import onnxkit
from onnxkit import ir
from onnxkit.dtypes import DataType

HERE = Path(__file__).resolve().parent


def build() -> ir.Model:
    rng = np.random.default_rng(2026)
    w1 = (rng.standard_normal((4, 1, 3, 3)) * 0.5).astype(np.float32)
    b1 = (rng.standard_normal(4) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((10, 4 * 3 * 3)) * 0.3).astype(np.float32)
    b2 = (rng.standard_normal(10) * 0.1).astype(np.float32)
    A = ir.Attribute.make
    nodes = [
        ir.Node(["image", "w1", "b1"], ["c1"], name="conv", op_type="Conv",
                attribute=[A("kernel_shape", [3, 3]), A("pads", [1, 1, 1, 1])]),
        ir.Node(["c1"], ["r1"], name="relu", op_type="Relu"),
        ir.Node(["r1"], ["p1"], name="pool", op_type="MaxPool",
                attribute=[A("kernel_shape", [3, 3]), A("strides", [3, 3]), A("pads", [0, 0, 1, 1])]),
        ir.Node(["p1"], ["f1"], name="flatten", op_type="Flatten", attribute=[A("axis", 1)]),
        ir.Node(["f1", "w2", "b2"], ["logits"], name="dense", op_type="Gemm", attribute=[A("transB", 1)]),
        ir.Node(["logits"], ["probabilities"], name="softmax", op_type="Softmax", attribute=[A("axis", 1)]),
    ]
    graph = ir.Graph(
        node=nodes, name="digits",
        initializer=[ir.Tensor.from_numpy(w1, "w1"), ir.Tensor.from_numpy(b1, "b1"),
                     ir.Tensor.from_numpy(w2, "w2"), ir.Tensor.from_numpy(b2, "b2")],
        input=[ir.ValueInfo("image", ir.tensor_type(DataType.FLOAT, ["N", 1, 8, 8]))],
        output=[ir.ValueInfo("probabilities", ir.tensor_type(DataType.FLOAT, ["N", 10]))],
    )
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], producer_name="onnxkit",
                    producer_version=onnxkit.__version__, graph=graph,
                    metadata_props=[ir.StringStringEntry("model_license", "Apache-2.0")])


def main() -> None:
    onnxkit.save(build(), HERE / "digits.onnx")
    images = np.zeros((2, 1, 8, 8), dtype=np.float32)
    images[0, 0, 1:7, 3:5] = 1.0          # a "1"
    images[1, 0, [1, 6], 2:6] = 1.0       # a "0"
    images[1, 0, 1:7, [2, 5]] = 1.0
    np.save(HERE / "digits_input.npy", images)
    print(f"wrote {HERE / 'digits.onnx'} and {HERE / 'digits_input.npy'}")


if __name__ == "__main__":
    main()
