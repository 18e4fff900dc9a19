"""``InferenceResult.declarations_used`` (onnxkit.inference): while False, the types inference
gives the model are those it gives the model without its declarations (the optimizer's
``undeclared`` view), so a session reuses the checker's inference instead of inferring twice."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from onnxkit import ir, load
from onnxkit.dtypes import DataType
from onnxkit.inference import infer_model
from onnxkit.runtime.optimizer.view import undeclared

F, I64 = int(DataType.FLOAT), int(DataType.INT64)
ROOT = Path(__file__).resolve().parents[2]


def vi(name, elem=F, shape=None):
    return ir.ValueInfo(name=name, type=None if elem is None else ir.TensorType(elem, shape))


def node(op, inputs, outputs, **attrs):
    return ir.Node(input=list(inputs), output=list(outputs), op_type=op,
                   attribute=[ir.Attribute.make(k, v) for k, v in attrs.items()])


def model(nodes, inputs, outputs, initializers=(), value_info=()):
    g = ir.Graph(node=list(nodes), name="g", input=list(inputs), output=list(outputs),
                 initializer=list(initializers), value_info=list(value_info))
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 18)], graph=g)


def relu_then_reshape(value_info=(), out=None):
    """x [2, 3] -> Relu -> r; Reshape(r, shape) with ``shape`` a graph input: y's shape unknown."""
    return model([node("Relu", ["x"], ["r"]), node("Reshape", ["r", "shape"], ["y"])],
                 [vi("x", F, [2, 3]), vi("shape", I64, [2])], [out or vi("y", F, None)], value_info=value_info)


def test_declarations_inference_confirms_are_not_used():
    m = relu_then_reshape(value_info=[vi("r", F, [2, 3])])
    result = infer_model(m)
    assert not result.declarations_used
    assert result.graph("") == infer_model(undeclared(m)).graph("")


def test_a_declaration_that_adds_a_shape_is_used():
    m = relu_then_reshape(out=vi("y", F, [3, 2]))
    result = infer_model(m)
    assert result.declarations_used and list(result.type_of("y").shape.values) == [3, 2]
    assert infer_model(undeclared(m)).type_of("y").shape is None or \
        list(infer_model(undeclared(m)).type_of("y").shape.values) != [3, 2]


def test_a_contradicting_declaration_is_used():
    m = relu_then_reshape(value_info=[vi("r", F, [4, 3])])
    result = infer_model(m)
    assert result.declarations_used and "inferred-shape-mismatch" in result.codes()


def test_an_untyped_input_typed_by_its_initializer_is_used():
    w = ir.Tensor.from_numpy(np.ones((2, 3), np.float32), name="w")
    m = model([node("Add", ["x", "w"], ["y"])], [vi("x", F, [2, 3]), vi("w", None)], [vi("y", F, None)],
              initializers=[w])
    assert infer_model(m).declarations_used


MODELS = ("small_resnet_ts", "hf_vit_ts", "lstm_tagger_ts", "unet_resize_ts", "silero_vad_op18_ifless",
          "hf_bert_ts", "rapidocr_rec_v4", "silero_vad_16k_op15")


@pytest.fixture(scope="module")
def corpus():
    """The real-world corpus folder, built on first use as tests/corpus does."""
    sys.path.insert(0, str(ROOT / "tests" / "corpus"))
    from corpus_cache import ensure_corpus

    return ensure_corpus(log=lambda line: print(line, file=sys.stderr))[0]


def test_a_declared_output_no_node_reads_gives_back_its_undeclared_type():
    m = relu_then_reshape(out=vi("y", F, [3, 2]))
    result = infer_model(m)
    assert list(result.declared_names) == ["y"]
    types = result.undeclared_types(m)
    assert types == infer_model(undeclared(m)).graph("")
    assert types["y"] != result.type_of("y")  # the declaration's shape is not taken for a fact


def test_a_declaration_of_a_name_a_node_reads_leaves_the_types_unsaid():
    m = relu_then_reshape(value_info=[vi("r", F, [4, 3])])  # contradicts, and the Reshape reads r
    result = infer_model(m)
    assert result.declarations_used and list(result.declared_names) == ["r"]
    assert result.undeclared_types(m) is None


def test_declarations_elsewhere_leave_the_types_unsaid():
    w = ir.Tensor.from_numpy(np.ones((2, 3), np.float32), name="w")
    m = model([node("Add", ["x", "w"], ["y"])], [vi("x", F, [2, 3]), vi("w", None)], [vi("y", F, None)],
              initializers=[w])
    result = infer_model(m)
    assert result.declared_names is None and result.undeclared_types(m) is None


#: corpus models whose declarations count outside the top-level graph's sinks (silero's If branches)
UNSAID = ("silero_vad_16k_op15",)


@pytest.mark.parametrize("name", MODELS)
def test_on_real_models_the_checkers_types_are_the_undeclared_ones(corpus, name):
    """Where ``undeclared_types`` answers, it is what inferring the model without its declarations
    gives (bert's and rapidocr's declared outputs add symbols inference does not derive)."""
    m = load(str(corpus / f"{name}.onnx"))
    result = infer_model(m)
    assert result.declarations_used == (name in ("hf_bert_ts", "rapidocr_rec_v4") + UNSAID)
    types = result.undeclared_types(m)
    assert (types is None) == (name in UNSAID)
    assert (result.declared_names is None) == (name in UNSAID)  # no account is kept of subgraphs' declarations
    if types is not None:
        assert types == infer_model(undeclared(m)).graph("")
