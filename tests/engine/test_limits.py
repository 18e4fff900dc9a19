"""Resource limits (Clause 12.5, 15.4): each refused with LimitExceeded naming the limit, and
reported under Clause 10 by the checker — never a MemoryError, a crash or a hang."""

import numpy as np
import pytest

import onnxkit
from onnxkit import ir
from onnxkit.checker import check_model
from onnxkit.errors import LimitExceeded
from onnxkit.limits import Limits
from onnxkit.runtime import InferenceSession
from onnxkit.wire import decode_message, encode_message


def _leaf(name: str) -> ir.Graph:
    value = ir.Tensor.from_numpy(np.array(1.0, np.float32))
    return ir.Graph(node=[ir.Node([], [name], op_type="Constant", attribute=[ir.Attribute.make("value", value)])],
                    name=f"leaf_{name}", output=[ir.ValueInfo(name)])


def nested_if_model(depth: int) -> ir.Model:
    """``depth`` If nodes, each the then-branch of the one above (names distinct: no shadowing, 5.4.3)."""
    A = ir.Attribute.make
    body = _leaf("y0")
    for i in range(1, depth + 1):
        body = ir.Graph(node=[ir.Node(["c"], [f"y{i}"], name=f"if{i}", op_type="If",
                                      attribute=[A("then_branch", body), A("else_branch", _leaf(f"e{i}"))])],
                        name=f"level{i}", output=[ir.ValueInfo(f"y{i}")])
    graph = ir.Graph(node=body.node, name="main", input=[ir.ValueInfo("c", ir.tensor_type(9, []))],
                     output=[ir.ValueInfo(f"y{depth}", ir.tensor_type(1, []))])
    return ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 16)], graph=graph)


def test_nesting_within_the_limits_evaluates():
    sess = InferenceSession(nested_if_model(5))
    assert sess.run(None, {"c": np.array(True)})[0] == 1.0


def test_deep_subgraph_nesting_is_refused_by_the_subgraph_depth_limit():
    with pytest.raises(LimitExceeded) as info:
        InferenceSession(nested_if_model(12), limits=Limits(max_subgraph_depth=8))
    assert info.value.limit == "max_subgraph_depth"


def test_deep_message_nesting_is_refused_while_decoding_and_reported_by_the_checker():
    data = encode_message(nested_if_model(40))  # 40 subgraph levels: more than 100 nested messages
    with pytest.raises(LimitExceeded) as info:
        decode_message(data)
    assert info.value.limit == "max_nesting_depth"
    report = check_model(data)
    assert "limit-exceeded" in report.codes() and not report.ok


def test_a_model_over_the_message_size_limit_is_refused():
    data = encode_message(nested_if_model(2))
    with pytest.raises(LimitExceeded) as info:
        onnxkit.load(data, limits=Limits(max_message_bytes=len(data) - 1))
    assert info.value.limit == "max_message_bytes"


def test_a_declared_tensor_far_larger_than_memory_is_refused_before_allocation(tmp_path):
    huge = ir.Tensor(name="W", dims=[1 << 40], data_type=1, data_location=1,
                     external_data=[ir.StringStringEntry("location", "w.bin")])
    graph = ir.Graph(node=[ir.Node(["W"], ["Y"], op_type="Identity")], name="g", initializer=[huge],
                     output=[ir.ValueInfo("Y", ir.tensor_type(1, [1 << 40]))])
    model = ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 16)], graph=graph)
    path = tmp_path / "huge.onnx"
    onnxkit.save(model, path)
    (tmp_path / "w.bin").write_bytes(b"\0" * 16)
    with pytest.raises(LimitExceeded) as info:
        onnxkit.load(path)  # 'lazy' still checks the declared size against the limits at load
    assert info.value.limit == "max_tensor_bytes"
    assert "limit-exceeded" in check_model(path).codes()
