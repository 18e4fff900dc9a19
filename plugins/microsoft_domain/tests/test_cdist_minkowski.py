"""CDist's 'minkowski' metric with ``p`` (what skl2onnx writes for a kNN / LocalOutlierFactor model
whose ``p`` is not 2) on the cpu and gpu backends, against scipy's ``cdist`` (an independent
reference) and, through skl2onnx, against scikit-learn's own predictions.

onnxruntime 1.32 computes no Minkowski distance: it refuses the node for its ``p`` (an unrecognized
attribute), which skl2onnx's own test of such a model accepts as a pass; the test below checks that
fact too, so a later onnxruntime that computes it is noticed.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest

from ms_harness import BACKENDS, build, rand, run_onnxkit
from onnxkit.errors import OnnxkitError

scipy_distance = pytest.importorskip("scipy.spatial.distance")
RNG = np.random.default_rng(11)


def _cdist(a, b, p):
    return scipy_distance.cdist(a.astype(np.float64), b.astype(np.float64), "minkowski", p=p)


@pytest.mark.parametrize("p", [1.0, 1.5, 3.0, 0.5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_minkowski_equals_scipy(p, dtype):
    a, b = rand(RNG, (7, 5), dtype), rand(RNG, (4, 5), dtype)
    model, feed = build("CDist", [a, b], {"metric": "minkowski", "p": p})
    want = _cdist(a, b, p)
    tol = 1e-6 if dtype == np.float32 else 1e-12
    for backend in BACKENDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 'p' is not in onnxruntime's definition: a checker warning
            (got,) = run_onnxkit(model, feed, backend)
        assert np.asarray(got).dtype == dtype
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol, err_msg=backend)


def test_minkowski_p2_is_euclidean_and_rows_past_one_block():
    """p = 2 is the euclidean distance; 300 rows of A span two blocks of the row loop."""
    a, b = rand(RNG, (300, 3)), rand(RNG, (9, 3))
    model, feed = build("CDist", [a, b], {"metric": "minkowski", "p": 2.0})
    want = _cdist(a, b, 2.0)
    for backend in BACKENDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (got,) = run_onnxkit(model, feed, backend)
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6, atol=1e-6, err_msg=backend)


def test_minkowski_of_no_rows():
    a, b = np.zeros((0, 3), np.float32), rand(RNG, (4, 3))
    model, feed = build("CDist", [a, b], {"metric": "minkowski", "p": 3.0})
    for backend in BACKENDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (got,) = run_onnxkit(model, feed, backend)
        assert np.asarray(got).shape == (0, 4)


@pytest.mark.parametrize("attrs,words", [({"metric": "minkowski", "p": 0.0}, "takes p > 0"),
                                         ({"metric": "minkowski", "p": -1.0}, "takes p > 0"),
                                         ({"metric": "cityblock"}, "is not one CDist computes")])
def test_near_misses_are_refused_by_name(attrs, words):
    a, b = rand(RNG, (3, 2)), rand(RNG, (2, 2))
    model, feed = build("CDist", [a, b], attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(OnnxkitError, match=words):
            run_onnxkit(model, feed, "cpu")


def test_onnxruntime_refuses_p():
    """The fact the module docstring states: onnxruntime 1.32 refuses CDist's ``p``."""
    a, b = rand(RNG, (3, 2)), rand(RNG, (2, 2))
    model, _ = build("CDist", [a, b], {"metric": "minkowski", "p": 3.0})
    with pytest.raises(Exception, match="Unrecognized attribute: p for operator CDist"):
        ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def _skl2onnx(est, n_features, options):
    skl2onnx = pytest.importorskip("skl2onnx")
    from skl2onnx.common.data_types import FloatTensorType

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onx = skl2onnx.to_onnx(est, initial_types=[("X", FloatTensorType([None, n_features]))], options=options,
                               target_opset={"": 17, "ai.onnx.ml": 3})
    return onx.SerializeToString()


def test_local_outlier_factor_p3_equals_scikit_learn():
    from sklearn.neighbors import LocalOutlierFactor

    X = RNG.standard_normal((30, 3)).astype(np.float32)
    est = LocalOutlierFactor(n_neighbors=4, novelty=True, p=3).fit(X)
    model = _skl2onnx(est, 3, {id(est): {"optim": "cdist"}})
    assert b"minkowski" in model
    Xt = RNG.standard_normal((12, 3)).astype(np.float32)
    for backend in BACKENDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            label, scores = run_onnxkit(model, {"X": Xt}, backend, on_fallback=True)[:2]
        np.testing.assert_array_equal(np.ravel(label), est.predict(Xt), err_msg=backend)
        np.testing.assert_allclose(np.ravel(scores), est.decision_function(Xt), rtol=1e-5, atol=1e-5,
                                   err_msg=backend)


def test_knn_regressor_p3_equals_scikit_learn():
    from sklearn.neighbors import KNeighborsRegressor

    X = RNG.standard_normal((40, 4)).astype(np.float32)
    y = X[:, 0] * 2 - X[:, 3]
    est = KNeighborsRegressor(n_neighbors=3, p=3).fit(X, y)
    model = _skl2onnx(est, 4, {id(est): {"optim": "cdist"}})
    Xt = RNG.standard_normal((10, 4)).astype(np.float32)
    for backend in BACKENDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (got,) = run_onnxkit(model, {"X": Xt}, backend, on_fallback=True)
        np.testing.assert_allclose(np.ravel(got), est.predict(Xt), rtol=1e-4, atol=1e-4, err_msg=backend)
