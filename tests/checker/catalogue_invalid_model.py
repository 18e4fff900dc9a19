"""Invalid models of the catalogue: the encoding and the model record, operator sets and nodes."""

from __future__ import annotations

from onnxkit import ir
from onnxkit.ir import AttributeType, WireInfo
from onnxkit.limits import Limits
from onnxkit.wire import encode_message

from catalogue_build import bad, F, I64, fn, graph, model, node, raw_field, ref_attr, relu, vi


# ================================================================== INVALID: encoding, model record

@bad("decode-error")
def truncated():
    from onnxkit.api import to_bytes

    return to_bytes(relu())[:-3]


@bad("decode-error")
def wire_type_3():
    from onnxkit.api import to_bytes

    return to_bytes(relu()) + b"\x0b"


@bad("limit-exceeded", limits=Limits(max_message_bytes=16))
def message_over_limit():
    return relu()


@bad("ir-version-missing")
def ir_version_missing():
    return relu(ir_version=0)


@bad("ir-version-invalid")
def ir_version_negative():
    return relu(ir_version=-1)


@bad("ir-version-newer")
def ir_version_15():
    return relu(ir_version=15)


@bad("ir-version-feature")
def optional_type_at_ir7():
    m = relu(ir_version=7, opsets=(("", 13),))
    m.graph.input.append(ir.ValueInfo(name="O", type=ir.OptionalType(ir.tensor_type(F, [2]))))
    return m


@bad("graph-missing")
def no_graph():
    return model(None)


@bad("mandatory-field-missing")
def attribute_without_type_ir10():
    a = ir.Attribute(name="alpha", type=AttributeType.FLOAT, value=0.5, _wire=WireInfo(absent=frozenset({"type"})))
    return model(graph([ir.Node(input=["X"], output=["Y"], op_type="LeakyRelu", attribute=[a])], [vi("X")], [vi("Y")]))


@bad("mandatory-field-missing")
def attribute_without_type_ir2():
    a = ir.Attribute(name="alpha", type=AttributeType.FLOAT, value=0.5, _wire=WireInfo(absent=frozenset({"type"})))
    return model(graph([ir.Node(input=["X"], output=["Y"], op_type="LeakyRelu", attribute=[a])], [vi("X")], [vi("Y")]),
                 ir_version=2, opsets=())


@bad("mandatory-field-missing")
def value_info_without_type():
    g = graph([node("Relu", ["X"], ["T"]), node("Relu", ["T"], ["Y"])], [vi("X")], [vi("Y")],
              value_info=[ir.ValueInfo(name="T")])
    return model(g)


@bad("mandatory-field-missing")
def tensor_type_without_elem_type():
    t = ir.TensorType(0, [2], _wire=WireInfo(absent=frozenset({"elem_type"})))
    return relu_with_value_info(t)


@bad("mandatory-field-missing")
def optional_without_element():
    m = relu()
    m.graph.input.append(ir.ValueInfo(name="O", type=ir.OptionalType(None)))
    return m


@bad("deprecated-field")
def type_proto_in_tp():
    t = ir.tensor_type(F, [2])
    raw = raw_field(14, 2, encode_message(t, "TypeProto"))
    a = ir.Attribute(name="type", type=AttributeType.TYPE_PROTO, value=t, _wire=WireInfo(unknown=[(14, raw)]))
    n = ir.Node(input=[], output=["O"], op_type="Optional", attribute=[a])
    return model(graph([n], [], [ir.ValueInfo(name="O", type=ir.OptionalType(ir.tensor_type(F, [2])))]),
                 opsets=(("", 18),))


@bad("reserved-field")
def graph_reserved_tag():
    m = relu()
    m.graph._wire = WireInfo(unknown=[(3, raw_field(3, 2, b"x"))])
    return m


def relu_with_value_info(t):
    g = graph([node("Relu", ["X"], ["T"]), node("Relu", ["T"], ["Y"])], [vi("X")], [vi("Y")],
              value_info=[ir.ValueInfo(name="T", type=t)])
    return model(g)


# ================================================================== INVALID: operator sets and nodes

@bad("opset-import-missing")
def no_imports():
    return model(graph([], [vi("X")], [vi("X")]), opsets=())


@bad("duplicate-opset-import")
def import_twice():
    return relu(opsets=(("", 17), ("ai.onnx", 16)))


@bad("invalid-opset-version")
def import_version_zero():
    return relu(opsets=(("", 17), ("com.x", 0)))


@bad("unknown-domain")
def custom_domain_op():
    return model(graph([node("Foo", ["X"], ["Y"], domain="com.acme")], [vi("X")], [vi("Y")]),
                 opsets=(("", 17), ("com.acme", 1)))


@bad("unknown-opset-version")
def default_domain_version_500():
    return relu(opsets=(("", 500),))


@bad("domain-not-imported")
def custom_domain_not_imported():
    return model(graph([node("Foo", ["X"], ["Y"], domain="com.acme")], [vi("X")], [vi("Y")]))


@bad("domain-not-imported")
def default_domain_not_imported():
    return relu(opsets=(("com.acme", 1),))


@bad("domain-implicitly-imported")
def com_microsoft_not_imported():
    # onnxruntime's test generators write these; onnxruntime imports com.microsoft 1 implicitly
    return model(graph([node("FastGelu", ["X"], ["Y"], domain="com.microsoft")], [vi("X")], [vi("Y")]))


@bad("unknown-operator")
def no_such_operator():
    return model(graph([node("Relux", ["X"], ["Y"])], [vi("X")], [vi("Y")]))


@bad("unknown-operator")
def operator_newer_than_import():
    return model(graph([node("Gelu", ["X"], ["Y"])], [vi("X")], [vi("Y")]), opsets=(("", 17),))


@bad("extension-operator")
def ai_onnx_operator_only_an_extension_provides():
    # no ai.onnx operator: onnxkit-microsoft (installed by default) adds it to ai.onnx as an extension
    n = node("SimplifiedLayerNormalization", ["X", "s"], ["Y"])
    return model(graph([n], [vi("X", F, (2, 4)), vi("s", F, (4,))], [vi("Y", F, (2, 4))]), opsets=(("", 17),))


@bad("deprecated-operator")
def group_normalization_18():
    n = node("GroupNormalization", ["X", "s", "b"], ["Y"], num_groups=1)
    return model(graph([n], [vi("X", F, (1, 2, 3)), vi("s"), vi("b")], [vi("Y", F, (1, 2, 3))]), opsets=(("", 18),))


@bad("empty-op-type")
def empty_op_type():
    return model(graph([node("", ["X"], ["Y"])], [vi("X")], [vi("Y")]))


@bad("duplicate-attribute")
def attribute_twice():
    n = node("LeakyRelu", ["X"], ["Y"], alpha=0.1)
    n.attribute.append(ir.Attribute.make("alpha", 0.2))
    return model(graph([n], [vi("X")], [vi("Y")]))


@bad("unknown-attribute")
def relu_with_beta():
    return model(graph([node("Relu", ["X"], ["Y"], beta=1.0)], [vi("X")], [vi("Y")]))


@bad("missing-required-attribute")
def cast_without_to():
    return model(graph([node("Cast", ["X"], ["Y"])], [vi("X")], [vi("Y")]))


@bad("attribute-wrong-type")
def cast_to_float():
    return model(graph([node("Cast", ["X"], ["Y"], to=1.0)], [vi("X")], [vi("Y")]))


@bad("attribute-form-accepted")
def constant_value_holding_a_sparse_tensor():
    import numpy as np

    sp = ir.SparseTensor(values=ir.Tensor.from_numpy(np.array([1.5], np.float32)),
                         indices=ir.Tensor.from_numpy(np.array([1], np.int64)), dims=[2])
    return model(graph([node("Constant", [], ["Y"], value=sp)], [], [vi("Y")]))


@bad("sparse-constant-output")
def constant_sparse_value_declared_a_sparse_tensor():
    import numpy as np

    sp = ir.SparseTensor(values=ir.Tensor.from_numpy(np.array([1.5], np.float32)),
                         indices=ir.Tensor.from_numpy(np.array([1], np.int64)), dims=[2])
    out = ir.ValueInfo(name="Y", type=ir.SparseTensorType(F, ir.Shape.of([2])))
    return model(graph([node("Constant", [], ["Y"], sparse_value=sp)], [], [out]))


@bad("attribute-value-beyond-definition")
def scatter_elements_reduction_max_at_16():
    n = node("ScatterElements", ["X", "i", "u"], ["Y"], reduction="max")
    return model(graph([n], [vi("X"), vi("i", I64, (1,)), vi("u", F, (1,))], [vi("Y")]), opsets=(("", 16),))


@bad("attribute-type-mismatch")
def float_attribute_with_i():
    a = ir.Attribute(name="alpha", type=AttributeType.FLOAT, value=0.5,
                     _wire=WireInfo(unknown=[(3, raw_field(3, 0, b"\x05"))]))
    return model(graph([ir.Node(input=["X"], output=["Y"], op_type="LeakyRelu", attribute=[a])], [vi("X")], [vi("Y")]))


@bad("attribute-type-mismatch", encode=False)
def python_attribute_kind():
    """Checked as an IR object: a FLOAT attribute holding a list (the writer would refuse it)."""
    a = ir.Attribute(name="alpha", type=AttributeType.FLOAT, value=[1.0, 2.0])
    return model(graph([ir.Node(input=["X"], output=["Y"], op_type="LeakyRelu", attribute=[a])], [vi("X")], [vi("Y")]))


@bad("attribute-value-missing")
def constant_without_tensor():
    a = ir.Attribute(name="value", type=AttributeType.TENSOR, value=None)
    return model(graph([ir.Node(input=[], output=["Y"], op_type="Constant", attribute=[a])], [], [vi("Y")]))


@bad("attribute-type-invalid")
def attribute_type_undefined():
    a = ir.Attribute(name="alpha", type=AttributeType.UNDEFINED, value=None)
    return model(graph([ir.Node(input=["X"], output=["Y"], op_type="LeakyRelu", attribute=[a])], [vi("X")], [vi("Y")]))


@bad("ref-attr-outside-function")
def reference_in_main_graph():
    n = ir.Node(input=["X"], output=["Y"], op_type="LeakyRelu", attribute=[ref_attr("alpha", "a", AttributeType.FLOAT)])
    return model(graph([n], [vi("X")], [vi("Y")]))


@bad("unresolved-attribute-reference")
def reference_to_undeclared_parameter():
    body = ir.Node(input=["x"], output=["y"], op_type="LeakyRelu", attribute=[ref_attr("alpha", "beta", AttributeType.FLOAT)])
    f = fn("Leaky", ["x"], ["y"], [body], attributes=["alpha"])
    g = graph([node("Leaky", ["X"], ["Y"], domain="com.acme", alpha=0.1)], [vi("X")], [vi("Y")])
    return model(g, opsets=(("", 17), ("com.acme", 1)), functions=[f])


@bad("input-arity")
def relu_two_inputs():
    return model(graph([node("Relu", ["X", "X"], ["Y"])], [vi("X")], [vi("Y")]))


@bad("input-arity")
def add_one_input():
    return model(graph([node("Add", ["X"], ["Y"])], [vi("X")], [vi("Y")]))


@bad("output-arity")
def relu_two_outputs():
    return model(graph([node("Relu", ["X"], ["Y", "Z"])], [vi("X")], [vi("Y")]))


@bad("input-arity")
def call_with_too_many_inputs():
    f = fn("Id", ["x"], ["y"], [node("Identity", ["x"], ["y"])])
    g = graph([node("Id", ["X", "X"], ["Y"], domain="com.acme")], [vi("X")], [vi("Y")])
    return model(g, opsets=(("", 17), ("com.acme", 1)), functions=[f])


@bad("required-input-unsupplied")
def add_empty_second_input():
    return model(graph([node("Add", ["X", ""], ["Y"])], [vi("X")], [vi("Y")]))


@bad("required-output-unsupplied")
def relu_empty_output():
    return model(graph([node("Relu", ["X"], [""]), node("Relu", ["X"], ["Y"])], [vi("X")], [vi("Y")]))
