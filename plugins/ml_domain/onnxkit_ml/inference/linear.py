"""Linear models and support vector machines: LinearClassifier, LinearRegressor, SVMClassifier,
SVMRegressor (all version 1).

A classifier gives labels [N] (STRING when ``classlabels_strings`` has entries, else INT64) and
float scores [N, E]; a regressor float [N, targets].  N is X's first extent ([N, C]), 1 for a
1-D X ([C]).
"""

from __future__ import annotations

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import dims_of, tensor

from ._util import FLOAT, ML, batch, class_labels, definition_keys, given

FUNCTIONS = FunctionTable(definition_keys, domain=ML)


def _features(t):
    d = dims_of(t)
    if d is None or not d:
        return None
    return d[-1] if isinstance(d[-1], int) else None


@FUNCTIONS.register("LinearClassifier")
def _linear_classifier(ctx):
    """E: one score per coefficient row (``intercepts`` has one entry per row); a binary model
    with one row and two labels gives two scores."""
    label, n_labels = class_labels(ctx, "classlabels_ints")
    t = ctx.input_type(0)
    n, _ = batch(ctx, t)
    rows = None
    intercepts = given(ctx, "intercepts")
    coefficients = given(ctx, "coefficients")
    if intercepts is not None and len(list(intercepts)):
        rows = len(list(intercepts))
    elif coefficients is not None:
        f = _features(t)
        if f:
            if len(list(coefficients)) % f:
                ctx.fail(f"{len(list(coefficients))} coefficients do not make rows of {f} features")
            rows = len(list(coefficients)) // f
    if rows == 1 and n_labels == 2:
        rows = 2
    return [tensor(label, [n]), tensor(FLOAT, [n, rows])]


@FUNCTIONS.register("LinearRegressor")
def _linear_regressor(ctx):
    """[N, targets] float."""
    targets = ctx.attr("targets", 1)
    targets = int(targets) if targets is not None else None
    d = dims_of(ctx.input_type(0))
    if d is not None and len(d) > 2:
        return [tensor(FLOAT, None)]
    n, _ = batch(ctx, ctx.input_type(0))
    return [tensor(FLOAT, [n, targets])]


@FUNCTIONS.register("SVMClassifier")
def _svm_classifier(ctx):
    """Scores E (the layout of onnxruntime and the reference implementation): with support
    vectors (``vectors_per_class``), the class probabilities when ``prob_a`` is given, else the
    k(k-1)/2 pairwise decision values (two for a binary model: ``[-s, s]``); without support
    vectors (the liblinear form), one score per class."""
    label, k = class_labels(ctx, "classlabels_ints")
    n, _ = batch(ctx, ctx.input_type(0))
    per_class = given(ctx, "vectors_per_class")
    svc = per_class is not None and sum(int(v) for v in per_class) > 0
    prob_a = given(ctx, "prob_a")
    e = None
    if k is not None:
        if not svc:
            e = k if k >= 2 else None
        elif prob_a is not None and len(list(prob_a)):
            e = k
        elif k > 2:
            e = k * (k - 1) // 2
        elif k == 2 and ctx.attr("post_transform", "NONE") != "PROBIT":
            e = 2  # PROBIT: onnxruntime gives two scores, the reference implementation one
    return [tensor(label, [n]), tensor(FLOAT, [n, e])]


@FUNCTIONS.register("SVMRegressor")
def _svm_regressor(ctx):
    """[N, 1] float: one decision value (or one-class verdict) per row."""
    n, _ = batch(ctx, ctx.input_type(0))
    return [tensor(FLOAT, [n, 1])]
