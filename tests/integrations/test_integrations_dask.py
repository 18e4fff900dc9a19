"""onnxkit.integrations.dask on a local cluster of two worker processes: results equal to one
in-process run, and one session per worker process however many partitions it scores."""

import numpy as np
import pytest

dd = pytest.importorskip("dask.dataframe", reason='the test extra installs dask: pip install -e ".[test]"')
import dask.array as da  # noqa: E402
import pandas as pd  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.integrations import cached_sessions, make_payload  # noqa: E402
from onnxkit.integrations import dask as okdask  # noqa: E402
from scoring_models import FEATURES, assert_batch_scores_match, digits, sklearn_model  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as c:
        yield c


def _sessions(client) -> dict:
    return client.run(cached_sessions)


def _built_at_most_one_each(client, before: dict) -> None:
    """Each worker process built at most one session since ``before`` (one model was scored)."""
    after = _sessions(client)
    assert set(after) == set(before)
    assert all(after[w] - before[w] <= 1 for w in after), (before, after)
    assert sum(after.values()) > sum(before.values())


def test_a_dataframe_scored_on_two_processes_equals_one_in_process_run(client):
    model, X, ref = sklearn_model(rows=3000)
    frame = pd.DataFrame(X, columns=FEATURES)
    frame["id"] = np.arange(len(frame))
    ddf = dd.from_pandas(frame, npartitions=8)
    before = _sessions(client)
    scored = okdask.score_dataframe(ddf, model, columns=FEATURES, batch_size=250, threads=1)
    assert list(scored.columns) == ["label", "probabilities_0", "probabilities_1", "probabilities_2"]
    got = scored.compute().sort_index()
    assert len(got) == 3000 and (got.index == frame.index).all()
    np.testing.assert_array_equal(got["label"].to_numpy(), ref["label"])
    np.testing.assert_array_equal(got[[f"probabilities_{j}" for j in range(3)]].to_numpy(), ref["probabilities"])
    # 8 partitions on 2 processes: each process built the session once at most.
    _built_at_most_one_each(client, before)


def test_a_dask_array_of_images_scored_block_wise_equals_one_in_process_run(client):
    model, images, ref = digits(rows=1200)
    arr = da.from_array(images, chunks=(150, 1, 4, 8))  # split along a non-row axis too: rechunked
    payload = make_payload(model, threads=1)
    before = _sessions(client)
    scored = okdask.score_array(arr, payload, batch_size=64)
    assert scored.shape == (1200, 10) and scored.dtype == np.float32 and scored.numblocks == (8, 1)
    assert_batch_scores_match(scored.compute(), ref["probabilities"])
    _built_at_most_one_each(client, before)


def test_bad_arguments_are_refused_before_anything_runs():
    model, _, _ = digits(rows=1)
    with pytest.raises(OnnxkitError, match="threads"):
        make_payload(model, threads=0)
    with pytest.raises(OnnxkitError, match="a model is a path"):
        make_payload(42)
    arr = da.zeros((10, 1, 8, 8), dtype=np.float32, chunks=5)
    with pytest.raises(OnnxkitError, match="batch_size"):
        okdask.score_array(arr, model, batch_size=0)
