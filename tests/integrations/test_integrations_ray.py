"""onnxkit.integrations.ray on a local Ray with two CPUs: ``map_batches`` on a pool of actors,
results equal to one in-process run, one session per actor however many batches it scores."""

import os
import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason='the test extra installs ray: pip install -e ".[test]"')
import ray.cloudpickle  # noqa: E402
import ray.data  # noqa: E402
import pandas as pd  # noqa: E402

from onnxkit.integrations import cached_sessions, make_payload  # noqa: E402
from onnxkit.integrations import ray as okray  # noqa: E402
from scoring_models import FEATURES, assert_batch_scores_match, digits, sklearn_model  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.execution_options.preserve_order = True
    # The actors unpickle _Reporting: ship this module's classes by value (tests/ is not on their path).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        yield
    finally:
        ray.shutdown()


class _Reporting(okray.OnnxkitPredictor):
    """The predictor, adding per row the actor's process id and how many sessions it has built."""

    def __call__(self, batch):
        out = super().__call__(batch)
        n = len(next(iter(out.values())))
        out["pid"] = np.full(n, os.getpid())
        out["sessions"] = np.full(n, cached_sessions())
        return out


def test_a_dataset_scored_by_two_actors_equals_one_in_process_run():
    model, X, ref = sklearn_model(rows=3000)
    frame = pd.DataFrame(X, columns=FEATURES)
    frame["id"] = np.arange(len(X))
    ds = ray.data.from_pandas([frame.iloc[i:i + 500] for i in range(0, 3000, 500)])  # 6 blocks
    payload = make_payload(model, threads=1)
    scored = ds.map_batches(_Reporting, fn_constructor_kwargs={"payload": payload, "keep_columns": ("id",),
                                                               "batch_size": 200},
                            batch_size=200, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=2),
                            num_cpus=1)
    rows = scored.to_pandas().sort_values("id")
    assert len(rows) == 3000 and (rows["id"].to_numpy() == np.arange(3000)).all()
    np.testing.assert_array_equal(rows["label"].to_numpy(), ref["label"])
    np.testing.assert_array_equal(np.stack(rows["probabilities"].to_numpy()), ref["probabilities"])
    # 15 batches of 200 rows on at most 2 actors, each of which built exactly one session.
    assert rows["pid"].nunique() <= 2 and set(rows["sessions"]) == {1}


def test_score_dataset_feeds_a_tensor_column_to_the_cnn():
    model, images, ref = digits(rows=1000)
    ds = ray.data.from_numpy(np.array_split(images, 4))  # 4 blocks of one column, "data", of (1, 8, 8) tensors
    scored = okray.score_dataset(ds, model, input_column="data", batch_size=128, num_workers=2, threads=1)
    got = np.concatenate([b["probabilities"] for b in scored.iter_batches(batch_format="numpy", batch_size=None)])
    assert got.shape == (1000, 10)
    # preserve_order is set: rows line up with the reference.
    assert_batch_scores_match(got, ref["probabilities"])
