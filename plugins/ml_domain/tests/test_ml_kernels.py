"""Unit tests of the ai.onnx.ml CPU kernels (behaviour the ONNX node vectors do not cover).

Expected values are hand-computed, or come from ``onnx.reference.ReferenceEvaluator`` (test-only
onnx) where its semantics and onnxkit's agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxkit.errors import EvaluationError, OnnxkitError
from onnxkit.runtime import InferenceSession

ML = "ai.onnx.ml"
F, D, I64, S = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.STRING


def _model(op, inputs, outputs, ml=1, **attrs):
    """A one-node model; ``inputs`` / ``outputs``: (name, TypeProto or (elem_type, shape))."""
    def vi(name, t):
        if isinstance(t, tuple):
            return helper.make_tensor_value_info(name, t[0], t[1])
        return helper.make_value_info(name, t)

    node = helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], domain=ML, **attrs)
    graph = helper.make_graph([node], "g", [vi(n, t) for n, t in inputs], [vi(n, t) for n, t in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, ml)],
                             ir_version=10)


def _run(model, _validate=True, **feeds):
    return InferenceSession(model.SerializeToString(), validate=_validate).run(None, feeds)


# Host issue: a NaN in a FLOAT(S) attribute is decoded as numpy.float32 (to keep its bits) and the
# checker then reports attribute-type-mismatch; such models are run unvalidated here.
NAN_ATTR = False


def _ref(model, **feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def _texts(a):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(a).ravel()]


# -- mapping ----------------------------------------------------------------------------------

def test_label_encoder_1_both_directions():
    m = _model("LabelEncoder", [("X", (S, [4]))], [("Y", (I64, [4]))], classes_strings=["a", "b", "c"],
               default_int64=-7)
    (y,) = _run(m, X=np.array(["c", "a", "zz", b"b"], dtype=object))
    assert y.dtype == np.int64 and y.tolist() == [2, 0, -7, 1]
    m = _model("LabelEncoder", [("X", (I64, [2, 2]))], [("Y", (S, [2, 2]))], classes_strings=["a", "b"],
               default_string="none")
    (y,) = _run(m, X=np.array([[1, 0], [5, -1]], dtype=np.int64))
    assert y.shape == (2, 2) and _texts(y) == ["b", "a", "none", "none"]


def test_label_encoder_2_kinds():
    m = _model("LabelEncoder", [("X", (I64, [3]))], [("Y", (S, [3]))], ml=2, keys_int64s=[3, 1],
               values_strings=["three", "one"], default_string="?")
    assert _texts(_run(m, X=np.array([1, 2, 3], dtype=np.int64))[0]) == ["one", "?", "three"]
    m = _model("LabelEncoder", [("X", (F, [4]))], [("Y", (I64, [4]))], ml=2, keys_floats=[0.5, float("nan"), 2.0],
               values_int64s=[5, 9, 20], default_int64=-1)
    (y,) = _run(m, NAN_ATTR, X=np.array([2.0, np.nan, 0.5, 7.0], dtype=np.float32))
    assert y.tolist() == [20, 9, 5, -1]
    m = _model("LabelEncoder", [("X", (S, [2]))], [("Y", (F, [2]))], ml=2, keys_strings=["x"], values_floats=[1.5])
    (y,) = _run(m, X=np.array(["x", "y"], dtype=object))
    assert y.dtype == np.float32 and y[0] == 1.5 and y[1] == 0 and np.signbit(y[1])  # default -0.0


def test_label_encoder_4_tensors_last_key_wins_and_default():
    keys = numpy_helper.from_array(np.array([1, 2, 1], dtype=np.int64), "keys_tensor")
    vals = numpy_helper.from_array(np.array([1.5, 2.5, 3.5], dtype=np.float64), "values_tensor")
    m = _model("LabelEncoder", [("X", (I64, [3]))], [("Y", (D, [3]))], ml=4, keys_tensor=keys, values_tensor=vals)
    (y,) = _run(m, X=np.array([1, 2, 4], dtype=np.int64))
    assert y.dtype == np.float64 and y.tolist() == [3.5, 2.5, -0.0]
    m = _model("LabelEncoder", [("X", (I64, [2]))], [("Y", (D, [2]))], ml=4, keys_tensor=keys, values_tensor=vals,
               default_tensor=numpy_helper.from_array(np.array([9.0]), "default_tensor"))
    assert _run(m, X=np.array([7, 2], dtype=np.int64))[0].tolist() == [9.0, 2.5]


def test_category_mapper():
    attrs = dict(cats_int64s=[10, 20], cats_strings=["ten", "twenty"], default_int64=-1, default_string="none")
    m = _model("CategoryMapper", [("X", (S, [3]))], [("Y", (I64, [3]))], **attrs)
    assert _run(m, X=np.array(["twenty", "x", "ten"], dtype=object))[0].tolist() == [20, -1, 10]
    m = _model("CategoryMapper", [("X", (I64, [3]))], [("Y", (S, [3]))], **attrs)
    assert _texts(_run(m, X=np.array([10, 11, 20], dtype=np.int64))[0]) == ["ten", "none", "twenty"]


def _map_type(key, value_elem):
    return helper.make_map_type_proto(key, helper.make_tensor_type_proto(value_elem, []))


def test_cast_map_dense_and_sparse():
    x = {3: np.float32(1.5), 0: np.float32(-2.0)}
    m = _model("CastMap", [("X", _map_type(I64, F))], [("Y", (F, [1, None]))])
    y = _run(m, X=x)[0]
    assert y.dtype == np.float32 and y.tolist() == [[-2.0, 1.5]]
    m = _model("CastMap", [("X", _map_type(I64, F))], [("Y", (I64, [1, 5]))], cast_to="TO_INT64",
               map_form="SPARSE", max_map=5)
    assert _run(m, X=x)[0].tolist() == [[-2, 0, 0, 1, 0]]
    m = _model("CastMap", [("X", _map_type(I64, S))], [("Y", (F, [1, None]))])
    assert _run(m, X={1: np.array("2.5", dtype=object), 0: np.array("1", dtype=object)})[0].tolist() == [[1.0, 2.5]]
    m = _model("CastMap", [("X", _map_type(I64, F))], [("Y", (S, [1, None]))], cast_to="TO_STRING")
    assert _texts(_run(m, X={1: np.float32(0.5)})[0]) == ["0.500000"]
    m = _model("CastMap", [("X", _map_type(I64, F))], [("Y", (F, [1, 2]))], map_form="SPARSE", max_map=2)
    with pytest.raises(EvaluationError, match="max_map"):
        _run(m, X={4: np.float32(1.0)})


def test_dict_vectorizer():
    m = _model("DictVectorizer", [("X", _map_type(S, F))], [("Y", (F, [None]))], string_vocabulary=["a", "b", "c"])
    y = _run(m, X={"c": np.float32(3.0), "a": np.float32(1.0), "zz": np.float32(9.0)})[0]
    assert y.dtype == np.float32 and y.tolist() == [1.0, 0.0, 3.0]
    m = _model("DictVectorizer", [("X", _map_type(I64, D))], [("Y", (D, [None]))], int64_vocabulary=[5, 7])
    y = _run(m, X={7: np.float64(0.25)})[0]
    assert y.dtype == np.float64 and y.tolist() == [0.0, 0.25]


def test_zipmap_int_and_string_labels():
    seq = helper.make_sequence_type_proto(_map_type(I64, F))
    m = _model("ZipMap", [("X", (F, [2, 2]))], [("Z", seq)], classlabels_int64s=[4, 9])
    (z,) = _run(m, X=np.array([[0.25, 0.75], [1.0, 0.0]], dtype=np.float32))
    assert z == [{4: 0.25, 9: 0.75}, {4: 1.0, 9: 0.0}]
    seq = helper.make_sequence_type_proto(_map_type(S, F))
    m = _model("ZipMap", [("X", (F, [1, 3]))], [("Z", seq)], classlabels_strings=["a", "b", "c"])
    (z,) = _run(m, X=np.array([[0.5, 0.25, 0.25]], dtype=np.float32))
    assert z == [{"a": 0.5, "b": 0.25, "c": 0.25}]
    with pytest.raises(OnnxkitError):
        _run(m, X=np.zeros((1, 2), dtype=np.float32))


# -- preprocessing ----------------------------------------------------------------------------

def test_feature_vectorizer_cuts_and_pads():
    m = _model("FeatureVectorizer", [("A", (D, [2, 3])), ("B", (D, [2]))], [("Y", (F, [2, 4]))],
               inputdimensions=[2, 2])
    (y,) = _run(m, A=np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float64), B=np.array([0.5, 1.5]))
    assert y.dtype == np.float32 and y.tolist() == [[1, 2, 0.5, 0], [4, 5, 1.5, 0]]


def test_imputer_float_value_and_int64s():
    m = _model("Imputer", [("X", (F, [2, 2]))], [("Y", (F, [2, 2]))], imputed_value_floats=[7.0, 8.0],
               replaced_value_float=-1.0)
    (y,) = _run(m, X=np.array([[-1, 2], [3, -1]], dtype=np.float32))
    assert y.tolist() == [[7, 2], [3, 8]]
    m = _model("Imputer", [("X", (I64, [3]))], [("Y", (I64, [3]))], imputed_value_int64s=[5], replaced_value_int64=0)
    (y,) = _run(m, X=np.array([0, 1, 0], dtype=np.int64))
    assert y.dtype == np.int64 and y.tolist() == [5, 1, 5]


def test_normalizer_modes():
    x = np.array([[1, -3, 2], [0, 0, 0]], dtype=np.float64)
    want = {"MAX": [[0.5, -1.5, 1.0], [0, 0, 0]], "L1": [[1 / 6, -0.5, 1 / 3], [0, 0, 0]],
            "L2": [[1 / 14 ** 0.5, -3 / 14 ** 0.5, 2 / 14 ** 0.5], [0, 0, 0]]}
    for norm, w in want.items():
        m = _model("Normalizer", [("X", (D, [2, 3]))], [("Y", (F, [2, 3]))], norm=norm)
        (y,) = _run(m, X=x)
        assert y.dtype == np.float32
        np.testing.assert_allclose(y, w, rtol=1e-6)


def test_scaler_binarizer_array_feature_extractor():
    m = _model("Scaler", [("X", (I64, [2, 2]))], [("Y", (F, [2, 2]))], offset=[1.0], scale=[2.0, 0.5])
    assert _run(m, X=np.array([[1, 3], [2, 5]], dtype=np.int64))[0].tolist() == [[0, 1], [2, 2]]
    m = _model("Binarizer", [("X", (D, [3]))], [("Y", (D, [3]))], threshold=0.5)
    (y,) = _run(m, X=np.array([0.5, 0.7, np.nan]))
    assert y.dtype == np.float64 and y.tolist() == [0, 1, 0]
    m = _model("ArrayFeatureExtractor", [("X", (S, [3])), ("Y", (I64, [2]))], [("Z", (S, [1, 2]))])
    (z,) = _run(m, X=np.array(["a", "b", "c"], dtype=object), Y=np.array([2, 0], dtype=np.int64))
    assert z.shape == (1, 2) and _texts(z) == ["c", "a"]
    with pytest.raises(EvaluationError, match="out of range"):
        _run(m, X=np.array(["a", "b", "c"], dtype=object), Y=np.array([3, 0], dtype=np.int64))


def test_one_hot_encoder():
    m = _model("OneHotEncoder", [("X", (I64, [2, 2]))], [("Y", (F, [2, 2, 3]))], cats_int64s=[7, 3, 5])
    (y,) = _run(m, X=np.array([[3, 7], [4, 5]], dtype=np.int64))
    assert y.shape == (2, 2, 3) and y.reshape(4, 3).tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 1]]
    m = _model("OneHotEncoder", [("X", (S, [2]))], [("Y", (F, [2, 2]))], cats_strings=["u", "v"], zeros=0)
    assert _run(m, X=np.array(["v", "u"], dtype=object))[0].tolist() == [[0, 1], [1, 0]]
    with pytest.raises(EvaluationError, match="not a category"):
        _run(m, X=np.array(["w", "u"], dtype=object))


# -- linear and SVM ---------------------------------------------------------------------------

X4 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [0.0, 0.0, 0.0], [-2.0, 1.0, 1.0]], dtype=np.float32)


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
def test_linear_classifier_transforms(transform):
    coef = [0.5, -0.25, 0.1, -0.3, 0.2, 0.05, 0.02, 0.01, -0.2]
    m = _model("LinearClassifier", [("X", (F, [4, 3]))], [("Y", (S, [4])), ("Z", (F, [4, 3]))],
               coefficients=coef, intercepts=[0.1, 0.0, -0.05], classlabels_strings=["a", "b", "c"],
               post_transform=transform)
    x = X4 / 8 if transform == "PROBIT" else X4  # probit needs scores in (0, 1)
    x = x + 0.3 if transform == "PROBIT" else x
    labels, z = _run(m, X=x)
    raw = x.astype(np.float64) @ np.array(coef).reshape(3, 3).T + [0.1, 0.0, -0.05]
    assert _texts(labels) == [["a", "b", "c"][i] for i in raw.argmax(axis=1)]
    ref_labels, ref_z = _ref(m, X=x)
    np.testing.assert_allclose(z, ref_z, rtol=1e-5, atol=1e-6)


def test_linear_classifier_binary_one_row_and_regressor():
    m = _model("LinearClassifier", [("X", (F, [4, 3]))], [("Y", (I64, [4])), ("Z", (F, [4, 2]))],
               coefficients=[1.0, 1.0, 0.0], intercepts=[0.5], classlabels_ints=[3, 8], post_transform="LOGISTIC")
    labels, z = _run(m, X=X4)
    s = X4[:, 0] + X4[:, 1] + 0.5
    assert labels.tolist() == [8 if v > 0 else 3 for v in s]
    np.testing.assert_allclose(z, np.stack([1 / (1 + np.exp(s)), 1 / (1 + np.exp(-s))], axis=1), rtol=1e-6)
    m = _model("LinearRegressor", [("X", (D, [4, 3]))], [("Y", (F, [4, 2]))], coefficients=[1, 2, 3, 0, 0, 1.5],
               intercepts=[1.0, -1.0], targets=2)
    (y,) = _run(m, X=X4.astype(np.float64))
    np.testing.assert_allclose(y, X4 @ np.array([[1, 2, 3], [0, 0, 1.5]]).T + [1, -1], rtol=1e-6)


SV = [0.0, 1.0, 1.0, 0.5, -1.0, 0.0, 0.5, 0.5, 2.0, -1.0, 1.0, 0.0, -0.5, -0.5, 0.0]  # 5 vectors x 3


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
def test_svm_classifier_multiclass_votes(kernel):
    m = _model("SVMClassifier", [("X", (F, [4, 3]))], [("Y", (I64, [4])), ("Z", (F, [4, 3]))],
               classlabels_ints=[0, 1, 2], vectors_per_class=[2, 2, 1], support_vectors=SV,
               coefficients=[1.0, 0.5, -0.25, -1.0, 0.75, 0.5, -0.5, 0.3, -0.2, -0.6],
               rho=[0.1, -0.2, 0.05], kernel_type=kernel, kernel_params=[0.3, 0.5, 2.0])
    labels, z = _run(m, X=X4)
    ref_labels, ref_z = _ref(m, X=X4)
    np.testing.assert_allclose(z, ref_z, rtol=1e-5, atol=1e-6)
    assert labels.tolist() == ref_labels.tolist()


def test_svm_classifier_probabilities_and_linear_form():
    m = _model("SVMClassifier", [("X", (F, [4, 3]))], [("Y", (S, [4])), ("Z", (F, [4, 3]))],
               classlabels_strings=["x", "y", "z"], vectors_per_class=[2, 2, 1], support_vectors=SV,
               coefficients=[1.0, 0.5, -0.25, -1.0, 0.75, 0.5, -0.5, 0.3, -0.2, -0.6], rho=[0.1, -0.2, 0.05],
               kernel_type="RBF", kernel_params=[0.3, 0.0, 0.0], prob_a=[-2.0, -1.5, -3.0], prob_b=[0.1, 0.0, -0.2])
    labels, z = _run(m, X=X4)
    # oracle: onnxruntime (the reference implementation's pairwise coupling multiplies the wrong
    # terms: it takes a dot product where libsvm multiplies two entries)
    ort = pytest.importorskip("onnxruntime")
    ort_labels, ort_z = ort.InferenceSession(m.SerializeToString()).run(None, {"X": X4})
    np.testing.assert_allclose(z, ort_z, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z.sum(axis=1), 1.0, rtol=1e-5)
    assert _texts(labels) == _texts(ort_labels) == ["x", "z", "x", "x"]
    m = _model("SVMClassifier", [("X", (F, [4, 3]))], [("Y", (I64, [4])), ("Z", (F, [4, 3]))],
               classlabels_ints=[5, 6, 7], coefficients=[1, 0, 0, 0, 1, 0, 0, 0, 1.0], rho=[0.5])
    labels, z = _run(m, X=X4)
    np.testing.assert_allclose(z, X4 + 0.5, rtol=1e-6)
    assert labels.tolist() == [7, 5, 5, 6]


def test_svm_regressor_forms():
    m = _model("SVMRegressor", [("X", (F, [4, 3]))], [("Y", (F, [4, 1]))], n_supports=5, support_vectors=SV,
               coefficients=[0.5, -1.0, 0.25, 0.75, -0.5], rho=[0.2], kernel_type="POLY", kernel_params=[0.5, 1.0, 3.0])
    (y,) = _run(m, X=X4)
    sv = np.array(SV).reshape(5, 3)
    want = ((0.5 * X4.astype(np.float64) @ sv.T + 1.0) ** 3) @ [0.5, -1.0, 0.25, 0.75, -0.5] + 0.2
    np.testing.assert_allclose(y[:, 0], want, rtol=1e-5)
    m = _model("SVMRegressor", [("X", (F, [4, 3]))], [("Y", (F, [4, 1]))], coefficients=[1.0, -1.0, 0.0], rho=[0.25],
               one_class=1)
    assert _run(m, X=X4)[0][:, 0].tolist() == [1, 1, 1, -1]


# -- trees ------------------------------------------------------------------------------------

def _legacy_tree_attrs():
    """Two trees, every legacy mode, missing values tracked on one node."""
    return dict(
        nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1],
        nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6],
        nodes_featureids=[0, 1, 0, 0, 0, 2, 1, 0, 0, 2, 0, 0],
        nodes_modes=["BRANCH_LEQ", "BRANCH_LT", "LEAF", "LEAF", "LEAF",
                     "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "LEAF", "BRANCH_NEQ", "LEAF", "LEAF"],
        nodes_values=[0.5, 0.0, 0, 0, 0, 1.0, 0.5, 1.5, 0, 2.0, 0, 0],
        nodes_truenodeids=[1, 2, 0, 0, 0, 1, 2, 3, 0, 5, 0, 0],
        nodes_falsenodeids=[4, 3, 0, 0, 0, 4, 6, 6, 0, 6, 0, 0],
        nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        target_treeids=[0, 0, 0, 0, 1, 1, 1],
        target_nodeids=[2, 3, 3, 4, 3, 5, 6],
        target_ids=[0, 0, 1, 1, 0, 1, 1],
        target_weights=[1.0, 2.0, 3.0, -4.0, 10.0, 20.0, -30.0],
    )


XT = np.array([[0.2, -1.0, 2.0], [0.7, 0.6, 0.5], [1.5, 0.2, 2.0], [np.nan, 1.0, 1.0], [1.5, 0.7, 3.0],
               [0.5, 0.0, 1.0]], dtype=np.float32)


@pytest.mark.parametrize("version", [1, 3, 5])
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_ensemble_regressor_legacy(version, aggregate):
    attrs = _legacy_tree_attrs()
    xt = XT[~np.isnan(XT[:, 0])]
    m = _model("TreeEnsembleRegressor", [("X", (F, [None, 3]))], [("Y", (F, [None, 2]))], ml=version,
               n_targets=2, aggregate_function=aggregate, base_values=[0.5, -0.5], **attrs)
    got = _run(m, X=xt)[0]
    # the reference's MIN/MAX leave an unvoted target at the float limits; onnxkit gives 0 + base
    want = _ref(m, X=xt)[0].astype(np.float64)
    want[np.abs(want) > 1e30] = np.array([0.5, -0.5])[np.nonzero(np.abs(want) > 1e30)[1]]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_tree_ensemble_regressor_missing_and_double_thresholds():
    attrs = _legacy_tree_attrs()
    values = attrs.pop("nodes_values")
    m = _model("TreeEnsembleRegressor", [("X", (D, [None, 3]))], [("Y", (F, [None, 2]))], ml=3, n_targets=2,
               nodes_values_as_tensor=numpy_helper.from_array(np.array(values, dtype=np.float64)), **attrs)
    (y,) = _run(m, X=XT.astype(np.float64))
    # row 3 has NaN in feature 0: node 0 tracks missing values -> true branch -> node 1 (x1=1.0 < 0 false) -> leaf 3
    # tree 1: x2=1.0 >= 1 -> node 1: x1 > 0.5 -> node 2: x0 == 1.5 false (NaN) -> node 6 (-30 on target 1)
    np.testing.assert_allclose(y[3], [2.0, 3.0 - 30.0])
    hand = {0: [1.0, -30.0], 2: [0.0, -4.0 - 30.0]}
    for r, w in hand.items():
        np.testing.assert_allclose(y[r], w)


def test_tree_ensemble_classifier_multiclass_strings_softmax():
    attrs = _legacy_tree_attrs()
    for k in ("target_treeids", "target_nodeids", "target_ids", "target_weights"):
        attrs[k.replace("target", "class")] = attrs.pop(k)
    m = _model("TreeEnsembleClassifier", [("X", (F, [None, 3]))], [("Y", (S, [None])), ("Z", (F, [None, 3]))],
               ml=3, classlabels_strings=["p", "q", "r"], post_transform="SOFTMAX", base_values=[0.1, 0.2, 0.3],
               **attrs)
    xt = XT[~np.isnan(XT[:, 0])]
    labels, z = _run(m, X=xt)
    ref_labels, ref_z = _ref(m, X=xt)
    np.testing.assert_allclose(z, ref_z, rtol=1e-6, atol=1e-12)
    assert _texts(labels) == _texts(ref_labels)


def test_tree_ensemble_classifier_binary_single_class():
    common = dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                  nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.5, 0, 0], nodes_truenodeids=[1, 0, 0],
                  nodes_falsenodeids=[2, 0, 0], class_treeids=[0, 0], class_nodeids=[1, 2], class_ids=[0, 0],
                  classlabels_int64s=[4, 9])
    x = np.array([[0.2], [0.9]], dtype=np.float32)
    m = _model("TreeEnsembleClassifier", [("X", (F, [None, 1]))], [("Y", (I64, [None])), ("Z", (F, [None, 2]))],
               class_weights=[0.25, 0.8], **common)
    labels, z = _run(m, X=x)  # probabilities of the positive class
    assert labels.tolist() == [4, 9]
    np.testing.assert_allclose(z, [[0.75, 0.25], [0.2, 0.8]], rtol=1e-6)
    m = _model("TreeEnsembleClassifier", [("X", (F, [None, 1]))], [("Y", (I64, [None])), ("Z", (F, [None, 2]))],
               class_weights=[-1.0, 2.0], base_values=[0.5], post_transform="LOGISTIC", **common)
    labels, z = _run(m, X=x)  # margins: -0.5 and 2.5
    assert labels.tolist() == [4, 9]
    s = np.array([-0.5, 2.5])
    np.testing.assert_allclose(z, np.stack([1 / (1 + np.exp(s)), 1 / (1 + np.exp(-s))], axis=1), rtol=1e-6)


def _tree_ensemble(x_dtype, cols=2, **over):
    """TreeEnsemble 5: tree 0 uses LT/GTE/MEMBER/NEQ, tree 1 is a single leaf."""
    attrs = dict(
        nodes_featureids=[0, 1, 0, 1],
        nodes_modes=numpy_helper.from_array(np.array([1, 2, 6, 5], dtype=np.uint8), "nodes_modes"),
        nodes_splits=numpy_helper.from_array(np.array([1.0, 0.0, 0.0, 4.0], dtype=x_dtype), "nodes_splits"),
        nodes_truenodeids=[1, 0, 2, 0], nodes_trueleafs=[0, 1, 1, 1],
        nodes_falsenodeids=[2, 3, 1, 4], nodes_falseleafs=[0, 0, 0, 1],
        nodes_missing_value_tracks_true=[0, 1, 0, 0],
        membership_values=numpy_helper.from_array(np.array([2.0, 5.0, 7.0, np.nan], dtype=x_dtype), "mv"),
        leaf_targetids=[0, 1, 0, 1, 0, 1], tree_roots=[0, 3],
        leaf_weights=numpy_helper.from_array(np.array([1, 2, 4, 8, 16, 32], dtype=x_dtype), "w"),
        n_targets=2, aggregate_function=1, post_transform=0)
    attrs.update(over)
    elem = {np.float32: F, np.float64: D, np.float16: TensorProto.FLOAT16}[x_dtype]
    return _model("TreeEnsemble", [("X", (elem, [None, cols]))], [("Y", (elem, [None, 2]))], ml=5, **attrs)


XE = np.array([[0.5, -1.0], [0.5, np.nan], [0.5, 3.0], [5.0, 4.0], [7.0, 1.0], [3.0, 4.0], [np.nan, 2.0]])


def test_tree_ensemble_5_modes_member_missing():
    # tree_roots=[0, 3]: node 3 (NEQ) is also a root of its own tree
    for dtype in (np.float32, np.float64, np.float16):
        m = _tree_ensemble(dtype)
        x = XE.astype(dtype)
        (y,) = _run(m, X=x)
        assert y.dtype == dtype
        want = _ref(m, X=x)[0]
        np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64), rtol=1e-3)
    # by hand: row 0 (x0=0.5 < 1 -> node 1: x1=-1 >= 0 false -> node 3: -1 != 4 -> leaf 0 (w 1, t0)),
    # tree 2 starts at node 3: leaf 0 again; row 1: x1 NaN tracks true at node 1 -> leaf 0;
    # row 4: x0=7 member of {2, 5, 7} -> leaf 2 (w 4); row 5: x0=3 not a member -> node 1: x1=4 >= 0
    # -> leaf 0 (w 1), and tree 2: 4 != 4 false -> leaf 4 (w 16)
    (y,) = _run(_tree_ensemble(np.float32), X=XE.astype(np.float32))
    assert y[[0, 1, 4, 5]].tolist() == [[2.0, 0.0], [2.0, 0.0], [5.0, 0.0], [17.0, 0.0]]


@pytest.mark.parametrize("agg", [0, 2, 3])
def test_tree_ensemble_5_aggregates_and_transform(agg):
    m = _tree_ensemble(np.float64, aggregate_function=agg)
    x = XE[~np.isnan(XE).any(axis=1)]
    (y,) = _run(m, X=x)
    want = _ref(m, X=x)[0]
    want[np.abs(want) > 1e300] = 0.0  # a target without votes is 0 in onnxkit
    np.testing.assert_allclose(y, want, rtol=1e-12)
    m = _tree_ensemble(np.float64, aggregate_function=agg, post_transform=2)  # LOGISTIC
    np.testing.assert_allclose(_run(m, X=x)[0], 1 / (1 + np.exp(-want)), rtol=1e-12)


def test_tree_ensemble_5_single_leaf_tree_and_errors():
    m = _tree_ensemble(np.float32, nodes_trueleafs=[1, 1, 1, 1], nodes_falseleafs=[1, 0, 0, 1],
                       nodes_truenodeids=[0, 0, 2, 0], nodes_falsenodeids=[0, 3, 1, 4], tree_roots=[0])
    (y,) = _run(m, X=XE.astype(np.float32))
    assert y.tolist() == [[1.0, 0.0]] * len(XE)  # the root's true and false leaf are both leaf 0
    with pytest.raises(OnnxkitError, match="membership_values"):
        InferenceSession(_tree_ensemble(np.float32, membership_values=numpy_helper.from_array(
            np.array([1.0], dtype=np.float32), "mv")).SerializeToString())
    m = _tree_ensemble(np.float32, cols=None)
    with pytest.raises(EvaluationError, match="feature"):
        _run(m, X=np.zeros((2, 1), np.float32))


def _random_forest(rng, n_trees, depth, n_features):
    """Random complete-ish legacy trees with mixed modes (one dict of TreeEnsembleRegressor attributes)."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids", "target_treeids", "target_nodeids",
                         "target_ids", "target_weights")}
    modes = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"]
    for t in range(n_trees):
        nid = [0]

        def grow(d):
            me = nid[0]
            nid[0] += 1
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(me)
            if d == depth or (d > 1 and rng.random() < 0.2):
                for k, v in (("nodes_featureids", 0), ("nodes_modes", "LEAF"), ("nodes_values", 0.0),
                             ("nodes_truenodeids", 0), ("nodes_falsenodeids", 0)):
                    a[k].append(v)
                a["target_treeids"].append(t)
                a["target_nodeids"].append(me)
                a["target_ids"].append(int(rng.integers(2)))
                a["target_weights"].append(float(np.float32(rng.normal())))
                return me
            pos = len(a["nodes_featureids"])
            for k, v in (("nodes_featureids", int(rng.integers(n_features))), ("nodes_modes", str(rng.choice(modes))),
                         ("nodes_values", float(np.float32(rng.normal()))), ("nodes_truenodeids", 0),
                         ("nodes_falsenodeids", 0)):
                a[k].append(v)
            a["nodes_truenodeids"][pos] = grow(d + 1)
            a["nodes_falsenodeids"][pos] = grow(d + 1)
            return me

        grow(0)
    return a


def test_tree_ensemble_random_forest_against_reference():
    rng = np.random.default_rng(1)
    attrs = _random_forest(rng, n_trees=12, depth=6, n_features=4)
    m = _model("TreeEnsembleRegressor", [("X", (F, [None, 4]))], [("Y", (F, [None, 2]))], n_targets=2, **attrs)
    x = rng.normal(size=(60, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(m, X=x)[0], _ref(m, X=x)[0], rtol=1e-5, atol=1e-5)
    te = legacy_to_tree_ensemble(m)
    np.testing.assert_allclose(_run(te, X=x)[0], _ref(m, X=x)[0], rtol=1e-5, atol=1e-5)


def legacy_to_tree_ensemble(model):
    """A TreeEnsembleRegressor model (one node, X float) rewritten as TreeEnsemble 5 (SUM or AVERAGE)."""
    node = next(n for n in model.graph.node if n.op_type == "TreeEnsembleRegressor")
    a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
    tids, nids = a["nodes_treeids"], a["nodes_nodeids"]
    modes = [m.decode() for m in a["nodes_modes"]]
    code = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4, "BRANCH_NEQ": 5}
    internal = [i for i, m in enumerate(modes) if m != "LEAF"]
    leaves = [i for i, m in enumerate(modes) if m == "LEAF"]
    where = {(tids[i], nids[i]): i for i in range(len(tids))}
    inode = {i: k for k, i in enumerate(internal)}
    ileaf = {i: k for k, i in enumerate(leaves)}
    votes = {}
    for t, n, tid, w in zip(a["target_treeids"], a["target_nodeids"], a["target_ids"], a["target_weights"]):
        votes.setdefault(where[t, n], []).append((tid, w))
    # a TreeEnsemble leaf carries one (target, weight): this converter handles one vote per leaf
    assert all(len(v) == 1 for v in votes.values()), "one vote per leaf"
    ref = lambda i: (ileaf[i], 1) if modes[i] == "LEAF" else (inode[i], 0)  # noqa: E731
    tr = [ref(where[tids[i], a["nodes_truenodeids"][i]]) for i in internal]
    fa = [ref(where[tids[i], a["nodes_falsenodeids"][i]]) for i in internal]
    roots = sorted({t: min(i for i in range(len(tids)) if tids[i] == t) for t in set(tids)}.items())
    agg = {b"SUM": 1, b"AVERAGE": 0}[a.get("aggregate_function", b"SUM")]
    new = helper.make_node(
        "TreeEnsemble", list(node.input), list(node.output), domain=ML,
        nodes_featureids=[a["nodes_featureids"][i] for i in internal],
        nodes_modes=numpy_helper.from_array(np.array([code[modes[i]] for i in internal], dtype=np.uint8), "m"),
        nodes_splits=numpy_helper.from_array(np.array([a["nodes_values"][i] for i in internal], dtype=np.float32), "s"),
        nodes_truenodeids=[c for c, _ in tr], nodes_trueleafs=[f for _, f in tr],
        nodes_falsenodeids=[c for c, _ in fa], nodes_falseleafs=[f for _, f in fa],
        leaf_targetids=[votes[i][0][0] for i in leaves],
        leaf_weights=numpy_helper.from_array(np.array([votes[i][0][1] for i in leaves], dtype=np.float32), "w"),
        tree_roots=[inode[i] for _, i in roots], n_targets=a.get("n_targets", 1), aggregate_function=agg)
    graph = helper.make_graph([new], "g", list(model.graph.input), list(model.graph.output))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 5)],
                             ir_version=10)
