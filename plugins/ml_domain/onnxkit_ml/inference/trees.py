"""Tree ensembles: TreeEnsembleClassifier 1/3/5, TreeEnsembleRegressor 1/3/5, TreeEnsemble 5.

X is [N, F] (a 1-D X is one row).  The classifiers give labels [N] (STRING when
``classlabels_strings`` has entries, else INT64) and float scores [N, number of class labels];
the regressors [N, n_targets] (float; TreeEnsemble 5: X's element type).
"""

from __future__ import annotations

from onnxkit.plugin import FunctionTable, ir
from onnxkit.plugin.inference import elem_of, tensor

from ._util import FLOAT, INT64, ML, UINT8, attr_length, batch, class_labels, definition_keys, exclusive, given

FUNCTIONS = FunctionTable(definition_keys, domain=ML)

_AS_TENSOR = ("nodes_values", "nodes_hitrates", "base_values")


@FUNCTIONS.register("TreeEnsembleClassifier")
def _tree_ensemble_classifier(ctx):
    exclusive(ctx, *[(a, a + "_as_tensor") for a in (*_AS_TENSOR, "class_weights")])
    label, k = class_labels(ctx, "classlabels_int64s", required=True)
    n, _ = batch(ctx, ctx.input_type(0))
    # one label: the reference implementation gives two scores for a binary model
    e = k if k is not None and k >= 2 else None
    return [tensor(label, [n]), tensor(FLOAT, [n, e])]


@FUNCTIONS.register("TreeEnsembleRegressor")
def _tree_ensemble_regressor(ctx):
    exclusive(ctx, *[(a, a + "_as_tensor") for a in (*_AS_TENSOR, "target_weights")])
    n, _ = batch(ctx, ctx.input_type(0))
    targets = given(ctx, "n_targets")
    return [tensor(FLOAT, [n, None if targets is None else int(targets)])]


def _check_length(ctx, name: str, length: int, elem: int = 0) -> None:
    v = given(ctx, name)
    if v is None:
        return
    if isinstance(v, ir.Tensor):
        if len(v.dims) != 1:
            ctx.fail(f"'{name}' must be 1-D, not of shape {list(v.dims)}")
        if elem and int(v.data_type) != elem:
            ctx.fail(f"'{name}' has element type {v.data_type}; {elem} is required")
    n = attr_length(v)
    if n is not None and n != length:
        ctx.fail(f"'{name}' has {n} entries but 'nodes_splits' {length}")


@FUNCTIONS.register("TreeEnsemble")
def _tree_ensemble(ctx):
    """Y: X's element type, [N, n_targets].  The nodes_* attributes share one length;
    ``nodes_splits``, ``leaf_weights`` and ``membership_values`` have X's element type."""
    t = ctx.input_type(0)
    x = elem_of(t)
    splits = given(ctx, "nodes_splits")
    if isinstance(splits, ir.Tensor):
        if len(splits.dims) != 1:
            ctx.fail(f"'nodes_splits' must be 1-D, not of shape {list(splits.dims)}")
        length = int(splits.dims[0])
        for name in ("nodes_featureids", "nodes_truenodeids", "nodes_falsenodeids", "nodes_trueleafs",
                     "nodes_falseleafs", "nodes_missing_value_tracks_true"):
            _check_length(ctx, name, length, INT64)
        _check_length(ctx, "nodes_modes", length, UINT8)
        _check_length(ctx, "nodes_hitrates", length)
    for name in ("nodes_splits", "leaf_weights", "membership_values"):
        v = given(ctx, name)
        if x and isinstance(v, ir.Tensor) and v.data_type and int(v.data_type) != x:
            ctx.fail(f"'{name}' has element type {v.data_type} but X {x}; they must be the same")
    ids, weights = given(ctx, "leaf_targetids"), given(ctx, "leaf_weights")
    if ids is not None and weights is not None:
        if attr_length(ids) != attr_length(weights):
            ctx.fail(f"'leaf_targetids' has {attr_length(ids)} entries but 'leaf_weights' {attr_length(weights)}")
    n, _ = batch(ctx, t)
    targets = given(ctx, "n_targets")
    return [tensor(x, [n, None if targets is None else int(targets)])]
