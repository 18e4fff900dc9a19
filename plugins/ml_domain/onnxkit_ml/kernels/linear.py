"""Linear models of ai.onnx.ml.

Operators and the definitions (since_versions) implemented:

* LinearClassifier 1: scores ``X @ coefficients.T + intercepts`` ([N, K], float), post
  transform, top class (int64 or STRING labels).
* LinearRegressor 1: ``X @ coefficients.T + intercepts`` ([N, targets], float), post transform.

Inputs of type float, double, int64 or int32, shape [N, C] or [C] (one row).  Scores are
computed in float64 and returned as float32 (Z / Y are ``tensor(float)``).

Documented choices (the specification is silent; these are onnxruntime's where noted):

* The label is the class of the greatest raw score (before the post transform; first one on
  ties), as onnxruntime.
* A binary classifier with one coefficient row (K = 1, two labels): label ``labels[1]`` when
  the score is > 0, else ``labels[0]``; Z is ``[-s, s]`` with the post transform applied to
  both columns (the ONNX reference implementation's layout).  K = 1 with other than two labels
  gives 1 / 0 (or "1" / "0") as onnxruntime.
* ``multi_class`` does not change the computation (neither runtime uses it).
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, calls_blas

from ._common import as_float_matrix, bytes_array, labels_from, post_transform, str_list, transform_name

KERNELS = KernelTable()
ML = "ai.onnx.ml"


def _weights(ctx, n_features: int, coefficients: np.ndarray, intercepts, what: str):
    if coefficients.size % max(n_features, 1) or (n_features == 0 and coefficients.size):
        ctx.fail(f"coefficients has {coefficients.size} values, not a multiple of the {n_features} input features")
    k = coefficients.size // n_features if n_features else 0
    w = coefficients.reshape(k, n_features)
    if intercepts is None or len(intercepts) == 0:
        b = np.zeros(k)
    else:
        b = np.asarray(intercepts, dtype=np.float64)
        if b.size != k:
            ctx.fail(f"intercepts has {b.size} values but coefficients describe {k} {what}")
    return w, b


@KERNELS.register("LinearClassifier", 1, domain=ML, host_only=True)
@calls_blas
def linear_classifier(ctx):
    coefficients = ctx.attr("coefficients")
    if coefficients is None:
        ctx.fail("attribute 'coefficients' is required")
    coefficients = np.asarray(coefficients, dtype=np.float64)
    intercepts = ctx.attr("intercepts")
    ints = list(ctx.attr("classlabels_ints") or [])
    strings = str_list(ctx.attr("classlabels_strings"))
    if ints and strings:
        ctx.fail("only one of classlabels_ints and classlabels_strings may be given")
    n_labels = len(strings) or len(ints)
    transform = transform_name(ctx)

    def run(x):
        x2 = as_float_matrix(ctx, x, np.float64)
        w, b = _weights(ctx, x2.shape[1], coefficients, intercepts, "classes")
        scores = x2 @ w.T + b
        k = w.shape[0]
        if k == 1:
            s = scores[:, 0]
            pos = s > 0
            if n_labels == 2:
                labels = labels_from(pos.astype(np.int64), ints, strings)
                z = post_transform(np.stack([-s, s], axis=1), transform)
            else:
                if strings:
                    labels = bytes_array(["1" if p else "0" for p in pos])
                else:
                    labels = pos.astype(np.int64)
                z = post_transform(scores, transform)
            return labels, z.astype(np.float32)
        if n_labels != k:
            ctx.fail(f"{k} coefficient rows but {n_labels} class labels")
        best = np.argmax(scores, axis=1) if len(scores) else np.zeros(0, dtype=np.int64)
        labels = labels_from(best, ints, strings)
        return labels, post_transform(scores, transform).astype(np.float32)

    return run


@KERNELS.register("LinearRegressor", 1, domain=ML, host_only=True)
@calls_blas
def linear_regressor(ctx):
    coefficients = np.asarray(ctx.attr("coefficients") or [], dtype=np.float64)
    intercepts = ctx.attr("intercepts")
    targets = int(ctx.attr("targets"))
    transform = transform_name(ctx)
    if targets < 1:
        ctx.fail(f"targets must be >= 1, got {targets}")

    def run(x):
        x2 = as_float_matrix(ctx, x, np.float64)
        w, b = _weights(ctx, x2.shape[1], coefficients, intercepts, "targets")
        if w.shape[0] != targets:
            ctx.fail(f"coefficients describe {w.shape[0]} targets for {x2.shape[1]} features, targets={targets}")
        y = x2 @ w.T + b
        return post_transform(y, transform).astype(np.float32)

    return run
