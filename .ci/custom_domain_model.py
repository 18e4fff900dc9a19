"""Write a model of the example domain (org.onnxkit.example.stats) and its inputs into a folder.

Used by .ci/wheels: the model is run with the `onnxkit` command of an environment where the
example package is installed as a wheel.  The expected output is printed as `expected.npy`.
"""

import sys
from pathlib import Path

import numpy as np

import onnxkit
from onnxkit import ir

DOMAIN = "org.onnxkit.example.stats"


def main(folder: str) -> None:
    out = Path(folder)
    A = ir.Attribute.make
    graph = ir.Graph(
        node=[ir.Node(["x"], ["h"], name="hist", op_type="MakeHistogram", domain=DOMAIN, attribute=[A("bins", 4)]),
              ir.Node(["h", "q"], ["y"], name="quant", op_type="HistogramQuantile", domain=DOMAIN)],
        name="stats",
        input=[ir.ValueInfo("x", ir.tensor_type(1, ["N"])), ir.ValueInfo("q", ir.tensor_type(1, [3]))],
        output=[ir.ValueInfo("y", ir.tensor_type(1, [3]))],
        value_info=[ir.ValueInfo("h", ir.OpaqueType(DOMAIN, "Histogram"))],
    )
    model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId(DOMAIN, 1)], graph=graph)
    onnxkit.save(model, out / "stats.onnx")
    np.save(out / "x.npy", np.arange(8, dtype=np.float32))
    np.save(out / "q.npy", np.array([0.0, 0.5, 1.0], dtype=np.float32))
    # 4 equal bins over [0, 7], two values each: the median is the middle edge, 3.5.
    np.save(out / "expected.npy", np.array([0.0, 3.5, 7.0], dtype=np.float32))


if __name__ == "__main__":
    main(sys.argv[1])
