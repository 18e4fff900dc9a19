"""The use-def index (onnxkit.runtime.usedef): producers and uses kept current by every edit,
subgraph reads and graph outputs counted as uses, and the optimizer's view reading it."""

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxkit
from onnxkit import ir
from onnxkit.runtime.optimizer.view import GraphView
from onnxkit.runtime.usedef import OUTPUT, SCOPE, node_index, step_index


def _node(op, inputs, outputs, **kw):
    return ir.Node(input=list(inputs), output=list(outputs), op_type=op, name=kw.pop("name", outputs[0]), **kw)


def _chain():
    a = _node("Relu", ["x"], ["a"])
    b = _node("Add", ["a", "a"], ["b"])
    c = _node("Neg", ["b"], ["c"])
    return a, b, c


def test_producer_and_uses_with_positions():
    a, b, c = _chain()
    index = node_index([a, b, c], graph_outputs=["c"])
    assert index.producer("a") is a and index.producer("x") is None
    assert [(u.item.name, u.slot) for u in index.uses("a")] == [("b", 0), ("b", 1)]
    assert index.readers("a") == [b]            # each reader once
    assert index.use_count("c") == 1 and index.uses("c")[0].slot == OUTPUT
    assert index.sole_reader("b") is c
    assert index.sole_reader("a") is None       # read twice
    assert index.sole_reader("c") is None       # a graph output is a use by name


def test_replace_all_uses_with_edits_the_inputs_and_the_links():
    a, b, c = _chain()
    index = node_index([a, b, c])
    assert index.replace_all_uses_with("a", "x") == 2
    assert b.input == ["x", "x"]
    assert index.use_count("a") == 0
    assert [u.item for u in index.uses("x")] == [a, b, b]


def test_remove_add_and_set_input_keep_the_index_current():
    a, b, c = _chain()
    index = node_index([a, b, c])
    index.remove(c)
    assert c not in index and index.use_count("b") == 0
    d = _node("Sqrt", ["b"], ["c"])
    index.add(d)
    assert index.producer("c") is d and index.sole_reader("b") is d
    index.set_input(b, 1, "x")
    assert b.input == ["a", "x"]
    assert [(u.item, u.slot) for u in index.uses("a")] == [(b, 0)]
    index.replace(d, c)
    assert index.producer("c") is c
    with pytest.raises(ValueError, match="not indexed"):
        index.remove(d)
    with pytest.raises(ValueError, match="indexed already"):
        index.add(c)


def test_a_name_read_inside_a_subgraph_is_a_use_and_cannot_be_renamed():
    body = ir.Graph(name="then", node=[_node("Identity", ["a"], ["y"])],
                    output=[ir.ValueInfo(name="y")])
    cond = _node("If", ["flag"], ["z"], attribute=[ir.Attribute(name="then_branch", type=ir.AttributeType.GRAPH,
                                                               value=body)])
    a = _node("Relu", ["x"], ["a"])
    index = node_index([a, cond])
    scoped = [u for u in index.uses("a") if u.slot == SCOPE]
    assert len(scoped) == 1 and scoped[0].item is cond and scoped[0].subgraph is body
    assert index.sole_reader("a") is None
    with pytest.raises(ValueError, match="read by name"):
        index.replace_all_uses_with("a", "x")


def test_step_index_reads_inputs_outputs_and_subgraph_uses():
    class S:
        def __init__(self, inputs, outputs, uses=()):
            self.inputs, self.outputs, self._uses = list(inputs), list(outputs), tuple(uses)

    s1, s2, s3 = S(["x"], ["a"]), S(["a", ""], ["b"]), S([], ["c"], uses=["a"])
    index = step_index([s1, s2, s3], keep=["b"])
    assert index.producer("a") is s1
    assert sorted(u.slot for u in index.uses("a")) == [SCOPE, 0]
    assert index.use_count("b") == 1 and index.uses("b")[0].slot == OUTPUT
    assert index.use_count("") == 0             # an unsupplied input is no name


def _model_with_identity_chain():
    nodes = [helper.make_node("Identity", ["x"], ["i1"]), helper.make_node("Identity", ["i1"], ["i2"]),
             helper.make_node("Relu", ["i2"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_view_keeps_its_index_current_through_a_pass():
    from onnxkit.runtime.optimizer import identity

    view = GraphView(onnxkit.load(_model_with_identity_chain().SerializeToString()))
    relu = view.producer_of("y")
    assert view.sole_consumer("i2") is relu
    assert identity.run(view) == 2
    assert relu.input == ["x"] and view.sole_consumer("x") is relu
    assert view.producer_of("i1") is None and view.use_count("i2") == 0
    assert [n.op_type for n in view.node] == ["Relu"] and view.holds(relu)
    model = view.finish()
    session = onnxkit.InferenceSession(model)
    x = np.array([-1.0, 2.0], np.float32)
    assert session.run(None, {"x": x})[0].tolist() == [0.0, 2.0]


def test_view_constants_are_converted_once_per_tensor_and_read_only():
    """GraphView.constant converts each tensor once (rules ask for the same constants many times):
    two Constant nodes' unnamed tensors keep their own values, an initializer its own, and the
    shared arrays refuse writes."""
    a = helper.make_node("Constant", [], ["a"], value=helper.make_tensor("", TP.FLOAT, [2], [1.0, 2.0]))
    b = helper.make_node("Constant", [], ["b"], value=helper.make_tensor("", TP.FLOAT, [2], [3.0, 4.0]))
    add = helper.make_node("Add", ["a", "b"], ["s"])
    mul = helper.make_node("Mul", ["s", "w"], ["y"])
    g = helper.make_graph([a, b, add, mul], "g", [], [helper.make_tensor_value_info("y", TP.FLOAT, [2])],
                          [helper.make_tensor("w", TP.FLOAT, [2], [5.0, 6.0])])
    view = GraphView(onnxkit.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()))
    for _ in range(2):
        assert view.constant("a").tolist() == [1.0, 2.0] and view.constant("b").tolist() == [3.0, 4.0]
        assert view.constant("w").tolist() == [5.0, 6.0] and view.constant("s") is None
    assert view.constant("w") is view.constant("w")
    with pytest.raises(ValueError):
        view.constant("a")[0] = 9.0
