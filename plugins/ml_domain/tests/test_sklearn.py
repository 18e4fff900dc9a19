"""scikit-learn models exported with skl2onnx: onnxkit's outputs against onnxruntime's.

Test-only dependencies: scikit-learn, skl2onnx, onnxruntime, pandas (the `test` extra).  Labels
must be equal; scores and probabilities within rtol 1e-5 (atol 1e-6 for values near 0).

Both runtimes get the exported bytes as they are (skl2onnx 1.20 imports the default domain
twice at one version: onnxkit's validator warns, ``repeated-opset-import``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxruntime as ort  # noqa: E402  (test dependencies: pyproject's `test` extra)

from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,  # noqa: E402
                              RandomForestClassifier, RandomForestRegressor)
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, StandardScaler  # noqa: E402
from sklearn.svm import SVC, SVR, LinearSVC  # noqa: E402
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor  # noqa: E402
from skl2onnx import to_onnx  # noqa: E402
from skl2onnx.common.data_types import FloatTensorType, StringTensorType  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)

RNG = np.random.default_rng(0)
XC, YC = make_classification(n_samples=240, n_features=6, n_informative=4, n_redundant=0, n_classes=3,
                             random_state=0)
XC = XC.astype(np.float32)
YB = (YC == 1).astype(np.int64)
XR, YR = make_regression(n_samples=240, n_features=6, noise=0.3, random_state=0)
XR = XR.astype(np.float32)
NOZIP = {"zipmap": False}


def _session(data: bytes) -> InferenceSession:
    """An onnxkit session; the model is validated first, as every session does (15.5)."""
    return InferenceSession(data)


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def _atol(want) -> float:
    """1e-6 of the output's scale: onnxruntime sums float32 votes, onnxkit float64, so a value
    that cancels to near 0 differs in absolute terms by the rounding of its summands."""
    w = np.abs(np.asarray(want, dtype=np.float64))
    return 1e-6 * max(1.0, float(w[np.isfinite(w)].max(initial=0.0)))


def _same(name, got, want):
    if isinstance(want, list):  # ZipMap: a sequence of maps
        assert isinstance(got, list) and len(got) == len(want), name
        for g, w in zip(got, want):
            assert set(g) == set(w), f"{name}: keys {sorted(g)} != {sorted(w)}"
            np.testing.assert_allclose([g[k] for k in w], [w[k] for k in w], rtol=1e-5, atol=1e-6, err_msg=name)
        return
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "OUS":
        assert [_text(v) for v in got.ravel()] == [_text(v) for v in want.ravel()], name
    elif want.dtype.kind in "iub":
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=_atol(want), err_msg=name)


def _compare(model, feeds):
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = _session(model.SerializeToString()).run(None, feeds)
    names = [o.name for o in model.graph.output]
    assert len(got) == len(want)
    for n, g, w in zip(names, got, want):
        _same(n, g, w)
    return got


def _export(est, x, options=None, **kw):
    return to_onnx(est, x[:1], options={id(est): options} if options else None, **kw)


# -- estimators -------------------------------------------------------------------------------

def test_decision_tree_classifier_multiclass():
    est = DecisionTreeClassifier(max_depth=6, random_state=0).fit(XC, YC)
    _compare(_export(est, XC, NOZIP), {"X": XC})


def test_decision_tree_regressor():
    est = DecisionTreeRegressor(max_depth=7, random_state=0).fit(XR, YR)
    _compare(_export(est, XR), {"X": XR})


def test_random_forest_classifier_binary():
    est = RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0).fit(XC, YB)
    labels, proba = _compare(_export(est, XC, NOZIP), {"X": XC})
    np.testing.assert_array_equal(labels, est.predict(XC))


def test_random_forest_regressor():
    est = RandomForestRegressor(n_estimators=15, max_depth=6, random_state=0).fit(XR, YR)
    _compare(_export(est, XR), {"X": XR})


def test_gradient_boosting_classifier_binary_and_multiclass():
    for y in (YB, YC):
        est = GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(XC, y)
        _compare(_export(est, XC, NOZIP), {"X": XC})


def test_gradient_boosting_regressor():
    est = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(XR, YR)
    _compare(_export(est, XR), {"X": XR})


def test_svc_with_probabilities_multiclass_and_binary():
    for y in (YC, YB):
        est = SVC(probability=True, random_state=0).fit(XC, y)
        labels, proba = _compare(_export(est, XC, NOZIP), {"X": XC})
        np.testing.assert_array_equal(labels, est.predict(XC))


@pytest.mark.parametrize("kernel", ["linear", "poly", "rbf", "sigmoid"])
def test_svc_kernels_binary(kernel):
    est = SVC(kernel=kernel, degree=2, gamma=0.1, coef0=0.5, random_state=0).fit(XC, YB)
    _compare(_export(est, XC, NOZIP), {"X": XC})


def test_svr_and_linear_svc():
    est = SVR(C=3.0).fit(XR, YR)
    _compare(_export(est, XR), {"X": XR})
    est = LinearSVC(random_state=0).fit(XC, YC)
    _compare(_export(est, XC), {"X": XC})


def test_logistic_regression_multiclass_and_binary():
    for y in (YC, YB):
        est = LogisticRegression(max_iter=500).fit(XC, y)
        labels, proba = _compare(_export(est, XC, NOZIP), {"X": XC})
        np.testing.assert_allclose(proba, est.predict_proba(XC), rtol=1e-4, atol=1e-5)


def test_linear_regression():
    est = LinearRegression().fit(XR, YR)
    _compare(_export(est, XR), {"X": XR})


def test_standard_scaler():
    est = StandardScaler().fit(XR)
    _compare(_export(est, XR), {"X": XR})


def test_one_hot_encoder_strings():
    cats = np.array([["red", "small"], ["blue", "big"], ["green", "small"], ["red", "big"]], dtype=object)
    est = OneHotEncoder(handle_unknown="ignore").fit(cats)
    x = np.array([["red", "big"], ["green", "small"], ["purple", "big"]], dtype=object)
    model = to_onnx(est, initial_types=[("X", StringTensorType([None, 2]))])
    _compare(model, {"X": x})


def test_simple_imputer():
    x = XR.copy()
    x[RNG.random(x.shape) < 0.2] = np.nan
    est = SimpleImputer(strategy="mean").fit(x)
    _compare(_export(est, x), {"X": x})


def test_pipeline_column_transformer_mixed_columns():
    n = 200
    num = RNG.normal(size=(n, 3)).astype(np.float32)
    num[RNG.random(num.shape) < 0.1] = np.nan
    color = RNG.choice(["red", "green", "blue"], size=(n, 1)).astype(object)
    size = RNG.choice(["S", "M", "L", "XL"], size=(n, 1)).astype(object)
    y = ((np.nan_to_num(num[:, 0]) > 0) ^ (color[:, 0] == "red")).astype(np.int64)
    import pandas as pd

    df = pd.DataFrame({"a": num[:, 0], "b": num[:, 1], "c": num[:, 2], "color": color[:, 0], "size": size[:, 0]})
    pre = ColumnTransformer([
        ("num", Pipeline([("imp", SimpleImputer(strategy="median")), ("sc", StandardScaler())]), ["a", "b", "c"]),
        ("cat", OneHotEncoder(handle_unknown="ignore"), ["color", "size"]),
    ])
    pipe = Pipeline([("pre", pre), ("clf", LogisticRegression(max_iter=500))]).fit(df, y)
    types = [(c, FloatTensorType([None, 1])) for c in ("a", "b", "c")] + \
            [(c, StringTensorType([None, 1])) for c in ("color", "size")]
    model = to_onnx(pipe, initial_types=types, options={id(pipe.steps[-1][1]): NOZIP})
    feeds = {c: df[[c]].to_numpy().astype(np.float32) for c in ("a", "b", "c")}
    feeds.update({c: df[[c]].to_numpy().astype(object) for c in ("color", "size")})
    labels, proba = _compare(model, feeds)
    np.testing.assert_array_equal(labels, pipe.predict(df))


def test_classifier_with_zipmap_string_labels():
    names = np.array(["cat", "dog", "eel"], dtype=object)
    est = RandomForestClassifier(n_estimators=10, max_depth=5, random_state=0).fit(XC, names[YC])
    model = _export(est, XC)  # default options: ZipMap output
    assert any(n.op_type == "ZipMap" for n in model.graph.node)
    labels, maps = _compare(model, {"X": XC})
    assert [_text(v) for v in labels] == list(est.predict(XC))
    assert isinstance(maps, list) and set(maps[0]) == {"cat", "dog", "eel"}


def test_classifier_with_zipmap_int_labels():
    est = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(XC, YC + 10)
    labels, maps = _compare(_export(est, XC), {"X": XC})
    assert set(maps[0]) == {10, 11, 12}


def test_tree_versions_3_and_5_and_tree_ensemble_5():
    """The same exported forest bound to TreeEnsemble{Regressor,Classifier} 3 and 5 and
    rewritten as TreeEnsemble 5 gives onnxruntime's numbers."""
    import importlib.util  # noqa: PLC0415
    import os  # noqa: PLC0415

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_ml_kernels.py")
    spec = importlib.util.spec_from_file_location("onnxkit_ml_kernel_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    legacy_to_tree_ensemble = module.legacy_to_tree_ensemble

    est = RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0).fit(XR, YR)
    model = _export(est, XR)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"X": XR})[0]
    for v in (3, 5):
        for o in model.opset_import:
            if o.domain == "ai.onnx.ml":
                o.version = v
        got = InferenceSession(model.SerializeToString()).run(None, {"X": XR})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=_atol(want))
    te = legacy_to_tree_ensemble(model)
    got = InferenceSession(te.SerializeToString()).run(None, {"X": XR})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=_atol(want))
