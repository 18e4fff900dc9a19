"""One session used from several Python threads at once gives each run the result a run of its
own feed alone gives (kernels keep per-thread scratch buffers and build caches safely).

Real models, one per kind of kernel state: convolutions and pools (small_resnet_ts,
rapidocr_rec_v4), attention and layer norms (hf_bert_ts), a recurrent layer (lstm_tagger_ts),
control flow (silero_vad_16k_op15).  Each thread runs its own feeds (the corpus feed perturbed
per thread and iteration), interleaved with the others; every result must equal, bit for bit,
the result the same session gives that feed when run alone (one BLAS thread: no summation
order depends on the thread count).
"""

from __future__ import annotations

import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

MODELS = ("small_resnet_ts", "rapidocr_rec_v4", "hf_bert_ts", "lstm_tagger_ts", "silero_vad_16k_op15")
THREADS, RUNS = 4, 6


def _feeds(base: dict, seed: int) -> dict:
    """``base`` with its float inputs perturbed and the elements of its integer inputs (token
    ids, masks) shuffled, so every value stays one the model accepts."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, v in base.items():
        if v.dtype.kind == "f" and v.size > 1:
            out[k] = (v + rng.standard_normal(v.shape).astype(v.dtype) * np.asarray(0.05, v.dtype)).astype(v.dtype)
        elif v.dtype.kind in "iu" and v.size > 1:
            out[k] = rng.permutation(v.reshape(-1)).reshape(v.shape)
        else:
            out[k] = v
    return out


@pytest.fixture(scope="module")
def corpus():
    from corpus_cache import ensure_corpus

    folder, _ = ensure_corpus(log=lambda line: print(line, file=sys.stderr))
    return folder


@pytest.mark.usefixtures("first_run_policy")
@pytest.mark.parametrize("name", MODELS)
def test_threads_sharing_a_session_get_each_their_own_result(corpus, name):
    from corpus_cache import load_inputs

    import onnxkit

    base = load_inputs(corpus, name)
    so = onnxkit.SessionOptions()
    so.intra_op_num_threads = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the models' validation warnings (the corpus test reports them)
        sess = onnxkit.InferenceSession(str(corpus / f"{name}.onnx"), so)
    feeds = {(t, r): _feeds(base, 1000 * t + r) for t in range(THREADS) for r in range(RUNS)}
    alone = {key: sess.run(None, feed) for key, feed in feeds.items()}
    got, errors = {}, []
    start = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        try:
            start.wait()
            for r in range(RUNS):
                got[(t, r)] = sess.run(None, feeds[(t, r)])
        except Exception as exc:  # reported below, with the thread
            errors.append((t, exc))

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert not errors, errors
    assert set(got) == set(alone)
    for key, outs in alone.items():
        assert len(got[key]) == len(outs)
        for a, b in zip(got[key], outs):
            _assert_same(a, b, (name, key))
    # the perturbation reached the results: the feeds differ, so must the outputs, by more than the
    # tolerance above (a run that got another thread's result would fail)
    with pytest.raises(AssertionError):
        _assert_same(alone[(0, 0)][0], alone[(1, 0)][0], "different feeds")


def _assert_same(a, b, where) -> None:
    """Equal up to the rounding of the kernels' own work split: a BLAS call made while other
    threads run may split its sums otherwise (seen: 1.5e-6 on outputs of scale 0.8 on one
    machine, bit-equal on another); a result crossing threads differs by far more."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc":
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True, err_msg=str(where))
    else:
        assert np.array_equal(a, b), where
