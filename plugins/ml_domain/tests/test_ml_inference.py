"""Shape and type inference of ai.onnx.ml (Clause 9.2): every definition has a function; the
rules on hand-built models; the ai.onnx.ml node models of the ONNX 1-3 test package; models
exported by skl2onnx against onnxruntime's outputs (test-only dependencies, skipped when absent).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import onnxkit
from onnxkit import ir
from onnxkit.dtypes import DataType, from_numpy_dtype
from onnxkit.inference import infer_model, infer_shapes
from onnxkit.registry import get_registry

ML = "ai.onnx.ml"
F, D, I32, I64, S = (int(DataType.FLOAT), int(DataType.DOUBLE), int(DataType.INT32), int(DataType.INT64),
                     int(DataType.STRING))
I16 = int(DataType.INT16)
REPO = Path(__file__).resolve().parents[3]


# -- every definition ------------------------------------------------------------------------

def test_every_ml_definition_has_an_inference_function():
    reg = get_registry()
    keys = set()
    for version in range(1, 6):
        opset = reg.operator_set(ML, version)
        assert opset is not None, f"{ML} {version} is not registered"
        keys |= {s.key for s in opset}
    assert len(keys) == 25
    missing = sorted(k for k in keys if k not in reg.inference)
    assert not missing, f"no inference function for {missing}"


def test_the_plugin_gives_exactly_the_definitions():
    from onnxkit_ml.inference import functions
    from onnxkit_ml.schemas import definitions

    assert set(functions()) == {s.key for s in definitions()}


# -- hand-built models -----------------------------------------------------------------------

def _vi(name, t):
    if isinstance(t, tuple):
        t = ir.TensorType(t[0], t[1])
    return ir.ValueInfo(name=name, type=t)


def infer1(op, inputs, n_out=1, ml=1, **attrs):
    """Infer a one-node model; ``inputs``: types (TensorType, MapType ...) or (elem, shape) pairs.
    Returns (output types, InferenceResult)."""
    names = [f"x{i}" for i in range(len(inputs))]
    outs = [f"y{i}" for i in range(n_out)]
    node = ir.Node(input=names, output=outs, op_type=op, domain=ML,
                   attribute=[ir.Attribute.make(k, v) for k, v in attrs.items()])
    g = ir.Graph(node=[node], name="g", input=[_vi(n, t) for n, t in zip(names, inputs)],
                 output=[ir.ValueInfo(name=o) for o in outs])
    m = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId(ML, ml)], graph=g)
    r = infer_model(m)
    assert not [d for d in r.diagnostics if d.code in ("no-inference-function", "inference-function-failed",
                                                        "unknown-operator")], r.diagnostics
    return [r.type_of(o) for o in outs], r


def ok(op, inputs, n_out=1, ml=1, **attrs):
    types, r = infer1(op, inputs, n_out, ml, **attrs)
    assert not r.errors, [d.message for d in r.errors]
    return types


def fails(op, inputs, n_out=1, ml=1, **attrs):
    _, r = infer1(op, inputs, n_out, ml, **attrs)
    assert "inference-error" in {d.code for d in r.errors}, r.diagnostics
    return r


def sig(t):
    """(elem, dims) of a tensor type; dims None for unknown rank."""
    assert isinstance(t, ir.TensorType), t
    return t.elem_type, None if t.shape is None else list(t.shape.values)


def tens(elem, shape=None):
    return ir.TensorType(elem, shape)


def test_array_feature_extractor():
    assert sig(ok("ArrayFeatureExtractor", [(F, ["N", 4]), (I64, [2])])[0]) == (F, ["N", 2])
    assert sig(ok("ArrayFeatureExtractor", [(S, [2, 3, 5]), (I64, [1, 3])])[0]) == (S, [2, 3, 3])
    assert sig(ok("ArrayFeatureExtractor", [(I32, [4]), (I64, [3])])[0]) == (I32, [1, 3])   # one row
    assert sig(ok("ArrayFeatureExtractor", [(F, ["N", 4]), (I64, ["K"])])[0]) == (F, ["N", "K"])
    assert sig(ok("ArrayFeatureExtractor", [(F, ["N", 4]), (I64, [1, "K"])])[0]) == (F, ["N", "K"])
    assert sig(ok("ArrayFeatureExtractor", [(F, ["N", 4]), (I64, [2, "K"])])[0]) == (F, ["N", None])
    assert sig(ok("ArrayFeatureExtractor", [(F, ["N", 4]), (I64, [])])[0]) == (F, ["N", 1])
    assert sig(ok("ArrayFeatureExtractor", [(F, None), (I64, [2])])[0]) == (F, None)
    fails("ArrayFeatureExtractor", [(F, []), (I64, [2])])


def test_same_type_and_shape():
    assert sig(ok("Binarizer", [(I64, ["N", 3])], threshold=0.5)[0]) == (I64, ["N", 3])
    assert sig(ok("Imputer", [(D, [2, 3])], imputed_value_floats=[1.0])[0]) == (D, [2, 3])


def test_normalizer_and_scaler_give_float():
    assert sig(ok("Normalizer", [(I32, ["N", 3])], norm="L2")[0]) == (F, ["N", 3])
    assert sig(ok("Normalizer", [(D, [3])])[0]) == (F, [3])
    fails("Normalizer", [(F, [2, 3, 4])])
    assert sig(ok("Scaler", [(D, [2, 3, 4])], offset=[0.0], scale=[2.0])[0]) == (F, [2, 3, 4])
    assert sig(ok("Scaler", [(I64, None)])[0]) == (F, None)


def test_one_hot_encoder():
    assert sig(ok("OneHotEncoder", [(S, ["N", 2])], cats_strings=["a", "b", "c"])[0]) == (F, ["N", 2, 3])
    assert sig(ok("OneHotEncoder", [(D, [5])], cats_int64s=[1, 2, 3, 4])[0]) == (F, [5, 4])
    fails("OneHotEncoder", [(S, [2])], cats_strings=["a"], cats_int64s=[1])
    fails("OneHotEncoder", [(S, [2])])
    fails("OneHotEncoder", [(S, [2])], cats_int64s=[1, 2])
    fails("OneHotEncoder", [(I64, [2])], cats_strings=["a"])


def test_feature_vectorizer():
    t = ok("FeatureVectorizer", [(I64, ["N", 2]), (D, ["N", 3])], inputdimensions=[2, 3])[0]
    assert sig(t) == (F, ["N", 5])
    t = ok("FeatureVectorizer", [(F, [4]), (F, [4, 3])], inputdimensions=[1, 3])[0]
    assert sig(t) == (F, [4, 4])
    assert sig(ok("FeatureVectorizer", [(F, [4])], inputdimensions=[4])[0]) == (F, [None, 4])
    assert sig(ok("FeatureVectorizer", [(F, None), (F, ["N", 2])])[0]) == (F, ["N", None])
    fails("FeatureVectorizer", [(F, [2, 1]), (F, [3, 1])], inputdimensions=[1, 1])
    fails("FeatureVectorizer", [(F, [2, 1]), (F, [2, 1])], inputdimensions=[1])
    fails("FeatureVectorizer", [(F, [2, 1, 1])])


def test_cast_map():
    m = ir.MapType(I64, tens(S))
    assert sig(ok("CastMap", [m], cast_to="TO_STRING")[0]) == (S, None)
    t = ok("CastMap", [ir.MapType(I64, tens(F))], cast_to="TO_INT64", map_form="SPARSE", max_map=5)[0]
    assert sig(t) == (I64, None)
    assert sig(ok("CastMap", [m])[0]) == (F, None)  # the default TO_FLOAT
    fails("CastMap", [m], cast_to="TO_DOUBLE")


def test_category_mapper_and_label_encoder_1_swap_string_and_int64():
    kw = dict(cats_strings=["a", "b"], cats_int64s=[1, 2])
    assert sig(ok("CategoryMapper", [(S, ["N", 2])], **kw)[0]) == (I64, ["N", 2])
    assert sig(ok("CategoryMapper", [(I64, [3])], **kw)[0]) == (S, [3])
    fails("CategoryMapper", [(S, [3])], cats_strings=["a", "b"], cats_int64s=[1])
    assert sig(ok("LabelEncoder", [(S, [3, "M"])], classes_strings=["a"])[0]) == (I64, [3, "M"])
    assert sig(ok("LabelEncoder", [(I64, ["N"])], classes_strings=["a"])[0]) == (S, ["N"])


def test_label_encoder_2():
    t = ok("LabelEncoder", [(S, ["N"])], ml=2, keys_strings=["a", "b"], values_floats=[1.0, 2.0])[0]
    assert sig(t) == (F, ["N"])
    t = ok("LabelEncoder", [(F, [2, 2])], ml=3, keys_floats=[1.0], values_strings=["x"])[0]
    assert sig(t) == (S, [2, 2])
    fails("LabelEncoder", [(I64, [2])], ml=2, keys_strings=["a"], values_int64s=[1])       # key type
    fails("LabelEncoder", [(S, [2])], ml=2, keys_strings=["a"], values_int64s=[1], values_floats=[1.0])
    fails("LabelEncoder", [(S, [2])], ml=2, keys_strings=["a", "b"], values_int64s=[1])   # lengths
    fails("LabelEncoder", [(S, [2])], ml=2, values_int64s=[1])


def test_label_encoder_4_tensor_attributes():
    keys = ir.Tensor.from_numpy(np.array([1, 2, 3], dtype=np.int32))
    values = ir.Tensor.from_numpy(np.array([0.5, 1.5, 2.5], dtype=np.float64))
    t = ok("LabelEncoder", [(I32, ["N", 2])], ml=4, keys_tensor=keys, values_tensor=values,
           default_tensor=ir.Tensor.from_numpy(np.array([-1.0])))[0]
    assert sig(t) == (D, ["N", 2])
    t = ok("LabelEncoder", [(S, [5])], ml=5, keys_strings=["a", "b", "c"],
           values_tensor=ir.Tensor.from_numpy(np.array([0, 1, 2], dtype=np.int16)))[0]
    assert sig(t) == (I16, [5])
    fails("LabelEncoder", [(I32, [2])], ml=4, keys_tensor=keys, values_tensor=values,
          default_tensor=ir.Tensor.from_numpy(np.array([-1], dtype=np.int64)))
    fails("LabelEncoder", [(I32, [2])], ml=4, keys_tensor=keys, values_tensor=values,
          default_tensor=ir.Tensor.from_numpy(np.array([-1.0, 0.0])))
    fails("LabelEncoder", [(I64, [2])], ml=4, keys_tensor=keys, values_tensor=values)
    fails("LabelEncoder", [(I32, [2])], ml=4, keys_tensor=keys, keys_int64s=[1, 2, 3], values_tensor=values)


def test_dict_vectorizer():
    t = ok("DictVectorizer", [ir.MapType(S, tens(D))], string_vocabulary=["a", "b", "c"])[0]
    assert sig(t) == (D, None)
    t = ok("DictVectorizer", [ir.MapType(I64, tens(S))], int64_vocabulary=[1, 2])[0]
    assert sig(t) == (S, None)
    fails("DictVectorizer", [ir.MapType(S, tens(F))], int64_vocabulary=[1, 2])
    fails("DictVectorizer", [ir.MapType(S, tens(F))])


def test_zip_map():
    (t,) = ok("ZipMap", [(F, ["N", 3])], classlabels_strings=["a", "b", "c"])
    assert t == ir.SequenceType(ir.MapType(S, ir.TensorType(F, [])))
    (t,) = ok("ZipMap", [(F, [2])], classlabels_int64s=[4, 5])
    assert t == ir.SequenceType(ir.MapType(I64, ir.TensorType(F, [])))
    fails("ZipMap", [(F, [2, 2, 2])], classlabels_int64s=[1, 2])
    fails("ZipMap", [(F, ["N", 3])], classlabels_int64s=[1, 2])
    fails("ZipMap", [(F, ["N", 2])], classlabels_int64s=[1, 2], classlabels_strings=["a", "b"])


def test_linear_classifier():
    y, z = ok("LinearClassifier", [(F, ["N", 3])], 2, coefficients=[0.1] * 9, intercepts=[0.0] * 3,
              classlabels_strings=["a", "b", "c"])
    assert sig(y) == (S, ["N"]) and sig(z) == (F, ["N", 3])
    y, z = ok("LinearClassifier", [(D, [7, 3])], 2, coefficients=[0.1] * 3, intercepts=[0.0],
              classlabels_ints=[0, 1])
    assert sig(y) == (I64, [7]) and sig(z) == (F, [7, 2])       # binary: two scores
    y, z = ok("LinearClassifier", [(I32, [3])], 2, coefficients=[0.1] * 6, classlabels_ints=[4, 5])
    assert sig(y) == (I64, [1]) and sig(z) == (F, [1, 2])       # one row; rows from the coefficients
    y, z = ok("LinearClassifier", [(F, None)], 2, coefficients=[0.1] * 6, classlabels_ints=[4, 5, 6])
    assert sig(y) == (I64, [None]) and sig(z) == (F, [None, None])
    fails("LinearClassifier", [(F, [2, 3, 4])], 2, coefficients=[0.1] * 8, intercepts=[0.0, 0.0])
    fails("LinearClassifier", [(F, [2, 4])], 2, coefficients=[0.1] * 6, classlabels_ints=[4, 5])


def test_linear_regressor():
    assert sig(ok("LinearRegressor", [(F, ["N", 3])], coefficients=[1.0] * 6, targets=2)[0]) == (F, ["N", 2])
    assert sig(ok("LinearRegressor", [(I64, [3])], coefficients=[1.0] * 3)[0]) == (F, [1, 1])


def test_svm_classifier_scores():
    common = dict(coefficients=[1.0] * 12, support_vectors=[0.5] * 12, rho=[0.0] * 3, kernel_type="RBF")
    y, z = ok("SVMClassifier", [(F, ["N", 3])], 2, vectors_per_class=[2, 1, 1], classlabels_ints=[0, 1, 2],
              prob_a=[1.0] * 3, prob_b=[0.0] * 3, **common)
    assert sig(y) == (I64, ["N"]) and sig(z) == (F, ["N", 3])   # probabilities
    y, z = ok("SVMClassifier", [(F, ["N", 3])], 2, vectors_per_class=[1, 1, 1, 1], classlabels_strings=list("abcd"),
              **common)
    assert sig(y) == (S, ["N"]) and sig(z) == (F, ["N", 6])     # pairwise decision values
    y, z = ok("SVMClassifier", [(F, [5, 3])], 2, vectors_per_class=[2, 2], classlabels_ints=[0, 1], **common)
    assert sig(z) == (F, [5, 2])                                  # binary: [-s, s]
    y, z = ok("SVMClassifier", [(F, [5, 3])], 2, coefficients=[1.0] * 9, rho=[0.0], classlabels_ints=[0, 1, 2])
    assert sig(z) == (F, [5, 3])                                  # liblinear form
    y, z = ok("SVMClassifier", [(F, [3])], 2, coefficients=[1.0] * 9, rho=[0.0], classlabels_ints=[0, 1, 2])
    assert sig(y) == (I64, [1])
    fails("SVMClassifier", [(F, [1, 2, 3])], 2, coefficients=[1.0] * 9, rho=[0.0], classlabels_ints=[0, 1, 2])


def test_svm_regressor():
    assert sig(ok("SVMRegressor", [(D, ["N", 3])], coefficients=[1.0] * 3, rho=[0.0])[0]) == (F, ["N", 1])
    assert sig(ok("SVMRegressor", [(F, [3])], coefficients=[1.0] * 3, rho=[0.0])[0]) == (F, [1, 1])


def _tree_attrs(**extra):
    return dict(nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.5, 0.0, 0.0],
                nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0], **extra)


@pytest.mark.parametrize("ml", [1, 3, 5])
def test_tree_ensemble_classifier(ml):
    leaves = dict(class_treeids=[0, 0], class_nodeids=[1, 2], class_ids=[0, 2], class_weights=[1.0, 1.0])
    y, z = ok("TreeEnsembleClassifier", [(D, ["N", 2])], 2, ml=ml, classlabels_int64s=[0, 1, 2],
              **_tree_attrs(**leaves))
    assert sig(y) == (I64, ["N"]) and sig(z) == (F, ["N", 3])
    y, z = ok("TreeEnsembleClassifier", [(F, [4, 2])], 2, ml=ml, classlabels_strings=["no", "yes"],
              **_tree_attrs(**leaves))
    assert sig(y) == (S, [4]) and sig(z) == (F, [4, 2])
    fails("TreeEnsembleClassifier", [(F, [4, 2])], 2, ml=ml, **_tree_attrs(**leaves))
    fails("TreeEnsembleClassifier", [(F, [4, 2, 1])], 2, ml=ml, classlabels_int64s=[0, 1], **_tree_attrs(**leaves))
    if ml >= 3:
        t = ir.Tensor.from_numpy(np.array([0.5, 0.0, 0.0]))
        fails("TreeEnsembleClassifier", [(F, [4, 2])], 2, ml=ml, classlabels_int64s=[0, 1],
              nodes_values_as_tensor=t, **_tree_attrs(**leaves))


@pytest.mark.parametrize("ml", [1, 3, 5])
def test_tree_ensemble_regressor(ml):
    leaves = dict(target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 1], target_weights=[1.0, 2.0])
    (y,) = ok("TreeEnsembleRegressor", [(D, ["N", 2])], ml=ml, n_targets=2, **_tree_attrs(**leaves))
    assert sig(y) == (F, ["N", 2])
    (y,) = ok("TreeEnsembleRegressor", [(I64, [3])], ml=ml, **_tree_attrs(**leaves))
    assert sig(y) == (F, [1, None])


def _tree5(dtype=np.float64, **over):
    a = dict(nodes_featureids=[0, 1], nodes_splits=ir.Tensor.from_numpy(np.array([0.5, 1.5], dtype=dtype)),
             nodes_modes=ir.Tensor.from_numpy(np.array([0, 0], dtype=np.uint8)),
             nodes_truenodeids=[1, 0], nodes_falsenodeids=[0, 1], nodes_trueleafs=[0, 1], nodes_falseleafs=[1, 1],
             tree_roots=[0], leaf_targetids=[0, 1, 0],
             leaf_weights=ir.Tensor.from_numpy(np.array([1.0, 2.0, 3.0], dtype=dtype)), n_targets=2)
    a.update(over)
    return a


def test_tree_ensemble_5():
    (y,) = ok("TreeEnsemble", [(D, ["N", 3])], ml=5, **_tree5())
    assert sig(y) == (D, ["N", 2])
    (y,) = ok("TreeEnsemble", [(F, [6, 3])], ml=5, **_tree5(np.float32))
    assert sig(y) == (F, [6, 2])
    fails("TreeEnsemble", [(F, [6, 3])], ml=5, **_tree5())                                  # splits' type
    fails("TreeEnsemble", [(D, [6, 3])], ml=5, **_tree5(nodes_featureids=[0, 1, 2]))        # lengths
    fails("TreeEnsemble", [(D, [6, 3])], ml=5, **_tree5(leaf_targetids=[0, 1]))
    fails("TreeEnsemble", [(D, [6, 3])], ml=5,
          **_tree5(nodes_modes=ir.Tensor.from_numpy(np.array([0, 0], dtype=np.int64))))


def test_output_batch_is_the_input_variable_not_a_fresh_one():
    types, _ = infer1("TreeEnsembleClassifier", [(F, ["batch", 2])], 2, ml=3, classlabels_int64s=[0, 1],
                      **_tree_attrs(class_treeids=[0], class_nodeids=[1], class_ids=[1], class_weights=[1.0]))
    assert sig(types[0]) == (I64, ["batch"]) and sig(types[1]) == (F, ["batch", 2])


def test_infer_shapes_writes_the_ml_values():
    n1 = ir.Node(input=["x"], output=["s"], op_type="Scaler", domain=ML,
                 attribute=[ir.Attribute.make("scale", [2.0])])
    n2 = ir.Node(input=["s"], output=["label", "scores"], op_type="LinearClassifier", domain=ML,
                 attribute=[ir.Attribute.make("coefficients", [0.1] * 6), ir.Attribute.make("intercepts", [0.0, 0.0]),
                            ir.Attribute.make("classlabels_strings", ["a", "b"])])
    n3 = ir.Node(input=["scores"], output=["probs"], op_type="ZipMap", domain=ML,
                 attribute=[ir.Attribute.make("classlabels_strings", ["a", "b"])])
    g = ir.Graph(node=[n1, n2, n3], name="g", input=[_vi("x", (I64, ["N", 3]))],
                 output=[ir.ValueInfo(name="label"), ir.ValueInfo(name="probs")])
    m = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21), ir.OperatorSetId(ML, 1)], graph=g)
    out = infer_shapes(m, strict=True)
    vis = {vi.name: vi.type for vi in out.graph.value_info}
    assert vis["s"] == ir.TensorType(F, ["N", 3])
    assert vis["scores"] == ir.TensorType(F, ["N", 2])
    outs = {vi.name: vi.type for vi in out.graph.output}
    assert outs["label"] == ir.TensorType(S, ["N"])
    assert outs["probs"] == ir.SequenceType(ir.MapType(S, ir.TensorType(F, [])))


# -- the ai.onnx.ml node models of the ONNX 1-3 test package ----------------------------------

def _ml_cases():
    pytest.importorskip("onnx")
    tests = str(REPO / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from onnx_vectors import ensure_vectors

    root = ensure_vectors() / "node"
    cases = []
    for p in sorted(root.iterdir()):
        m = onnxkit.load(p / "model.onnx")
        if any(n.domain == ML for n in m.graph.node):
            cases.append(p)
    return cases


def _contradiction(t, value):
    """A message when the inferred type ``t`` is contradicted by the value, else None."""
    if t is None:
        return None
    if isinstance(value, np.ndarray):
        if not isinstance(t, ir.TensorType):
            return f"inferred {t} for a tensor"
        tag = int(from_numpy_dtype(value.dtype).tag)
        if t.elem_type and t.elem_type != tag and not (tag == S or t.elem_type == S and value.dtype == object):
            return f"element type {t.elem_type}, expected {tag}"
        if t.shape is not None:
            dims = list(t.shape.values)
            if len(dims) != value.ndim:
                return f"rank {len(dims)}, expected shape {value.shape}"
            if any(isinstance(d, int) and d != s for d, s in zip(dims, value.shape)):
                return f"shape {dims}, expected {value.shape}"
        return None
    if isinstance(value, list):
        if not isinstance(t, ir.SequenceType):
            return f"inferred {t} for a sequence"
        for v in value:
            bad = _contradiction(t.elem_type, v)
            if bad:
                return "element: " + bad
        return None
    if isinstance(value, dict):
        if not isinstance(t, ir.MapType):
            return f"inferred {t} for a map"
        for k, v in value.items():
            key = S if isinstance(k, (str, bytes)) else I64
            if t.key_type and t.key_type != key and not (key == I64 and t.key_type in (I32, int(DataType.INT16))):
                return f"key type {t.key_type}, expected {key}"
            if isinstance(v, float):  # a Python float (onnxruntime's maps): any floating type, a scalar
                v = np.asarray(v, dtype=np.float32 if getattr(t.value_type, "elem_type", 0) == F else np.float64)
            bad = _contradiction(t.value_type, np.asarray(v))
            if bad:
                return "value: " + bad
        return None
    return None


def test_onnx_ml_node_vectors():
    cases = _ml_cases()
    assert len(cases) >= 8
    exact = 0
    for case in cases:
        model = onnxkit.load(case / "model.onnx")
        declared = [vi.type for vi in model.graph.output]
        # the declared output types must agree with what inference derives
        r = infer_model(model)
        assert not r.errors, (case.name, [d.message for d in r.errors])
        assert not [d for d in r.warnings if d.code == "no-inference-function"], case.name
        shaped = infer_shapes(model, strict=True)
        assert shaped.graph is not None
        # inference alone (declared output types dropped) against the expected outputs
        for vi in model.graph.output:
            vi.type = None
        r = infer_model(model)
        assert not r.errors, (case.name, [d.message for d in r.errors])
        for k, vi in enumerate(model.graph.output):
            t = r.type_of(vi.name)
            for ds in sorted(case.glob("test_data_set_*")):
                value = onnxkit.load_value(ds / f"output_{k}.pb", type=declared[k])
                bad = _contradiction(t, value)
                assert bad is None, f"{case.name} output {vi.name}: {bad}"
            if isinstance(t, ir.TensorType) and t.elem_type and t.shape is not None and t.shape.is_static:
                exact += 1
    assert exact == len(cases)  # every one of these models is inferred exactly


# -- models exported by skl2onnx, against onnxruntime ------------------------------------------

def _sklearn_cases():
    pytest.importorskip("sklearn")
    pytest.importorskip("skl2onnx")
    from sklearn.datasets import make_classification, make_regression
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.preprocessing import Binarizer, Normalizer, StandardScaler
    from sklearn.svm import SVC, SVR, LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    xc, yc = make_classification(n_samples=90, n_features=5, n_informative=3, n_redundant=0, n_classes=3,
                                 random_state=0)
    xc = xc.astype(np.float32)
    yb = (yc == 1).astype(np.int64)
    xr, yr = make_regression(n_samples=90, n_features=5, random_state=0)
    xr = xr.astype(np.float32)
    names = np.array(["ant", "bee", "cat"])
    nozip = {"zipmap": False}
    return [
        ("tree_classifier_zipmap", DecisionTreeClassifier(max_depth=3, random_state=0).fit(xc, yc), xc, None),
        ("forest_classifier_strings", RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0)
         .fit(xc, names[yc]), xc, None),
        ("forest_classifier_binary", RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0)
         .fit(xc, yb), xc, nozip),
        ("forest_regressor_2_targets", RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0)
         .fit(xr, np.c_[yr, -yr]), xr, None),
        ("gradient_boosting_binary", GradientBoostingClassifier(n_estimators=3, random_state=0).fit(xc, yb), xc, nozip),
        ("svc_probabilities", SVC(probability=True, random_state=0).fit(xc, yc), xc, nozip),
        ("svc_binary", SVC().fit(xc, yb), xc, nozip),
        ("svr", SVR().fit(xr, yr), xr, None),
        ("linear_svc_binary", LinearSVC().fit(xc, yb), xc, None),
        ("logistic_regression", LogisticRegression(max_iter=300).fit(xc, yc), xc, nozip),
        ("logistic_regression_strings", LogisticRegression(max_iter=300).fit(xc, names[yc]), xc, None),
        ("linear_regression_2_targets", LinearRegression().fit(xr, np.c_[yr, yr]), xr, None),
        ("standard_scaler", StandardScaler().fit(xr), xr, None),
        ("normalizer", Normalizer().fit(xr), xr, None),
        ("binarizer", Binarizer().fit(xr), xr, None),
    ]


def _dedupe(model):
    """skl2onnx 1.20 writes the default domain twice in opset_import; keep one."""
    seen = set()
    for o in list(model.opset_import):
        if (o.domain, o.version) in seen:
            model.opset_import.remove(o)
        seen.add((o.domain, o.version))
    return model


def _ort_outputs(proto, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check_against_ort(proto, feeds, batch, got=None):
    """Infer (the graph input fixed to ``batch`` rows, declared output types dropped) and compare
    with onnxruntime's outputs (``got``, else computed): tensors exactly (element type and static
    shape), sequences of maps by key and value types."""
    if got is None:
        got = _ort_outputs(proto, feeds)
    model = onnxkit.load(proto.SerializeToString())
    declared = infer_model(model)
    assert not [d for d in declared.warnings if d.code == "no-inference-function"]
    for vi in model.graph.input:
        t = vi.type
        if isinstance(t, ir.TensorType) and t.shape is not None and len(t.shape) >= 1:
            vi.type = ir.TensorType(t.elem_type, [batch, *list(t.shape.values)[1:]])
    for vi in model.graph.output:
        vi.type = None
    r = infer_model(model)
    assert not r.errors, [d.message for d in r.errors]
    for vi, value in zip(model.graph.output, got):
        t = r.type_of(vi.name)
        if isinstance(value, np.ndarray):
            want = S if value.dtype == object else int(from_numpy_dtype(value.dtype).tag)
            assert sig(t) == (want, list(value.shape)), (vi.name, str(t), value.dtype, value.shape)
        else:
            assert isinstance(value, list) and isinstance(t, ir.SequenceType), (vi.name, str(t))
            mt = t.elem_type
            key = S if isinstance(next(iter(value[0])), str) else I64
            assert isinstance(mt, ir.MapType) and mt.key_type == key and mt.value_type.elem_type == F, str(t)
            assert _contradiction(t, value) is None


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("index", range(15))
def test_sklearn_models_against_onnxruntime(index):
    from skl2onnx import to_onnx

    name, est, x, options = _sklearn_cases()[index]
    proto = _dedupe(to_onnx(est, x[:1], options={id(est): options} if options else None,
                            target_opset={"": 18, ML: 3}))
    assert any(n.domain == ML for n in proto.graph.node), name
    _check_against_ort(proto, {proto.graph.input[0].name: x[:7]}, 7)


@pytest.mark.filterwarnings("ignore")
def test_sklearn_tree_models_bound_to_ml_1_3_and_5():
    """The same exported classifier under ai.onnx.ml 1, 3 and 5 (TreeEnsembleClassifier 1/3/5)."""
    pytest.importorskip("sklearn")
    from skl2onnx import to_onnx
    from sklearn.ensemble import RandomForestClassifier

    _, _, x, _ = _sklearn_cases()[0]
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)
    est = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(x, y)
    proto = _dedupe(to_onnx(est, x[:1], options={id(est): {"zipmap": False}}, target_opset={"": 18, ML: 3}))
    feeds = {proto.graph.input[0].name: x[:4]}
    got = _ort_outputs(proto, feeds)  # onnxruntime refuses the deprecated version 5: its outputs at 3
    for version in (1, 3, 5):
        for o in proto.opset_import:
            if o.domain == ML:
                o.version = version
        _check_against_ort(proto, feeds, 4, got)


@pytest.mark.filterwarnings("ignore")
def test_sklearn_one_hot_encoder_and_dict_vectorizer():
    pytest.importorskip("sklearn")
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import DictionaryType, FloatTensorType, StringTensorType
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.preprocessing import OneHotEncoder

    cats = np.array([["x", "p"], ["y", "q"], ["z", "p"]])
    est = OneHotEncoder().fit(cats)
    proto = _dedupe(to_onnx(est, initial_types=[("X", StringTensorType([None, 2]))], target_opset={"": 18, ML: 3}))
    _check_against_ort(proto, {"X": cats}, 3)
    # DictVectorizer: element type only (the definition's rank and onnxruntime's differ)
    dv = DictVectorizer(sparse=False).fit([{"a": 1.0, "b": 2.0}, {"c": 3.0}])
    proto = _dedupe(to_onnx(dv, initial_types=[("X", DictionaryType(StringTensorType([1]), FloatTensorType([1])))],
                            target_opset={"": 18, ML: 3}))
    model = onnxkit.load(proto.SerializeToString())
    for vi in model.graph.output:
        vi.type = None
    r = infer_model(model)
    assert not r.errors
    t = r.type_of(model.graph.output[0].name)
    assert sig(t) == (F, None)
