"""Corpus source: scikit-learn models converted by skl2onnx, LightGBM models by onnxmltools.

Every model is trained here on a seeded synthetic data set (or iris), so the files are
reproducible; classifiers keep the converters' default ZipMap output (a sequence of maps).
The fixed inputs are rows the model was not trained on.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from corpus_common import Entry, normal, rng_for


def _data(name: str, n: int = 200, features: int = 6, classes: int = 3):
    """A seeded classification set: features, integer labels, and 5 held-out rows."""
    rng = rng_for(name)
    X = normal(rng, (n + 5, features))
    w = normal(rng, (features, classes))
    y = np.argmax(X @ w + 0.3 * normal(rng, (n + 5, classes)), axis=1)
    return X[:n], y[:n], X[n:]


def _sklearn_models():
    """(name, fitted estimator, held-out rows) of each scikit-learn model."""
    from sklearn.decomposition import PCA
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, StandardScaler
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeRegressor

    models = []
    X, y, rows = _data("skl_pipeline_logreg")
    models.append(("skl_pipeline_logreg", Pipeline([("scale", StandardScaler()), ("pca", PCA(4)),
                                                    ("clf", LogisticRegression(max_iter=500))]).fit(X, y), rows))
    X, y, rows = _data("skl_random_forest")
    models.append(("skl_random_forest", RandomForestClassifier(20, max_depth=6, random_state=0).fit(X, y), rows))
    X, y, rows = _data("skl_gradient_boosting_reg")
    models.append(("skl_gradient_boosting_reg",
                   GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(X, X[:, 0] * 2 + y),
                   rows))
    X, y, rows = _data("skl_linear_regression_2t")
    models.append(("skl_linear_regression_2t", LinearRegression().fit(X, np.stack([X[:, 1], y], 1)), rows))
    X, y, rows = _data("skl_decision_tree_2t")
    models.append(("skl_decision_tree_2t", DecisionTreeRegressor(max_depth=5, random_state=0)
                   .fit(X, np.stack([X[:, 1], y], 1)), rows))
    X, y, rows = _data("skl_svc_rbf")
    models.append(("skl_svc_rbf", SVC(probability=True, random_state=0).fit(X, y), rows))
    X, y, rows = _data("skl_mlp_string_labels")
    labels = np.array(["cat", "dog", "bird"])[y]
    models.append(("skl_mlp_string_labels", Pipeline([("scale", MinMaxScaler()), ("mlp", MLPClassifier(
        (16,), max_iter=300, random_state=0))]).fit(X, labels), rows))
    return models


def _lightgbm_models():
    """(name, fitted booster wrapper, held-out rows) of each LightGBM model."""
    import lightgbm

    X, y, rows = _data("lgbm_classifier")
    clf = lightgbm.LGBMClassifier(n_estimators=20, num_leaves=8, random_state=0, verbose=-1).fit(X, y)
    X2, y2, rows2 = _data("lgbm_regressor")
    reg = lightgbm.LGBMRegressor(n_estimators=20, num_leaves=8, random_state=0, verbose=-1).fit(X2, X2[:, 0] + y2)
    return [("lgbm_classifier", clf, rows), ("lgbm_regressor", reg, rows2)]


def build(out: Path) -> list[Entry]:
    """Fit, convert and write every model; inputs are the held-out rows as ``X``."""
    import onnxmltools
    import skl2onnx
    from onnxmltools.convert.common.data_types import FloatTensorType
    from skl2onnx import to_onnx

    entries = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model, rows in _sklearn_models():
            onx = to_onnx(model, rows[:1], target_opset={"": 17, "ai.onnx.ml": 3})
            (out / f"{name}.onnx").write_bytes(onx.SerializeToString())
            entries.append(Entry(name, "skl2onnx", skl2onnx.__version__, {"X": rows}))
        for name, model, rows in _lightgbm_models():
            onx = onnxmltools.convert_lightgbm(model, initial_types=[("X", FloatTensorType([None, rows.shape[1]]))],
                                               target_opset=15)
            (out / f"{name}.onnx").write_bytes(onx.SerializeToString())
            entries.append(Entry(name, "onnxmltools (LightGBM)", onnxmltools.__version__, {"X": rows}))
    return entries
