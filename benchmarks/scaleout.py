"""Scale-out throughput: rows/s scoring a random forest with onnxkit on 1 vs 2 workers, on Dask
(LocalCluster, worker processes, 1 thread each) and on Ray (local, an actor pool), against one
in-process ``InferenceSession.run`` over all rows.

The model: RandomForestClassifier exported with skl2onnx (``--trees`` 100, ``--depth`` 10,
``--features`` 20, 3 classes).  The data: ``--rows`` (400,000) float32 rows in ``--parts`` (8)
partitions / blocks, scored in batches of ``--batch`` (8,192) rows, ``threads=1`` per worker.
Every distributed result is checked equal to the in-process one.  Dask times are best-of
``--repeat`` after a warm-up run (sessions already built on the workers); Ray times are one
execution each and include starting the actor pool (Ray starts the actors per execution).
Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (distributed's
``nanny.pre-spawn-environ``), which makes glibc return freed memory eagerly and slows onnxkit's
many temporary arrays about 2x; ``--dask-env trimmed`` (default) keeps Dask's setting,
``--dask-env glibc`` leaves glibc's own default.
Needs the test extras (scikit-learn, skl2onnx, dask[distributed], ray[data]).
Run: ``python benchmarks/scaleout.py`` (``--engines dask`` or ``ray`` to run one).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from timing import best_of


def _model(args):
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from skl2onnx import to_onnx

    x, y = make_classification(n_samples=5000, n_features=args.features, n_informative=args.features // 2,
                               n_classes=3, random_state=0)
    forest = RandomForestClassifier(n_estimators=args.trees, max_depth=args.depth, random_state=0, n_jobs=1)
    forest.fit(x.astype(np.float32), y)
    return to_onnx(forest, x[:1].astype(np.float32), options={"zipmap": False}).SerializeToString()


def _dask(model, X, ref, args, workers: int) -> float:
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster

    from onnxkit.integrations import dask as okdask

    cols = [f"f{i}" for i in range(X.shape[1])]
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
    if args.dask_env == "glibc":
        environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}), \
            LocalCluster(n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster):
        ddf = dd.from_pandas(pd.DataFrame(X, columns=cols), npartitions=args.parts).persist()
        scored = okdask.score_dataframe(ddf, model, columns=cols, outputs=["label"], batch_size=args.batch, threads=1)
        got = scored.compute()  # warm-up: every worker builds its session
        np.testing.assert_array_equal(got["label"].to_numpy(), ref)
        return best_of(lambda: scored.compute(), args.repeat)


def _ray(model, X, ref, args, workers: int) -> float:
    import ray

    from onnxkit.integrations import ray as okray

    ds = ray.data.from_numpy(np.array_split(X, args.parts)).materialize()
    t0 = time.perf_counter()
    scored = okray.score_dataset(ds, model, input_column="data", outputs=["label"], batch_size=args.batch,
                                 num_workers=workers, threads=1)
    got = np.concatenate([b["label"] for b in scored.iter_batches(batch_format="numpy", batch_size=None)])
    seconds = time.perf_counter() - t0
    np.testing.assert_array_equal(got, ref)
    return seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--parts", type=int, default=8)
    p.add_argument("--batch", type=int, default=8192)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--engines", default="dask,ray")
    p.add_argument("--dask-env", choices=["trimmed", "glibc"], default="trimmed")
    args = p.parse_args()

    from onnxkit.integrations import make_payload, session_for
    from onnxkit.integrations._scoring import score

    model = _model(args)
    X = np.random.default_rng(1).normal(size=(args.rows, args.features)).astype(np.float32)
    sess = session_for(make_payload(model))
    ref = sess.run(["label"], {"X": X})[0]
    single = best_of(lambda: score(sess, {"X": X}, ["label"], args.batch), args.repeat)

    print(f"{os.cpu_count()} cores visible, load average {os.getloadavg()[0]:.1f}; {args.rows:,} rows x "
          f"{args.features} features, {args.trees} trees of depth {args.depth}, {args.parts} partitions, "
          f"batch {args.batch:,}, 1 compute thread per worker")
    print(f"{'engine':8s} {'workers':>7s} {'seconds':>8s} {'rows/s':>10s} {'vs in-process':>13s}")
    print(f"{'none':8s} {1:7d} {single:8.2f} {args.rows / single:10,.0f} {1.0:12.2f}x")
    engines = args.engines.split(",")
    if "dask" in engines:
        for workers in (1, 2):
            s = _dask(model, X, ref, args, workers)
            print(f"{'dask':8s} {workers:7d} {s:8.2f} {args.rows / s:10,.0f} {single / s:12.2f}x  "
                  f"(--dask-env {args.dask_env})")
    if "ray" in engines:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        try:
            for workers in (1, 2):
                s = _ray(model, X, ref, args, workers)
                print(f"{'ray':8s} {workers:7d} {s:8.2f} {args.rows / s:10,.0f} {single / s:12.2f}x  "
                      "(includes starting the actors)")
        finally:
            ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
