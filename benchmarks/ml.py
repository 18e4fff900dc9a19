"""Tree ensemble speed: a scikit-learn random forest exported with skl2onnx, onnxkit-cpu vs
onnxruntime (default threads and one thread), in one run.

The forest: RandomForestClassifier, 300 trees, max_depth 12, 20 features, 3 classes
(``TreeEnsembleClassifier``, ai.onnx.ml 1), scored on a 10,000-row batch.  Prints the time to
prepare a session, the best-of-N time of one inference, and the ratio onnxkit / onnxruntime
(target: within 3x).  Also checks that the labels are equal and the probabilities agree.
Needs scikit-learn, skl2onnx, onnx and onnxruntime.  Run: ``python benchmarks/ml.py``
(``--trees``, ``--depth``, ``--rows``, ``--repeat`` to vary).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from timing import best_of


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees", type=int, default=300)
    p.add_argument("--depth", type=int, default=12)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()

    import onnxruntime as ort
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from skl2onnx import to_onnx

    from onnxkit.runtime import InferenceSession

    x, y = make_classification(n_samples=args.rows, n_features=args.features, n_informative=args.features // 2,
                               n_classes=3, random_state=0)
    x = x.astype(np.float32)
    t0 = time.perf_counter()
    rf = RandomForestClassifier(n_estimators=args.trees, max_depth=args.depth, random_state=0, n_jobs=-1).fit(x, y)
    model = to_onnx(rf, x[:1], options={id(rf): {"zipmap": False}})
    nodes = sum(e.tree_.node_count for e in rf.estimators_)
    print(f"forest: {args.trees} trees, max_depth {args.depth}, {nodes} nodes, {args.features} features; "
          f"batch {args.rows} rows (trained and exported in {time.perf_counter() - t0:.1f} s)")
    data = data_kit = model.SerializeToString()
    feeds = {"X": x}

    t0 = time.perf_counter()
    kit = InferenceSession(data_kit)
    prep_kit = time.perf_counter() - t0
    t0 = time.perf_counter()
    rt = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    prep_ort = time.perf_counter() - t0
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    rt1 = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])

    got = kit.run(None, feeds)
    want = rt.run(None, feeds)
    same_labels = bool((got[0] == want[0]).all())
    max_diff = float(np.abs(got[1] - want[1]).max())

    t_kit = best_of(lambda: kit.run(None, feeds), args.repeat)
    t_ort = best_of(lambda: rt.run(None, feeds), args.repeat)
    t_ort1 = best_of(lambda: rt1.run(None, feeds), args.repeat)
    print(f"prepare   onnxkit {prep_kit:8.3f} s   onnxruntime {prep_ort:8.3f} s")
    print(f"inference onnxkit {t_kit * 1e3:8.1f} ms  onnxruntime {t_ort * 1e3:8.1f} ms "
          f"(1 thread {t_ort1 * 1e3:8.1f} ms)")
    print(f"ratio onnxkit / onnxruntime: {t_kit / t_ort:.2f}x (1 thread: {t_kit / t_ort1:.2f}x); target <= 3x")
    print(f"labels equal: {same_labels}; max |probability difference|: {max_diff:.2e}")
    return 0 if same_labels and max_diff < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
