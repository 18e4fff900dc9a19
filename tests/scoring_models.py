"""Models and data the scale-out tests score: a scikit-learn pipeline and the bundled CNN.

The reference of every scale-out result is one ``InferenceSession.run`` over all rows, in
this process.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FEATURES = [f"f{i}" for i in range(6)]


@functools.lru_cache(maxsize=None)
def sklearn_model(rows: int = 3000, seed: int = 0):
    """(model octets, features float32 (rows, 6), reference {output: array}) of scaler + random forest.

    Cached: callers must not modify the arrays."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from skl2onnx import to_onnx

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, len(FEATURES))).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(np.int64) + (X[:, 3] > 1)
    pipe = make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=12, max_depth=6, random_state=seed))
    pipe.fit(X, y)
    data = to_onnx(pipe, X[:1], options={RandomForestClassifier: {"zipmap": False}},
                   target_opset={"": 17, "ai.onnx.ml": 3}).SerializeToString()
    return data, X, reference(data, X)


def digits(rows: int = 1000, seed: int = 0):
    """(model octets, images float32 (rows, 1, 8, 8), reference {output: array}) of examples/digits.onnx."""
    data = (EXAMPLES / "digits.onnx").read_bytes()
    images = np.random.default_rng(seed).random((rows, 1, 8, 8), dtype=np.float32)
    return data, images, reference(data, images)


def assert_batch_scores_match(got: np.ndarray, expected: np.ndarray) -> None:
    """``got`` (scored batch by batch) equals ``expected`` (one run over every row) within
    onnxkit's float tolerance: a matrix product's BLAS blocking, and so its rounding, depends
    on how many rows a batch has, so a row's floats need not be identical across batchings."""
    from onnxkit.tolerances import tolerance_for

    assert got.shape == expected.shape and got.dtype == expected.dtype
    tol = tolerance_for(expected.dtype)
    np.testing.assert_allclose(got, expected, rtol=tol.rtol, atol=tol.atol)


def reference(model_bytes: bytes, x: np.ndarray) -> dict:
    import onnxkit

    sess = onnxkit.InferenceSession(model_bytes)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, {sess.get_inputs()[0].name: x})))
