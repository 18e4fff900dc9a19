"""A catalogue of models for the validator: invalid ones, each breaking ONE rule, and valid ones.

Every model is built with onnxkit's own IR and written with onnxkit's writer
(:func:`onnxkit.api.to_bytes`); a few are octets built by hand where the fault is in the
encoding itself.  Faults the Python IR cannot express directly (a mandatory field absent,
a reserved or deprecated field present, a value field that does not match the type) are
written through the IR's wire record (``_wire``), which the writer honours: that is how a
decoded model with the same fault round-trips.

:data:`INVALID` and :data:`VALID` list :class:`Case` objects.  For an invalid case, ``code``
is the code the validator must report, and ``also`` the other error codes it may report
(the same fault seen from another rule); a case whose ``code`` is a warning must produce
no error at all beyond ``also``.  A valid case must produce no error; its ``warnings`` must
be reported.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from onnxkit import ir
from onnxkit.dtypes import DataType
from onnxkit.ir import AttributeType, WireInfo
from onnxkit.limits import DEFAULT_LIMITS, Limits
from onnxkit.wire import encode_message

F, I64, B, S = DataType.FLOAT, DataType.INT64, DataType.BOOL, DataType.STRING


@dataclass
class Case:
    name: str
    build: Callable
    code: Optional[str] = None
    also: tuple = ()
    warnings: tuple = ()
    limits: Limits = DEFAULT_LIMITS
    files: dict = field(default_factory=dict)  # written beside model.onnx; the case is checked by path
    path: bool = False
    open_external: bool = False
    oracle: bool = False  # valid case that onnx.checker must accept too
    encode: bool = True  # False: checked as the IR object itself, not its octets
    registry: object = None  # None: the installed plugins


INVALID: list = []
VALID: list = []


def bad(code, also=(), **kw):
    def deco(fn):
        INVALID.append(Case(fn.__name__, fn, code, tuple(also), **kw))
        return fn
    return deco


def good(warnings=(), **kw):
    def deco(fn):
        VALID.append(Case(fn.__name__, fn, None, (), tuple(warnings), **kw))
        return fn
    return deco


# -- builders -------------------------------------------------------------------------------------

def vi(name, elem=F, shape=(2,)):
    return ir.ValueInfo(name=name, type=ir.tensor_type(elem, shape))


def node(op, inputs, outputs, name="", domain="", **attrs):
    return ir.Node(input=list(inputs), output=list(outputs), name=name, op_type=op, domain=domain,
                   attribute=[ir.Attribute.make(k, v) for k, v in attrs.items()])


def tensor(name, values, dtype=np.float32):
    return ir.Tensor.from_numpy(np.asarray(values, dtype=dtype), name=name)


def graph(nodes=(), inputs=(), outputs=(), inits=(), name="main", **kw):
    return ir.Graph(node=list(nodes), name=name, input=list(inputs), output=list(outputs), initializer=list(inits), **kw)


def model(g=None, ir_version=10, opsets=(("", 17),), **kw):
    return ir.Model(ir_version=ir_version, opset_import=[ir.OperatorSetId(d, v) for d, v in opsets], graph=g,
                    producer_name="onnxkit-tests", **kw)


def relu(**kw):
    """The base model: Y = Relu(X), X and Y float [2]."""
    return model(graph([node("Relu", ["X"], ["Y"])], [vi("X")], [vi("Y")]), **kw)


def relu_graph(name="main", **kw):
    return graph([node("Relu", ["X"], ["Y"])], [vi("X")], [vi("Y")], name=name, **kw)


def if_node(then_g, else_g, outputs=("Y",), cond="C"):
    return ir.Node(input=[cond], output=list(outputs), op_type="If",
                   attribute=[ir.Attribute.make("then_branch", then_g), ir.Attribute.make("else_branch", else_g)])


def branch(name, nodes=(), outputs=("Y",), out_type=None):
    return graph(nodes, [], [ir.ValueInfo(name=o, type=out_type) for o in outputs], name=name)


def ref_attr(name, ref, atype):
    return ir.Attribute(name=name, type=atype, ref_attr_name=ref)


def raw_field(tag, wire_type, payload: bytes) -> bytes:
    """A field's octets (key and value), for wire records."""
    from onnxkit.wire.varint import encode_varint

    key = encode_varint((tag << 3) | wire_type)
    if wire_type == 2:
        return key + encode_varint(len(payload)) + payload
    return key + payload


def loop_model(body_inits=(), ir_version=10):
    body = graph([node("Identity", ["cond"], ["cond_out"]), node("Relu", ["v"], ["v_out"])],
                 [vi("iter", I64, ()), vi("cond", B, ()), vi("v")], [vi("cond_out", B, ()), vi("v_out")],
                 inits=body_inits, name="body")
    loop = ir.Node(input=["M", "C", "X"], output=["Y"], op_type="Loop", attribute=[ir.Attribute.make("body", body)])
    return model(graph([loop], [vi("M", I64, ()), vi("C", B, ()), vi("X")], [vi("Y")]), ir_version=ir_version)


def fn(name, inputs, outputs, nodes, domain="com.acme", attributes=(), attribute_proto=(), opsets=(("", 17),),
       overload=""):
    return ir.Function(name=name, domain=domain, input=list(inputs), output=list(outputs), node=list(nodes),
                       attribute=list(attributes), attribute_proto=list(attribute_proto), overload=overload,
                       opset_import=[ir.OperatorSetId(d, v) for d, v in opsets])


def with_init(t, **kw):
    """The base model plus one (unused) initializer ``t``."""
    g = relu_graph()
    g.initializer.append(t)
    return model(g, **kw)


def external_tensor(entries, raw=None, dims=(2,), location=1):
    return ir.Tensor(dims=list(dims), data_type=F, name="W", raw_data=raw, data_location=location,
                     external_data=[ir.StringStringEntry(k, v) for k, v in entries])


def add_w(w, x_shape=(2,)):
    """Y = Add(X, W) with W an initializer."""
    return model(graph([node("Add", ["X", "W"], ["Y"])], [vi("X", F, x_shape)], [vi("Y", F, x_shape)], [w]))


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


@bad("unknown-operator")
def no_such_operator():
    return model(graph([node("Relux", ["X"], ["Y"])], [vi("X")], [vi("Y")]))


@bad("unknown-operator")
def operator_newer_than_import():
    return model(graph([node("Gelu", ["X"], ["Y"])], [vi("X")], [vi("Y")]), opsets=(("", 17),))


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


# ================================================================== INVALID: inference (Clause 9.4)

@bad("inferred-type-mismatch")
def cast_declared_as_another_type():
    # Cast's output may be int32 by its constraint, but `to` says FLOAT: inference contradicts the declaration
    return model(graph([node("Cast", ["X"], ["Y"], to=int(F))], [vi("X", I64)], [vi("Y", DataType.INT32)]))


@bad("inferred-shape-mismatch")
def relu_declared_with_another_shape():
    return model(graph([node("Relu", ["X"], ["Y"])], [vi("X", F, (2, 3))], [vi("Y", F, (3, 2))]))


@bad("inference-error")
def matmul_inner_extents_differ():
    return model(graph([node("MatMul", ["A", "B"], ["Y"])], [vi("A", F, (2, 3)), vi("B", F, (4, 5))],
                       [vi("Y", F, (2, 5))]))


def _registry_with_custom_domain(infer=None):
    """The installed plugins plus a domain 'com.example.infer' whose op may lack inference."""
    import types

    from onnxkit import hookimpl
    from onnxkit.registry import build_registry
    from onnxkit.schema import FormalParameter, OperatorSet, OpSchema

    schema = OpSchema(domain="com.example.infer", name="Thing", since_version=1,
                      inputs=(FormalParameter("x", "tensor(float)"),), outputs=(FormalParameter("y", "tensor(float)"),),
                      min_input=1, max_input=1, min_output=1, max_output=1)
    plugin = types.SimpleNamespace()

    def onnxkit_operator_sets():
        return [OperatorSet("com.example.infer", 1, {"Thing": schema})]

    plugin.onnxkit_operator_sets = hookimpl(onnxkit_operator_sets)
    if infer is not None:
        def onnxkit_inference_functions():
            return {("com.example.infer", "Thing", 1): infer}

        plugin.onnxkit_inference_functions = hookimpl(onnxkit_inference_functions)
    return build_registry(extra=[("example-infer", plugin)])


def _thing_model():
    return model(graph([node("Thing", ["X"], ["Y"], domain="com.example.infer")], [vi("X")], [vi("Y")]),
                 opsets=(("", 17), ("com.example.infer", 1)))


@bad("no-inference-function", registry=_registry_with_custom_domain())
def custom_op_without_inference():
    return _thing_model()


def _broken_inference(ctx):
    raise RuntimeError("this inference function is broken")


@bad("inference-function-failed", registry=_registry_with_custom_domain(_broken_inference))
def custom_op_with_failing_inference():
    return _thing_model()


# ================================================================== INVALID: tensors

@bad("tensor-storage-conflict")
def raw_and_typed():
    return with_init(ir.Tensor(dims=[1], data_type=F, name="W", raw_data=b"\0\0\0\0", float_data=[1.0]))


@bad("string-raw-data")
def string_in_raw_data():
    return with_init(ir.Tensor(dims=[1], data_type=S, name="W", raw_data=b"ab"))


@bad("tensor-wrong-field")
def float_in_int64_data():
    return with_init(ir.Tensor(dims=[2], data_type=F, name="W", int64_data=[1, 2]))


@bad("tensor-size-mismatch")
def raw_too_short():
    return with_init(ir.Tensor(dims=[3], data_type=F, name="W", raw_data=b"\0" * 8))


@bad("tensor-size-mismatch")
def typed_too_short():
    return with_init(ir.Tensor(dims=[3], data_type=F, name="W", float_data=[1.0, 2.0]))


@bad("tensor-size-mismatch")
def attribute_tensor_too_long():
    t = ir.Tensor(dims=[1], data_type=F, float_data=[1.0, 2.0])
    return model(graph([node("Constant", [], ["Y"], value=t)], [], [vi("Y", F, (1,))]))


@bad("nonzero-padding")
def int4_padding_set():
    return with_init(ir.Tensor(dims=[1], data_type=DataType.INT4, name="W", raw_data=b"\xf1"))


@bad("invalid-data-location")
def data_location_2():
    return with_init(ir.Tensor(dims=[1], data_type=F, name="W", raw_data=b"\0\0\0\0", data_location=2))


@bad("tensor-segment")
def segmented_tensor():
    return with_init(ir.Tensor(dims=[2], data_type=F, name="W", float_data=[1.0], segment=ir.Segment(0, 1)))


def sparse(values, indices, dims, index_dtype=np.int64):
    return ir.SparseTensor(values=tensor("S", values), indices=tensor("", indices, index_dtype), dims=list(dims))


def with_sparse(sp):
    g = relu_graph()
    g.sparse_initializer.append(sp)
    return model(g)


@bad("sparse-tensor-invalid")
def sparse_values_2d():
    sp = sparse([1.0, 2.0], [0, 1], [4])
    sp.values = tensor("S", [[1.0, 2.0]])
    return with_sparse(sp)


@bad("sparse-tensor-invalid")
def sparse_float_indices():
    return with_sparse(sparse([1.0, 2.0], [0.0, 1.0], [4], np.float32))


@bad("sparse-index-out-of-range")
def sparse_index_7_of_4():
    return with_sparse(sparse([1.0, 2.0], [1, 7], [4]))


# ================================================================== INVALID: external data

@bad("external-with-embedded-data")
def external_and_raw():
    return add_w(external_tensor([("location", "w.bin")], raw=b"\0" * 8))


@bad("external-data-not-external")
def references_without_external_location():
    return add_w(external_tensor([("location", "w.bin")], raw=b"\0" * 8, location=0))


@bad("external-unknown-key")
def external_unknown_key():
    return add_w(external_tensor([("location", "w.bin"), ("compression", "zstd")]))


@bad("external-path-traversal")
def external_parent_directory():
    return add_w(external_tensor([("location", "../w.bin")]))


@bad("external-absolute-path")
def external_absolute_path():
    return add_w(external_tensor([("location", "/etc/passwd")]))


@bad("external-missing-location")
def external_without_location():
    return add_w(external_tensor([("offset", "0")]))


@bad("external-size-mismatch")
def external_length_wrong():
    return add_w(external_tensor([("location", "w.bin"), ("length", "7")]))


@bad("external-duplicate-key")
def external_location_twice():
    return add_w(external_tensor([("location", "w.bin"), ("location", "v.bin")]))


@bad("external-invalid-location")
def external_location_with_nul():
    return add_w(external_tensor([("location", "w\x00.bin")]))


@bad("external-bad-offset")
def external_negative_offset():
    return add_w(external_tensor([("location", "w.bin"), ("offset", "-1")]))


@bad("external-bad-length")
def external_length_not_a_number():
    return add_w(external_tensor([("location", "w.bin"), ("length", "eight")]))


@bad("external-bad-checksum")
def external_checksum_not_sha1():
    return add_w(external_tensor([("location", "w.bin"), ("checksum", "md5:0")]))


@bad("external-unsupported-type")
def external_string_tensor():
    t = ir.Tensor(dims=[1], data_type=S, name="W", data_location=1,
                  external_data=[ir.StringStringEntry("location", "w.bin")])
    return with_init(t)


@bad("external-unresolved", path=True, open_external=True)
def external_file_missing():
    return add_w(external_tensor([("location", "w.bin")]))


@bad("external-short-file", files={"w.bin": b"\0" * 4}, open_external=True)
def external_file_short():
    return add_w(external_tensor([("location", "w.bin"), ("offset", "0"), ("length", "8")]))


@bad("external-checksum-mismatch", files={"w.bin": b"\0" * 8}, open_external=True)
def external_checksum_wrong():
    return add_w(external_tensor([("location", "w.bin"), ("checksum", "0" * 40)]))


# ================================================================== INVALID: functions

def call_acme(op="F", functions=(), opsets=(("", 17), ("com.acme", 1))):
    g = graph([node(op, ["X"], ["Y"], domain="com.acme")], [vi("X")], [vi("Y")])
    return model(g, opsets=opsets, functions=list(functions))


@bad("duplicate-function")
def function_twice():
    f = fn("F", ["x"], ["y"], [node("Relu", ["x"], ["y"])])
    return call_acme(functions=[f, fn("F", ["x"], ["y"], [node("Abs", ["x"], ["y"])])])


@bad("function-recursion")
def mutual_recursion():
    f = fn("F", ["x"], ["y"], [node("G", ["x"], ["y"], domain="com.acme")], opsets=(("", 17), ("com.acme", 1)))
    g = fn("G", ["x"], ["y"], [node("F", ["x"], ["y"], domain="com.acme")], opsets=(("", 17), ("com.acme", 1)))
    return call_acme(functions=[f, g])


@bad("function-domain-not-imported")
def function_in_unimported_domain():
    m = relu()
    m.functions.append(fn("F", ["x"], ["y"], [node("Relu", ["x"], ["y"])], domain="com.other"))
    return m


@bad("function-opset-mismatch")
def function_imports_other_version():
    f = fn("F", ["x"], ["y"], [node("Relu", ["x"], ["y"])], opsets=(("", 16),))
    return call_acme(functions=[f])


@bad("duplicate-definition")
def function_body_ssa():
    f = fn("F", ["x"], ["y"], [node("Relu", ["x"], ["y"]), node("Abs", ["x"], ["y"])])
    return call_acme(functions=[f])


@bad("undefined-value")
def function_body_undefined():
    f = fn("F", ["x"], ["y"], [node("Relu", ["z"], ["y"])])
    return call_acme(functions=[f])


@bad("domain-not-imported")
def function_body_domain_not_imported():
    f = fn("F", ["x"], ["y"], [node("Bar", ["x"], ["y"], domain="com.bar")])
    return call_acme(functions=[f])


# ================================================================== INVALID: metadata, devices

@bad("duplicate-metadata-key")
def model_metadata_twice():
    m = relu()
    m.metadata_props = [ir.StringStringEntry("model_author", "a"), ir.StringStringEntry("model_author", "b")]
    return m


@bad("duplicate-metadata-key")
def image_keys_ignore_case():
    m = relu()
    m.graph.node[0].metadata_props = [ir.StringStringEntry("Image.ColorSpaceGamma", "SRGB"),
                                      ir.StringStringEntry("image.colorspacegamma", "Linear")]
    return m


@bad("invalid-metadata-value")
def image_pixel_format_unknown():
    m = relu()
    m.metadata_props = [ir.StringStringEntry("Image.BitmapPixelFormat", "Rgb9")]
    return m


def with_devices(configs=(), node_configs=()):
    m = relu(ir_version=11)
    m.configuration = list(configs)
    m.graph.node[0].device_configurations = list(node_configs)
    return m


@bad("unknown-device-configuration")
def node_device_not_declared():
    return with_devices([], [ir.NodeDeviceConfiguration(configuration_id="gpu")])


@bad("duplicate-device-configuration")
def device_configuration_twice():
    c = ir.DeviceConfiguration(name="c", num_devices=1, device=["d0"])
    return with_devices([c, ir.DeviceConfiguration(name="c", num_devices=1, device=["d1"])])


@bad("device-count-mismatch")
def device_count_differs():
    return with_devices([ir.DeviceConfiguration(name="c", num_devices=2, device=["d0"])])


@bad("unknown-sharding-tensor")
def sharding_names_other_value():
    c = ir.DeviceConfiguration(name="c", num_devices=2, device=["d0", "d1"])
    nc = ir.NodeDeviceConfiguration(configuration_id="c", sharding_spec=[ir.ShardingSpec(tensor_name="Q", device=[0, 1])])
    return with_devices([c], [nc])


@bad("mandatory-field-missing", also=())
def simple_sharding_without_dim():
    c = ir.DeviceConfiguration(name="c", num_devices=2, device=["d0", "d1"])
    spec = ir.ShardingSpec(tensor_name="X", device=[0, 1], sharded_dim=[
        ir.ShardedDim(axis=0, simple_sharding=[ir.SimpleShardedDim(num_shards=2)])])
    return with_devices([c], [ir.NodeDeviceConfiguration(configuration_id="c", sharding_spec=[spec])])


@bad("unknown-annotation-tensor")
def annotation_names_nothing():
    m = relu()
    m.graph.quantization_annotation = [ir.TensorAnnotation(tensor_name="Q")]
    return m


@bad("training-binding-invalid")
def training_binding_names_nothing():
    m = relu()
    m.training_info = [ir.TrainingInfo(algorithm=graph([], [], [], name="algorithm"),
                                       update_binding=[ir.StringStringEntry("Q", "R")])]
    return m


# ================================================================== VALID

@good(oracle=True)
def relu_ir10():
    return relu()


@good(oracle=True)
def ir3_initializers_are_inputs():
    w = tensor("W", [1.0, 2.0, 3.0])
    g = graph([node("Add", ["X", "W"], ["Y"], broadcast=1)], [vi("X", F, (2, 3)), vi("W", F, (3,))],
              [vi("Y", F, (2, 3))], [w])
    return model(g, ir_version=3, opsets=(("", 6),))


@bad("repeated-opset-import")
def import_twice_at_one_version():
    # skl2onnx writes the default domain twice at one version: harmless, a warning only
    return relu(opsets=(("", 17), ("ai.onnx", 17)))


@good()
def ir1_attribute_without_type():
    a = ir.Attribute(name="alpha", type=AttributeType.FLOAT, value=0.5, _wire=WireInfo(absent=frozenset({"type"})))
    g = graph([ir.Node(input=["X"], output=["Y"], op_type="LeakyRelu", attribute=[a])], [vi("X")], [vi("Y")])
    return model(g, ir_version=1, opsets=())


@good(oracle=True)
def ir4_constant_initializer():
    return add_w(tensor("W", [1.0, 2.0]))


@good(oracle=True)
def ir4_input_with_default():
    g = graph([node("Add", ["X", "W"], ["Y"])], [vi("X"), vi("W")], [vi("Y")], [tensor("W", [1.0, 2.0])])
    return model(g, ir_version=4, opsets=(("", 9),))


@good(oracle=True)
def if_with_outer_scope():
    then_g = branch("then", [node("Relu", ["X"], ["T"])], ["T"], ir.tensor_type(F, [2]))
    else_g = branch("else", [node("Abs", ["X"], ["E"])], ["E"], ir.tensor_type(F, [2]))
    return model(graph([if_node(then_g, else_g)], [vi("X"), vi("C", B, ())], [vi("Y")]), ir_version=8,
                 opsets=(("", 13),))


@good(oracle=True)
def loop_with_carried_value():
    return loop_model()


@good()
def loop_body_initializer_after_supplied_inputs():
    body = graph([node("Identity", ["cond"], ["cond_out"]), node("Add", ["v", "k"], ["v_out"])],
                 [vi("iter", I64, ()), vi("cond", B, ()), vi("v"), vi("k")], [vi("cond_out", B, ()), vi("v_out")],
                 inits=[tensor("k", [1.0, 1.0])], name="body")
    loop = ir.Node(input=["M", "C", "X"], output=["Y"], op_type="Loop", attribute=[ir.Attribute.make("body", body)])
    return model(graph([loop], [vi("M", I64, ()), vi("C", B, ()), vi("X")], [vi("Y")]))


@good(oracle=True)
def scan_sum():
    body = graph([node("Add", ["acc", "x"], ["acc_out"]), node("Identity", ["acc_out"], ["y"])],
                 [vi("acc", F, (2,)), vi("x", F, (2,))], [vi("acc_out", F, (2,)), vi("y", F, (2,))], name="scan_body")
    scan = ir.Node(input=["I", "X"], output=["S", "Y"], op_type="Scan",
                   attribute=[ir.Attribute.make("body", body), ir.Attribute.make("num_scan_inputs", 1)])
    return model(graph([scan], [vi("I", F, (2,)), vi("X", F, (3, 2))], [vi("S", F, (2,)), vi("Y", F, (3, 2))]))


@good(oracle=True)
def local_function_with_default_and_overload():
    const = ir.Node(input=[], output=["c"], op_type="Constant",
                    attribute=[ref_attr("value_float", "alpha", AttributeType.FLOAT)])
    f = fn("Scale", ["x"], ["y"], [const, node("Mul", ["x", "c"], ["y"])], attributes=[],
           attribute_proto=[ir.Attribute.make("alpha", 1.0)], overload="v1")
    call = node("Scale", ["X"], ["Y"], domain="com.acme", alpha=2.0)
    call.overload = "v1"
    return model(graph([call], [vi("X")], [vi("Y")]), opsets=(("", 17), ("com.acme", 1)), functions=[f])


@good(oracle=True)
def sequences():
    g = graph([node("SequenceConstruct", ["X", "X"], ["Q"]), node("SequenceAt", ["Q", "i"], ["Y"])],
              [vi("X")], [vi("Y"), ir.ValueInfo(name="Q", type=ir.SequenceType(ir.tensor_type(F, [2])))],
              [tensor("i", 1, np.int64)])
    return model(g, opsets=(("", 17),))


@good(oracle=True)
def maps():
    m_type = ir.MapType(I64, ir.tensor_type(F))
    g = graph([node("CastMap", ["M"], ["Y"], domain="ai.onnx.ml")], [ir.ValueInfo(name="M", type=m_type)],
              [vi("Y", F, (1, "N"))])
    return model(g, opsets=(("", 17), ("ai.onnx.ml", 3)))


@good(oracle=True)
def optionals():
    g = graph([node("Optional", ["X"], ["O"]), node("OptionalHasElement", ["O"], ["Y"])], [vi("X")],
              [vi("Y", B, ())], value_info=[ir.ValueInfo(name="O", type=ir.OptionalType(ir.tensor_type(F, [2])))])
    return model(g, ir_version=8, opsets=(("", 18),))


@good(oracle=True)
def sparse_initializer_and_attribute():
    sp = sparse([1.0, 2.0], [0, 3], [4])
    g = graph([node("Constant", [], ["K"], sparse_value=sparse([5.0], [[1, 1]], [2, 2])), node("Relu", ["X"], ["Y"])],
              [vi("X", F, (4,))], [vi("Y", F, (4,)), vi("K", F, (2, 2))])
    g.sparse_initializer.append(sp)
    return model(g, ir_version=8)


@good(files={"w.bin": np.asarray([1.0, 2.0], np.float32).tobytes()}, open_external=True)
def external_data():
    data = np.asarray([1.0, 2.0], np.float32).tobytes()
    return add_w(external_tensor([("location", "w.bin"), ("offset", "0"), ("length", "8"),
                                  ("checksum", hashlib.sha1(data).hexdigest())]))


@good(oracle=True)
def cast_to_float8_ir9():
    return model(graph([node("Cast", ["X"], ["Y"], to=int(DataType.FLOAT8E4M3FN))], [vi("X")],
                       [vi("Y", DataType.FLOAT8E4M3FN)]), ir_version=9, opsets=(("", 19),))


@good()
def devices_and_metadata_ir11():
    c = ir.DeviceConfiguration(name="c", num_devices=2, device=["d0", "d1"])
    spec = ir.ShardingSpec(tensor_name="X", device=[0, 1], sharded_dim=[
        ir.ShardedDim(axis=0, simple_sharding=[ir.SimpleShardedDim(dim_value=2, num_shards=2)])])
    m = with_devices([c], [ir.NodeDeviceConfiguration(configuration_id="c", sharding_spec=[spec])])
    m.metadata_props = [ir.StringStringEntry("model_author", "onnxkit"),
                        ir.StringStringEntry("Image.BitmapPixelFormat", "Rgb8")]
    m.graph.node[0].metadata_props = [ir.StringStringEntry("note", "a")]
    return m


@good(oracle=True)
def constant_broadcast():
    g = graph([node("Constant", [], ["K"], value=tensor("", [1.0, 2.0, 3.0])), node("Add", ["X", "K"], ["Y"])],
              [vi("X", F, ("N", 3))], [vi("Y", F, ("N", 3))])
    return model(g)


@good(warnings=("unknown-domain",))
def custom_domain_node():
    return custom_domain_op()


@good(oracle=True)
def narrow_types_ir13():
    g = relu_graph()
    g.initializer += [ir.Tensor(dims=[3], data_type=DataType.INT4, name="W4", raw_data=b"\x21\x03"),
                      ir.Tensor(dims=[3], data_type=DataType.INT2, name="W2", raw_data=b"\x39")]
    return model(g, ir_version=13, opsets=(("", 25),))


@good()
def float6_ir14():
    g = relu_graph()
    g.initializer.append(ir.Tensor(dims=[2], data_type=DataType.FLOAT6E2M3, name="W6", int32_data=[1, 2]))
    return model(g, ir_version=14, opsets=(("", 25),))


@good()
def training_info():
    m = with_init(tensor("W", [1.0]))
    algo = graph([node("Add", ["W", "W"], ["W_new"])], [], [vi("W_new", F, (1,))], name="algorithm")
    m.training_info = [ir.TrainingInfo(algorithm=algo, update_binding=[ir.StringStringEntry("W", "W_new")])]
    return m


@good(oracle=True)
def unsupplied_optional_input():
    g = graph([node("Clip", ["X", "", "hi"], ["Y"])], [vi("X")], [vi("Y")], [tensor("hi", 6.0)])
    return model(g)
