"""Load speed: onnxkit vs onnx_ir (from_proto of onnx.load) vs onnx.load, in one run (issue #3).

Two models:
* ``light_densenet121.onnx`` from the onnx wheel (1,746 nodes): many small messages.
* a generated model with one 200 MB initializer: onnxkit maps the file and leaves the
  tensor a view of it (zero copy), so opening it costs almost nothing.

Prints the best of several runs of each and the ratios.  Run: ``python benchmarks/load.py``.
Needs the test extras (onnx, onnx-ir).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from timing import best_of


def densenet_path() -> Path:
    import onnx.backend.test as bt

    return Path(bt.__file__).parent / "data" / "light" / "light_densenet121.onnx"


def big_model(path: str, megabytes: int = 200) -> None:
    import onnxkit
    from onnxkit import ir

    n = megabytes * (1 << 20) // 4
    data = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    w = ir.Tensor(dims=[n], data_type=1, name="W", raw_data=data.tobytes())
    graph = ir.Graph(
        node=[ir.Node(input=["X", "W"], output=["Y"], op_type="Add")], name="big",
        initializer=[w],
        input=[ir.ValueInfo("X", ir.tensor_type(1, [n]))], output=[ir.ValueInfo("Y", ir.tensor_type(1, [n]))])
    model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], producer_name="onnxkit-bench", graph=graph)
    onnxkit.save(model, path)


def main() -> int:
    import onnx
    import onnx_ir

    import onnxkit

    print(f"python {sys.version.split()[0]}, onnx {onnx.__version__}, onnx_ir {onnx_ir.__version__}, onnxkit {onnxkit.__version__}")
    b = densenet_path().read_bytes()
    m = onnxkit.load(b)
    assert len(m.graph.node) == 1746, len(m.graph.node)
    t_kit = best_of(lambda: onnxkit.load(b), 7)
    t_ir = best_of(lambda: onnx_ir.from_proto(onnx.load_from_string(b)), 7)
    t_onnx = best_of(lambda: onnx.load_from_string(b), 7)
    print(f"\ndensenet121 light ({len(b) / 1e3:.0f} kB, 1746 nodes), best of 7:")
    print(f"  onnxkit.load               {t_kit * 1e3:8.2f} ms")
    print(f"  onnx_ir.from_proto(onnx)   {t_ir * 1e3:8.2f} ms   onnxkit is {t_ir / t_kit:5.2f}x faster")
    print(f"  onnx.load_from_string      {t_onnx * 1e3:8.2f} ms   ratio onnxkit/onnx = {t_kit / t_onnx:5.2f}")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.onnx")
        big_model(path)
        size = os.path.getsize(path)
        m = onnxkit.load(path)
        raw = m.graph.initializer[0].raw_data
        assert isinstance(raw, memoryview) and raw.readonly, "the initializer must be a view of the mapped file"
        t_kit = best_of(lambda: onnxkit.load(path), 5)
        t_onnx = best_of(lambda: onnx.load(path), 3)
        t_ir = best_of(lambda: onnx_ir.from_proto(onnx.load(path)), 3)
        print(f"\ngenerated model with a {size / 1e6:.0f} MB initializer, opened from a file:")
        print(f"  onnxkit.load               {t_kit * 1e3:8.2f} ms   (tensor is a memoryview of the mapped file)")
        print(f"  onnx.load                  {t_onnx * 1e3:8.2f} ms   onnxkit takes {t_kit / t_onnx:.4f} of onnx.load's time"
              f" (target < 0.1)")
        print(f"  onnx_ir.from_proto(onnx)   {t_ir * 1e3:8.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
