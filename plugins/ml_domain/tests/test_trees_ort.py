"""Tree ensembles against onnxruntime (issue 29 item 6): the binary case of TreeEnsembleClassifier
(two labels, every vote for one class id), every post transform, and sklearn's binary models.

onnxruntime (optimizer off) is the oracle; where the kernel's docstring states a deliberate
difference (PROBIT of a derived score, class id 1 with two base values, two class ids) the
reference evaluator or a hand computation is.  Seeds are fixed; each test takes well under a second.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from onnxkit.runtime import InferenceSession

ort = pytest.importorskip("onnxruntime")
ort.set_default_logger_severity(4)

ML = "ai.onnx.ml"
TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")


def _forest(rng, n_trees, depth, n_features, targets, positive, prefix="class", sparse=False):
    """Random legacy trees; each leaf votes for every id in ``targets`` (some skipped if ``sparse``)."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                         "nodes_truenodeids", "nodes_falsenodeids")}
    votes = {k: [] for k in (f"{prefix}_treeids", f"{prefix}_nodeids", f"{prefix}_ids", f"{prefix}_weights")}
    for t in range(n_trees):
        nid = [0]

        def grow(d):
            me = nid[0]
            nid[0] += 1
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(me)
            if d == depth or (d > 0 and rng.random() < 0.3):
                for k, v in (("nodes_featureids", 0), ("nodes_modes", "LEAF"), ("nodes_values", 0.0),
                             ("nodes_truenodeids", 0), ("nodes_falsenodeids", 0)):
                    a[k].append(v)
                for j, c in enumerate(targets):
                    if sparse and j and rng.random() < 0.4:
                        continue
                    w = rng.random() * 0.6 if positive else rng.normal()
                    for k, v in zip(votes, (t, me, int(c), float(np.float32(w)))):
                        votes[k].append(v)
                return me
            pos = len(a["nodes_featureids"])
            for k, v in (("nodes_featureids", int(rng.integers(n_features))), ("nodes_modes", "BRANCH_LEQ"),
                         ("nodes_values", float(np.float32(rng.normal()))), ("nodes_truenodeids", 0),
                         ("nodes_falsenodeids", 0)):
                a[k].append(v)
            a["nodes_truenodeids"][pos] = grow(d + 1)
            a["nodes_falsenodeids"][pos] = grow(d + 1)
            return me

        grow(0)
    return {**a, **votes}


def _classifier(attrs, ml=3):
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["Y", "Z"], domain=ML, **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.INT64, [None]),
                           helper.make_tensor_value_info("Z", TensorProto.FLOAT, [None, 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, ml)],
                             ir_version=10).SerializeToString()


def _ort(blob, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _kit(blob, feeds):
    return InferenceSession(blob).run(None, feeds)


def _binary_case(rng, cid, n_base, positive, transform):
    attrs = _forest(rng, int(rng.integers(1, 5)), int(rng.integers(1, 4)), 3, [cid], positive)
    if n_base:
        attrs["base_values"] = [float(np.float32(rng.normal() * 0.3)) for _ in range(n_base)]
    attrs.update(classlabels_int64s=[3, 8], post_transform=transform)
    return _classifier(attrs), {"X": rng.normal(size=(16, 3)).astype(np.float32)}


#: (class id, base values) whose Z differs from onnxruntime on purpose (trees.py docstring)
def _deliberate(cid, n_base, transform):
    return (cid == 1 and n_base == 2) or (cid == 0 and n_base < 2 and transform == "PROBIT")


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("cid, n_base", [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)])
def test_binary_case_matches_onnxruntime(cid, n_base, transform):
    rng = np.random.default_rng(1000 * cid + 10 * n_base + TRANSFORMS.index(transform))
    for positive in (True, False):
        for _ in range(4):
            blob, feeds = _binary_case(rng, cid, n_base, positive, transform)
            labels, z = _kit(blob, feeds)
            want_labels, want_z = _ort(blob, feeds)
            if cid == 1 and n_base == 2:  # test_class_id_1_with_two_base_values
                continue
            assert labels.tolist() == want_labels.tolist()
            if _deliberate(cid, n_base, transform):
                continue
            np.testing.assert_allclose(z, want_z, rtol=1e-5, atol=1e-5, equal_nan=True)  # PROBIT: float32 erfinv


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC"])
def test_class_id_1_with_two_base_values(transform):
    # Z = post_transform([base[0], v + base[1]]), the label by v + base[1]; v (0 where no vote
    # reached the row) from onnxruntime's regressor over the same votes
    rng = np.random.default_rng(11)
    for positive in (True, False):
        blob, feeds = _binary_case(rng, 1, 2, positive, transform)
        m = onnx.load_from_string(blob)
        node = m.graph.node[0]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        b0, b1 = attrs.pop("base_values")
        reg = {k.replace("class_", "target_"): v for k, v in attrs.items()
               if k not in ("classlabels_int64s", "post_transform")}
        v = _ort(_regressor({**reg, "n_targets": 2}, 2), feeds)[0][:, 1].astype(np.float64) + b1
        pair = np.stack([np.full_like(v, b0), v], axis=1)
        want = pair if transform == "NONE" else 1 / (1 + np.exp(-pair))
        labels, z = _kit(blob, feeds)
        np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-6)
        assert labels.tolist() == np.where(v > (0.5 if positive else 0.0), 8, 3).tolist()


def _stump(weights, **attrs):
    """x <= 0 -> leaf 1, else leaf 2; ``weights`` (leaf 1, leaf 2) all for class id 0."""
    return _classifier(dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                            nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.0, 0, 0],
                            nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0], class_treeids=[0, 0],
                            class_nodeids=[1, 2], class_ids=[0, 0], class_weights=list(weights),
                            classlabels_int64s=[0, 1], **attrs))


X2 = {"X": np.array([[-1, 0, 0], [1, 0, 0]], np.float32)}


def test_logistic_of_one_score_is_applied():
    # the reproducer: weights >= 0, a negative base value, LOGISTIC: [σ(-v), σ(v)], not [1 - v, v]
    blob = _stump([0.2, 0.9], base_values=[-0.605], post_transform="LOGISTIC")
    labels, z = _kit(blob, X2)
    v = np.array([0.2 - 0.605, 0.9 - 0.605])
    want = np.stack([1 / (1 + np.exp(v)), 1 / (1 + np.exp(-v))], axis=1)
    np.testing.assert_allclose(z, want, rtol=1e-6)
    np.testing.assert_allclose(z[0], [0.5999, 0.4001], atol=1e-4)
    np.testing.assert_allclose(z, _ort(blob, X2)[1], rtol=1e-6)
    assert labels.tolist() == [0, 0]  # v > 0.5 with weights >= 0, onnxruntime's rule


def test_probit_of_one_score_is_the_references():
    blob = _stump([0.3, 0.8], post_transform="PROBIT")
    z = _kit(blob, X2)[1]
    np.testing.assert_allclose(z, ReferenceEvaluator(blob).run(None, X2)[1], rtol=1e-5)
    assert z[0, 0] == pytest.approx(-z[0, 1], rel=1e-6) and z[0, 1] < 0 < z[1, 1]


def test_two_class_ids_follow_the_reference():
    rng = np.random.default_rng(7)
    for transform in ("NONE", "LOGISTIC", "SOFTMAX"):
        for positive in (True, False):
            attrs = _forest(rng, 3, 2, 3, [0, 1], positive, sparse=False)
            attrs.update(classlabels_int64s=[3, 8], post_transform=transform)
            blob = _classifier(attrs)
            feeds = {"X": rng.normal(size=(16, 3)).astype(np.float32)}
            labels, z = _kit(blob, feeds)
            want_labels, want_z = ReferenceEvaluator(blob).run(None, feeds)
            np.testing.assert_allclose(z, want_z, rtol=1e-5, atol=1e-6)
            assert labels.tolist() == want_labels.tolist()


def test_a_forest_of_probabilities_summing_to_one_gives_no_negative_probability():
    # 5 trees voting 0.2 each: 1.0000000149 in float64, 1 in float32 (onnxruntime): P(0) is 0, not -1.5e-08
    attrs = dict(nodes_treeids=[t for t in range(5) for _ in range(3)], nodes_nodeids=[0, 1, 2] * 5,
                 nodes_featureids=[0] * 15, nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"] * 5,
                 nodes_values=[0.0, 0, 0] * 5, nodes_truenodeids=[1, 0, 0] * 5, nodes_falsenodeids=[2, 0, 0] * 5,
                 class_treeids=[t for t in range(5) for _ in range(2)], class_nodeids=[1, 2] * 5,
                 class_ids=[0] * 10, class_weights=[0.0, 0.2] * 5, classlabels_int64s=[0, 1])
    blob = _classifier(attrs)
    z = _kit(blob, X2)[1]
    assert z.min() >= 0.0 and z[1].tolist() == [0.0, 1.0]
    np.testing.assert_array_equal(z, _ort(blob, X2)[1])


@pytest.fixture(scope="module")
def data():
    from sklearn.datasets import make_classification

    x, y = make_classification(300, 4, random_state=0)
    return x.astype(np.float32), y


@pytest.mark.parametrize("name", ["rf5", "rf7", "gb", "dt", "et"])
def test_sklearn_binary_models_match_onnxruntime_and_sklearn(name, data):
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.ensemble import ExtraTreesClassifier, GradientBoostingClassifier, RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    est = {"rf5": RandomForestClassifier(5, random_state=0), "rf7": RandomForestClassifier(7, max_depth=4, random_state=1),
           "gb": GradientBoostingClassifier(n_estimators=20, max_depth=2, random_state=0),
           "dt": DecisionTreeClassifier(max_depth=4, random_state=0), "et": ExtraTreesClassifier(4, random_state=0)}[name]
    x, y = data
    est.fit(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        blob = skl2onnx.to_onnx(est, x[:1], options={"zipmap": False},
                                target_opset={"": 17, "ai.onnx.ml": 3}).SerializeToString()
    labels, z = _kit(blob, {"X": x})
    want_labels, want_z = _ort(blob, {"X": x})
    assert labels.tolist() == want_labels.tolist()
    np.testing.assert_allclose(z, want_z, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z, est.predict_proba(x), atol=1e-5)
    assert z.min() >= 0.0


def _regressor(attrs, n_targets):
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n_targets])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 3)],
                             ir_version=10).SerializeToString()


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_regressors_match_onnxruntime(aggregate):
    # every leaf votes for every target (a target without votes is a documented difference), and
    # a single target only under NONE / PROBIT (onnxruntime applies no other transform to one target)
    rng = np.random.default_rng(["SUM", "AVERAGE", "MIN", "MAX"].index(aggregate))
    for n_targets in (1, 2, 3):
        for transform in TRANSFORMS if n_targets > 1 else ("NONE", "PROBIT"):
            for n_base in (0, n_targets):
                attrs = _forest(rng, int(rng.integers(1, 5)), int(rng.integers(1, 4)), 3, list(range(n_targets)),
                                False, prefix="target")
                if n_base:
                    attrs["base_values"] = [float(np.float32(rng.normal() * 0.3)) for _ in range(n_base)]
                attrs.update(n_targets=n_targets, aggregate_function=aggregate, post_transform=transform)
                blob = _regressor(attrs, n_targets)
                feeds = {"X": rng.normal(size=(16, 3)).astype(np.float32)}
                np.testing.assert_allclose(_kit(blob, feeds)[0], _ort(blob, feeds)[0], rtol=1e-5, atol=1e-5,
                                           equal_nan=True)
