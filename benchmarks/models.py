"""Evaluation speed on the nine light models of the onnx wheel, in one run (issue #5):
onnxkit-cpu vs onnxruntime (one thread, and default threads) vs onnx.reference.

Prints, per model, the best-of-N time of one inference and the ratios, then geometric means.
Targets: onnxkit within 3x of onnxruntime (geometric mean), and at least 20x faster than
onnx.reference on the convolutional models.  ``--skip-reference`` leaves out onnx.reference
(slow).  Needs the test extras (onnx, onnxruntime).  Run: ``python benchmarks/models.py``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from timing import best_of


def light_models() -> list[Path]:
    import onnx.backend.test as bt

    return sorted((Path(bt.__file__).parent / "data" / "light").glob("light_*.onnx"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("-k", dest="only", default=None, help="only models whose name contains this")
    args = parser.parse_args()

    import onnx
    import onnx.reference
    import onnxruntime as ort

    ort.set_default_logger_severity(3)

    import onnxkit
    from onnxkit.conformance import dummy_input
    from onnxkit.runtime import InferenceSession

    rows = []
    print(f"{'model':14s} {'onnxkit':>10s} {'ort-1t':>10s} {'ort':>10s} {'reference':>10s}  "
          f"{'kit/ort-1t':>10s} {'kit/ort':>8s} {'ref/kit':>8s}")
    for path in light_models():
        name = path.stem[len("light_"):]
        if args.only and args.only not in name:
            continue
        model = onnxkit.load(path)
        init = {t.name for t in model.graph.initializer}
        feed = {vi.name: dummy_input(vi) for vi in model.graph.input if vi.name not in init}
        sess = InferenceSession(model)
        sess.run(None, feed)
        t_kit = best_of(lambda: sess.run(None, feed), args.repeat)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        o1 = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        od = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        o1.run(None, feed)
        od.run(None, feed)
        t_o1 = best_of(lambda: o1.run(None, feed), args.repeat)
        t_od = best_of(lambda: od.run(None, feed), args.repeat)
        t_ref = math.nan
        if not args.skip_reference:
            ref = onnx.reference.ReferenceEvaluator(onnx.load(str(path)))
            t_ref = best_of(lambda: ref.run(None, feed), 1, budget_s=0)
        rows.append((name, t_kit, t_o1, t_od, t_ref))
        print(f"{name:14s} {t_kit * 1e3:9.1f}ms {t_o1 * 1e3:9.1f}ms {t_od * 1e3:9.1f}ms {t_ref * 1e3:9.1f}ms  "
              f"{t_kit / t_o1:10.2f} {t_kit / t_od:8.2f} {t_ref / t_kit:8.1f}", flush=True)

    def gmean(values):
        values = [v for v in values if v == v]
        return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan

    print(f"\ngeometric mean onnxkit / onnxruntime(1 thread):  {gmean([r[1] / r[2] for r in rows]):.2f}  (target <= 3)")
    print(f"geometric mean onnxkit / onnxruntime(default):   {gmean([r[1] / r[3] for r in rows]):.2f}")
    if not args.skip_reference:
        print(f"geometric mean onnx.reference / onnxkit:         {gmean([r[4] / r[1] for r in rows]):.1f}  (target >= 20)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
