"""Invalid models of the catalogue: graph structure, types and shapes."""

from __future__ import annotations

from onnxkit import ir
from onnxkit.dtypes import DataType
from onnxkit.ir import WireInfo
from onnxkit.limits import Limits

from catalogue_build import (
    B, bad, branch, F, graph, I64, if_node, loop_model, model, node, relu, relu_graph, tensor, vi,
    with_init,
)
from catalogue_invalid_model import relu_with_value_info


# ================================================================== INVALID: graph structure

@bad("graph-name-missing")
def unnamed_graph():
    return model(relu_graph(name=""))


@bad("empty-name")
def empty_input_name():
    m = relu()
    m.graph.input.append(vi(""))
    return m


@bad("empty-name")
def empty_initializer_name():
    return with_init(tensor("", [1.0]))


@bad("undefined-value")
def undefined_input():
    return model(graph([node("Relu", ["Q"], ["Y"])], [vi("X")], [vi("Y")]))


@bad("undefined-value")
def undefined_in_subgraph():
    then_g = branch("then", [node("Relu", ["Q"], ["T"])], ["T"])
    else_g = branch("else", [], ["X"])
    return model(graph([if_node(then_g, else_g)], [vi("X"), vi("C", B, ())], [vi("Y")]))


@bad("undefined-value")
def use_of_sibling_branch_value():
    then_g = branch("then", [node("Relu", ["X"], ["T"])], ["T"])
    else_g = branch("else", [node("Relu", ["T"], ["E"])], ["E"])
    return model(graph([if_node(then_g, else_g)], [vi("X"), vi("C", B, ())], [vi("Y")]))


@bad("duplicate-definition")
def two_producers():
    return model(graph([node("Relu", ["X"], ["Y"]), node("Abs", ["X"], ["Y"])], [vi("X")], [vi("Y")]))


@bad("duplicate-definition")
def output_redefines_input():
    return model(graph([node("Relu", ["X"], ["X"]), node("Relu", ["X"], ["Y"])], [vi("X")], [vi("Y")]))


@bad("duplicate-definition")
def input_twice():
    m = relu()
    m.graph.input.append(vi("X"))
    return m


@bad("duplicate-initializer")
def initializer_twice():
    g = relu_graph()
    g.initializer += [tensor("W", [1.0]), tensor("W", [2.0])]
    return model(g)


@bad("duplicate-node-name")
def node_name_twice():
    return model(graph([node("Relu", ["X"], ["T"], name="n"), node("Relu", ["T"], ["Y"], name="n")], [vi("X")], [vi("Y")]))


@bad("duplicate-value-info")
def value_info_twice():
    g = graph([node("Relu", ["X"], ["T"]), node("Relu", ["T"], ["Y"])], [vi("X")], [vi("Y")], value_info=[vi("T"), vi("T")])
    return model(g)


@bad("graph-cycle")
def cycle():
    return model(graph([node("Add", ["X", "B"], ["A"]), node("Relu", ["A"], ["B"]), node("Relu", ["B"], ["Y"])],
                       [vi("X")], [vi("Y")]))


@bad("not-topologically-sorted")
def out_of_order():
    return model(graph([node("Relu", ["T"], ["Y"]), node("Relu", ["X"], ["T"])], [vi("X")], [vi("Y")]))


@bad("not-topologically-sorted")
def out_of_order_through_subgraph():
    then_g = branch("then", [], ["T"])
    else_g = branch("else", [], ["X"])
    return model(graph([if_node(then_g, else_g, ("Y",)), node("Relu", ["X"], ["T"])], [vi("X"), vi("C", B, ())],
                       [vi("Y")]))


@bad("undefined-output")
def output_not_defined():
    m = relu()
    m.graph.output.append(vi("Z"))
    return m


@bad("shadowed-name")
def subgraph_redefines_outer_name():
    then_g = branch("then", [node("Relu", ["X"], ["A"])], ["A"])
    else_g = branch("else", [], ["A"])
    return model(graph([node("Relu", ["X"], ["A"]), if_node(then_g, else_g)], [vi("X"), vi("C", B, ())], [vi("Y")]))


@bad("shadowed-node-output")
def subgraph_defines_output_of_its_node():
    then_g = branch("then", [node("Relu", ["X"], ["Y"])], ["Y"])
    else_g = branch("else", [node("Relu", ["X"], ["E"])], ["E"])
    return model(graph([if_node(then_g, else_g)], [vi("X"), vi("C", B, ())], [vi("Y")]))


@bad("subgraph-cycle", encode=False)
def subgraph_contains_itself():
    """Only a Python-built IR can be cyclic: the branch's own If node carries the branch again."""
    then_g = branch("then", [], ["X"])
    then_g.node.append(if_node(then_g, then_g, ("Z",)))
    else_g = branch("else", [], ["X"])
    return model(graph([if_node(then_g, else_g)], [vi("X"), vi("C", B, ())], [vi("Y")]))


@bad("subgraph-input-initializer")
def loop_body_input_is_initializer():
    return loop_model(body_inits=[tensor("v", [1.0, 2.0])])


@bad("initializer-not-input")
def ir3_initializer_not_input():
    return with_init(tensor("W", [1.0]), ir_version=3, opsets=(("", 6),))


@bad("limit-exceeded", limits=Limits(max_subgraph_depth=0))
def subgraphs_too_deep():
    then_g = branch("then", [], ["X"])
    else_g = branch("else", [], ["X"])
    return model(graph([if_node(then_g, else_g)], [vi("X"), vi("C", B, ())], [vi("Y")]))


# ================================================================== INVALID: types and shapes

@bad("missing-type")
def input_without_type():
    m = relu()
    m.graph.input[0] = ir.ValueInfo(name="X")
    return m


@bad("missing-shape")
def input_without_shape():
    m = relu()
    m.graph.input[0] = ir.ValueInfo(name="X", type=ir.tensor_type(F))
    return m


@bad("type-kind-missing")
def value_info_type_undefined():
    return relu_with_value_info(ir.UndefinedType())


@bad("invalid-elem-type")
def input_elem_type_zero():
    m = relu()
    m.graph.input[0] = vi("X", 0)
    return m


@bad("invalid-elem-type")
def initializer_data_type_99():
    return with_init(ir.Tensor(dims=[1], data_type=99, name="W", raw_data=b"\0\0\0\0"))


@bad("invalid-map-key")
def map_with_float_key():
    m = relu()
    m.graph.input.append(ir.ValueInfo(name="M", type=ir.MapType(F, ir.tensor_type(F))))
    return m


@bad("invalid-optional-elem")
def optional_of_optional():
    m = relu()
    m.graph.input.append(ir.ValueInfo(name="O", type=ir.OptionalType(ir.OptionalType(ir.tensor_type(F, [2])))))
    return m


@bad("opaque-name-missing")
def opaque_without_name():
    m = relu()
    m.graph.input.append(ir.ValueInfo(name="O", type=ir.OpaqueType("com.acme", "")))
    return m


@bad("negative-dim-value")
def negative_dimension():
    return relu_with_value_info(ir.tensor_type(F, [-1]))


@bad("type-kind-multiple", also=("type-constraint-violation",))
def value_info_type_two_kinds():
    """B.2.21: tensor_type and a sequence_type (of tensor(float)) in one TypeProto, written as retained octets.

    The decoder keeps the member written last (sequence_type), which Relu does not admit."""
    t = ir.tensor_type(F, [2])
    t._outer_wire = WireInfo(unknown=[(4, b"\x22\x06\x0a\x04\x0a\x02\x08\x01")])
    return relu_with_value_info(t)


@bad("negative-extent")
def negative_tensor_dims():
    return with_init(ir.Tensor(dims=[-1], data_type=F, name="W"))


@bad("type-mismatch")
def input_type_against_initializer():
    g = relu_graph()
    g.input.append(vi("W", I64))
    g.initializer.append(tensor("W", [1.0, 2.0]))
    return model(g)


@bad("shape-mismatch")
def value_info_against_initializer_dims():
    g = relu_graph(value_info=[vi("W", F, (3,))])
    g.initializer.append(tensor("W", [1.0, 2.0]))
    return model(g)


@bad("shape-mismatch")
def value_info_against_output():
    g = graph([node("Relu", ["X"], ["Y"])], [vi("X")], [vi("Y")], value_info=[vi("Y", F, (2, 1))])
    return model(g)


@bad("broadcast-mismatch")
def add_does_not_broadcast():
    g = graph([node("Add", ["X", "W"], ["Y"])], [vi("X", F, (2, 3))], [vi("Y", F, (2, 3))],
              [tensor("W", [1.0, 2.0, 3.0, 4.0])])
    return model(g)


@bad("shape-mismatch")
def add_output_against_broadcast():
    g = graph([node("Add", ["X", "W"], ["Y"])], [vi("X", F, (2, 3))], [vi("Y", F, (2, 4))], [tensor("W", [1.0, 2.0, 3.0])])
    return model(g)


@bad("broadcast-mismatch")
def prelu_slope_does_not_broadcast():
    g = graph([node("PRelu", ["X", "W"], ["Y"])], [vi("X", F, (2, 3))], [vi("Y", F, (2, 3))], [tensor("W", [1.0, 2.0])])
    return model(g)


@bad("type-constraint-violation")
def sqrt_of_int64():
    return model(graph([node("Sqrt", ["X"], ["Y"])], [vi("X", I64)], [vi("Y", I64)]))


@bad("type-constraint-violation")
def if_condition_float():
    then_g = branch("then", [], ["X"])
    else_g = branch("else", [], ["X"])
    return model(graph([if_node(then_g, else_g)], [vi("X"), vi("C", F, ())], [vi("Y")]))


@bad("type-variable-mismatch")
def add_float_and_int64():
    return model(graph([node("Add", ["X", "W"], ["Y"])], [vi("X"), vi("W", I64)], [vi("Y")]))


@bad("type-variable-mismatch")
def relu_output_type_differs():
    return model(graph([node("Relu", ["X"], ["Y"])], [vi("X")], [vi("Y", DataType.DOUBLE)]))
